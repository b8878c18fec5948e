#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages the tests need when missing, starts
# the real peers on free loopback ports, runs every test target (the hermetic ones per module and
# HTTPDNSIntegrationTests, which needs the peers), a 60 s soak with faults, the hermetic ones again under
# ThreadSanitizer and AddressSanitizer, builds the Benchmarks package and runs it once, stops
# the peers, builds every README and DocC example (Snippets/) from a separate package, fuzzes the
# parsers, counts the public API and builds the documentation. swift-format's strict lint runs first.
# Under CI=true a missing peer is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(mktemp -d /tmp/httpdns-peers.XXXXXX)"
trap 'scripts/peers.sh stop "$dir"' EXIT
scripts/peers.sh start "$dir"
# shellcheck disable=SC1091
source "$dir/env"
# swift-format's strict lint first (seconds): a finding fails the run before anything is built.
[ $# -gt 0 ] || scripts/format-lint.sh
# The package trait OpenAPI builds HTTPDNSOpenAPI and its tests (apps get it only when they ask for it).
traits=(--traits OpenAPI)
swift build --build-tests "${traits[@]}"
if [ $# -gt 0 ]; then
    swift test --skip-build "${traits[@]}" "$@"
else
    # One test at a time: many tests bound real timeouts (failover, fallback, stale windows) and on 2
    # cores a fully parallel run starved them. Headless Chromium is heavy, and so are the hostile peers
    # (floods, thousands of addresses, dozens of CLI runs): each runs after everything else.
    swift test --skip-build "${traits[@]}" --no-parallel --skip Chromium --skip Hostile
    # One at a time as well: the floods (thousands of connections) would starve the hang checks beside them.
    swift test --skip-build "${traits[@]}" --no-parallel --filter Hostile
    swift test --skip-build "${traits[@]}" --filter Chromium
    # The benchmarks' executable is built above with everything else; one short run of two of its
    # benchmarks proves it still runs (the full rows: scripts/speed-bench.sh).
    .build/debug/httpdns-bench resolver --iterations 1000 --concurrency 50
    .build/debug/httpdns-bench hot --op lookup --iterations 1000
    # The differential conformance suite: every case through a plain URLSession and through
    # one with HTTPDNS enabled, corelibs as the oracle (where corelibs is wrong, Apple's documented
    # behaviour: Conformance/CorelibsDefects.swift). One DIFF fails the run.
    .build/debug/httpdns-conformance
    # The soak for 60 s: engine, proxy, URLSession and serve under load in a namespace of
    # their own while the upstream resolver is killed and the network changes; anything lost fails it.
    scripts/soak.sh 60
    # The hermetic suites again under ThreadSanitizer, then AddressSanitizer, each in a build
    # folder of its own so the plain build stays. A race or a memory error anywhere fails the run: TSan
    # and ASan exit non-zero after a report. No suppressions. ASan's leak check is off: at exit it lists
    # everything the test process still holds (the shared event loops, channels the tests leave open),
    # not leaks that grow; growth is what the hostile suites' memory bounds watch. UBSan is not offered
    # for Swift on Linux (swiftc refuses -sanitize=undefined there).
    # Only the test bundle is built: the CLI (and swift-otel, which only it uses) is not under test here.
    hermetic=(--no-parallel --skip Chromium --skip Hostile --skip HTTPDNSIntegrationTests --skip OpenAPIPeerTests)
    tests=(--product swift-httpdnsPackageTests)
    swift build "${tests[@]}" --sanitize=thread --scratch-path .build-tsan
    TSAN_OPTIONS=halt_on_error=1 swift test --skip-build --sanitize=thread --scratch-path .build-tsan "${hermetic[@]}"
    swift build "${tests[@]}" --sanitize=address --scratch-path .build-asan
    ASAN_OPTIONS=detect_leaks=0 swift test --skip-build --sanitize=address --scratch-path .build-asan "${hermetic[@]}"
    # The Benchmarks package (engine-bench, against AsyncHTTPClient) builds from the public API alone,
    # and one short scenario runs against the test nginx, so it cannot rot.
    swift build --package-path Benchmarks --product engine-bench
    Benchmarks/.build/debug/engine-bench h1 --requests 200 --cacert "$HTTPDNS_CA" \
        --url "https://a.test:$HTTPDNS_NGINX_TLS_PORT/whoami"
    # Every Swift example in the README and DocC is a snippet, built by a separate package that depends
    # on this one as the README says; it reuses the Benchmarks package's build folder.
    scripts/snippets.sh
    # Coverage-guided fuzzing of every parser, 30 s each; a crash fails the run.
    scripts/fuzz.sh all 30
    # The public declarations per module, printed for review (the cap of 200 is retired), and
    # DocC without a warning.
    scripts/public-api.sh
    scripts/docs.sh
    # The iOS 16 compile check when an SDK is named; says SKIPPED otherwise (CI has none).
    scripts/apple-check.sh
fi
