# Sourced by quality.sh and draws.sh. needs_imatrix TYPE: the targets llama.cpp quantizes only with
# an importance matrix (its llama-quantize refuses them without one; IQ2_M and IQ3_XXS: their
# attention Q or K is IQ2_S).
needs_imatrix() { case $1 in IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ2_M | IQ3_XXS | Q2_K_S) return 0 ;; esac; return 1; }
