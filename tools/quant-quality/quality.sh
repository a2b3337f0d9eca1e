#!/usr/bin/env bash
# Quality of our quantized files beside llama.cpp's, on a model whose weights were trained (see
# README.md): for each target type, our llama-quantize and llama.cpp's make the file from the same
# F16 model, with llama.cpp's importance matrix and (where llama.cpp allows it) without, and
# llama.cpp's llama-perplexity --kl-divergence scores every file against the F16 model's logits
# on the same held-out text. Prints one table row per type: mean KL divergence and perplexity.
#
#   quality.sh OURS_BIN LCPP_BIN MODEL-F16.gguf IMATRIX_TEXT EVAL_TEXT WORKDIR [TYPE...]
set -euo pipefail
source "$(dirname "$(realpath "$0")")/needs-imatrix.sh"
ours=$(realpath "$1") lcpp=$(realpath "$2") model=$(realpath "$3") imtext=$(realpath "$4") evaltext=$(realpath "$5") work=$6
shift 6
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M
    IQ4_XS IQ4_NL Q2_K_S Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_M Q6_K TQ1_0 TQ2_0)
ctx=${CTX:-256}  # IMATRIX_CHUNKS (400): the importance matrix from the first 400 x 256 tokens
threads=${THREADS:-2}
mkdir -p "$work"
cd "$work"

[ -f imatrix.dat ] || "$lcpp/llama-imatrix" -m "$model" -f "$imtext" -o imatrix.dat -c "$ctx" \
    --chunks "${IMATRIX_CHUNKS:-400}" -t "$threads" > imatrix.log 2>&1
[ -f base.kld ] || "$lcpp/llama-perplexity" -m "$model" -f "$evaltext" -c "$ctx" -t "$threads" \
    --kl-divergence-base base.kld > base.log 2>&1

score() {  # FILE -> "KLD PPL" (llama.cpp's llama-perplexity on the held-out text)
    local log=${1%.gguf}.kl.log
    # a file scored before (the work directory keeps what it made) is not scored again
    grep -q '^Mean *KLD:' "$log" 2>/dev/null ||
        "$lcpp/llama-perplexity" -m "$1" -c "$ctx" -t "$threads" --kl-divergence-base base.kld --kl-divergence > "$log" 2>&1
    local kld ppl
    kld=$(grep -m1 '^Mean *KLD:' "$log" | awk '{print $3}')
    ppl=$(grep -m1 '^Mean PPL(Q)' "$log" | awk '{print $4}')
    echo "$kld $ppl"
}

printf '| type | ours KLD (imatrix) | llama.cpp KLD (imatrix) | ours KLD (none) | llama.cpp KLD (none) | ours PPL (imatrix) | llama.cpp PPL (imatrix) | ours PPL (none) | llama.cpp PPL (none) | size ours / llama.cpp (imatrix) |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for t in "${types[@]}"; do
    declare -A kld=() ppl=()
    for who in ours lcpp; do
        bin=$ours
        [ $who = lcpp ] && bin=$lcpp
        for im in imatrix none; do
            out=$who-$t-$im.gguf
            kld[$who-$im]=- ppl[$who-$im]=-
            [ $im = none ] && needs_imatrix "$t" && continue
            args=()
            [ $im = imatrix ] && args=(--imatrix imatrix.dat)
            [ -f "$out" ] || "$bin/llama-quantize" "${args[@]}" "$model" "$out" "$t" "$threads" > "${out%.gguf}.q.log" 2>&1
            read -r k p < <(score "$out")
            kld[$who-$im]=$k ppl[$who-$im]=$p
        done
    done
    size() { [ -f "$1" ] && awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f", b / 1048576 }' || echo -; }
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s MiB |\n' "$t" \
        "${kld[ours-imatrix]}" "${kld[lcpp-imatrix]}" "${kld[ours-none]}" "${kld[lcpp-none]}" \
        "${ppl[ours-imatrix]}" "${ppl[lcpp-imatrix]}" "${ppl[ours-none]}" "${ppl[lcpp-none]}" \
        "$(size ours-$t-imatrix.gguf)" "$(size lcpp-$t-imatrix.gguf)"
done
