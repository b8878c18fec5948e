#!/usr/bin/env bash
# Round trips to the first byte (issue 48): the time from a request's start (its DNS lookup included) to
# the response's first byte, counted in round trips of a simulated mobile link, for `httpdns fetch` and
# for curl, through the same delay relay (Tests/Fixtures/peers/delay_relay.py: D ms each way).
#
#   scripts/rtt-bench.sh HTTPDNS [PEERS_DIR]     # or HTTPDNS_BIN=...; ROUNDS=3 DELAY_MS=50 by default
#
# HTTPDNS is the httpdns binary (a debug build will do: round trips dominate). PEERS_DIR is a running
# scripts/peers.sh folder (its env file is read); without it the peers are started here and stopped at
# the end. The relay runs here: TCP relays on one ephemeral port of 127.0.0.1 and ::1 (a.test has both
# addresses) in front of nginx (TLS 1.3, h2) and of kresd's DoH (doh2), and a UDP relay on port 53 of
# a free 127.0.0.N in front of kresd's Do53. Every client runs in a private mount namespace
# (`unshare -m`) whose /etc/resolv.conf names 127.0.0.N, so the system resolver goes through the relay
# too (and so would any query of ours to the system resolver); the network namespace is the host's.
# Every client fetches https://a.test:RELAY/whoami (kresd's hints give a.test 127.0.0.1 and ::1).
#
# Rows (median of ROUNDS alternating rounds):
#   cold launch      nothing cached. Ours: `httpdns fetch URL --resolver doh:RELAY --no-fallback` (A and
#                    AAAA over DoH, then the origin); curl with the system resolver (glibc: A and AAAA
#                    over UDP together); `curl --doh-url`; curl --resolve (the address known: no DNS).
#   persisted        ours relaunched with --cache-file F --serve-expired 86400, F's answer an hour past
#                    its TTL (written by an earlier run, aged as speed-bench's coldstart row does): the
#                    stale answer is used at once and refreshed in the background. curl keeps no DNS
#                    cache across runs: its columns are the cold launch's (marked *).
#   pre-connect      ours with --preconnect (lookup, TCP and TLS before the request; its ttfbMs is the
#                    request's own); curl's second URL of one invocation, on the first's connection.
#   cached answer    a request to a host whose answer is in the cache file and fresh (an app's second
#                    host whose answer a pre-resolve stored): ours with --cache-file, the answer's TTL
#                    set to an hour. curl: as for persisted.
# Ours is `ttfbMs` of --trace-json: from the engine's start of the request (before the lookup) to the
# response head; each run is checked to have got its address as its row says (dnsSource doh:...,
# stale(...), cache(...); a pre-connected request: reused). curl's is %{time_starttransfer}: from the
# transfer's start (name lookup included) to the first byte. Neither counts the process's own start-up.
#
# Accounting. "relay" RTTs are ms / (2 D). The relay delays every byte D each way but cannot delay the
# TCP handshake (connect() to it returns at once), so a new connection and its first request cost ONE
# relay round trip where a real link costs two: "real" RTTs add 1 per new TCP connection on the path
# to the first byte. Floors (TLS 1.3: one round trip for the handshake; relay / real):
#   cold, DoH:         DoH TLS + query (2 / 3) + origin TLS + request (2 / 3)    = 4 / 6
#   cold, system DNS:  UDP query (1 / 1) + origin (2 / 3)                         = 3 / 4
#   persisted, cached: origin only                                                = 2 / 3
#   pre-connect:       the request on an open connection                          = 1 / 1
# What is left over the floor is the clients' own CPU time (TLS, parsing; more in a debug build). Under
# the table the relay's log says what each client opened (TCP connections, UDP queries) in the last
# round; RELAY_LOG=FILE keeps the whole log (one line per chunk, see delay_relay.py) to count flights.
set -euo pipefail
shopt -s inherit_errexit  # a failed client inside $(...) fails the run
root="$(cd "$(dirname "$0")/.." && pwd)"
H="${1:-${HTTPDNS_BIN:-}}"
if [ -z "$H" ] || [ ! -x "$H" ]; then
    echo "usage: scripts/rtt-bench.sh HTTPDNS_BINARY [PEERS_DIR]   (or HTTPDNS_BIN=...)" >&2
    exit 64
fi
H="$(cd "$(dirname "$H")" && pwd)/$(basename "$H")"
peers="${2:-}"
ROUNDS=${ROUNDS:-3}
DELAY_MS=${DELAY_MS:-50}
for tool in curl python3 unshare; do
    command -v "$tool" >/dev/null || { echo "rtt-bench: $tool is missing" >&2; exit 69; }
done

work=$(mktemp -d /tmp/rtt-bench.XXXXXX)
relay_pid=""
own_peers=""
cleanup() {
    if [ -n "$relay_pid" ]; then
        kill "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
    fi
    if [ -n "$own_peers" ]; then
        "$root/scripts/peers.sh" stop "$own_peers" >/dev/null 2>&1 || true
        rm -rf "$own_peers"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -z "$peers" ]; then
    own_peers=$(mktemp -d /tmp/rtt-bench-peers.XXXXXX)
    peers=$own_peers
    "$root/scripts/peers.sh" start "$peers" 2>&1 | tail -1 >&2
fi
# shellcheck disable=SC1091
source "$peers/env"

# A loopback address whose UDP port 53 is free, for the relay a resolv.conf can name (it has no port).
dns_host=$(python3 - <<'PY'
import socket
for n in range(48, 255):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((f"127.0.0.{n}", 53))
    except OSError:
        continue
    finally:
        s.close()
    print(f"127.0.0.{n}")
    break
PY
)
[ -n "$dns_host" ] || { echo "rtt-bench: no 127.0.0.N has UDP port 53 free" >&2; exit 69; }

log="${RELAY_LOG:-$work/relay.log}"
: > "$log"
python3 "$root/Tests/Fixtures/peers/delay_relay.py" --delay-ms "$DELAY_MS" \
    --listen-host 127.0.0.1 --listen-host ::1 \
    --tcp "127.0.0.1:$HTTPDNS_NGINX_TLS_PORT" --tcp "127.0.0.1:$HTTPDNS_KRESD_DOH2_PORT" \
    --udp "$dns_host:53=$HTTPDNS_KRESD_DNS" --log "$log" > "$work/ready" 2> "$work/relay.err" &
relay_pid=$!
for _ in $(seq 100); do
    grep -q '^ready' "$work/ready" 2>/dev/null && break
    kill -0 "$relay_pid" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q '^ready' "$work/ready" 2>/dev/null; then
    echo "rtt-bench: the delay relay did not start" >&2
    cat "$work/relay.err" >&2
    exit 1
fi
read -r origin_port doh_port < <(sed -E 's/^ready tcp=([0-9]+),([0-9]+).*/\1 \2/' "$work/ready")
URL="https://a.test:$origin_port/whoami"
DOH="https://127.0.0.1:$doh_port/dns-query"

# The clients' system resolver is the UDP relay; /etc/hosts knows only localhost.
printf 'nameserver %s\n' "$dns_host" > "$work/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$work/hosts"
in_ns() { # command...: run it with the private resolv.conf and hosts
    unshare -m sh -c 'mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' \
        in_ns "$work/resolv.conf" "$work/hosts" "$@"
}
if ! in_ns cat /etc/resolv.conf 2>/dev/null | grep -q "$dns_host"; then
    echo "rtt-bench: cannot bind-mount resolv.conf in a private mount namespace (unshare -m needs root)" >&2
    exit 69
fi

# What the relay saw from one client run: "TCP UDP" (connections opened, datagrams sent to a server).
mark() { wc -l < "$log"; }
seen_since() { # line count from mark
    tail -n +"$(($1 + 1))" "$log" | awk '$3 == "open" { t++ } $2 == "udp" && $4 == ">" { u++ } END { printf "%d %d\n", t, u }'
}

# Ours: prints ttfbMs, after checking the request got its address the way the row means (EXPECT: doh,
# stale, cache or reused). Extra `httpdns fetch` flags in $@.
ours() { # expect flags...
    local expect=$1 err="$work/ours.err"
    shift
    if ! in_ns "$H" fetch "$URL" --resolver "doh:$DOH" --cacert "$HTTPDNS_CA" --no-fallback \
        --network-id rtt-bench --trace-json -o /dev/null "$@" 2> "$err"; then
        echo "rtt-bench: httpdns fetch $URL $* failed:" >&2
        cat "$err" >&2
        return 1
    fi
    python3 - "$expect" "$(tail -1 "$err")" <<'PY'
import json, sys
expect, m = sys.argv[1], json.loads(sys.argv[2])
source = "reused" if m.get("reused") else m.get("dnsSource", "")
if not source.startswith({"doh": "doh:", "stale": "stale(", "cache": "cache(", "reused": "reused"}[expect]):
    sys.exit(f"rtt-bench: expected the address from {expect}, the request says {source!r}: {m}")
print(m["ttfbMs"])
PY
}

# curl: prints the time to first byte, in ms, of transfer $1 (1, or 2 when two URLs are given).
curl_ttfb() { # transfer curl-arguments...
    local n=$1 out
    shift
    out=$(in_ns curl -sS --cacert "$HTTPDNS_CA" -w '%{time_starttransfer}\n' "$@")
    awk -v n="$n" 'NR == n { printf "%.3f\n", $1 * 1000 }' <<<"$out"
}
curl_sys() { curl_ttfb 1 -o /dev/null "$URL"; }
curl_doh() { curl_ttfb 1 -o /dev/null --doh-url "$DOH" "$URL"; }
curl_known() { curl_ttfb 1 -o /dev/null --resolve "a.test:$origin_port:127.0.0.1" "$URL"; }
curl_sys_second() { curl_ttfb 2 -o /dev/null -o /dev/null "$URL" "$URL"; }
curl_doh_second() { curl_ttfb 2 -o /dev/null -o /dev/null --doh-url "$DOH" "$URL" "$URL"; }

# A cache file written by a run of ours (straight to the peers, no relay), then two copies: stale.json,
# every time an hour earlier (the app relaunched an hour later, as speed-bench's coldstart row), and
# fresh.json, the answer's TTL an hour (still valid, and not yet at its prefetch point).
prepare_caches() {
    rm -f "$work/seed.json"
    "$H" fetch "https://a.test:$HTTPDNS_NGINX_TLS_PORT/whoami" \
        --resolver "doh:https://127.0.0.1:$HTTPDNS_KRESD_DOH2_PORT/dns-query" --cacert "$HTTPDNS_CA" \
        --no-fallback --network-id rtt-bench --cache-file "$work/seed.json" -o /dev/null
    python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
hour = 3600 * 10**9
for name in ("stale", "fresh"):
    with open(f"{work}/seed.json") as f:
        snapshot = json.load(f)
    for item in snapshot["entries"]:
        entry = item["entry"]
        if name == "stale":
            for field in ("storedAt", "expiresAt", "lastUsed"):
                entry[field]["nanoseconds"] -= hour
        else:
            entry["ttl"] = 3600
            entry["expiresAt"]["nanoseconds"] = entry["storedAt"]["nanoseconds"] + hour
    with open(f"{work}/{name}.json", "w") as f:
        json.dump(snapshot, f)
PY
}

# Each measurement appends its ms to $work/m.KEY and leaves what the relay saw in $work/seen.KEY.
measure() { # key command...
    local key=$1 m v
    shift
    m=$(mark)
    v=$("$@")
    echo "$v" >> "$work/m.$key"
    seen_since "$m" > "$work/seen.$key"
}

for ((i = 0; i < ROUNDS; i++)); do
    measure cold_ours ours doh
    measure cold_sys curl_sys
    measure cold_doh curl_doh
    measure cold_known curl_known
    prepare_caches
    measure stale_ours ours stale --cache-file "$work/stale.json" --serve-expired 86400
    measure pre_ours ours reused --preconnect
    measure pre_sys curl_sys_second
    measure pre_doh curl_doh_second
    measure fresh_ours ours cache --cache-file "$work/fresh.json"
done

median() { sort -g "$work/m.$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
rtt=$(awk -v d="$DELAY_MS" 'BEGIN { print 2 * d }')
# "relay / real" round trips of a median: ms / RTT, and that plus the new TCP connections on the path.
trips() { # key connections
    awk -v ms="$(median "$1")" -v r="$rtt" -v c="$2" 'BEGIN { printf "%.2f / %.2f", ms / r, ms / r + c }'
}
row() { printf '%-34s %8s  %-13s %-14s %-14s %-14s %7s  %-7s %s\n' "$@"; }
ms() { printf '%.0f' "$(median "$1")"; }
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { printf "%.2fx", a / b }'; }
over() { # key floor: ours' relay round trips over the floor
    awk -v ms="$(median "$1")" -v r="$rtt" -v f="$2" 'BEGIN { printf "%+.2f", ms / r - f }'
}

echo "rtt-bench: D = $DELAY_MS ms each way (RTT $rtt ms), medians of $ROUNDS rounds; $URL through the relay;"
echo "  ours $H, resolver doh:$DOH; curl's system resolver: $dns_host:53 (UDP relay)"
echo "  RTTs: relay / real-link (the relay does not delay TCP handshakes: real = relay + 1 per new TCP"
echo "  connection on the path); floor = ours' floor, relay / real"
echo
row "what" "ours ms" "ours RTTs" "curl sys RTTs" "curl DoH RTTs" "curl --resolve" "ours/" "floor" "ours over floor"
row "" "" "" "" "" "(address known)" "curl sys" "" "(relay RTTs)"
row "cold launch (nothing cached)" "$(ms cold_ours)" "$(trips cold_ours 2)" "$(trips cold_sys 1)" \
    "$(trips cold_doh 2)" "$(trips cold_known 1)" "$(ratio cold_ours cold_sys)" "4 / 6" "$(over cold_ours 4)"
row "persisted answer, expired 1 h ago" "$(ms stale_ours)" "$(trips stale_ours 1)" "$(trips cold_sys 1) *" \
    "$(trips cold_doh 2) *" "$(trips cold_known 1) *" "$(ratio stale_ours cold_sys)" "2 / 3" "$(over stale_ours 2)"
row "pre-connected (--preconnect)" "$(ms pre_ours)" "$(trips pre_ours 0)" "$(trips pre_sys 0) **" \
    "$(trips pre_doh 0) **" "-" "$(ratio pre_ours pre_sys)" "1 / 1" "$(over pre_ours 1)"
row "new host, answer cached (fresh)" "$(ms fresh_ours)" "$(trips fresh_ours 1)" "$(trips cold_sys 1) *" \
    "$(trips cold_doh 2) *" "$(trips cold_known 1) *" "$(ratio fresh_ours cold_sys)" "2 / 3" "$(over fresh_ours 2)"
echo
echo "  * curl keeps no DNS cache across runs: the cold launch's figures (--resolve: the address known,"
echo "    as when the system resolver still has it cached)"
echo "  ** the second URL of one curl invocation, on the first one's connection"
seen() { read -r t u < "$work/seen.$1"; printf '%s TCP%s' "$t" "$([ "$u" -gt 0 ] && echo " + $u UDP" || true)"; }
echo "  the relay saw (last round): cold: ours $(seen cold_ours), curl sys $(seen cold_sys), curl DoH $(seen cold_doh)," \
    "--resolve $(seen cold_known); persisted: ours $(seen stale_ours) (the refresh off the path);" \
    "pre-connect: ours $(seen pre_ours), curl sys $(seen pre_sys), curl DoH $(seen pre_doh);" \
    "cached: ours $(seen fresh_ours)"
