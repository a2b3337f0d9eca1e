#!/usr/bin/env bash
# Trains the model quality.sh quantizes, with the engine itself: a llama of dim 256 (every matrix
# row a multiple of 256, as the IQ and K types need), FFN 768, 4 layers, 8 heads, the 512-token
# TinyStories tokenizer, on stories sampled from the shared TinyStories-656K model.
#   1. init-base.py: matrices N(0, 0.02), token embeddings N(0, 1);
#   2. llama-finetune: a LoRA adapter of full rank (256 = each matrix's smaller side, alpha = r so
#      B A is added unscaled) on every matrix including the output, 350 steps of 8 x 256 tokens:
#      full training, reparametrized;
#   3. llama-export-lora: W0 + B A, every matrix trained; written F32, then F16.
#
#   train.sh BIN_DIR SHARED_DIR WORKDIR        (about 4 minutes on 2 idle cores, after 3 of text generation)
set -euo pipefail
bin=$1 shared=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
threads=${THREADS:-2}
mkdir -p "$work"
cd "$work"
[ -f stories.txt ] || "$here/gen-text.sh" "$bin" "$shared/models/TinyStories-656K-Q8_0.gguf" 3000 stories.txt
head -c 2400000 stories.txt > train.txt   # 1.16 M tokens
tail -c +2400001 stories.txt > eval.txt   # 98 k tokens, held out
python3 "$here/init-base.py" base.bin 256 768 4 8 8 512 512
"$bin/llama-convert" --llama2c base.bin --tokenizer "$shared/models/tok512.bin" -o base-f32.gguf > convert.log 2>&1
"$bin/llama-finetune" -m base-f32.gguf -f train.txt -o lora.gguf -c 256 -b 8 --steps 350 \
    --lr 2e-3 --lr-schedule cosine --warmup 20 --lr-min 0.1 --grad-clip 1 \
    --lora-targets q,k,v,o,gate,up,down,output --lora-r 256 --lora-alpha 256 \
    --val-split 0.02 --loss-log loss.tsv -t "$threads" > train.log 2>&1
"$bin/llama-export-lora" -m base-f32.gguf --lora lora.gguf -o trained-f32.gguf > export.log 2>&1
"$bin/llama-quantize" trained-f32.gguf trained-f16.gguf F16 "$threads" > f16.log 2>&1
echo "$work/trained-f16.gguf"
