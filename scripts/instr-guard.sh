#!/usr/bin/env bash
# Instructions per operation, counted by callgrind (repeatable: they do not depend on the machine's load
# or speed), against the baselines committed in Benchmarks/instructions-baseline.txt (issue 76):
#   doh-answer   one DoH answer of `httpdns serve` (TLS, h2, a name from --hosts), asked N and 3N times
#                by h2load -c1 -m1: the difference over 2N, so start-up and shutdown cancel out
#   h2-exchange  one GET over HTTP/2 by our engine (httpdns-bench hot --op h2), to that same server
#   lookup       one cached A+AAAA lookup (httpdns-bench hot --op lookup), the engine's hot path
# Each count is the fewest of RUNS runs (default 2; a run's background work, a timer or a wake-up, only
# ever adds). The step fails when a count is more than 5 % over its baseline, and prints ours, the
# baseline and the ratio for each. A change that must cost more updates the baseline in the same commit
# (`scripts/instr-guard.sh --update`) and says why in the commit message.
#
#   scripts/instr-guard.sh [--update] [BIN_DIR]     # BIN_DIR: where httpdns and httpdns-bench are
#                                                   # (default: the debug build, .build/debug)
# The baselines are per build configuration (a debug build's counts, which the test command has, are not a
# release build's); the file names the one it holds. Needs valgrind, h2load (nghttp2-client), openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
bin=${1:-.build/debug}
baseline=Benchmarks/instructions-baseline.txt
RUNS=${RUNS:-2}
N=${N:-200}
for tool in valgrind h2load openssl gcc strip; do
    command -v "$tool" >/dev/null || { echo "instr-guard: $tool is missing" >&2; exit 69; }
done
config=$(basename "$bin")  # debug or release

dir=$(mktemp -d /tmp/instr-guard.XXXXXX)
serve_pid=""
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

# valgrind 3.19 cannot read the DWARF the Swift 6.3 toolchain writes, so it counts copies without debug
# info; and libdispatch's signal thread calls sigsuspend with a mask in read-only memory, which kills it
# under valgrind, so a shim hands the kernel a copy (scripts/valgrind-sigsuspend.c).
cp "$bin/httpdns" "$dir/httpdns"
cp "$bin/httpdns-bench" "$dir/httpdns-bench"
strip -g "$dir/httpdns" "$dir/httpdns-bench"
gcc -O2 -shared -fPIC scripts/valgrind-sigsuspend.c -o "$dir/vg-sigsuspend.so"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/doh.key" \
    -out "$dir/doh.pem" -days 2 -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
printf '127.0.0.1 a.test\n' >"$dir/hosts"
# The question: A a.test, as a GET's dns= parameter.
query=$(python3 -c '
import base64, struct
q = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0) + b"\x01a\x04test\x00" + struct.pack(">HH", 1, 1)
print(base64.urlsafe_b64encode(q).decode().rstrip("="))')

# Starts serve, behind "$@" (valgrind) if given; sets serve_pid and port.
start_serve() {
    local out="$dir/serve.out"
    LD_PRELOAD="$dir/vg-sigsuspend.so" "$@" "$dir/httpdns" serve --listen 127.0.0.1:0 --tls-cert "$dir/doh.pem" \
        --tls-key "$dir/doh.key" --hosts "$dir/hosts" >"$out" 2>&1 &
    serve_pid=$!
    for _ in $(seq 1200); do  # up to 120 s: under valgrind it starts slowly
        grep -qE 'listening on .*127\.0\.0\.1:[0-9]+' "$out" 2>/dev/null && break
        sleep 0.1
    done
    port=$(grep -oE 'listening on .*127\.0\.0\.1:[0-9]+' "$out" | head -1 | grep -oE '[0-9]+$')
    [ -n "$port" ] || { echo "instr-guard: serve did not start:" >&2; cat "$out" >&2; exit 1; }
}
stop_serve() {
    kill -INT "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=""
}

# The fewest instructions callgrind counts for a command over RUNS runs.
fewest() {
    local best="" n
    for _ in $(seq "$RUNS"); do
        n=$(LD_PRELOAD="$dir/vg-sigsuspend.so" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 \
            >/dev/null | awk '/Collected :/ { print $NF }')
        if [ -z "$best" ] || [ "$n" -lt "$best" ]; then best=$n; fi
    done
    echo "$best"
}
per_op() { # A B N: (B - A) / 2N
    awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.0f", (b - a) / (2 * n) }'
}

doh_answer() {
    local counts=() m best n
    for m in $N $((3 * N)); do
        best=""
        for _ in $(seq "$RUNS"); do
            start_serve valgrind --tool=callgrind --callgrind-out-file=/dev/null
            h2load -c1 -m1 -n"$m" "https://127.0.0.1:$port/dns-query?dns=$query" >"$dir/h2load.out" 2>&1
            grep -q "succeeded, 0 errored" "$dir/h2load.out" || grep -q " $m succeeded" "$dir/h2load.out" || {
                echo "instr-guard: h2load did not get $m answers:" >&2; cat "$dir/h2load.out" >&2; exit 1; }
            stop_serve
            n=$(awk '/Collected :/ { print $NF }' "$dir/serve.out")
            if [ -z "$best" ] || [ "$n" -lt "$best" ]; then best=$n; fi
        done
        counts+=("$best")
    done
    per_op "${counts[0]}" "${counts[1]}" "$N"
}

h2_exchange() {
    start_serve
    local url="https://127.0.0.1:$port/dns-query?dns=$query" a b
    a=$(fewest "$dir/httpdns-bench" hot --op h2 --url "$url" --cacert "$dir/doh.pem" --iterations "$N")
    b=$(fewest "$dir/httpdns-bench" hot --op h2 --url "$url" --cacert "$dir/doh.pem" --iterations $((3 * N)))
    stop_serve
    per_op "$a" "$b" "$N"
}

lookup() {
    local n=$((N * 200)) a b
    a=$(fewest "$dir/httpdns-bench" hot --op lookup --iterations "$n")
    b=$(fewest "$dir/httpdns-bench" hot --op lookup --iterations $((3 * n)))
    per_op "$a" "$b" "$n"
}

declare -A ours
ours[doh-answer]=$(doh_answer)
ours[h2-exchange]=$(h2_exchange)
ours[lookup]=$(lookup)

if [ "$update" = 1 ]; then
    {
        echo "# Instructions per operation (scripts/instr-guard.sh), $config build, $(swift --version 2>/dev/null | head -1)."
        echo "# Updated by a change that must cost more, in the same commit, which says why."
        echo "config $config"
        for k in doh-answer h2-exchange lookup; do echo "$k ${ours[$k]}"; done
    } >"$baseline"
    echo "instr-guard: baseline written to $baseline"
fi

[ -f "$baseline" ] || { echo "instr-guard: no $baseline (run with --update)" >&2; exit 1; }
want=$(awk '$1 == "config" { print $2 }' "$baseline")
[ "$want" = "$config" ] || { echo "instr-guard: the baseline is for a $want build, this is $config" >&2; exit 1; }
failed=0
printf '%-12s %12s %12s %7s\n' "operation" "ours" "baseline" "ratio"
for k in doh-answer h2-exchange lookup; do
    base=$(awk -v k="$k" '$1 == k { print $2 }' "$baseline")
    verdict=$(awk -v o="${ours[$k]}" -v b="$base" 'BEGIN { r = o / b; printf "%.3f %s", r, (r > 1.05 ? "OVER" : "ok") }')
    printf '%-12s %12s %12s %7s\n' "$k" "${ours[$k]}" "$base" "$verdict"
    case "$verdict" in *OVER) failed=1 ;; esac
done
if [ "$failed" = 1 ]; then
    echo "instr-guard: an operation costs more than 5 % over its baseline; find why, or update the baseline with --update and say why in the commit" >&2
    exit 1
fi
