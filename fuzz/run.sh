#!/usr/bin/env bash
# Runs each libFuzzer harness of BUILD_DIR/bin (default build-fuzz) for FUZZ_SECONDS (default
# 60) with a 1 s hang limit, a 2 GiB memory limit and leak detection. Seeds: fuzz/corpus/<target>
# plus, when present, the small files of the shared test models (beside the repository, or LLAMA_TEST_MODELS). New
# interesting inputs go to BUILD_DIR/fuzz-corpus/<target> (kept between runs), crashing ones to
# BUILD_DIR/fuzz-artifacts/<target>/, the logs to BUILD_DIR/fuzz-logs/<target>.log.
# fuzz/<target>.dict, when present, is the target's libFuzzer dictionary.
# FUZZ_TARGETS="fuzz-json fuzz-gguf" runs only those. Exits non-zero if any target failed.
set -u
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
shared_models=${LLAMA_TEST_MODELS:-$(cd .. && pwd)/shared/models}
targets=${FUZZ_TARGETS:-$(for f in fuzz/fuzz-*.cpp; do basename "$f" .cpp; done)}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Extra seed files from the shared test models for a target, linked into one folder (sizes capped at 1 MiB:
# libFuzzer would cut longer inputs anyway).
extra_seeds() {
    local t=$1 dir=$build/fuzz-seeds/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    [ -d "$shared_models" ] || return 0
    local files=()
    case $t in
        fuzz-gguf|fuzz-model)
            mapfile -t files < <(find "$shared_models" -name '*.gguf' -size -1024k 2>/dev/null) ;;
        fuzz-json)
            mapfile -t files < <(find "$shared_models" -name '*.json' -size -256k 2>/dev/null) ;;
        fuzz-tokenizer)
            mapfile -t files < <(find "$shared_models" -name '*.inp' -size -64k 2>/dev/null) ;;
    esac
    local i=0
    for f in "${files[@]}"; do
        ln -sf "$f" "$dir/$i-$(basename "$f")"
        i=$((i + 1))
    done
    [ "$i" -gt 0 ] && echo "$dir"
    return 0
}

failed=()
summary=()
for t in $targets; do
    bin=$build/bin/$t
    if [ ! -x "$bin" ]; then
        echo "fuzz: $bin is not built" >&2
        failed+=("$t (not built)")
        continue
    fi
    work=$build/fuzz-corpus/$t
    art=$build/fuzz-artifacts/$t
    log=$build/fuzz-logs/$t.log
    mkdir -p "$work" "$art" "$(dirname "$log")"
    seeds=(fuzz/corpus/$t)
    extra=$(extra_seeds "$t")
    [ -n "$extra" ] && seeds+=("$extra")
    dict=()
    [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
    echo "== $t: ${seconds}s (seeds: ${seeds[*]}) =="
    start=$(date +%s)
    # -close_fd_mask=3: the library's own messages (errors are expected) are dropped; libFuzzer
    # and the sanitizers still report on a duplicate of stderr, into the log.
    "$bin" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 -detect_leaks=1 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$work" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    line="$t: ${secs}s, ${execs:-?} execs, ${cov:-cov: ?}, exit $rc"
    summary+=("$line")
    echo "$line"
    if [ $rc -ne 0 ]; then
        failed+=("$t")
        echo "---- $log (last 60 lines) ----"
        tail -n 60 "$log"
        echo "---- artifacts: $(ls "$art")"
    fi
done

echo "== fuzz summary =="
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (reproduce: $build/bin/<target> <artifact>; LLAMA_FUZZ_VERBOSE=1 shows the library's log)"
    exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a crash, hang, leak or sanitizer report"
