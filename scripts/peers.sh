#!/usr/bin/env bash
# Real peers for the tests, on free loopback ports:
#   kresd   DoH h2 (doh2), legacy DoH (HTTP/1.1 + h2), Do53 — the trusted resolver
#   dnsmasq the hijacking LocalDNS on 127.0.0.2
# Usage: scripts/peers.sh start DIR   (writes DIR/env with the ports, to be sourced)
#        scripts/peers.sh stop DIR
# Certificates are generated here, at test time, from a throw-away CA.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fixtures="$here/../Tests/Fixtures/peers"

packages=(knot-resolver knot-resolver-module-http dnsmasq-base dnsutils openssl)

ensure_packages() {
    local missing=()
    command -v kresd >/dev/null || missing+=(knot-resolver)
    [ -e /usr/lib/knot-resolver/kres_modules/http.lua ] || ls /usr/lib/*/knot-resolver/kres_modules/http.lua >/dev/null 2>&1 || missing+=(knot-resolver-module-http)
    command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
    command -v dig >/dev/null || missing+=(dnsutils)
    command -v openssl >/dev/null || missing+=(openssl)
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
}

start() {
    local dir="$1"
    mkdir -p "$dir"
    ensure_packages
    gen_certs "$dir"
    local dns_port doh2_port legacy_port hj_port
    dns_port=$(free_port 127.0.0.1); doh2_port=$(free_port 127.0.0.1); legacy_port=$(free_port 127.0.0.1)
    hj_port=$(free_port 127.0.0.2)
    cp "$fixtures/kresd-hosts" "$dir/kresd-hosts"
    sed -e "s|@ROOT@|$dir|g" -e "s|@DNS_PORT@|$dns_port|g" -e "s|@DOH2_PORT@|$doh2_port|g" \
        -e "s|@DOH_LEGACY_PORT@|$legacy_port|g" "$fixtures/kresd.conf" > "$dir/kresd.conf"
    sed -e "s|@ROOT@|$dir|g" -e "s|@PORT@|$hj_port|g" "$fixtures/dnsmasq.conf" > "$dir/dnsmasq.conf"
    mkdir -p "$dir/kresd-run"
    kresd -n -c "$dir/kresd.conf" "$dir/kresd-run" > "$dir/kresd.log" 2>&1 &
    echo $! > "$dir/kresd.pid"
    dnsmasq -C "$dir/dnsmasq.conf"
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
ENV
    echo "peers: kresd dns=$dns_port doh2=$doh2_port doh_legacy=$legacy_port; dnsmasq 127.0.0.2:$hj_port" >&2
}

stop() {
    local dir="$1"
    for f in "$dir/kresd.pid" "$dir/dnsmasq.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
}

case "${1:-}" in
    start) start "${2:?directory}" ;;
    stop) stop "${2:?directory}" ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 64 ;;
esac
