#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages the tests need when missing, starts
# the real peers on free loopback ports, runs every test target in parallel (the hermetic ones per module
# in parallel, then HTTPDNSIntegrationTests, which needs the peers, one at a time), Chromium, the
# benchmarks' smoke runs, the instruction-count guard, the
# conformance suite, a 60 s soak with faults, stops the peers, the hermetic suites again under
# ThreadSanitizer and AddressSanitizer (four tests at a time), builds every README and DocC example (Snippets/)
# from a separate package, fuzzes the parsers, counts the public API, guards the app size and builds the
# documentation.
# swift-format's strict lint runs first. Under CI=true a missing peer is a failure, never a skip.
#
# Each step prints its wall time as it ends, and the table of all of them at the end (also when a step
# fails): CI has 90 minutes, and the run is kept under 45 on 2 cores.
#
# `scripts/test.sh ARGS…` runs only `swift test ARGS…` against the peers (e.g. `--filter Chromium`).
set -euo pipefail
cd "$(dirname "$0")/.."

# MARK: Step timing
timings=()
run_started=$SECONDS
# step NAME COMMAND…: runs COMMAND, prints how long it took, and records it for the table.
step() {
    local name=$1 started=$SECONDS status=0
    shift
    echo "==> $name" >&2
    "$@" || status=$?
    local took=$((SECONDS - started)) verdict=ok
    [ "$status" = 0 ] || verdict="FAILED (exit $status)"
    timings+=("$(printf '%-44s %5d s  %s' "$name" "$took" "$verdict")")
    printf '<== %s: %d s, %s\n' "$name" "$took" "$verdict" >&2
    return "$status"
}
print_timings() {
    [ ${#timings[@]} -gt 0 ] || return 0
    echo "step times (wall clock):"
    printf '  %s\n' "${timings[@]}"
    printf '  %-44s %5d s (%d min)\n' "total" "$((SECONDS - run_started))" "$(((SECONDS - run_started + 59) / 60))"
}

dir="$(mktemp -d /tmp/httpdns-peers.XXXXXX)"
peers_up=0
stop_peers() {
    [ "$peers_up" = 1 ] || return 0
    peers_up=0
    scripts/peers.sh stop "$dir"
}
trap 'stop_peers; print_timings' EXIT
step "peers: install and start" scripts/peers.sh start "$dir"
peers_up=1
# shellcheck disable=SC1091
source "$dir/env"
# The package trait OpenAPI builds HTTPDNSOpenAPI and its tests (apps get it only when they ask for it).
traits=(--traits OpenAPI)

if [ $# -gt 0 ]; then
    swift build --build-tests "${traits[@]}" --explicit-target-dependency-import-check error
    swift test --skip-build "${traits[@]}" "$@"
    exit
fi

# swift-format's strict lint first (seconds): a finding fails the run before anything is built.
step "format lint" scripts/format-lint.sh
# Every module imports only what it declares (directly or through what it declares), as AsyncHTTPClient's
# CI checks: checked in this build, not one of its own.
step "build: debug, every target and test, imports checked" swift build --build-tests "${traits[@]}" \
    --explicit-target-dependency-import-check error

# Every hermetic suite at once (the hostile floods included), as plain `swift test` runs them: no test's
# verdict depends on the machine's speed (each bound is one a starved 2-core machine cannot miss, and
# says so). The suites against the real peers then run one test at a time: the peers (kresd, BIND, nginx,
# Chromium…) share the same two cores, and their tests bound real timeouts against them. Headless
# Chromium last: it is a browser, and its test waits for pages.
peer_suites="HTTPDNSIntegrationTests|OpenAPIPeerTests"
step "tests: hermetic suites, parallel" swift test --skip-build "${traits[@]}" --parallel \
    --skip "$peer_suites" --skip Chromium
step "tests: peer suites, one at a time" swift test --skip-build "${traits[@]}" --no-parallel \
    --filter "$peer_suites" --skip Chromium
step "tests: Chromium" swift test --skip-build "${traits[@]}" --filter Chromium

# The benchmarks' executable is built above with everything else; one short run of two of its
# benchmarks proves it still runs (the full rows: scripts/speed-bench.sh).
# (A step's commands are chained with &&: inside `step`, set -e does not stop a function.)
bench_smoke() {
    .build/debug/httpdns-bench resolver --iterations 1000 --concurrency 50 &&
        .build/debug/httpdns-bench hot --op lookup --iterations 1000
}
step "benchmarks: httpdns-bench smoke" bench_smoke
# Instructions per operation (callgrind: repeatable whatever the machine's load) of a DoH answer, an h2
# exchange and a cached lookup, against the baselines in Benchmarks/instructions-baseline.txt: a count
# more than 5 % over fails the run, with ours, the baseline and the ratio printed (issue 76).
step "instructions: guard against the baselines" scripts/instr-guard.sh
# The differential conformance suite: every case through a plain URLSession and through one with
# HTTPDNS enabled, corelibs as the oracle (where corelibs is wrong, Apple's documented behaviour:
# Conformance/CorelibsDefects.swift). One DIFF fails the run.
step "conformance" .build/debug/httpdns-conformance
# The soak for 60 s: engine, proxy, URLSession and serve under load in a namespace of their own while the
# upstream resolver is killed and the network changes; anything lost fails it. It builds the Benchmarks
# package's soak client (the dependency graph once more, in Benchmarks/.build, which the engine bench
# and the snippets below reuse).
step "soak: 60 s (builds the soak client)" scripts/soak.sh 60
# The Benchmarks package (engine-bench, against AsyncHTTPClient) builds from the public API alone, and
# one short scenario runs against the test nginx, so it cannot rot.
engine_bench_smoke() {
    swift build --package-path Benchmarks --product engine-bench &&
        Benchmarks/.build/debug/engine-bench h1 --requests 200 --cacert "$HTTPDNS_CA" \
        --url "https://a.test:$HTTPDNS_NGINX_TLS_PORT/whoami"
}
step "benchmarks: engine-bench build and smoke" engine_bench_smoke
# Every Swift example in the README and DocC is a snippet, built by a separate package that depends on
# this one as the README says; it reuses the Benchmarks package's build folder. PrivateCA runs against
# the peers, so this comes before they stop.
step "snippets" scripts/snippets.sh
step "peers: stop" stop_peers

# The hermetic suites again under ThreadSanitizer, then AddressSanitizer, each in a build folder of its
# own so the plain build stays. A race or a memory error anywhere fails the run: TSan and ASan exit
# non-zero after a report. TSan's suppressions (scripts/tsan-suppressions.txt) name only reports in the
# Swift runtime's continuations, each with its public bug report. ASan's leak check is off: at exit it lists everything the test
# process still holds (the shared event loops, channels the tests leave open), not leaks that grow; growth
# is what the hostile suites' memory bounds watch. UBSan is not offered for Swift on Linux (swiftc refuses
# -sanitize=undefined there). Only the test bundle is built: the CLI (and swift-otel, which only it uses)
# is not under test here.
# The bundle is run directly, four tests at a time (Swift Testing's parallelization width): suites still
# overlap, which is where races show, while the deadlines some suites test (failover within a lookup's
# timeout, a fetch's --max-time) hold under a sanitizer's 5-15x slowdown, which every suite at once on 2
# cores does not give them.
sanitized() { # SCRATCH OPTIONS: the hermetic suites of that build's test bundle, OPTIONS (NAME=VALUE) set
    env "$2" "$1/debug/swift-httpdnsPackageTests.xctest" --testing-library swift-testing \
        --experimental-maximum-parallelization-width 4 \
        --skip Chromium --skip HTTPDNSIntegrationTests --skip OpenAPIPeerTests
}
tests=(--product swift-httpdnsPackageTests)
step "build: ThreadSanitizer" swift build "${tests[@]}" --sanitize=thread --scratch-path .build-tsan
step "tests: hermetic, ThreadSanitizer, 4 at a time" sanitized .build-tsan \
    "TSAN_OPTIONS=halt_on_error=1:suppressions=$PWD/scripts/tsan-suppressions.txt"
step "build: AddressSanitizer" swift build "${tests[@]}" --sanitize=address --scratch-path .build-asan
step "tests: hermetic, AddressSanitizer, 4 at a time" sanitized .build-asan ASAN_OPTIONS=detect_leaks=0

# Coverage-guided fuzzing of every parser, 20 s of a core each (two at a time); a crash fails the run.
step "fuzz: every parser, 20 s each" scripts/fuzz.sh all 20
# The public declarations per module, printed for review, and DocC without a warning.
step "public API" scripts/public-api.sh
# What HTTPDNSKit adds to an app, against scripts/app-size.baseline (the iOS figure only with an SDK).
step "app size: guard against the baseline" scripts/app-size.sh
step "docs" scripts/docs.sh
# The iOS 16 compile check when an SDK is named; says SKIPPED otherwise (CI has none).
step "apple check" scripts/apple-check.sh
