#!/usr/bin/env bash
# How much of a KL divergence is chance, and who is ahead on average. A quantized file is one draw
# of its quantizer's rounding decisions: on the small model of README.md, moving a few values
# across their rounding boundaries moves a file's KLD by a few percent, as much as the gaps
# between engines on the K types. So each draw here is a copy of the F16 model with a little noise
# on every matrix (perturb.py: 0.005 x the row's RMS); ours and llama.cpp's llama-quantize make
# the file from that same copy, with quality.sh's importance matrix and, where llama.cpp allows it,
# without; llama.cpp's llama-perplexity scores it against the unperturbed model's logits
# (quality.sh's base.kld). Per type and mode: both engines' mean KLD over the draws, the mean of
# the paired difference (ours - llama.cpp, same copy) with its standard error, and the draws
# ours wins.
#
#   draws.sh OURS_BIN LCPP_BIN MODEL-F16.gguf WORKDIR DRAWS [TYPE...]
# WORKDIR: quality.sh's (imatrix.dat, base.kld); perturb.py needs python3 with numpy. Results
# accumulate in WORKDIR/draws/results.tsv; a draw already there is not made again.
set -euo pipefail
here=$(dirname "$(realpath "$0")")
ours=$(realpath "$1") lcpp=$(realpath "$2") model=$(realpath "$3") work=$(realpath "$4") ndraws=$5
shift 5
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_M Q6_K IQ4_XS IQ2_XXS IQ3_XXS
                                IQ1_S IQ1_M IQ2_XS IQ2_S IQ2_M IQ3_XS IQ3_S IQ3_M IQ4_NL Q2_K_S)
threads=${THREADS:-2} ctx=${CTX:-256}
[ -f "$work/imatrix.dat" ] && [ -f "$work/base.kld" ] || { echo "draws.sh: run quality.sh on $work first" >&2; exit 1; }
mkdir -p "$work/draws"
cd "$work/draws"
touch results.tsv
source "$here/needs-imatrix.sh"

for ((s = 1; s <= ndraws; s++)); do
    for t in "${types[@]}"; do
        for im in imatrix none; do
            [ $im = none ] && needs_imatrix "$t" && continue
            for who in ours lcpp; do
                grep -q "^$t	$im	$s	$who	" results.tsv && continue
                [ -f f16-$s.gguf ] || python3 "$here/perturb.py" "$model" f16-$s.gguf $s > /dev/null
                bin=$ours
                [ $who = lcpp ] && bin=$lcpp
                args=()
                [ $im = imatrix ] && args=(--imatrix ../imatrix.dat)
                "$bin/llama-quantize" "${args[@]}" f16-$s.gguf q.gguf "$t" "$threads" > q.log 2>&1
                "$lcpp/llama-perplexity" -m q.gguf -c "$ctx" -t "$threads" --kl-divergence-base ../base.kld \
                    --kl-divergence > kl.log 2>&1
                printf '%s\t%s\t%s\t%s\t%s\n' "$t" $im $s $who "$(grep -m1 '^Mean *KLD:' kl.log | awk '{print $3}')" >> results.tsv
                rm -f q.gguf
            done
        done
    done
    rm -f f16-$s.gguf
done

# One row per type and mode, over the draws in results.tsv that have both engines.
printf '| type | importance matrix | draws | ours mean KLD | llama.cpp mean KLD | ours - llama.cpp | standard error | ours lower in |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|\n'
for t in "${types[@]}"; do
    for im in imatrix none; do
        awk -F'\t' -v t="$t" -v im=$im '
            $1 == t && $2 == im { k[$3 " " $4] = $5; seen[$3] = 1 }
            END {
                for (s in seen) {
                    if (!((s " ours") in k) || !((s " lcpp") in k)) continue
                    a = k[s " ours"]; b = k[s " lcpp"]; d = a - b
                    n++; sa += a; sb += b; sd += d; sd2 += d * d; if (d < 0) wins++
                }
                if (n == 0) exit
                md = sd / n; se = n > 1 ? sqrt((sd2 - n * md * md) / (n - 1) / n) : 0
                printf "| %s | %s | %d | %.6f | %.6f | %+.6f (%+.1f%%) | %.6f | %d of %d |\n", t, im == "imatrix" ? "yes" : "no", n, sa / n, sb / n, md, 100 * md / (sb / n), se, wins, n
            }' results.tsv
    done
done
