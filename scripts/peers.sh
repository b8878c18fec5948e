#!/usr/bin/env bash
# Real peers for the tests, on free loopback ports:
#   kresd   DoH h2 (doh2), legacy DoH (HTTP/1.1 + h2), Do53 — the trusted resolver
#   dnsmasq the hijacking LocalDNS on 127.0.0.2
#   nginx   HTTPS origin: a.test and b.test with their own certificates on one port (SNI), h2 + http/1.1
#   tinyproxy an HTTP proxy (CONNECT) that logs what it is asked to reach
#   netns   a network namespace whose system resolver (resolv.conf) is a hijacking dnsmasq, with its own
#           nginx and kresd, and 127.0.0.2 blackholed (SYNs silently dropped)
#   nat64   an IPv6-only network behind NAT64 (tayga) and DNS64 (kresd): four namespaces — an IPv6-only
#           client, a dual-stack client, the router, and an IPv4-only origin running nginx
# Usage: scripts/peers.sh start DIR   (writes DIR/env with the ports, to be sourced)
#        scripts/peers.sh stop DIR
#        source scripts/peers.sh       (defines the helpers, starts nothing)
# Certificates are generated here, at test time, from a throw-away CA.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fixtures="$here/../Tests/Fixtures/peers"


ensure_packages() {
    local missing=()
    command -v kresd >/dev/null || missing+=(knot-resolver)
    [ -e /usr/lib/knot-resolver/kres_modules/http.lua ] || ls /usr/lib/*/knot-resolver/kres_modules/http.lua >/dev/null 2>&1 || missing+=(knot-resolver-module-http)
    command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
    command -v dig >/dev/null || missing+=(dnsutils)
    command -v openssl >/dev/null || missing+=(openssl)
    command -v nginx >/dev/null || missing+=(nginx)
    [ -e /usr/lib/nginx/modules/ngx_http_js_module.so ] || missing+=(libnginx-mod-http-js)
    command -v curl >/dev/null || missing+=(curl)
    command -v ip >/dev/null || missing+=(iproute2)
    command -v iptables >/dev/null || missing+=(iptables)
    command -v chromium >/dev/null || missing+=(chromium)
    command -v certutil >/dev/null || missing+=(libnss3-tools)
    command -v xmllint >/dev/null || missing+=(libxml2-utils)
    command -v tayga >/dev/null || missing+=(tayga)
    command -v haproxy >/dev/null || missing+=(haproxy)
    command -v tinyproxy >/dev/null || missing+=(tinyproxy)
    [ -x /usr/sbin/named ] || missing+=(bind9)
    # The instruction-count guard (scripts/instr-guard.sh): callgrind, and h2load as the DoH client.
    command -v valgrind >/dev/null || missing+=(valgrind)
    command -v h2load >/dev/null || missing+=(nghttp2-client)
    # The Prometheus text parser the metrics tests check /metrics with (PyPI).
    python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus_client >&2
    # The OTLP decoder the tracing tests read exported spans with: OpenTelemetry's own proto classes.
    python3 -c 'import opentelemetry.proto' 2>/dev/null || python3 -m pip install -q opentelemetry-proto >&2
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "peers: installing ${missing[*]}" >&2
    # Keep package scripts from starting services on hosts with an init system.
    [ -e /usr/sbin/policy-rc.d ] || printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d || true
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# A port free for both TCP and UDP on HOST, chosen by the OS.
free_port() {
    python3 - "$1" <<'PY'
import socket, sys
host = sys.argv[1]
for _ in range(50):
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind((host, 0)); port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind((host, port))
    except OSError:
        t.close(); continue
    u.close(); t.close(); print(port); break
PY
}

wait_tcp() { # host port what
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "peers: $3 did not open $1:$2" >&2
    return 1
}

wait_dns() { # server port name what
    for _ in $(seq 1 100); do
        if dig "@$1" -p "$2" +short +time=1 +tries=1 "$3" 2>/dev/null | grep -q .; then return 0; fi
        sleep 0.1
    done
    echo "peers: $4 does not answer DNS on $1:$2" >&2
    return 1
}

gen_certs() { # dir
    local d="$1/certs"
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout "$d/ca.key" -out "$d/ca.pem" \
        -subj "/CN=swift-httpdns test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    leaf() { # name SAN
        openssl req -newkey rsa:2048 -nodes -keyout "$d/$1.key" -out "$d/$1.csr" -subj "/CN=$1" 2>/dev/null
        printf "subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" "$2" > "$d/$1.ext"
        openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
            -out "$d/$1.pem" -extfile "$d/$1.ext" 2>/dev/null
        rm -f "$d/$1.csr" "$d/$1.ext"
    }
    leaf doh "DNS:doh.test,IP:127.0.0.1,IP:::1"
    leaf a.test "DNS:a.test"
    leaf b.test "DNS:b.test"
    leaf web.svcb.test "DNS:web.svcb.test,DNS:hinted.svcb.test,DNS:webalias.svcb.test,DNS:h1web.svcb.test"
    leaf default.test "DNS:default.test,IP:127.0.0.1,IP:::1,IP:198.18.0.2"
}

# nginx from the fixture templates into DIR/NAME, listening on ADDRS (space-separated) at the ports.
setup_nginx() { # dir name tls_port http_port h2c_port addrs...
    local dir="$1" name="$2" tls="$3" http="$4" h2c="$5"; shift 5
    local n="$dir/$name"
    mkdir -p "$n/tmp"
    local l_tls="" l_def="" l_http="" h1_tls
    h1_tls=$(free_port 127.0.0.1)
    echo "$h1_tls" > "$n/h1_tls_port"
    for a in "$@"; do
        l_tls+="        listen $a:$tls ssl http2;\n"
        l_def+="        listen $a:$tls ssl http2 default_server;\n"
        l_http+="        listen $a:$http default_server;\n"
    done
    sed -e "s|@ROOT@/nginx|$n|g" -e "s|@ROOT@|$dir|g" -e "s|@TLS_PORT@|$tls|g" -e "s|@H2C_PORT@|$h2c|g" \
        -e "s|@H1_TLS_PORT@|$h1_tls|g" -e "s|@LISTEN_TLS_DEFAULT@|$l_def|" -e "s|@LISTEN_TLS@|$l_tls|" -e "s|@LISTEN_HTTP@|$l_http|" \
        "$fixtures/nginx.conf" > "$n/nginx.conf"
    sed -e "s|@ROOT@|$dir|g" -e "s|@TLS_PORT@|$tls|g" "$fixtures/nginx-locations.conf" > "$n/locations.conf"
    cp "$fixtures/echo.js" "$n/echo.js"
}

start_netns() { # dir
    local dir="$1" ns="hdns$$"
    mkdir -p "$dir/netns"
    ip netns add "$ns"
    echo "$ns" > "$dir/netns/name"
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    echo "nameserver 127.0.0.53" > "/etc/netns/$ns/resolv.conf"
    printf '127.0.0.1 localhost\n::1 localhost\n' > "/etc/netns/$ns/hosts"
    # Blackhole 127.0.0.2: its SYNs vanish (no RST, no ICMP), like a dead server on a lossy path.
    if ! ip netns exec "$ns" iptables -A INPUT -d 127.0.0.2 -p tcp --syn -j DROP 2>/dev/null; then
        ip netns exec "$ns" tc qdisc add dev lo handle ffff: ingress
        ip netns exec "$ns" tc filter add dev lo parent ffff: protocol ip u32 match ip dst 127.0.0.2/32 action drop
    fi
    sed -e "s|@ROOT@|$dir|g" "$fixtures/netns-dnsmasq.conf" > "$dir/netns/dnsmasq.conf"
    ip netns exec "$ns" dnsmasq -C "$dir/netns/dnsmasq.conf"
    setup_nginx "$dir" netns-nginx 8443 8080 8081 127.0.0.1
    ip netns exec "$ns" nginx -p "$dir/netns-nginx" -c "$dir/netns-nginx/nginx.conf"
    sed -e "s|@ROOT@|$dir|g" -e "s|@DNS_PORT@|5302|g" -e "s|@DOH2_PORT@|8473|g" -e "s|@DOH_LEGACY_PORT@|8474|g" \
        "$fixtures/kresd.conf" > "$dir/netns/kresd.conf"
    mkdir -p "$dir/netns/kresd-run"
    ip netns exec "$ns" kresd -n -c "$dir/netns/kresd.conf" "$dir/netns/kresd-run" > "$dir/netns/kresd.log" 2>&1 &
    echo $! > "$dir/netns/kresd.pid"
    for _ in $(seq 1 100); do
        if ip netns exec "$ns" bash -c '(exec 3<>/dev/tcp/127.0.0.1/8473) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/8443) 2>/dev/null'; then
            return 0
        fi
        sleep 0.1
    done
    echo "peers: servers in netns $ns did not come up" >&2
    cat "$dir/netns/kresd.log" >&2
    return 1
}

stop_netns() { # dir
    local dir="$1"
    [ -s "$dir/netns/name" ] || return 0
    local ns; ns=$(cat "$dir/netns/name")
    for f in "$dir/netns-nginx/nginx.pid" "$dir/netns/dnsmasq.pid" "$dir/netns/kresd.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
}

# Run CMD inside namespace NS until it succeeds (10 s at most).
wait_ns() { # ns what cmd...
    local ns="$1" what="$2"; shift 2
    for _ in $(seq 1 100); do
        if ip netns exec "$ns" "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "peers: $what did not come up in netns $ns" >&2
    return 1
}

# The NAT64 network. Only 198.18.0.0/15 and fd00::/8; every link is a veth pair created straight into
# its two namespaces, so interface names never meet the host's. The router runs tayga (NAT64,
# fd00:64:64::/96 <-> IPv4, clients mapped into 198.18.254.0/24) and the DNS64 kresd on port 53.
#   client (IPv6 only)  fd00:64::2 ---- fd00:64::1              router  198.18.0.1 ---- 198.18.0.2  origin
#   dual               198.18.1.2 ---- 198.18.1.1                                                  (nginx,
#                      fd00:65::2 ---- fd00:65::1                                                   IPv4 only)
start_nat64() { # dir
    local dir="$1" n="$1/nat64"
    local router="n64r$$" client="n64c$$" dual="n64d$$" origin="n64o$$" tls=8443 http=8080 ns l
    mkdir -p "$n"
    rm -rf "$n/tayga" "$n/kresd-run"
    mkdir -p "$n/tayga" "$n/kresd-run"
    : > "$n/names"
    for ns in "$router" "$client" "$dual" "$origin"; do
        ip netns add "$ns"
        echo "$ns" >> "$n/names"
        ip -n "$ns" link set lo up
    done
    echo "$router" > "$n/router"; echo "$client" > "$n/client"; echo "$dual" > "$n/dual"; echo "$origin" > "$n/origin"
    echo "$tls" > "$n/tls_port"; echo "$http" > "$n/http_port"
    ip link add r-client netns "$router" type veth peer name eth0 netns "$client"
    ip link add r-dual netns "$router" type veth peer name eth0 netns "$dual"
    ip link add r-origin netns "$router" type veth peer name eth0 netns "$origin"
    # nodad: the IPv6 addresses are usable (bindable, routable) at once instead of "tentative" for a while.
    ip -n "$router" addr add fd00:64::1/64 dev r-client nodad
    ip -n "$router" addr add 198.18.1.1/24 dev r-dual
    ip -n "$router" addr add fd00:65::1/64 dev r-dual nodad
    ip -n "$router" addr add 198.18.0.1/24 dev r-origin
    ip -n "$client" addr add fd00:64::2/64 dev eth0 nodad
    ip -n "$dual" addr add 198.18.1.2/24 dev eth0
    ip -n "$dual" addr add fd00:65::2/64 dev eth0 nodad
    ip -n "$origin" addr add 198.18.0.2/24 dev eth0
    for l in r-client r-dual r-origin; do ip -n "$router" link set "$l" up; done
    for ns in "$client" "$dual" "$origin"; do ip -n "$ns" link set eth0 up; done
    ip -n "$client" -6 route add default via fd00:64::1 dev eth0
    ip -n "$dual" route add default via 198.18.1.1 dev eth0
    ip -n "$dual" -6 route add default via fd00:65::1 dev eth0
    ip -n "$origin" route add default via 198.18.0.1 dev eth0
    ip netns exec "$router" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
    for ns in "$client" "$dual"; do
        mkdir -p "/etc/netns/$ns"
        printf '127.0.0.1 localhost\n::1 localhost\n' > "/etc/netns/$ns/hosts"
    done
    echo "nameserver fd00:64::1" > "/etc/netns/$client/resolv.conf"
    echo "nameserver fd00:65::1" > "/etc/netns/$dual/resolv.conf"
    # tayga: make the tun, route the prefix and the pool to it, then run it in the foreground (-d) in the
    # background — the form that stays up; its pid is the one to kill.
    sed -e "s|@ROOT@|$dir|g" "$fixtures/tayga.conf" > "$n/tayga.conf"
    ip netns exec "$router" tayga -c "$n/tayga.conf" --mktun > "$n/tayga.log" 2>&1
    ip -n "$router" link set nat64 up
    ip -n "$router" route add 198.18.254.0/24 dev nat64
    ip -n "$router" -6 route add fd00:64:64::/96 dev nat64
    ip netns exec "$router" tayga -c "$n/tayga.conf" -d >> "$n/tayga.log" 2>&1 &
    echo $! > "$n/tayga.pid"
    # DNS64: kresd on the router's client-side addresses, ipv4only.arpa from a dnsmasq on the router's loopback.
    sed -e "s|@ROOT@|$dir|g" -e "s|@PORT@|5353|g" "$fixtures/nat64-dnsmasq.conf" > "$n/dnsmasq.conf"
    ip netns exec "$router" dnsmasq -C "$n/dnsmasq.conf"
    sed -e "s|@PREFIX@|fd00:64:64::|g" -e "s|@LISTEN_V6ONLY@|fd00:64::1|g" \
        -e "s|@LISTEN_DUAL@|fd00:65::1|g" -e "s|@ZONE@|127.0.0.1@5353|g" \
        "$fixtures/kresd-dns64.conf" > "$n/kresd.conf"
    ip netns exec "$router" kresd -n -c "$n/kresd.conf" "$n/kresd-run" > "$n/kresd.log" 2>&1 &
    echo $! > "$n/kresd.pid"
    # The IPv4-only origin: in a fresh namespace every port is free.
    setup_nginx "$dir" nat64-nginx "$tls" "$http" 8081 198.18.0.2
    ip netns exec "$origin" nginx -p "$dir/nat64-nginx" -c "$dir/nat64-nginx/nginx.conf"
    wait_ns "$origin" "nginx (https)" bash -c "(exec 3<>/dev/tcp/198.18.0.2/$tls)" \
        || { cat "$dir/nat64-nginx/error.log" >&2; return 1; }
    wait_ns "$origin" "nginx (http)" bash -c "(exec 3<>/dev/tcp/198.18.0.2/$http)"
    # tayga forwards: the origin through the NAT64 prefix (198.18.0.2 = c612:2), from both clients.
    wait_ns "$client" "NAT64 (tayga)" bash -c "(exec 3<>/dev/tcp/fd00:64:64::c612:2/$tls)" \
        || { cat "$n/tayga.log" >&2; return 1; }
    wait_ns "$dual" "NAT64 (tayga)" bash -c "(exec 3<>/dev/tcp/fd00:64:64::c612:2/$tls)"
    wait_ns "$client" "DNS64 (kresd)" bash -c 'dig @fd00:64::1 +short +time=1 +tries=1 AAAA ipv4only.arpa | grep -q c000:aa' \
        || { cat "$n/kresd.log" >&2; return 1; }
    wait_ns "$dual" "DNS64 (kresd)" bash -c 'dig @fd00:65::1 +short +time=1 +tries=1 AAAA ipv4only.arpa | grep -q c000:aa'
}

stop_nat64() { # dir
    local dir="$1" n="$1/nat64"
    [ -s "$n/names" ] || return 0
    for f in "$n/tayga.pid" "$n/kresd.pid" "$n/dnsmasq.pid" "$dir/nat64-nginx/nginx.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    local ns
    while read -r ns; do
        [ -n "$ns" ] || continue
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/$ns"
    done < "$n/names"
    rm -f "$n/names" "$n/tayga.pid" "$n/kresd.pid" "$n/dnsmasq.pid"
}

start() {
    local dir="$1"
    mkdir -p "$dir"
    chmod 755 "$dir"  # nginx's workers (www-data) serve files from it; mktemp -d makes it 0700
    ensure_packages
    gen_certs "$dir"
    local dns_port doh2_port legacy_port hj_port
    dns_port=$(free_port 127.0.0.1); doh2_port=$(free_port 127.0.0.1); legacy_port=$(free_port 127.0.0.1)
    hj_port=$(free_port 127.0.0.2)
    local tls_port http_port
    local h2c_port
    tls_port=$(free_port 127.0.0.1); http_port=$(free_port 127.0.0.1); h2c_port=$(free_port 127.0.0.1)
    cp "$fixtures/kresd-hosts" "$dir/kresd-hosts"
    sed -e "s|@ROOT@|$dir|g" -e "s|@DNS_PORT@|$dns_port|g" -e "s|@DOH2_PORT@|$doh2_port|g" \
        -e "s|@DOH_LEGACY_PORT@|$legacy_port|g" "$fixtures/kresd.conf" > "$dir/kresd.conf"
    sed -e "s|@ROOT@|$dir|g" -e "s|@PORT@|$hj_port|g" "$fixtures/dnsmasq.conf" > "$dir/dnsmasq.conf"
    mkdir -p "$dir/kresd-run"
    kresd -n -c "$dir/kresd.conf" "$dir/kresd-run" > "$dir/kresd.log" 2>&1 &
    echo $! > "$dir/kresd.pid"
    dnsmasq -C "$dir/dnsmasq.conf"
    local proxy_port
    proxy_port=$(free_port 127.0.0.1)
    sed -e "s|@ROOT@|$dir|g" -e "s|@PORT@|$proxy_port|g" "$fixtures/tinyproxy.conf" > "$dir/tinyproxy.conf"
    # In the foreground (-d), its pid ours: as a daemon it keeps no pid file when it runs as root.
    tinyproxy -d -c "$dir/tinyproxy.conf" > "$dir/tinyproxy.out" 2>&1 &
    echo $! > "$dir/tinyproxy.pid"
    # A second one that wants Basic credentials (alice:wonderland): the proxy's 407 challenge.
    local auth_proxy_port
    auth_proxy_port=$(free_port 127.0.0.1)
    sed -e "s|@ROOT@|$dir|g" -e "s|@PORT@|$auth_proxy_port|g" -e "s|tinyproxy.log|tinyproxy-auth.log|" \
        "$fixtures/tinyproxy.conf" > "$dir/tinyproxy-auth.conf"
    echo "BasicAuth alice wonderland" >> "$dir/tinyproxy-auth.conf"
    tinyproxy -d -c "$dir/tinyproxy-auth.conf" > "$dir/tinyproxy-auth.out" 2>&1 &
    echo $! > "$dir/tinyproxy-auth.pid"
    # nginx's Basic realm (/basic): the same user, in nginx's plain-text form.
    echo 'alice:{PLAIN}wonderland' > "$dir/htpasswd"
    mkdir -p "$dir/www"
    head -c $((64 * 1024 * 1024)) /dev/urandom > "$dir/www/big.bin"
    python3 -c "import sys; sys.stdout.write('swift-httpdns compresses well. ' * 8000)" > "$dir/www/text.txt"
    setup_nginx "$dir" nginx "$tls_port" "$http_port" "$h2c_port" 127.0.0.1 '[::1]'
    nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf"
    wait_tcp 127.0.0.1 "$tls_port" "nginx (https)" || { cat "$dir/nginx/error.log" >&2; return 1; }
    wait_tcp 127.0.0.1 "$http_port" "nginx (http)"
    start_netns "$dir"
    start_nat64 "$dir"
    wait_tcp 127.0.0.1 "$doh2_port" "kresd doh2" || { cat "$dir/kresd.log" >&2; return 1; }
    wait_tcp 127.0.0.1 "$legacy_port" "kresd doh_legacy" || { cat "$dir/kresd.log" >&2; return 1; }
    wait_dns 127.0.0.1 "$dns_port" a.test "kresd Do53"
    wait_dns 127.0.0.2 "$hj_port" a.test "dnsmasq"
    wait_tcp 127.0.0.1 "$proxy_port" "tinyproxy" || { cat "$dir/tinyproxy.log" >&2; return 1; }
    wait_tcp 127.0.0.1 "$auth_proxy_port" "tinyproxy (Basic)" || { cat "$dir/tinyproxy-auth.out" >&2; return 1; }
    # BIND 9.18, authoritative for svcb.test: HTTPS records (RFC 9460) over Do53 and DoH.
    local bind_dns_port bind_doh_port
    bind_dns_port=$(free_port 127.0.0.1); bind_doh_port=$(free_port 127.0.0.1)
    mkdir -p "$dir/bind-https"
    sed -e "s|@NGINX_TLS_PORT@|$tls_port|g" "$fixtures/https.zone" > "$dir/bind-https/https.zone"
    sed -e "s|@ROOT@|$dir|g" -e "s|@DNS_PORT@|$bind_dns_port|g" -e "s|@DOH_PORT@|$bind_doh_port|g" \
        "$fixtures/bind-https.conf" > "$dir/bind-https/named.conf"
    /usr/sbin/named -g -c "$dir/bind-https/named.conf" > "$dir/bind-https/named.log" 2>&1 &
    echo $! > "$dir/bind-https.pid"
    wait_dns 127.0.0.1 "$bind_dns_port" a.svcb.test "bind (Do53)" || { cat "$dir/bind-https/named.log" >&2; return 1; }
    wait_tcp 127.0.0.1 "$bind_doh_port" "bind (DoH)" || { cat "$dir/bind-https/named.log" >&2; return 1; }
    # An OTLP/HTTP receiver: every span exported to it, decoded, one JSON line each in otlp-spans.jsonl.
    local otlp_port
    otlp_port=$(free_port 127.0.0.1)
    python3 "$fixtures/otlp_receiver.py" 127.0.0.1 "$otlp_port" "$dir/otlp-spans.jsonl" > "$dir/otlp.log" 2>&1 &
    echo $! > "$dir/otlp.pid"
    wait_tcp 127.0.0.1 "$otlp_port" "OTLP receiver" || { cat "$dir/otlp.log" >&2; return 1; }
    cat > "$dir/env" <<ENV
export HTTPDNS_PEERS=1
export HTTPDNS_PEERS_DIR='$dir'
export HTTPDNS_CA='$dir/certs/ca.pem'
export HTTPDNS_KRESD_DNS='127.0.0.1:$dns_port'
export HTTPDNS_KRESD_DOH2_PORT='$doh2_port'
export HTTPDNS_KRESD_DOH_LEGACY_PORT='$legacy_port'
export HTTPDNS_HIJACKER='127.0.0.2:$hj_port'
export HTTPDNS_TINYPROXY_PORT='$proxy_port'
export HTTPDNS_TINYPROXY_LOG='$dir/tinyproxy.log'
export HTTPDNS_TINYPROXY_AUTH_PORT='$auth_proxy_port'
export HTTPDNS_NGINX_TLS_PORT='$tls_port'
export HTTPDNS_NGINX_HTTP_PORT='$http_port'
export HTTPDNS_NGINX_H2C_PORT='$h2c_port'
export HTTPDNS_NGINX_H1_TLS_PORT='$(cat "$dir/nginx/h1_tls_port")'
export HTTPDNS_WWW='$dir/www'
export HTTPDNS_OTLP_ENDPOINT='http://127.0.0.1:$otlp_port'
export HTTPDNS_OTLP_SPANS='$dir/otlp-spans.jsonl'
export HTTPDNS_BIND_DNS='127.0.0.1:$bind_dns_port'
export HTTPDNS_BIND_DOH_PORT='$bind_doh_port'
export HTTPDNS_NETNS='$(cat "$dir/netns/name")'
export HTTPDNS_NAT64_CLIENT_NS='$(cat "$dir/nat64/client")'
export HTTPDNS_NAT64_DUAL_NS='$(cat "$dir/nat64/dual")'
export HTTPDNS_NAT64_ROUTER_NS='$(cat "$dir/nat64/router")'
export HTTPDNS_NAT64_ORIGIN_NS='$(cat "$dir/nat64/origin")'
export HTTPDNS_NAT64_ORIGIN_IP='198.18.0.2'
export HTTPDNS_NAT64_PREFIX='fd00:64:64::/96'
export HTTPDNS_NAT64_TLS_PORT='$(cat "$dir/nat64/tls_port")'
export HTTPDNS_NAT64_HTTP_PORT='$(cat "$dir/nat64/http_port")'
ENV
    echo "peers: kresd dns=$dns_port doh2=$doh2_port doh_legacy=$legacy_port; dnsmasq 127.0.0.2:$hj_port; nginx https=$tls_port http=$http_port; netns $(cat "$dir/netns/name"); nat64 client $(cat "$dir/nat64/client") dual $(cat "$dir/nat64/dual")" >&2
}

stop() {
    local dir="$1"
    stop_nat64 "$dir"
    stop_netns "$dir"
    for f in "$dir/kresd.pid" "$dir/dnsmasq.pid" "$dir/nginx/nginx.pid" "$dir/tinyproxy.pid" "$dir/tinyproxy-auth.pid" \
        "$dir/otlp.pid" "$dir/bind-https.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
}

# Sourced (scripts/soak.sh borrows the helpers above): define, run nothing.
[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0

case "${1:-}" in
    start) start "${2:?directory}" ;;
    stop) stop "${2:?directory}" ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 64 ;;
esac
