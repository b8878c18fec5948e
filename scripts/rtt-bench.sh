#!/usr/bin/env bash
# Round trips to the first byte on a true delay line (issue 63): `httpdns fetch` and curl on real URLs
# (https://a.test/ is port 443), from the same run, with the floor of each row.
#
#   sudo scripts/rtt-bench.sh HTTPDNS [OUT]      # or HTTPDNS_BIN=...; ROUNDS=5 DELAY_MS=50 by default
#
# The link is ../shared/tools/rttlink (RTTLINK=DIR to name another copy; its README says how it works):
# two network namespaces joined by a userspace delay line that holds EVERY packet DELAY_MS each way, the
# TCP handshake included, so a row's milliseconds over 2 x DELAY_MS are its round trips with no
# correction. Behind it: nginx (a.test, b.test; TLS 1.3, h2) on :443 and :8443, knot-resolver (Do53,
# DoH), `httpdns serve` (DoH and the vendors' forms) and a resolver whose HTTPS-record answers come 400 ms
# after its A answers. The rows are rttlink's (bench.py) and this project's (scripts/rtt_rows.py):
#   cold        nothing cached: ours over DoH (floor 6), over UDP (4); curl with the system resolver,
#               --doh-url and --resolve
#   warm        ours with --warm-resolver: the first request after HTTPDNS was made and its resolver's
#               connection came up, as an app's first request after launch (floor 4: one DoH round trip,
#               TCP, TLS, the request)
#   slowhttps   ours asking a resolver that answers HTTPS records 400 ms late, port 443 and 8443 (floor 4)
#   vendor      ours through the vendors' plain-http forms (floor 5)
#   stale       relaunched with the persisted answer an hour past its TTL (floor 3)
#   fresh       a second host with a fresh answer in the cache file (floor 3)
#   pre         a pre-connected request (floor 1)
#   tfo         with --tcp-fastopen, against servers that offer fast open (nginx, kresd): cold over DoH
#               (floor 4), the relaunch and the second host (floor 2), beside curl --tcp-fastopen with
#               --doh-url and --resolve. The ClientHello rides in the SYN once the kernel holds the
#               server's cookie, which the first round gets.
#   dual_*      a dual-stack client network (IPv4 and IPv6 default routes) and names with A records only:
#               the relaunch and the second host again, port 443 and 8443 (floor 3)
# Ours is ttfbMs of --trace-json (from the request's start, its lookup included, to the response head),
# with dnsMs, the HTTPS-record wait and the connect and TLS times beside it; curl's is
# %{time_starttransfer}. Needs root (namespaces), nginx, knot-resolver, tcpdump, iputils-ping, curl and
# python3. Results in OUT (default /tmp/rtt/out-DATE): table-v4.txt, table-dual.txt, raw.jsonl, link.txt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
H="${1:-${HTTPDNS_BIN:-}}"
if [ -z "$H" ] || [ ! -x "$H" ]; then
    echo "usage: sudo scripts/rtt-bench.sh HTTPDNS_BINARY [OUT]   (or HTTPDNS_BIN=...)" >&2
    exit 64
fi
export HTTPDNS_BIN
HTTPDNS_BIN="$(cd "$(dirname "$H")" && pwd)/$(basename "$H")"
RTTLINK=${RTTLINK:-$root/../shared/tools/rttlink}
[ -x "$RTTLINK/setup.sh" ] || { echo "rtt-bench: no rttlink at $RTTLINK (set RTTLINK=DIR)" >&2; exit 69; }
[ "$(id -u)" = 0 ] || { echo "rtt-bench: needs root (network namespaces)" >&2; exit 77; }
for tool in nginx kresd ping curl python3 ip; do
    command -v "$tool" >/dev/null || { echo "rtt-bench: $tool is missing" >&2; exit 69; }
done
ROUNDS=${ROUNDS:-5}
OUT=${2:-/tmp/rtt/out-$(date +%Y%m%d-%H%M%S)}
export STATE=${STATE:-/tmp/rtt/state}
mkdir -p "$OUT"
trap '"$RTTLINK/teardown.sh" > "$OUT/tunlink.txt" 2>&1 || true' EXIT
"$RTTLINK/setup.sh" > "$OUT/setup.txt"
# The origins offer TCP Fast Open (the tfo rows): the kernel's server side in their namespace, and
# nginx's listeners (restarted: a listener's fast-open queue is set when nginx opens it).
ip netns exec rtts sysctl -qw net.ipv4.tcp_fastopen=3
sed -i 's/\(listen 10\.200\.0\.1[01]:[0-9]* ssl http2\)/\1 fastopen=64/' "$STATE/nginx/nginx.conf"
ip netns exec rtts nginx -p "$STATE/nginx" -c "$STATE/nginx/nginx.conf" -s stop
while [ -e "$STATE/nginx/nginx.pid" ]; do sleep 0.1; done
ip netns exec rtts nginx -p "$STATE/nginx" -c "$STATE/nginx/nginx.conf"
{ echo "before:"; ip netns exec rttc ping -c 5 -i 0.2 -q 10.200.0.10 2>&1 | tail -1
  ip netns exec rttc python3 "$RTTLINK/linkcheck.py"; } | tee "$OUT/link.txt"
for net in v4 dual; do
    ip netns exec rttc nice -n 5 python3 "$root/scripts/rtt_rows.py" --rttlink "$RTTLINK" --bin "$HTTPDNS_BIN" \
        --ca "$STATE/pki/ca.pem" --out "$OUT" --rounds "$ROUNDS" --net "$net" > "$OUT/rounds-$net.txt"
done
echo; cat "$OUT/table-v4.txt"; echo; cat "$OUT/table-dual.txt"
echo "(RTTs = ms / $((2 * ${DELAY_MS:-50})); results in $OUT)"
