#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages the tests need when missing, starts
# the real peers on free loopback ports, runs every test target (the hermetic ones per module and
# HTTPDNSIntegrationTests, which needs the peers), stops the peers, fuzzes the parsers, counts the
# public API and builds the documentation. Under CI=true a missing peer is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(mktemp -d /tmp/httpdns-peers.XXXXXX)"
trap 'scripts/peers.sh stop "$dir"' EXIT
scripts/peers.sh start "$dir"
# shellcheck disable=SC1091
source "$dir/env"
swift build --build-tests
if [ $# -gt 0 ]; then
    swift test --skip-build "$@"
else
    # One test at a time: many tests bound real timeouts (failover, fallback, stale windows) and on 2
    # cores a fully parallel run starved them. Headless Chromium is heavy, and so are the hostile peers
    # (floods, thousands of addresses, dozens of CLI runs): each runs after everything else.
    swift test --skip-build --no-parallel --skip Chromium --skip Hostile
    swift test --skip-build --filter Hostile
    swift test --skip-build --filter Chromium
    # Coverage-guided fuzzing of every parser, 30 s each (issue 10); a crash fails the run.
    scripts/fuzz.sh all 30
    # At most 200 public declarations across the library modules, and DocC without a warning (issue 11).
    scripts/public-api.sh 200
    scripts/docs.sh
    # The iOS 16 compile check (issue 33) when an SDK is named; says SKIPPED otherwise (CI has none).
    scripts/apple-check.sh
fi
