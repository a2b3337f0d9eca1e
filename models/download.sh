#!/usr/bin/env sh
# Puts the default model (stories260K.gguf) in models/: copied from the shared test models when present (LLAMA_TEST_MODELS, or shared/models beside the repository),
# else downloaded. Exits non-zero with a message when neither works.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest="$here/stories260K.gguf"
[ -s "$dest" ] && exit 0
shared="${LLAMA_TEST_MODELS:-$here/../../shared/models}"
if [ -s "$shared/stories260K.gguf" ]; then
    cp "$shared/stories260K.gguf" "$dest.tmp" && mv "$dest.tmp" "$dest"
    exit 0
fi
url="https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
if command -v curl >/dev/null 2>&1; then
    curl -fL --retry 2 -o "$dest.tmp" "$url" || { rm -f "$dest.tmp"; echo "download of $url failed" >&2; exit 1; }
elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$dest.tmp" "$url" || { rm -f "$dest.tmp"; echo "download of $url failed" >&2; exit 1; }
else
    echo "models/download.sh: neither curl nor wget is installed; put stories260K.gguf in models/ by hand" >&2
    exit 1
fi
mv "$dest.tmp" "$dest"
