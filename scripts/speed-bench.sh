#!/usr/bin/env bash
# Our speed next to the C peers', from one run: starts the peers (scripts/peers.sh), builds
# httpdns in release, and prints for each row ours, the peer, the ratio and CPU per request.
#
#   scripts/speed-bench.sh            # every row, ROUNDS=3 alternating rounds (medians)
#   ROUNDS=5 scripts/speed-bench.sh
#   ROWS="h1 h2" scripts/speed-bench.sh     # some rows: lookup h1 h2 urlsession doh coldstart instr tracing rtt
#
# Rows:
#   lookup      cached A+AAAA lookup (httpdns-bench resolver: resolveCachedOrStart, then await resolve)
#               vs getaddrinfo of an /etc/hosts name
#   h1          HTTP/1.1 keep-alive GETs, 1 in flight: our engine vs `wrk -t1 -c1`, same nginx URL
#   h2          HTTP/2, 100 streams on 1 connection: our engine vs `h2load -c1 -m100`, same URL
#   urlsession  small GETs through HTTPDNSURLProtocol vs plain URLSession (libcurl) (httpdns-bench urlsession)
#   doh         DoH server, `h2load -m1` with 1 and 16 connections: `httpdns serve` vs kresd's doh2,
#               the same query for a name both answer from local data; CPU is the server's
#   coldstart   an app relaunched an hour after its last run (`httpdns fetch` with a cache file aged by
#               an hour): with --serve-expired (ours) against without (a cold start): DNS round trips
#               before the connect, DNS time and time to first byte
#   instr       instructions per operation by callgrind: a cached lookup (vs getaddrinfo), one h1
#               exchange (vs wrk), one h2 exchange (vs h2load -m1), one DoH answer (two counts, N and
#               3N operations; the difference over 2N cancels start-up)
#   tracing     the h1 row and the instructions of a cached await resolve and an h1 exchange, with no
#               tracer (off) and with every span exported over OTLP/HTTP to the peers' receiver (on)
#   rtt         round trips to the first byte on a true delay line (50 ms each way, every packet; needs
#               root and ../shared/tools/rttlink), `httpdns fetch` on https://host/ vs curl: cold, warm
#               resolver, slow HTTPS records, relaunch, second host, pre-connected, dual-stack
#               (scripts/rtt-bench.sh, which lists the rows and floors; its own table)
# The URL is an IP literal (https://127.0.0.1:PORT/whoami), so every client reaches the same nginx
# server block without a name (wrk and h2load do not verify certificates; ours checks the IP SAN).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-"lookup h1 h2 urlsession doh coldstart instr tracing rtt"}

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v valgrind >/dev/null || missing+=(valgrind)
if ((${#missing[@]})); then
    echo "installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

# Release builds in a folder of their own: `httpdns` (serve, fetch) and `httpdns-bench`, the benchmarks'
# executable, which is not part of the shipped tool.
swift build -c release --scratch-path .build-speed --product httpdns >&2
swift build -c release --scratch-path .build-speed --product httpdns-bench >&2
H=$(swift build -c release --scratch-path .build-speed --show-bin-path)/httpdns
B=$(swift build -c release --scratch-path .build-speed --show-bin-path)/httpdns-bench

dir=$(mktemp -d /tmp/speed-bench.XXXXXX)
serve_pid=""
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    scripts/peers.sh stop "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
scripts/peers.sh start "$dir" 2>&1 | tail -1 >&2
# shellcheck disable=SC1091
source "$dir/env"
URL="https://127.0.0.1:$HTTPDNS_NGINX_TLS_PORT/whoami"

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
# Runs a command and prints the CPU seconds it used (user + system, its children included) on stderr's
# last line; its own output goes to stdout.
cpu_of() { python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("CPU %.6f" % (r.ru_utime + r.ru_stime), file=sys.stderr)' "$@"; }
# CPU seconds a running process has used (utime + stime from /proc).
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.4f\n", ($14 + $15) / hz }' "/proc/$1/stat"; }
row() { printf '%-44s %14s %22s %8s   %s\n' "$@"; }

header() {
    echo
    row "what" "ours" "peer" "ratio" "CPU per request (ours / peer)"
}

# Our engine against URL (extra `bench engine` arguments in $@): prints "REQ_PER_S CPU_US_PER_REQUEST".
ours_engine() {
    local out
    out=$("$B" engine --url "$URL" --cacert "$HTTPDNS_CA" "$@" | tail -1)
    sed -E 's/.*rate=([0-9.]+) cpu_us=([0-9.]+).*/\1 \2/' <<<"$out"
}

# wrk for 5 s, one connection: "REQ_PER_S CPU_US_PER_REQUEST".
peer_wrk() {
    local w
    w=$(cpu_of wrk -t1 -c1 -d5s "$URL" 2>&1)
    awk '/Requests\/sec/ { r = $2 } /^CPU/ { c = $2 } END { printf "%s %.2f\n", r, c / (r * 5) * 1e6 }' <<<"$w"
}

# h2load, one connection, $1 streams, $2 requests: "REQ_PER_S CPU_US_PER_REQUEST".
peer_h2load() {
    local h
    h=$(cpu_of h2load -c1 -m"$1" -n"$2" "$URL" 2>&1)
    awk -v n="$2" '/^finished in/ { r = $4 } /^CPU/ { c = $2 } END { printf "%s %.2f\n", r, c / n * 1e6 }' <<<"$h"
}

# ROUNDS alternating rounds of `ours` and `peer` (commands printing "RATE CPU"), one table row.
compare() { # label peer-label ours-command peer-command [unit] [CPU note]
    local o=() p=() oc=() pc=() r c
    for ((i = 0; i < ROUNDS; i++)); do
        read -r r c <<<"$(eval "$3")"
        o+=("$r"); oc+=("$c")
        read -r r c <<<"$(eval "$4")"
        p+=("$r"); pc+=("$c")
    done
    local om pm
    om=$(printf '%s\n' "${o[@]}" | median)
    pm=$(printf '%s\n' "${p[@]}" | median)
    row "$1" "$(printf '%.0f %s' "$om" "${5:-req/s}")" "$2 $(printf '%.0f' "$pm")" "$(ratio "$om" "$pm")x" \
        "$(printf '%s\n' "${oc[@]}" | median) / $(printf '%s\n' "${pc[@]}" | median) us${6:-}"
}

# Each client row twice: callers on the engine's event loop (EventLoopTaskExecutor, no thread hop
# per request) and on Swift's default pool (the hop an app's own task pays).
run_h1() {
    compare "HTTP/1.1 keep-alive GET, 1 in flight" "wrk -t1 -c1" "ours_engine --requests 20000" peer_wrk
    compare "  the same, callers on the default pool" "wrk -t1 -c1" \
        "ours_engine --requests 20000 --caller pool" peer_wrk
}

run_h2() {
    # Below nginx's keepalive_requests (100000 in the peers' config), so no GOAWAY falls in a round.
    compare "HTTP/2, 100 streams on 1 connection" "h2load -c1 -m100" \
        "ours_engine --h2 --concurrency 100 --requests 50000" "peer_h2load 100 50000"
    compare "  the same, callers on the default pool" "h2load -c1 -m100" \
        "ours_engine --h2 --concurrency 100 --requests 50000 --caller pool" "peer_h2load 100 50000"
}

# The DNS query for a.test A, base64url without padding (RFC 8484).
doh_query() {
    python3 -c '
import base64, struct
q = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0) + b"\x01a\x04test\x00" + struct.pack(">HH", 1, 1)
print(base64.urlsafe_b64encode(q).decode().rstrip("="))'
}

# Starts `httpdns serve` (HTTPS, the peers' hosts file), behind the command given as arguments if any
# (valgrind); sets serve_pid and SERVE_PORT. Its output goes to $dir/serve.out.
start_serve() {
    local out="$dir/serve.out"
    "$@" "$H" serve --listen 127.0.0.1:0 --tls-cert "$HTTPDNS_PEERS_DIR/certs/doh.pem" \
        --tls-key "$HTTPDNS_PEERS_DIR/certs/doh.key" --hosts "$HTTPDNS_PEERS_DIR/kresd-hosts" >"$out" 2>&1 &
    serve_pid=$!
    for _ in $(seq 600); do  # up to 60 s: under valgrind it starts slowly
        grep -qE 'listening on .*127\.0\.0\.1:[0-9]+' "$out" 2>/dev/null && break
        sleep 0.1
    done
    SERVE_PORT=$(grep -oE 'listening on .*127\.0\.0\.1:[0-9]+' "$out" | head -1 | grep -oE '[0-9]+$')
}

# h2load against one server: prints "QPS SERVER_CPU_US_PER_QUERY".
doh_once() { # url pid connections n
    local before after h
    before=$(proc_cpu "$2")
    h=$(h2load -c"$3" -m1 -n"$4" "$1" 2>&1)
    after=$(proc_cpu "$2")
    if ! grep -q " 0 failed, 0 errored" <<<"$h"; then grep -E "requests:|status codes" <<<"$h" >&2; fi
    awk -v b="$before" -v a="$after" -v n="$4" '/^finished in/ { printf "%s %.2f\n", $4, (a - b) / n * 1e6 }' <<<"$h"
}

run_doh() {
    start_serve
    local q kresd
    q=$(doh_query)
    kresd=$(cat "$HTTPDNS_PEERS_DIR/kresd.pid")
    local ours_url="https://127.0.0.1:$SERVE_PORT/dns-query?dns=$q"
    local peer_url="https://127.0.0.1:$HTTPDNS_KRESD_DOH2_PORT/dns-query?dns=$q"
    for c in 1 16; do
        local n=$((c == 1 ? 20000 : 50000))
        compare "DoH server, h2load -c$c -m1" "kresd doh2" "doh_once '$ours_url' $serve_pid $c $n" \
            "doh_once '$peer_url' $kresd $c $n" "q/s" " (server)"
    done
}

# Cold start: a fetch by name writes its cache file; the file is aged by an hour, as if the
# app were relaunched an hour later; then the same fetch runs with --serve-expired (ours) and without
# (cold). Prints "ROUND_TRIPS DNS_MS TTFB_MS" for one run: round trips before the connect are 0 when the
# name came from the cache (stale or fresh), else 1 (A and AAAA go out together).
coldstart_once() { # serve-expired-flags...
    local file="$dir/cold.json" out
    local base=(fetch "https://a.test:$HTTPDNS_NGINX_TLS_PORT/whoami" --resolver "dns:$HTTPDNS_KRESD_DNS"
        --cacert "$HTTPDNS_CA" --cache-file "$file" --network-id coldstart -o /dev/null --trace-json)
    rm -f "$file"
    "$H" "${base[@]}" 2>/dev/null
    python3 - "$file" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    snapshot = json.load(f)
for item in snapshot["entries"]:
    for field in ("storedAt", "expiresAt", "lastUsed"):
        item["entry"][field]["nanoseconds"] -= 3600 * 10**9
with open(path, "w") as f:
    json.dump(snapshot, f)
PY
    out=$("$H" "${base[@]}" "$@" 2>&1 >/dev/null | tail -1)
    python3 -c '
import json, sys
m = json.loads(sys.argv[1])
cached = m["dnsSource"].startswith(("stale(", "cache("))
print(0 if cached else 1, m["dnsMs"], m["ttfbMs"])' "$out"
}

run_coldstart() {
    local trips=() cold_trips=() dns=() cold_dns=() ttfb=() cold_ttfb=() a b c
    for ((i = 0; i < ROUNDS; i++)); do
        read -r a b c <<<"$(coldstart_once --serve-expired 86400)"
        trips+=("$a"); dns+=("$b"); ttfb+=("$c")
        read -r a b c <<<"$(coldstart_once)"
        cold_trips+=("$a"); cold_dns+=("$b"); cold_ttfb+=("$c")
    done
    local t ct d cd f cf
    t=$(printf '%s\n' "${trips[@]}" | median); ct=$(printf '%s\n' "${cold_trips[@]}" | median)
    d=$(printf '%s\n' "${dns[@]}" | median); cd=$(printf '%s\n' "${cold_dns[@]}" | median)
    f=$(printf '%s\n' "${ttfb[@]}" | median); cf=$(printf '%s\n' "${cold_ttfb[@]}" | median)
    echo "cold start, relaunched 1 h after the last run (fetch by name; ours: --serve-expired 86400):"
    row "  DNS round trips before the connect" "$t" "cold start $ct" "-" " (loopback upstream)"
    row "  DNS time" "$(printf '%.2f ms' "$d")" "cold start $(printf '%.2f' "$cd")" "$(ratio "$d" "$cd")x" ""
    row "  time to first byte" "$(printf '%.2f ms' "$f")" "cold start $(printf '%.2f' "$cf")" \
        "$(ratio "$f" "$cf")x" " (a phone's round trip to HTTPDNS is 30-300 ms, here under 3 ms)"
}

# Instructions callgrind counts for a whole command (its output is dropped).
instructions() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null \
        | awk '/Collected :/ { print $NF }'
}

# The fewest instructions of three runs of a command: a run's background work (timers, event-loop
# wake-ups, start-up's threads) adds up to a few million instructions now and then, never fewer.
fewest_instructions() {
    local best="" n
    for _ in 1 2 3; do
        n=$(instructions "$@")
        if [ -z "$best" ] || [ "$n" -lt "$best" ]; then best=$n; fi
    done
    echo "$best"
}

# Instructions per operation of a command run for N and 3N operations ("$@" ends with the option that
# takes the count): the difference over 2N, so start-up and shutdown cancel out. N must be large next
# to the noise left: the cached lookup (under 2,000 a call) uses N = 50000, where runs agree to within
# a few instructions; at N = 1000 single runs were up to 500 apart.
per_op() { # n command...
    local n=$1 a b
    shift
    a=$(fewest_instructions "$@" $n)
    b=$(fewest_instructions "$@" $((3 * n)))
    awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.0f", (b - a) / (2 * n) }'
}

# wrk runs for a time, not a count: instructions and requests for 2 s and 6 s, per request.
wrk_per_request() {
    local a b ra rb out
    out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null wrk -t1 -c1 -d2s "$URL" 2>&1)
    a=$(awk '/Collected :/ { print $NF }' <<<"$out"); ra=$(awk '/requests in/ { print $1 }' <<<"$out")
    out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null wrk -t1 -c1 -d6s "$URL" 2>&1)
    b=$(awk '/Collected :/ { print $NF }' <<<"$out"); rb=$(awk '/requests in/ { print $1 }' <<<"$out")
    awk -v a="$a" -v b="$b" -v ra="$ra" -v rb="$rb" 'BEGIN { printf "%.0f", (b - a) / (rb - ra) }'
}

instr_row() { # label ours peer-label peer note
    local r="-"
    [ -n "$4" ] && r="$(ratio "$2" "$4")x"
    row "$1" "$2" "$3${4:+ $4}" "$r" "$5"
}

# Points B at a copy of httpdns-bench that callgrind can count, until restore_h; fails when valgrind cannot
# run it. valgrind 3.19 (Debian 12's) cannot read the DWARF the Swift 6.3 toolchain writes ("possibly
# corrupted debuginfo file"), so it counts a copy without debug info; and it dies as libdispatch's
# signal thread calls sigsuspend with a mask in read-only memory, so a shim
# (scripts/valgrind-sigsuspend.c) hands the kernel a copy instead.
use_valgrind() {
    saved_h=$B
    B="$dir/httpdns-bench-nodebug"
    cp "$saved_h" "$B"
    strip -g "$B"
    gcc -O2 -shared -fPIC scripts/valgrind-sigsuspend.c -o "$dir/vg-sigsuspend.so"
    export LD_PRELOAD="$dir/vg-sigsuspend.so"
    if valgrind --tool=none "$B" --help >/dev/null 2>&1; then return 0; fi
    row "instructions per operation" "n/a" "" "" "$(valgrind --version) cannot run httpdns-bench"
    restore_h
    return 1
}
restore_h() {
    unset LD_PRELOAD
    B=$saved_h
}

# Tracing: the h1 row and the instruction counts of a cached lookup and an h1 exchange with
# every span exported over OTLP/HTTP to the peers' receiver (--otlp-endpoint), next to the same without
# (no tracer bootstrapped: what the other rows measure), in one run.
run_tracing() {
    local otlp="--otlp-endpoint $HTTPDNS_OTLP_ENDPOINT"
    compare "HTTP/1.1 keep-alive GET, tracing off" "wrk -t1 -c1" "ours_engine --requests 20000" peer_wrk
    compare "  the same, tracing on (OTLP export)" "wrk -t1 -c1" "ours_engine --requests 20000 $otlp" peer_wrk
    use_valgrind || return 0
    echo "instructions per operation, tracing off / on (callgrind):"
    local op
    for op in lookup h1; do
        local n=50000 args=()
        [ "$op" = h1 ] && n=300 && args=(--url "$URL" --cacert "$HTTPDNS_CA")
        local off on
        off=$(per_op $n "$B" hot --op $op "${args[@]}" --iterations)
        # shellcheck disable=SC2086
        on=$(per_op $n "$B" hot --op $op "${args[@]}" $otlp --iterations)
        instr_row "  $([ $op = h1 ] && echo "one h1 exchange" || echo "cached await resolve"), off / on" \
            "$off" "on" "$on" " (ratio = off / on)"
    done
    restore_h
}

run_instr() {
    if use_valgrind; then
        echo "instructions per operation (callgrind; lower is better, ratio = ours / peer):"
        local gai
        gai=$(per_op 50000 "$B" hot --op getaddrinfo --iterations)
        instr_row "  cached lookup (A+AAAA) vs getaddrinfo" \
            "$(per_op 50000 "$B" hot --op lookup-sync --iterations)" "getaddrinfo" "$gai" \
            " (resolveCachedOrStart; /etc/hosts name)"
        instr_row "  the same, await resolve" \
            "$(per_op 50000 "$B" hot --op lookup --iterations)" "getaddrinfo" "$gai" ""
        instr_row "  one h1 exchange (client) vs wrk" \
            "$(per_op 300 "$B" hot --op h1 --url "$URL" --cacert "$HTTPDNS_CA" --iterations)" "wrk" \
            "$(wrk_per_request)" " (TLS included)"
        instr_row "  one h2 exchange (client) vs h2load -m1" \
            "$(per_op 300 "$B" hot --op h2 --url "$URL" --cacert "$HTTPDNS_CA" --iterations)" "h2load" \
            "$(per_op 300 h2load -c1 -m1 "$URL" -n)" " (TLS included)"
        # One DoH answer: the server under callgrind, asked N and then 3N times, stopped by SIGINT.
        local q counts=() n=300
        q=$(doh_query)
        for m in $n $((3 * n)); do
            start_serve valgrind --tool=callgrind --callgrind-out-file=/dev/null
            h2load -c1 -m1 -n$m "https://127.0.0.1:$SERVE_PORT/dns-query?dns=$q" >/dev/null 2>&1
            kill -INT "$serve_pid"
            wait "$serve_pid" || true
            serve_pid=""
            counts+=("$(awk '/Collected :/ { print $NF }' "$dir/serve.out")")
        done
        instr_row "  one DoH answer (server)" \
            "$(awk -v a="${counts[0]}" -v b="${counts[1]}" -v n=$n 'BEGIN { printf "%.0f", (b - a) / (2 * n) }')" \
            "kresd n/a" "" " (TLS and h2 included; kresd runs as the peers' daemon, not under callgrind)"
        restore_h
    fi
}

echo "speed-bench: $(nproc) cores, $ROUNDS alternating rounds (medians), release build; $URL"
header
for r in $ROWS; do
    case "$r" in
        lookup)
            "$B" resolver --iterations 200000 --concurrency 1000 \
                | grep -E "^cached|^  the same, await|^getaddrinfo|^ratio|^  await resolve" ;;
        h1) run_h1 ;;
        h2) run_h2 ;;
        urlsession)
            "$B" urlsession --upload-mib 16 | sed -n '/^small GETs/,$p' ;;
        doh) run_doh ;;
        coldstart) run_coldstart ;;
        instr) run_instr ;;
        tracing) run_tracing ;;
        rtt) echo; ROUNDS=$ROUNDS scripts/rtt-bench.sh "$H" "$dir/rtt" ;;
        *) echo "unknown row $r (lookup h1 h2 urlsession doh coldstart instr tracing rtt)" >&2; exit 2 ;;
    esac
done
