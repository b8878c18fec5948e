#!/usr/bin/env bash
# Builds the DocC documentation of every public library module and fails on any DocC
# warning: a broken symbol link, an article that does not resolve. Output: .build/docs/.
# Usage: scripts/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(HTTPDNSKit HTTPDNSLoopbackProxy HTTPDNSCore HTTPDNSEngine HTTPDNSLookup HTTPDNSURLSession HTTPDNSOpenAPI)
args=()
for t in "${targets[@]}"; do args+=(--target "$t"); done
log=/tmp/httpdns-docs.log
swift package --traits OpenAPI --disable-sandbox --allow-writing-to-directory .build/docs generate-documentation \
    "${args[@]}" --enable-experimental-combined-documentation --output-path .build/docs \
    --warnings-as-errors 2>&1 | tee "$log" | grep -E "warning|error|Finished|Generated" || true
# A dependency's own package warning (swift-distributed-tracing ships a CMakeLists.txt SwiftPM does not
# handle) is not ours to fix; every other warning fails the run.
problems=$(grep -vE "^warning: '[^']+': found [0-9]+ file\(s\) which are unhandled" "$log" \
    | grep -E "^(warning|error)|: (warning|error):" || true)
if [ -n "$problems" ] || ! grep -q "Generated" "$log"; then
    echo "docs: DocC reported problems (full log: $log)" >&2
    exit 1
fi
