#!/usr/bin/env bash
# Compile-checks the package for iOS 16: every library target (HTTPDNSKit builds them all)
# and the server are type-checked and compiled for arm64-apple-ios16.0 on this Linux machine by the
# shared harness
# (../shared/tools/apple-typecheck.sh), which Xcode's rules for the declared deployment target apply
# to: availability, CryptoKit's Sendable surface, the code behind #if canImport(Darwin/Network/ObjectiveC).
# Nothing is linked or run: the Apple-only code is compiled, never executed here.
#
# Needs an iPhoneOS SDK and the Dispatch/os API notes, named by the environment (docs/APPLE.md);
# without them it says that it skipped and exits 0 (CI has none).
#   HTTPDNS_APPLE_SDK        path of iPhoneOS16.5.sdk (or another iPhoneOS SDK)
#   HTTPDNS_APPLE_APINOTES   folder holding Dispatch.apinotes and os.apinotes
#   HTTPDNS_APPLE_HARNESS    the harness (default ../shared/tools/apple-typecheck.sh)
#   WORK                     the harness's scratch folder (default: its own; kept between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${HTTPDNS_APPLE_SDK:-}" ] || [ -z "${HTTPDNS_APPLE_APINOTES:-}" ]; then
    echo "apple-check: SKIPPED, no iOS SDK (set HTTPDNS_APPLE_SDK and HTTPDNS_APPLE_APINOTES to run it)"
    exit 0
fi
harness=${HTTPDNS_APPLE_HARNESS:-../shared/tools/apple-typecheck.sh}
if [ ! -x "$harness" ]; then
    echo "apple-check: the harness $harness is missing: set HTTPDNS_APPLE_HARNESS" >&2
    exit 2
fi
# Not the `httpdns` CLI: swift-argument-parser imports `os` and Synchronization, whose iOS 16.5 SDK
# interfaces (Swift 5.8) this harness cannot rebuild with today's compiler; that stops in the SDK, before
# any of our code. The CLI is a macOS/Linux tool; the library is what ships in apps.
# The snippets too, the Apple-only ones above all (Linux compiles them as empty files), but
# MetricsBackend: it imports swift-metrics' `Metrics`, which only the CLI depends on; a build of the
# snippet alone (what the harness runs) does not make that module. The Linux build compiles it.
snippets=$(ls Snippets/*.swift | xargs -n1 basename | sed 's/\.swift$//' | grep -vxE 'MetricsBackend' | tr '\n' ' ')
export TARGETS=${TARGETS:-"HTTPDNSKit HTTPDNSLoopbackProxy HTTPDNSOpenAPI HTTPDNSURLSession HTTPDNSLookup HTTPDNSServer httpdns-conformance $snippets"}
work=${WORK:-${TMPDIR:-/tmp}/apple-typecheck}
# The harness reports every log in its folder: drop those of earlier runs (other targets).
rm -f "$work"/logs/*.log
# NIOTransportServices (Swift 6 mode) relies on the Sendable conformances of Network's types (NWEndpoint,
# NWPath, NWConnection...) that iOS 17 and later SDKs declare; the iOS 16.5 SDK's overlay predates them,
# as its Dispatch overlay predates Dispatch's (which the harness patches). Xcode with a current SDK builds
# it as it is, for an iOS 16 deployment target too. So the check's copy of it imports Network with
# @preconcurrency: the harness seeds its copy of the dependencies from ours when it has none, and we seed
# it first, to mark those imports. Nothing outside the check's folder is touched.
if [ -d .build/checkouts ]; then
    mkdir -p "$work/pkg/.build"
    for d in repositories checkouts workspace-state.json; do
        [ -e "$work/pkg/.build/$d" ] || cp -a ".build/$d" "$work/pkg/.build/"
    done
    nits="$work/pkg/.build/checkouts/swift-nio-transport-services/Sources"
    [ -d "$nits" ] && find "$nits" -name '*.swift' -exec sed -i -E 's/^( *)import Network$/\1@preconcurrency import Network/' {} +
fi
log=$(mktemp /tmp/httpdns-apple-check.XXXXXX)
# HTTPDNSOpenAPI is behind the package trait OpenAPI, and the harness builds without traits: its copy of
# the manifest (only the copy) turns the trait on by default, through the harness's PATCH.
patchdir=$(mktemp -d /tmp/httpdns-apple-patch.XXXXXX)
trap 'rm -rf "$log" "$patchdir"' EXIT
mkdir -p "$patchdir/a" "$patchdir/b"
cp Package.swift "$patchdir/a/"
sed 's/^    traits: \[$/    traits: [\n        .default(enabledTraits: ["OpenAPI"]),/' Package.swift > "$patchdir/b/Package.swift"
(cd "$patchdir" && diff -u a/Package.swift b/Package.swift > manifest.patch) || true
grep -q 'enabledTraits' "$patchdir/manifest.patch" || { echo "apple-check: could not turn the OpenAPI trait on" >&2; exit 2; }
export PATCH="$patchdir/manifest.patch"
set +e
"$harness" "$HTTPDNS_APPLE_SDK" "$PWD" "$HTTPDNS_APPLE_APINOTES" > "$log" 2>&1
rc=$?
set -e
# The harness's summary: one line per target, then every diagnostic in our own Sources.
sed -n '/^== swift build/,$p' "$log"
errors=$(grep -cE '^(Sources|Snippets|Conformance)/.*: error:' "$log" || true)
warnings=$(grep -cE '^(Sources|Snippets|Conformance)/.*: warning:' "$log" || true)
echo "apple-check: arm64-apple-ios16.0, targets: $TARGETS"
echo "apple-check: $errors errors, $warnings warnings in Sources and Snippets; harness exit $rc"
[ "$rc" = 0 ] && [ "$errors" = 0 ]
