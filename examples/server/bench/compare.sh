#!/usr/bin/env bash
# Our llama-server against llama.cpp's on the same model and flags, under 1, 4 and 8 concurrent
# clients, in one run: for each -np N, each server in turn (which one goes first alternates with N)
# is started with the same flags, `-m MODEL -t THREADS -np N -c CTX --port PORT`, waited for
# (GET /health), loaded by llama-server-bench with N clients, and stopped. One table row per
# (server, N); the bench's JSON lines and the servers' logs are kept in LOGDIR.
#
#   examples/server/bench/compare.sh [OURS [THEIRS [MODEL [BENCH]]]]
#
# Each setting is an environment variable too (the arguments win); defaults in brackets:
#   OURS           our llama-server              [<repo>/build/bin/llama-server]
#   THEIRS         llama.cpp's llama-server       [/tmp/lcpp/build/bin/llama-server]
#   MODEL          the GGUF both load             [/tmp/tl/tl-q4_0.gguf]
#   BENCH          llama-server-bench             [/tmp/build-bench/bin/llama-server-bench]
#   NPS            the -np values                 ["1 4 8"]
#   REQS           requests per client, per -np   ["1:5 4:2 8:2"]
#   THREADS        -t                             [2]
#   CTX            -c, shared by the N slots      [4096]
#   PROMPT_TOKENS  N_PREDICT  SEED                [128  128  1]
#   PORT           where the servers listen       [18080]
#   OURS_FLAGS     THEIRS_FLAGS                   extra flags for one server only [none]
#   BENCH_FLAGS    extra flags for the bench, both servers (e.g. --no-ignore-eos) [none]
#   LOGDIR         logs and results               [a new mktemp -d directory]
#
# Why these defaults:
# - CTX 4096, not 2048: each of the N slots gets CTX / N cells and must hold the chat template,
#   the prompt and the N_PREDICT tokens (about 128 + 20 + 128); at -np 8 2048 / 8 = 256 cells are
#   too few (our server refuses such a request, llama.cpp's would shift the context, which is
#   other work). Neither server computes attention over unused cells, so a larger -c costs
#   nothing at -np 1. The script refuses settings where CTX / N is too small.
# - REQS: about 20-40 s of load per run with 2 threads on TinyLlama-1.1B Q4_0 (a quiet machine
#   gave about 40 generated tokens/s and 1.4 s to the first token for one stream, so 5 requests at
#   -np 1 are 15-25 s); 2 per client at -np 4 and 8, so each client's second request starts while
#   the others' are still running (continuous batching, not one batch of N that starts and ends
#   together). -np 8 may run past 40 s; each row shows its wall_s.
# - llama.cpp's defaults otherwise (no -fa; its prompt cache and context shift on): the bench's
#   prompts differ from their first word on, so the prompt cache saves only the chat template's
#   first tokens, and no request outgrows its slot.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)

OURS=${1:-${OURS:-$root/build/bin/llama-server}}
THEIRS=${2:-${THEIRS:-/tmp/lcpp/build/bin/llama-server}}
MODEL=${3:-${MODEL:-/tmp/tl/tl-q4_0.gguf}}
BENCH=${4:-${BENCH:-/tmp/build-bench/bin/llama-server-bench}}
NPS=${NPS:-"1 4 8"}
REQS=${REQS:-"1:5 4:2 8:2"}
THREADS=${THREADS:-2}
CTX=${CTX:-4096}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
N_PREDICT=${N_PREDICT:-128}
SEED=${SEED:-1}
PORT=${PORT:-18080}
OURS_FLAGS=${OURS_FLAGS:-}
THEIRS_FLAGS=${THEIRS_FLAGS:-}
BENCH_FLAGS=${BENCH_FLAGS:-}
LOGDIR=${LOGDIR:-$(mktemp -d "${TMPDIR:-/tmp}/server-compare.XXXXXX")}

die() { echo "compare.sh: $*" >&2; exit 2; }

for f in "$OURS" "$THEIRS" "$BENCH"; do [ -x "$f" ] || die "not an executable: $f"; done
[ -f "$MODEL" ] || die "no model at $MODEL"
command -v curl >/dev/null || die "curl is needed (to wait for /health)"
mkdir -p "$LOGDIR" || die "cannot create $LOGDIR"
url="http://127.0.0.1:$PORT"
if curl -s -o /dev/null --max-time 2 "$url/health"; then die "something already listens on port $PORT (set PORT)"; fi

reqs_for() {  # requests per client for -np $1
    local kv
    for kv in $REQS; do [ "${kv%%:*}" = "$1" ] && { echo "${kv#*:}"; return; }; done
    echo 2
}

for np in $NPS; do
    need=$((PROMPT_TOKENS + N_PREDICT + 64))
    [ $((CTX / np)) -ge $need ] || die "-c $CTX gives each of $np slots $((CTX / np)) cells; a request needs about $need (raise CTX)"
done

server_pid=""
stop_server() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$server_pid" 2>/dev/null && kill -KILL "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    server_pid=""
}
trap 'stop_server; exit 130' INT TERM
trap 'stop_server' EXIT

# start_server NAME BINARY NP EXTRA_FLAGS: starts it, waits for /health (up to 300 s).
start_server() {
    local name=$1 bin=$2 np=$3 extra=$4 log="$LOGDIR/$1-np$3.log"
    # shellcheck disable=SC2086  # EXTRA_FLAGS are words
    "$bin" -m "$MODEL" -t "$THREADS" -np "$np" -c "$CTX" --host 127.0.0.1 --port "$PORT" $extra >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 3000); do
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "compare.sh: $name (-np $np) exited while starting; the end of $log:" >&2
            tail -n 15 "$log" >&2
            server_pid=""
            return 1
        fi
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/health")" = 200 ] && return 0
        sleep 0.1
    done
    echo "compare.sh: $name (-np $np) did not become healthy in 300 s (see $log)" >&2
    stop_server
    return 1
}

results="$LOGDIR/results.jsonl"
: >"$results"
echo "ours:   $OURS"
echo "theirs: $THEIRS"
echo "model:  $MODEL   -t $THREADS -c $CTX   prompt ~$PROMPT_TOKENS tokens, $N_PREDICT generated per request   logs: $LOGDIR"
echo
row() { printf '%-7s %3s %5s %6s %8s %8s %10s %12s %11s %11s %7s\n' "$@"; }
row server np reqs errors wall_s req/s gen_tok/s gen_med_tok/s ttft_p50_ms ttft_p99_ms prompt
status=0
turn=0
for np in $NPS; do
    r=$(reqs_for "$np")
    if [ $((turn % 2)) -eq 0 ]; then order="ours theirs"; else order="theirs ours"; fi
    turn=$((turn + 1))
    for name in $order; do
        if [ "$name" = ours ]; then bin=$OURS; extra=$OURS_FLAGS; else bin=$THEIRS; extra=$THEIRS_FLAGS; fi
        if ! start_server "$name" "$bin" "$np" "$extra"; then
            row "$name" "$np" - "start" - - - - - - -
            status=1
            continue
        fi
        # shellcheck disable=SC2086  # BENCH_FLAGS are words
        out=$("$BENCH" --url "$url" -c "$np" -r "$r" --prompt-tokens "$PROMPT_TOKENS" --n-predict "$N_PREDICT" --seed "$SEED" $BENCH_FLAGS --json \
            2>"$LOGDIR/$name-np$np.bench.err")
        rc=$?
        stop_server 2>>"$LOGDIR/$name-np$np.log"  # (llama.cpp b4747's server aborts at SIGTERM; its shell notice goes to the log)
        [ $rc -eq 0 ] || status=1
        if [ -z "$out" ]; then
            row "$name" "$np" - "rc=$rc" - - - - - - -
            sed 's/^/    /' "$LOGDIR/$name-np$np.bench.err" >&2
            continue
        fi
        echo "{\"server\":\"$name\",\"np\":$np,\"bench\":$out}" >>"$results"
        if command -v jq >/dev/null; then
            # shellcheck disable=SC2046
            row "$name" "$np" $(echo "$out" | jq -r '[.requests, .errors, .wall_s, .req_per_s, .gen_tok_per_s, .gen_speed_median, .ttft_p50_ms, .ttft_p99_ms, .prompt_tokens_mean] | map(tostring) | join(" ")')
        else
            echo "$name np=$np $out"
        fi
        [ $rc -eq 0 ] || sed 's/^/    /' "$LOGDIR/$name-np$np.bench.err" >&2
    done
done
echo
echo "results: $results"
exit $status
