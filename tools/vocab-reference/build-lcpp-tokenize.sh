#!/bin/bash
# build-lcpp-tokenize.sh LLAMA_CPP_SRC [OUT]: llama.cpp's static libraries built as
# tools/arch-reference/build-lcpp-logits.sh builds them, and lcpp-tokenize.cpp linked against them
# into OUT (default: LLAMA_CPP_SRC/build/lcpp-tokenize). An offline developer tool.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${1:?usage: build-lcpp-tokenize.sh LLAMA_CPP_SRC [OUT]}
exec "$HERE/../arch-reference/build-lcpp-logits.sh" "$SRC" "${2:-$(cd "$SRC" && pwd)/build/lcpp-tokenize}" "$HERE/lcpp-tokenize.cpp"
