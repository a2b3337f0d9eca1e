#!/bin/bash
# build-lcpp-logits.sh LLAMA_CPP_SRC [OUT [SOURCE.cpp]]: builds llama.cpp's static libraries in
# LLAMA_CPP_SRC/build (CPU only, 2 jobs) and links SOURCE.cpp (default lcpp-logits.cpp) against them
# into OUT (default: LLAMA_CPP_SRC/build/lcpp-logits).
# An offline developer tool; tests and CI never run it. Checked with llama.cpp build 4747.
set -euo pipefail
SRC=${1:?usage: build-lcpp-logits.sh LLAMA_CPP_SRC [OUT [SOURCE.cpp]]}
SRC=$(cd "$SRC" && pwd)
OUT=${2:-$SRC/build/lcpp-logits}
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=${3:-$HERE/lcpp-logits.cpp}
JOBS=${JOBS:-2}

cmake -S "$SRC" -B "$SRC/build" -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$SRC/build" -j "$JOBS" --target llama

lib() { # first static library of this name under the build folder
    local p; p=$(find "$SRC/build" -name "$1" -print -quit)
    [ -n "$p" ] || { echo "build-lcpp-logits.sh: $1 not found under $SRC/build" >&2; exit 1; }
    echo "$p"
}
# order matters for static linking: llama, then ggml (backend registry), the CPU backend, ggml-base
LIBS=("$(lib libllama.a)" "$(lib libggml.a)" "$(lib libggml-cpu.a)" "$(lib libggml-base.a)")

g++ -std=c++17 -O2 "$TOOL" -o "$OUT" \
    -I "$SRC/include" -I "$SRC/ggml/include" \
    "${LIBS[@]}" -fopenmp -lpthread -ldl -lm
echo "built $OUT"
