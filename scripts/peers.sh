#!/usr/bin/env bash
# Real peers for the tests, on free loopback ports:
#   kresd   DoH h2 (doh2), legacy DoH (HTTP/1.1 + h2), Do53 — the trusted resolver
#   dnsmasq the hijacking LocalDNS on 127.0.0.2
#   nginx   HTTPS origin: a.test and b.test with their own certificates on one port (SNI), h2 + http/1.1
#   netns   a network namespace whose system resolver (resolv.conf) is a hijacking dnsmasq, with its own
#           nginx and kresd, and 127.0.0.2 blackholed (SYNs silently dropped)
# Usage: scripts/peers.sh start DIR   (writes DIR/env with the ports, to be sourced)
#        scripts/peers.sh stop DIR
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
    leaf default.test "DNS:default.test,IP:127.0.0.1,IP:::1"
}

# nginx from the fixture templates into DIR/NAME, listening on ADDRS (space-separated) at the ports.
setup_nginx() { # dir name tls_port http_port h2c_port addrs...
    local dir="$1" name="$2" tls="$3" http="$4" h2c="$5"; shift 5
    local n="$dir/$name"
    mkdir -p "$n/tmp"
    local l_tls="" l_def="" l_http=""
    for a in "$@"; do
        l_tls+="        listen $a:$tls ssl http2;\n"
        l_def+="        listen $a:$tls ssl http2 default_server;\n"
        l_http+="        listen $a:$http default_server;\n"
    done
    sed -e "s|@ROOT@/nginx|$n|g" -e "s|@ROOT@|$dir|g" -e "s|@TLS_PORT@|$tls|g" -e "s|@H2C_PORT@|$h2c|g" \
        -e "s|@LISTEN_TLS_DEFAULT@|$l_def|" -e "s|@LISTEN_TLS@|$l_tls|" -e "s|@LISTEN_HTTP@|$l_http|" \
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
    mkdir -p "$dir/www"
    head -c $((64 * 1024 * 1024)) /dev/urandom > "$dir/www/big.bin"
    python3 -c "import sys; sys.stdout.write('swift-httpdns compresses well. ' * 8000)" > "$dir/www/text.txt"
    setup_nginx "$dir" nginx "$tls_port" "$http_port" "$h2c_port" 127.0.0.1 '[::1]'
    nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf"
    wait_tcp 127.0.0.1 "$tls_port" "nginx (https)" || { cat "$dir/nginx/error.log" >&2; return 1; }
    wait_tcp 127.0.0.1 "$http_port" "nginx (http)"
    start_netns "$dir"
    wait_tcp 127.0.0.1 "$doh2_port" "kresd doh2" || { cat "$dir/kresd.log" >&2; return 1; }
    wait_tcp 127.0.0.1 "$legacy_port" "kresd doh_legacy" || { cat "$dir/kresd.log" >&2; return 1; }
    wait_dns 127.0.0.1 "$dns_port" a.test "kresd Do53"
    wait_dns 127.0.0.2 "$hj_port" a.test "dnsmasq"
    cat > "$dir/env" <<ENV
export HTTPDNS_PEERS=1
export HTTPDNS_PEERS_DIR='$dir'
export HTTPDNS_CA='$dir/certs/ca.pem'
export HTTPDNS_KRESD_DNS='127.0.0.1:$dns_port'
export HTTPDNS_KRESD_DOH2_PORT='$doh2_port'
export HTTPDNS_KRESD_DOH_LEGACY_PORT='$legacy_port'
export HTTPDNS_HIJACKER='127.0.0.2:$hj_port'
export HTTPDNS_NGINX_TLS_PORT='$tls_port'
export HTTPDNS_NGINX_HTTP_PORT='$http_port'
export HTTPDNS_NGINX_H2C_PORT='$h2c_port'
export HTTPDNS_WWW='$dir/www'
export HTTPDNS_NETNS='$(cat "$dir/netns/name")'
ENV
    echo "peers: kresd dns=$dns_port doh2=$doh2_port doh_legacy=$legacy_port; dnsmasq 127.0.0.2:$hj_port; nginx https=$tls_port http=$http_port; netns $(cat "$dir/netns/name")" >&2
}

stop() {
    local dir="$1"
    stop_netns "$dir"
    for f in "$dir/kresd.pid" "$dir/dnsmasq.pid" "$dir/nginx/nginx.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
}

case "${1:-}" in
    start) start "${2:?directory}" ;;
    stop) stop "${2:?directory}" ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 64 ;;
esac
