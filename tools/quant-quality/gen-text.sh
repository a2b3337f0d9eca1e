#!/usr/bin/env bash
# Writes N short stories sampled from the shared TinyStories-656K model (temperature 0.8, seeds
# 1..N, five openings in turn), one blank line between stories: the training and evaluation text
# of quality.sh.   usage: gen-text.sh BIN_DIR MODEL N OUT
set -euo pipefail
bin=$1 model=$2 n=$3 out=$4
openings=("Once upon a time" "One day" "Lily wanted" "Tom and his dog" "There was a little")
: > "$out.tmp"
for ((s = 1; s <= n; s++)); do
    "$bin/llama-cli" -m "$model" -p "${openings[s % 5]}" -n 400 --temp 0.8 -s "$s" -t 1 2>/dev/null |
        sed 's/<|end_story|>//' >> "$out.tmp"
    printf '\n\n' >> "$out.tmp"
done
mv "$out.tmp" "$out"
