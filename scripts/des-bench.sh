#!/usr/bin/env bash
# DES-ECB, ours (Sources/HTTPDNSLookup/Providers/DES.swift, pure Swift) against the C peer (OpenSSL 3's EVP DES-ECB,
# legacy provider), on one DNSPod `alg=des` query's work: seal and open the 13-byte name of the vendor's
# example. Counts instructions per query with callgrind (repeatable on a noisy machine: the start-up
# cost is measured with 0 iterations and taken off), then times both. Prints ours, the peer and the ratio.
# Needs valgrind, gcc and libssl-dev. Usage: scripts/des-bench.sh [ITERATIONS]   (default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
out=.build-bench/des
mkdir -p "$out"
swiftc -O -package-name bench -module-name DESBench Sources/HTTPDNSLookup/Providers/DES.swift Benchmarks/DES/main.swift \
    -o "$out/ours"
gcc -O2 Benchmarks/DES/peer.c -o "$out/peer" -lcrypto
count() { # program iterations -> instructions
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_query() { echo $((($(count "$1" "$n") - $(count "$1" 0)) / n)); }
ours=$(per_query "$out/ours")
peer=$(per_query "$out/peer")
echo "instructions per query (seal + open): ours $ours, OpenSSL $peer, ratio $(python3 -c "print(f'{$ours/$peer:.1f}')")x"
"$out/ours" 200000
"$out/peer" 200000
