#!/bin/bash
# compare.sh BIN_DIR OUT_DIR: runs llama.cpp's example programs from BIN_DIR on stories260K (greedy where the
# program takes --temp), stdout to OUT/<name>.out, exit codes to OUT/rc.txt. Run it on both builds, then
#   for f in OURS/*.out; do cmp -s $f THEIRS/$(basename $f) && echo "$f same"; done
B=$1; O=$2; M=${MODEL:-/work/shared/models/stories260K.gguf}
mkdir -p $O
python3 -c "print(('One day, Lily went to the park with her mom. She saw a big tree and a little bird. ' * 40))" > $O/text.txt
run() { name=$1; shift; timeout 120 "$@" > $O/$name.out 2> $O/$name.err; echo "$name rc=$?" >> $O/rc.txt; }
rm -f $O/rc.txt
run simple $B/llama-simple -m $M -n 32 "Once upon a time"
run simple-chat bash -c "printf 'Hello\n' | $B/llama-simple-chat -m $M -c 512"
run cli $B/llama-cli -m $M -p "Once upon a time" -n 48 --temp 0 -s 1 -no-cnv --no-warmup
run batched $B/llama-batched -m $M -p "Once upon a time" -np 4 -n 32 -s 1
run parallel $B/llama-parallel -m $M -np 4 -ns 8 -n 24 --temp 0 -s 1 -c 1024
run embedding $B/llama-embedding -m $M -p "Once upon a time" --pooling mean -c 512 -b 512
run save-load-state $B/llama-save-load-state -m $M -p "Once upon a time" -n 16 -s 1
run perplexity $B/llama-perplexity -m $M -f $O/text.txt -c 128 -b 128
run passkey $B/llama-passkey -m $M --junk 5 -c 512 -n 8 -s 1
run speculative $B/llama-speculative -m $M -md $M -p "Once upon a time" -n 32 --temp 0 -s 1 --draft-max 4
run lookahead $B/llama-lookahead -m $M -p "Once upon a time" -n 32 --temp 0 -s 1
run gguf $B/llama-gguf $M r n
run gguf-hash $B/llama-gguf-hash --sha256 $M
