#!/usr/bin/env bash
# Every Swift example in the README and the DocC articles is a SwiftPM snippet under Snippets/,
# and this proves they compile as an app would write them:
#   1. The README repeats each snippet's visible text after a `<!-- snippet: NAME -->` line, the DocC
#      articles include them with `@Snippet(path: "swift-httpdns/Snippets/NAME")`, and no other Swift
#      block is left in either (the README's dependency lines excepted: step 2 uses them).
#   2. A separate package, made here, depends on this one through the README's own dependency lines (the
#      path pointed at this checkout) and builds every snippet as an executable of its own: only the
#      public API of the HTTPDNSKit product is in reach. It shares the Benchmarks package's build folder,
#      which holds the same dependencies already built, so only the snippets are compiled.
# The snippets are compiled; most are not run (they need the internet or a server, and each says which),
# but PrivateCA, the newcomer's first app with a private CA, runs against the test peers when they are up.
# Usage: scripts/snippets.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
python3 - "$root" <<'PY'
import os, re, sys, textwrap
root = sys.argv[1]
snippets = {f[:-6]: open(os.path.join(root, "Snippets", f)).read()
            for f in sorted(os.listdir(os.path.join(root, "Snippets"))) if f.endswith(".swift")}

def visible(text):
    """The snippet as DocC shows it: hidden parts dropped, the leading comment kept as its abstract
    is not, common indentation removed, no blank lines at either end."""
    lines, shown = [], True
    for line in text.splitlines():
        marker = line.strip()
        if marker == "// snippet.hide": shown = False; continue
        if marker == "// snippet.show": shown = True; continue
        if shown: lines.append(line.rstrip())
    while lines and lines[0].startswith("//"): lines.pop(0)   # the abstract
    while lines and not lines[0].strip(): lines.pop(0)
    while lines and not lines[-1].strip(): lines.pop()
    return textwrap.dedent("\n".join(lines))

problems = []
used = set()
readme = open(os.path.join(root, "README.md")).read()
blocks = list(re.finditer(r"```swift\n(.*?)```", readme, re.S))
for block in blocks:
    before = readme[:block.start()].rstrip().splitlines()[-1] if block.start() else ""
    line = readme[:block.start()].count("\n") + 1
    if before.strip() == "<!-- package-manifest -->":
        continue
    m = re.fullmatch(r"<!-- snippet: (\w+) -->", before.strip())
    if not m:
        problems.append(f"README.md:{line}: a Swift block that is not a snippet (put `<!-- snippet: NAME -->` before it)")
        continue
    name = m.group(1)
    used.add(name)
    if name not in snippets:
        problems.append(f"README.md:{line}: no Snippets/{name}.swift")
    elif block.group(1).rstrip("\n") != visible(snippets[name]):
        problems.append(f"README.md:{line}: the block differs from Snippets/{name}.swift (copy its visible text)")
docc = os.path.join(root, "Sources/HTTPDNSKit/HTTPDNSKit.docc")
for article in sorted(os.listdir(docc)):
    if not article.endswith(".md"): continue
    text = open(os.path.join(docc, article)).read()
    for block in re.finditer(r"```swift", text):
        problems.append(f"{article}:{text[:block.start()].count(chr(10)) + 1}: a Swift block: use @Snippet")
    for m in re.finditer(r'@Snippet\(path: "swift-httpdns/Snippets/(\w+)"', text):
        used.add(m.group(1))
        if m.group(1) not in snippets:
            problems.append(f"{article}: @Snippet names Snippets/{m.group(1)}.swift, which does not exist")
for name in sorted(set(snippets) - used):
    problems.append(f"Snippets/{name}.swift is shown nowhere (README or DocC)")
manifest = [b for b in blocks if readme[:b.start()].rstrip().splitlines()[-1].strip() == "<!-- package-manifest -->"]
if len(manifest) != 1:
    problems.append("README.md: one `<!-- package-manifest -->` Swift block (the dependency lines) is expected")
for p in problems:
    print("snippets: " + p, file=sys.stderr)
if problems:
    sys.exit(1)
# The dependency lines, for step 2.
lines = [l.strip() for l in manifest[0].group(1).splitlines() if l.strip().startswith(".")]
with open("/tmp/httpdns-snippet-manifest", "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"snippets: {len(snippets)} snippets, each shown in the README or DocC, texts identical")
PY
# The OpenAPIClient snippet needs the product behind the trait OpenAPI, so the package line turns it on
# as the README's OpenAPI section says, and the snippets see the same condition its hidden lines test.
package_line=$(grep '^\.package(' /tmp/httpdns-snippet-manifest \
    | sed -E "s|path: \"[^\"]*\"|path: \"$root\", traits: [\"OpenAPI\"]|")
product_line=$(grep '^\.product(' /tmp/httpdns-snippet-manifest)
pkg="$(mktemp -d /tmp/httpdns-snippets.XXXXXX)"
trap 'rm -rf "$pkg"' EXIT
targets=""
for f in Snippets/*.swift; do
    name=$(basename "$f" .swift)
    mkdir -p "$pkg/Sources/$name"
    cp "$f" "$pkg/Sources/$name/main.swift"
    targets+="        .executableTarget(name: \"$name\", dependencies: deps, path: \"Sources/$name\", swiftSettings: openAPI),
"
done
cat > "$pkg/Package.swift" <<EOF
// swift-tools-version:6.1
// Made by scripts/snippets.sh: an app that depends on swift-httpdns as the README says.
import PackageDescription

let openAPI: [SwiftSetting] = [.define("OpenAPI")]
let deps: [Target.Dependency] = [
    $product_line
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "Metrics", package: "swift-metrics"),
    .product(name: "Tracing", package: "swift-distributed-tracing"),
    .product(name: "HTTPDNSOpenAPI", package: "swift-httpdns"),
]
let package = Package(
    name: "httpdns-snippets",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [
        $package_line
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
    ],
    targets: [
$targets    ],
    swiftLanguageModes: [.v6]
)
EOF
# Warnings count as failures: an example should not teach one.
log=/tmp/httpdns-snippets.log
if ! swift build --package-path "$pkg" --scratch-path "$root/Benchmarks/.build" >"$log" 2>&1; then
    grep -E "error:" "$log" | sort -u | head -20 >&2
    echo "snippets: the separate package did not build (full log: $log)" >&2
    exit 1
fi
if grep -q "warning:" "$log" && grep "warning:" "$log" | grep -q "$pkg"; then
    grep "warning:" "$log" | grep "$pkg" | sort -u | head -20 >&2
    echo "snippets: warnings in the snippets (full log: $log)" >&2
    exit 1
fi
echo "snippets: built $(ls Snippets/*.swift | wc -l) snippets in a separate package, from the public API"
# The newcomer's first app with a private CA, run for real when the test peers are up.
if [ "${HTTPDNS_PEERS:-}" = 1 ]; then
    out=$("$root/Benchmarks/.build/debug/PrivateCA" 2>&1) || { echo "snippets: PrivateCA failed: $out" >&2; exit 1; }
    case "$out" in
        *"sni=a.test"*) echo "snippets: PrivateCA ran against the peers: $out" ;;
        *) echo "snippets: PrivateCA printed $out, not a.test's answer" >&2; exit 1 ;;
    esac
fi
