#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages the tests need when missing, starts
# the real peers on free loopback ports, runs the whole test suite, stops the peers.
# Under CI=true a missing peer is a failure, never a skip.
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
    # Headless Chromium is heavy on 2 cores: run its suite alone, after everything else.
    swift test --skip-build --skip ChromiumProxyTests
    swift test --skip-build --filter ChromiumProxyTests
fi
