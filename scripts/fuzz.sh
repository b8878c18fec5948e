#!/usr/bin/env bash
# Coverage-guided fuzzing of the pure core with libFuzzer.
#
#   scripts/fuzz.sh list                      the target names
#   scripts/fuzz.sh TARGET SECONDS [FLAGS…]   fuzz one target for SECONDS (0: no time bound; extra libFuzzer
#                                             flags such as -runs=10000000 are passed on)
#   scripts/fuzz.sh all SECONDS [FLAGS…]      every target, one per core at a time (CI: scripts/fuzz.sh all 20)
#
# One binary holds every target: Sources/HTTPDNSCore/**/*.swift, the parsers listed in BESIDE_USERS and
# Fuzz/Targets/*.swift compiled into one module by swiftc with -sanitize=fuzzer,address, so the harness reaches internal and package symbols
# without importing anything. It is rebuilt when a source (or this script) is newer than it. Builds
# take /tmp/swift-build.lock like every other Swift build on the machine.
#
# Per target, libFuzzer starts from the committed seeds (Fuzz/Corpus/TARGET) and regressions
# (Fuzz/Regressions/TARGET), which it only reads; what it learns goes to .build-fuzz/corpus/TARGET, and a
# crashing input to .build-fuzz/artifacts/TARGET/. Each run prints one summary line (target, executions,
# exec/s, crashes, corpus); the full log is in .build-fuzz/logs/TARGET.log. Exits non-zero when any
# target crashed (an invariant broke, a trap, an ASan report, a timeout or running out of memory).
# A crash is reproduced with:  HTTPDNS_FUZZ_TARGET=TARGET .build-fuzz/httpdns-fuzz CRASH-FILE
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=.build-fuzz
BIN=$OUT/httpdns-fuzz
SWIFTC=${SWIFTC:-$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)}

usage() {
    echo "usage: scripts/fuzz.sh list | TARGET SECONDS [libFuzzer flags…] | all SECONDS [libFuzzer flags…]" >&2
    exit 2
}

# Parsers of untrusted input that live beside their users in other modules, fuzzed all the same: compiled
# into the fuzz module from copies without their `import HTTPDNSCore` or `import HTTPDNSLookup` (here all
# are one module). Each depends on HTTPDNSCore, the files listed here and Foundation only.
BESIDE_USERS=(
    Sources/HTTPDNSLookup/Formats/*.swift
    Sources/HTTPDNSLookup/Wire/*.swift
    Sources/HTTPDNSLookup/Cache/HostAnswer.swift
    Sources/HTTPDNSLookup/Cache/AddressCollector.swift
    Sources/HTTPDNSLookup/Cache/CacheSnapshot+Loading.swift
    Sources/HTTPDNSLookup/Cache/DNSCache.swift
    Sources/HTTPDNSLookup/Cache/DNSCache+Records.swift
    Sources/HTTPDNSLookup/Cache/StrictTransportSecurity.swift
    Sources/HTTPDNSLookup/ServiceList.swift
    Sources/HTTPDNSLookup/Providers/DES.swift
    Sources/HTTPDNSServer/Service/HostsFile.swift
    Sources/HTTPDNSLoopbackProxy/ProxyRequestTarget.swift
    Sources/HTTPDNSEngine/Trust/CertificateDER.swift
)

build() {
    local sources=(Sources/HTTPDNSCore/*.swift Sources/HTTPDNSCore/*/*.swift Fuzz/Targets/*.swift)
    if [[ -x $BIN ]] && [[ -z $(find "${sources[@]}" "${BESIDE_USERS[@]}" scripts/fuzz.sh -newer "$BIN" -print -quit) ]]; then
        return
    fi
    mkdir -p "$OUT"
    echo "fuzz: building $BIN" >&2
    rm -rf "$OUT/beside-users"
    mkdir -p "$OUT/beside-users"
    local file
    for file in "${BESIDE_USERS[@]}"; do
        grep -Ev '^import HTTPDNS(Core|Lookup)$' "$file" >"$OUT/beside-users/$(basename "$file")"
        sources+=("$OUT/beside-users/$(basename "$file")")
    done
    # swiftc leaves module files in its working directory: run it in $OUT.
    (
        cd "$OUT"
        flock /tmp/swift-build.lock "$SWIFTC" \
            -sanitize=fuzzer,address -parse-as-library -O -wmo -g -use-ld=lld \
            -swift-version 6 -enable-upcoming-feature ExistentialAny \
            -package-name swift_httpdns -module-name HTTPDNSFuzz \
            "${sources[@]/#/$ROOT/}" -o "$ROOT/$BIN.tmp"
    )
    mv "$BIN.tmp" "$BIN"
}

targets() { HTTPDNS_FUZZ_TARGET=list "$BIN"; }

# run TARGET SECONDS [FLAGS…]: fuzz, print the summary line, return 1 on a crash.
run() {
    local target=$1 seconds=$2
    shift 2
    local corpus=$OUT/corpus/$target artifacts=$OUT/artifacts/$target log=$OUT/logs/$target.log
    mkdir -p "$corpus" "$artifacts" "$OUT/logs"
    local seeds=()
    for dir in Fuzz/Corpus/$target Fuzz/Regressions/$target; do
        [[ -d $dir ]] && seeds+=("$dir")
    done
    local before status=0
    before=$(find "$artifacts" -type f | sort)
    # The Swift runtime's backtracer and ASan's report get in each other's way: leave crashes to ASan.
    SWIFT_BACKTRACE=enable=no HTTPDNS_FUZZ_TARGET=$target "$BIN" \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" "$@" "$corpus" "${seeds[@]}" >"$log" 2>&1 || status=$?
    local execs rate crashes corp
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corp=$(grep -ao 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    local found
    found=$(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | sed '/^$/d')
    crashes=$(echo -n "$found" | grep -c . || true)
    if ((status != 0 && crashes == 0)); then crashes=1; fi
    printf 'fuzz %-14s %12s executions %8s exec/s %3d crashes  corpus %s (%s s, %s files learnt)\n' \
        "$target" "${execs:-?}" "${rate:-?}" "$crashes" "${corp:-?}" "$seconds" "$(find "$corpus" -type f | wc -l)"
    if ((crashes > 0)); then
        echo "fuzz $target: CRASH (exit $status); log $log; input(s):" >&2
        echo "${found:-  (none saved)}" | sed 's/^/  /' >&2
        grep -E 'invariant broken|Fatal error|ERROR: (AddressSanitizer|libFuzzer)|SUMMARY' "$log" | head -5 >&2 || true
        return 1
    fi
}

[[ $# -ge 1 ]] || usage
case $1 in
list)
    build
    targets
    ;;
all)
    [[ $# -ge 2 ]] || usage
    seconds=$2
    shift 2
    build
    # One libFuzzer process per core at a time (FUZZ_JOBS, default: the cores): each target still gets
    # its SECONDS of one core, and the whole run takes half the wall time on two. Each target's line is
    # printed when it ends.
    jobs=${FUZZ_JOBS:-$(nproc)}
    failed=0
    running=0
    for t in $(targets); do
        if ((running >= jobs)); then
            wait -n || failed=1
            running=$((running - 1))
        fi
        run "$t" "$seconds" "$@" &
        running=$((running + 1))
    done
    while ((running > 0)); do
        wait -n || failed=1
        running=$((running - 1))
    done
    exit $failed
    ;;
*)
    [[ $# -ge 2 ]] || usage
    target=$1 seconds=$2
    shift 2
    build
    targets | grep -qx -- "$target" || { echo "unknown target \"$target\"; targets: $(targets | xargs)" >&2; exit 2; }
    run "$target" "$seconds" "$@"
    ;;
esac
