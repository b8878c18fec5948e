#!/usr/bin/env bash
# swift-format's lint, strict (a finding fails), with the repository's .swift-format, on every Swift file
# in git but generated code (Tests/HTTPDNSOpenAPITests/Generated, swift-openapi-generator's output).
# `swift format format -i FILE…` fixes what it reports.
# Usage: scripts/format-lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z '*.swift' ':!:*/Generated/*' | xargs -0 swift format lint --strict
echo "format-lint: $(git ls-files '*.swift' ':!:*/Generated/*' | wc -l) files, no findings"
