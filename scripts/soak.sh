#!/usr/bin/env bash
# scripts/soak.sh SECONDS: the engine, the proxy and the server together under load for
# SECONDS while faults are injected, in a network namespace of its own (root; nothing leaves it):
#   kresd                 the upstream resolver of `httpdns serve`; SIGKILLed every 30 s (from 10 s on)
#                         and started again 3 s later
#   nginx                 the origin: h2 and HTTP/1.1 by ALPN, an HTTP/1.1-only port, a body echo
#   httpdns serve         the HTTPDNS server the clients resolve through (json:)
#   httpdns proxy         the loopback proxy; curl (h2 and HTTP/1.1 through CONNECT) and the engine use it
#   soak-client           (Benchmarks package, public API only) the engine's h1/h2 GETs and streamed
#                         POSTs, some cancelled mid-body, URLSession through the URLProtocol, and the
#                         engine through the proxy
#   network change        every 60 s from 25 s on, the namespace's default route moves between two
#                         links (another source address: what the route probe sees as a new network)
# Every process of ours (serve, proxy, soak-client) is sampled once a second for RSS and open
# descriptors. A request that failed while a fault was injected (from the fault until 10 s after it
# ended) is counted as such; one that failed with no fault to blame, or whose bytes differed, is lost.
# The last line:
#   soak: N requests, F failed while a fault was injected, lost L, rss A->B MiB, fds C->D
# where A and C are the first sample after 5 s (warmed up), B and D the last one. It exits non-zero when
# anything was lost, a process of ours died, or a kind of request never succeeded. SOAK_KINDS=a,b runs
# only those kinds of the client's (to find which one a problem follows); SOAK_WORKERS=N sets the
# client's requests in flight (6); SOAK_SANITIZE=thread (or address) builds serve, the proxy and the
# client with that sanitizer (a report ends the process, and the soak fails); SOAK_WRAP="heaptrack -o F"
# runs the client under a tool (its RSS is then the tool's); SOAK_KEEP=1 keeps the logs.
set -euo pipefail
seconds="${1:?usage: scripts/soak.sh SECONDS}"
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -ge 20 ] || { echo "soak: give SECONDS, 20 or more" >&2; exit 64; }
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=peers.sh
source "$root/scripts/peers.sh"  # ensure_packages, gen_certs, setup_nginx

ensure_packages
if [ -n "${SOAK_SANITIZE:-}" ]; then
    # Our processes built with a sanitizer (thread, address), each package in a build folder of its own.
    build=(--sanitize="$SOAK_SANITIZE" --scratch-path)
    case "$SOAK_SANITIZE" in
        thread) scratch=.build-tsan ;;  # the test command's TSan build of the package, reused
        address) scratch=.build-asan ;;
        *) echo "soak: SOAK_SANITIZE is thread or address" >&2; exit 64 ;;
    esac
    export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1}"
else
    build=(--scratch-path)
    scratch=.build
fi
# The plain build with the traits the test command builds with, so its build folder is reused as it is.
traits=()
[ -n "${SOAK_SANITIZE:-}" ] || traits=(--traits OpenAPI)
(cd "$root" && swift build "${traits[@]}" "${build[@]}" "$root/$scratch" --product httpdns >&2)
swift build --package-path "$root/Benchmarks" "${build[@]}" "$root/Benchmarks/$scratch" --product soak-client >&2
httpdns="$root/$scratch/debug/httpdns"
client="$root/Benchmarks/$scratch/debug/soak-client"

dir="$(mktemp -d /tmp/httpdns-soak.XXXXXX)"
chmod 755 "$dir"  # nginx's workers read from it
ns="hsoak$$"
pids=()  # ours and the peers', stopped at exit
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -s "$dir/nginx/nginx.pid" ] && kill "$(cat "$dir/nginx/nginx.pid")" 2>/dev/null || true
    [ -s "$dir/kresd.pid" ] && kill -9 "$(cat "$dir/kresd.pid")" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    [ "${SOAK_KEEP:-0}" = 1 ] && echo "soak: files kept in $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT
# Background processes are started with `ip netns exec` itself, never through a function: `$!` must be
# the process (ip execs the command), not a subshell around it.
in_ns() { ip netns exec "$ns" "$@"; }
now_ms() { date +%s%3N; }

# The namespace: loopback for every service, and two networks the default route moves between (veth
# pairs with both ends inside: nothing answers there, and nothing is sent there).
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add net-a type veth peer name net-a-end
ip -n "$ns" link add net-b type veth peer name net-b-end
for link in net-a-end net-b-end; do ip -n "$ns" link set "$link" up; done
ip -n "$ns" addr add 198.18.100.2/24 dev net-a
ip -n "$ns" addr add 198.18.101.2/24 dev net-b
ip -n "$ns" link set net-a up
ip -n "$ns" link set net-b up
ip -n "$ns" route add default via 198.18.100.1 dev net-a

gen_certs "$dir"
mkdir -p "$dir/www" "$dir/kresd-run"
head -c 4096 /dev/urandom > "$dir/www/small.bin"
head -c $((256 * 1024)) /dev/urandom > "$dir/www/mid.bin"
head -c $((16 * 1024 * 1024)) /dev/urandom > "$dir/www/big.bin"
cp "$fixtures/kresd-hosts" "$dir/kresd-hosts"
sed -e "s|@ROOT@|$dir|g" -e "s|@DNS_PORT@|5300|g" -e "s|@DOH2_PORT@|5301|g" -e "s|@DOH_LEGACY_PORT@|5302|g" \
    "$fixtures/kresd.conf" > "$dir/kresd.conf"
start_kresd() {
    ip netns exec "$ns" kresd -n -c "$dir/kresd.conf" "$dir/kresd-run" >> "$dir/kresd.log" 2>&1 &
    echo $! > "$dir/kresd.pid"
}
start_kresd
setup_nginx "$dir" nginx 8443 8080 8081 127.0.0.1
in_ns nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf"
h1_port="$(cat "$dir/nginx/h1_tls_port")"

ip netns exec "$ns" "$httpdns" serve --listen 127.0.0.1:8053 --upstream dns:127.0.0.1:5300 > "$dir/serve.log" 2>&1 &
serve=$!
pids+=("$serve")
ip netns exec "$ns" "$httpdns" proxy --listen 127.0.0.1:8090 --allow-port 8443 \
    --resolver json:http://127.0.0.1:8053/resolve --no-fallback > "$dir/proxy.log" 2>&1 &
proxy=$!
pids+=("$proxy")
for port in 8443 5300 8053 8090; do
    for _ in $(seq 1 100); do
        in_ns bash -c "(exec 3<>/dev/tcp/127.0.0.1/$port)" 2>/dev/null && break
        sleep 0.1
    done
    in_ns bash -c "(exec 3<>/dev/tcp/127.0.0.1/$port)" 2>/dev/null \
        || { echo "soak: nothing listens on $port" >&2; cat "$dir"/*.log >&2; exit 1; }
done

start=$(now_ms)
# shellcheck disable=SC2086  # SOAK_WRAP is a command prefix, split on purpose
ip netns exec "$ns" ${SOAK_WRAP:-} "$client" --resolver json:http://127.0.0.1:8053/resolve --cacert "$dir/certs/ca.pem" --tls-port 8443 \
    --h1-port "$h1_port" --proxy-port 8090 --www "$dir/www" --seconds "$seconds" ${SOAK_KINDS:+--kinds "$SOAK_KINDS"} \
    ${SOAK_WORKERS:+--workers "$SOAK_WORKERS"} \
    > "$dir/requests.log" 2> "$dir/client.err" &
load=$!
pids+=("$load")

# curl through the proxy, h2 and HTTP/1.1 in turn, until the client is done: one line per request, in a
# file of its own (the client's stdout keeps its own offset in requests.log).
small_sha="$(sha256sum "$dir/www/small.bin" | cut -d' ' -f1)"
(
    n=0
    while kill -0 "$load" 2>/dev/null; do
        n=$((n + 1))
        version=--http2
        [ $((n % 2)) -eq 0 ] && version=--http1.1
        s=$(now_ms)
        if in_ns curl -sS "$version" --max-time 20 -x http://127.0.0.1:8090 --cacert "$dir/certs/ca.pem" \
            -o "$dir/curl.out" "https://b.test:8443/files/small.bin" 2> "$dir/curl.err"; then
            if [ "$(sha256sum "$dir/curl.out" | cut -d' ' -f1)" = "$small_sha" ]; then
                outcome=ok
            else
                outcome="mismatch curl body"
            fi
        else
            outcome="fail $(tr '\n' ' ' < "$dir/curl.err")"
        fi
        echo "$s $(now_ms) curl-proxy${version#--http} $outcome" >> "$dir/curl.log"
    done
) &
curls=$!
pids+=("$curls")

# Faults and samples, once a second until the client is done.
: > "$dir/faults.log"
: > "$dir/samples.log"
touch "$dir/curl.log"
net=a
next_kill=10
next_move=25
restarts=()
while kill -0 "$load" 2>/dev/null; do
    elapsed=$(( ($(now_ms) - start) / 1000 ))
    if [ "$elapsed" -ge "$next_kill" ]; then
        next_kill=$((next_kill + 30))
        fault=$(now_ms)
        kill -9 "$(cat "$dir/kresd.pid")" 2>/dev/null || true
        (sleep 3; start_kresd; echo "$fault $(( $(now_ms) + 10000 )) upstream-killed" >> "$dir/faults.log") &
        restarts+=($!)
    fi
    if [ "$elapsed" -ge "$next_move" ]; then
        next_move=$((next_move + 60))
        if [ "$net" = a ]; then net=b; gateway=198.18.101.1; else net=a; gateway=198.18.100.1; fi
        fault=$(now_ms)
        ip -n "$ns" route replace default via "$gateway" dev "net-$net"
        echo "$fault $(( fault + 10000 )) network-change" >> "$dir/faults.log"
    fi
    sample="$(( $(now_ms) - start ))"
    for pid in "$serve" "$proxy" "$load"; do
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        # A process that has just ended (the client at the end of its run) has no /proc entry: count 0
        # rather than let `ls` fail the script; whether one died is judged after the loop.
        fds=$( (ls "/proc/$pid/fd" 2>/dev/null || true) | wc -l)
        sample+=" ${rss:-0} $fds"
    done
    echo "$sample" >> "$dir/samples.log"
    sleep 1
done
wait "$load" && client_status=0 || client_status=$?
kill "$curls" 2>/dev/null || true
wait "$curls" 2>/dev/null || true
for pid in "${restarts[@]}"; do wait "$pid" || true; done  # a pending restart writes its fault line
died=()
kill -0 "$serve" 2>/dev/null || died+=(serve)
kill -0 "$proxy" 2>/dev/null || died+=(proxy)
[ "$client_status" -eq 0 ] || died+=("soak-client (exit $client_status)")

python3 - "$dir" "${died[*]:-}" <<'PY'
import collections, sys
folder, died = sys.argv[1], sys.argv[2]
faults = []
for line in open(f"{folder}/faults.log"):
    s, e, _ = line.split(maxsplit=2)
    faults.append((int(s), int(e)))
requests, explained, lost = 0, 0, []
by_kind = collections.defaultdict(collections.Counter)
for line in open(f"{folder}/requests.log").readlines() + open(f"{folder}/curl.log").readlines():
    parts = line.rstrip("\n").split(" ", 4)
    if len(parts) < 4 or not parts[0].isdigit():
        continue  # a tool's own lines (SOAK_WRAP="heaptrack …" writes to the client's output)
    start, end, kind, outcome = int(parts[0]), int(parts[1]), parts[2], parts[3]
    requests += 1
    by_kind[kind][outcome] += 1
    if outcome == "mismatch":
        lost.append(line)
    elif outcome == "fail":
        if any(start <= fe and end >= fs for fs, fe in faults):
            explained += 1
        else:
            lost.append(line)
# Each sample: milliseconds, then RSS (KiB) and descriptors of serve, proxy and soak-client.
samples = [tuple(map(int, l.split())) for l in open(f"{folder}/samples.log") if len(l.split()) == 7]
warm = [s for s in samples if s[0] >= 5000] or samples
first, last = warm[0], warm[-1]
for i, name in enumerate(["serve", "proxy", "soak-client"]):
    print(f"soak: {name}: rss {first[1 + 2 * i] / 1024:.1f}->{last[1 + 2 * i] / 1024:.1f} MiB, "
          f"fds {first[2 + 2 * i]}->{last[2 + 2 * i]}", file=sys.stderr)
rss = lambda s: sum(s[1::2]) / 1024
fds = lambda s: sum(s[2::2])
for kind in sorted(by_kind):
    print(f"soak: {kind}: " + ", ".join(f"{n} {o}" for o, n in sorted(by_kind[kind].items())), file=sys.stderr)
print(f"soak: faults injected: {len(faults)}", file=sys.stderr)
for line in lost[:20]:
    print(f"soak: lost: {line.rstrip()}", file=sys.stderr)
never = [k for k, c in by_kind.items() if c["ok"] + c["cancelled"] == 0]
if never:
    print(f"soak: never succeeded: {', '.join(sorted(never))}", file=sys.stderr)
if died:
    print(f"soak: died: {died}", file=sys.stderr)
print(f"soak: {requests} requests, {explained} failed while a fault was injected, lost {len(lost)}, "
      f"rss {rss(first):.0f}->{rss(last):.0f} MiB, fds {fds(first)}->{fds(last)}")
sys.exit(1 if lost or never or died or requests == 0 else 0)
PY
