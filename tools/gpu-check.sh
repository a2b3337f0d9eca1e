#!/bin/bash
# gpu-check.sh - the checks and measurements of the CUDA backend on a machine with an NVIDIA GPU,
# as one script (a lent GPU's time is short): correctness first, then speed beside llama.cpp.
#
# Build here first (sm_90 for an H100 / H200), then run this on the GPU machine with the build,
# ../shared and, for the comparison, a llama.cpp CUDA build's llama-bench:
#   cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DGGML_NATIVE=OFF -DGGML_AVX2=ON && cmake --build build-cuda -j
#   gcc -O2 -o build-cuda/bin/randckpt ../shared/tools/randckpt.c -lm
#   tools/gpu-check.sh [BIN=build-cuda/bin] [LCPP_BENCH=path/to/llama.cpp/llama-bench] [OUT=dir]
#
# Steps: test-backend-ops and test-gpu-model (every op and the shared models against the CPU);
# TinyLlama-1.1B-shaped random weights (randckpt -> llama-convert f16 -> llama-quantize Q4_0,
# Q4_K_M, Q8_0); llama-bench pp512 / tg128 with every layer on the GPU, fa 0 and 1, ours with
# CUDA graphs and fusions on, each off (GGML_CUDA_DISABLE_GRAPHS / _FUSION), prompts without the
# tensor-core attention (GGML_CUDA_DISABLE_MMA_FA), and llama.cpp's; Q8_0 and Q4_0 caches after 2048 tokens;
# bench-cuda's kernels; LoRA training (llama-finetune --bench -ngl 99), and a short run on the GPU
# beside the same run on the CPU (their losses);
# then where the time goes (GGML_CUDA_PROFILE=1: time per kernel class) for Q4_0 pp512 and tg128.
set -u
BIN=${BIN:-build-cuda/bin}
SHARED=${SHARED:-../shared}
OUT=${OUT:-/tmp/gpu-check}
R=${R:-3}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
# the result rows of a llama-bench table (not its header or the build line after it)
results() { grep -E '\| +(pp|tg)[0-9]+( @ d[0-9]+)? +\|' || true; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"

log "correctness"
"$BIN/test-backend-ops" > "$OUT/test-backend-ops.txt" 2>&1; log "test-backend-ops rc $?"
RANDOM_CASES_SEED=7 RANDOM_CASES_N=3000 "$BIN/test-backend-ops" --gtest_filter='*EveryBackend*' > "$OUT/test-backend-ops-random.txt" 2>&1
log "test-backend-ops, 3000 more random cases: rc $?"
LLAMA_TEST_MODELS="$SHARED/models" "$BIN/test-gpu-model" > "$OUT/test-gpu-model.txt" 2>&1; log "test-gpu-model rc $?"

log "TinyLlama-shaped files"
M="$OUT/m"; mkdir -p "$M"
if [ ! -f "$M/tl-F16.gguf" ]; then
    "$BIN/randckpt" "$M/tl.bin" 2048 5632 22 32 4 32000 2048 0.02 &&
    "$BIN/llama-convert" --llama2c "$M/tl.bin" --tokenizer "$SHARED/models/llama2c-tokenizer.bin" -o "$M/tl-F16.gguf" --outtype f16 > /dev/null &&
    rm -f "$M/tl.bin"
fi
for t in Q4_0 Q4_K_M Q8_0; do
    [ -f "$M/tl-$t.gguf" ] || "$BIN/llama-quantize" "$M/tl-F16.gguf" "$M/tl-$t.gguf" "$t" > /dev/null 2>&1
done

log "speed: llama-bench -ngl 99 -fa 0,1 -p 512 -n 128 -r $R"
for t in Q4_0 Q4_K_M Q8_0 F16; do
    f="$M/tl-$t.gguf"
    [ -f "$f" ] || continue
    "$BIN/llama-bench" -m "$f" -ngl 99 -fa 0,1 -p 512 -n 128 -r "$R" 2>/dev/null | tee -a "$OUT/summary.txt"
    GGML_CUDA_DISABLE_GRAPHS=1 "$BIN/llama-bench" -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -r "$R" 2>/dev/null | results | sed 's/^/no graphs: /' | tee -a "$OUT/summary.txt"
    GGML_CUDA_DISABLE_FUSION=1 "$BIN/llama-bench" -m "$f" -ngl 99 -fa 1 -p 512 -n 128 -r "$R" 2>/dev/null | results | sed 's/^/no fusion: /' | tee -a "$OUT/summary.txt"
    GGML_CUDA_DISABLE_MMA_FA=1 "$BIN/llama-bench" -m "$f" -ngl 99 -fa 1 -p 512 -n 0 -r "$R" 2>/dev/null | results | sed 's/^/no tensor-core attention: /' | tee -a "$OUT/summary.txt"
    if [ -n "${LCPP_BENCH:-}" ] && [ -x "$LCPP_BENCH" ]; then
        "$LCPP_BENCH" -m "$f" -ngl 99 -fa 0,1 -p 512 -n 128 -r "$R" 2>/dev/null | sed 's/^/llama.cpp: /' | tee -a "$OUT/summary.txt"
    fi
done

log "quantized caches: llama-bench -ngl 99 -fa 1 -ctk/-ctv q8_0, q4_0 after 2048 tokens (Q4_0 weights)"
f="$M/tl-Q4_0.gguf"
if [ -f "$f" ]; then
    for c in q8_0 q4_0; do
        "$BIN/llama-bench" -m "$f" -ngl 99 -fa 1 -ctk $c -ctv $c -d 2048 -p 512 -n 128 -r "$R" 2>/dev/null | results | sed "s/^/cache $c: /" | tee -a "$OUT/summary.txt"
        if [ -n "${LCPP_BENCH:-}" ] && [ -x "$LCPP_BENCH" ]; then
            "$LCPP_BENCH" -m "$f" -ngl 99 -fa 1 -ctk $c -ctv $c -d 2048 -p 512 -n 128 -r "$R" 2>/dev/null | results | sed "s/^/llama.cpp cache $c: /" | tee -a "$OUT/summary.txt"
        fi
    done
fi

log "kernels: bench-cuda (mul_mat GB/s and TFLOP/s, flash attention, its gradient beside the forward)"
"$BIN/bench-cuda" 2>&1 | tee -a "$OUT/summary.txt"

log "training: llama-finetune --bench, LoRA on the F16 and Q4_0 files, 512-token sequences, every layer on the GPU"
for t in F16 Q4_0; do
    f="$M/tl-$t.gguf"
    [ -f "$f" ] && "$BIN/llama-finetune" -m "$f" --bench -c 512 -b 1 --steps 4 -ngl 99 2>&1 | tail -3 | sed "s/^/$t: /" | tee -a "$OUT/summary.txt"
done

log "training on the GPU beside the CPU: LoRA on ktest-F32 (heads of 64: attention on tensor cores), 20 steps, f32 backward products on both"
f="$SHARED/models/ktest/ktest-F32.gguf"
if [ -f "$f" ]; then
    for ngl in 0 99; do
        "$BIN/llama-finetune" -m "$f" -f "$SHARED/reference/lora-sentences.txt" -o "$OUT/ft-ngl$ngl.gguf" -c 64 --steps 20 --no-shuffle \
            --backward-prec f32 -ngl $ngl --loss-log "$OUT/ft-ngl$ngl.tsv" > "$OUT/ft-ngl$ngl.txt" 2>&1
        log "llama-finetune -ngl $ngl rc $?"
    done
    # the largest relative difference of a step's loss (row 0: the base model's)
    paste "$OUT/ft-ngl0.tsv" "$OUT/ft-ngl99.tsv" | awk -F'\t' 'NR > 1 { d = ($2 - $6) / $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
        END { printf "%d steps, largest relative loss difference GPU vs CPU: %.3g\n", n, m }' | tee -a "$OUT/summary.txt"
fi

log "where the time goes: GGML_CUDA_PROFILE=1, Q4_0, the 12 largest classes (whole tables in $OUT/profile-*.txt)"
f="$M/tl-Q4_0.gguf"
if [ -f "$f" ]; then
    for run in "pp512-fa1:-fa 1 -p 512 -n 0" "pp512-fa0:-fa 0 -p 512 -n 0" "tg128-fa1:-fa 1 -p 0 -n 128"; do
        name=${run%%:*}
        GGML_CUDA_PROFILE=1 "$BIN/llama-bench" -m "$f" -ngl 99 ${run#*:} -r 1 > /dev/null 2> "$OUT/profile-$name.txt"
        log "$name"
        grep -A13 "ggml_cuda profile" "$OUT/profile-$name.txt" | tee -a "$OUT/summary.txt"
    done
fi
