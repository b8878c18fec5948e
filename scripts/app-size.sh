#!/usr/bin/env bash
# The app-size guard: fails when what HTTPDNSKit adds to an app grows by more than 5 % over the figures
# in scripts/app-size.baseline, or when a dependency joins what an iOS app links. Three checks:
#
#   products   the dependency products HTTPDNSKit's modules name for iOS (Package.swift, platform
#              conditions applied, from `swift package dump-package`) must be the baseline's list: a new
#              one is a new module in every app, and is decided on purpose (update the baseline).
#   own code   the __text of HTTPDNSKit's own modules as the test build compiles them (.build/debug,
#              llvm-size): the libraries' code, on any machine, CI included. A proxy for the release
#              figure below, which it follows but does not equal (debug code, Linux's transport). The
#              same for what the opt-in product HTTPDNSLoopbackProxy adds on top (proxy-debug-text).
#   ios        with an iOS SDK named (HTTPDNS_APPLE_SDK, HTTPDNS_APPLE_APINOTES, as for apple-check.sh):
#              ../shared/tools/appsize/appsize.sh, the bytes HTTPDNSKit adds to a stripped arm64 iOS
#              release app (docs/APPLE.md). It needs Debian's lld-16, installed when missing; CI has no
#              SDK, so there it says SKIPPED.
#
# `scripts/app-size.sh --update` writes the figures measured now into the baseline (say why in the
# CHANGELOG). Run after a debug build (scripts/test.sh runs it after its build).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=scripts/app-size.baseline
update=0
[ "${1:-}" = "--update" ] && update=1
own_modules=(HTTPDNSCore HTTPDNSEngine HTTPDNSLookup HTTPDNSURLSession HTTPDNSKit)
# What the opt-in product HTTPDNSLoopbackProxy adds to an app that has HTTPDNSKit.
proxy_modules=(HTTPDNSLoopbackProxy HTTPDNSListener)
status=0

value() { awk -v k="$1" '$1 == k { print $2 }' "$baseline"; }
# compare NAME NOW: fails above the baseline's figure by more than 5 %.
compare() {
    local name=$1 now=$2 was
    was=$(value "$name")
    if [ "$update" = 1 ] || [ -z "$was" ]; then
        echo "app-size: $name $now (baseline ${was:-none})"
        return 0
    fi
    local ratio
    ratio=$(awk -v a="$now" -v b="$was" 'BEGIN { printf "%.3f", a / b }')
    echo "app-size: $name $now, baseline $was, ratio $ratio (the guard is 1.050)"
    if awk -v r="$ratio" 'BEGIN { exit !(r > 1.05) }'; then
        echo "app-size: $name grew by more than 5 %: cut it, or say why in the CHANGELOG and run" \
            "scripts/app-size.sh --update" >&2
        status=1
    fi
}

# MARK: Products an iOS app links
products=$(swift package dump-package | python3 -c '
import json, sys
package = json.load(sys.stdin)
targets = {t["name"]: t for t in package["targets"]}
seen, todo, products = set(), ["HTTPDNSKit"], set()
while todo:
    name = todo.pop()
    if name in seen or name not in targets:
        continue
    seen.add(name)
    for dependency in targets[name]["dependencies"]:
        kind, fields = next(iter(dependency.items()))
        condition = fields[-1] or {}
        platforms = condition.get("platformNames")
        if platforms and "ios" not in platforms:
            continue
        if kind == "product":
            products.add(fields[0])
        else:
            todo.append(fields[0])
print(",".join(sorted(products)))
')
was=$(value ios-products)
added=$(comm -13 <(tr , '\n' <<< "$was" | sort) <(tr , '\n' <<< "$products" | sort) | paste -sd, -)
removed=$(comm -23 <(tr , '\n' <<< "$was" | sort) <(tr , '\n' <<< "$products" | sort) | paste -sd, -)
echo "app-size: ios-products $products"
if [ "$update" = 0 ] && [ -n "$was" ] && [ -n "$added" ]; then
    echo "app-size: new on iOS: $added. A new product is a module in every app: take it out, or say why" \
        "in the CHANGELOG and run scripts/app-size.sh --update" >&2
    status=1
fi
[ -z "$removed" ] || [ "$update" = 1 ] || echo "app-size: no longer on iOS: $removed (scripts/app-size.sh --update records it)"

# MARK: Our own code, as built for the tests
# The objects of the current build plan only (.build/debug.yaml): a tree built before files moved keeps
# the old objects beside the new ones.
if [ ! -f .build/debug.yaml ]; then
    echo "app-size: no debug build: run swift build --build-tests first" >&2
    exit 2
fi
# debug_text MODULE...: the __text of those modules' objects in the debug build.
debug_text() {
    local pattern objects
    pattern="/($(IFS='|'; echo "$*"))\.build/[^\"]*\.o"
    mapfile -t objects < <(grep -oE "\"[^\"]*$pattern\"" .build/debug.yaml | tr -d '"' | sort -u)
    if [ "${#objects[@]}" = 0 ] || [ ! -e "${objects[0]}" ]; then
        echo "app-size: the debug build's objects are missing: run swift build --build-tests first" >&2
        exit 2
    fi
    llvm-size --totals "${objects[@]}" | awk '/\(TOTALS\)/ { print $1 }'
}
own=$(debug_text "${own_modules[@]}") || exit 2
proxy=$(debug_text "${proxy_modules[@]}") || exit 2
compare linux-debug-text "$own"
compare proxy-debug-text "$proxy"

# MARK: The iOS figure, where there is an SDK
ios=""
if [ -n "${HTTPDNS_APPLE_SDK:-}" ] && [ -n "${HTTPDNS_APPLE_APINOTES:-}" ]; then
    command -v ld64.lld-16 > /dev/null || { apt-get update -qq && apt-get install -y -qq lld-16; } > /dev/null
    out=${TMPDIR:-/tmp}/httpdns-appsize
    work=${WORK:-${TMPDIR:-/tmp}/apple-typecheck}
    # appsize.sh links every object in the release folder: one left by a module that has since left
    # the closure would be counted. The release build starts empty (APPSIZE_KEEP_BUILD=1 keeps it).
    [ "${APPSIZE_KEEP_BUILD:-0}" = 1 ] || rm -rf "$work/pkg/.build/arm64-apple-ios/release"
    SDK="$HTTPDNS_APPLE_SDK" PKG=. APINOTES="$HTTPDNS_APPLE_APINOTES" WORK="$work" OUT="$out" \
        bash ../shared/tools/appsize/appsize.sh > "$out.log" 2>&1 || {
        tail -20 "$out.log" >&2
        exit 2
    }
    ios=$(sed -n 's/^== file: .*stripped: +\([0-9]*\) bytes$/\1/p' "$out.log")
    sed -n '/== kit app: bytes kept/,/all .* owners/p' "$out.log"
    # Our own code per source file (a file holds one type and its extensions here), from the linker map:
    # the symbols dead-stripping kept, by the object file they came from.
    python3 - "$out/app/kit.map" <<'PY'
import collections, re, sys
objects, sizes, symbols = {}, collections.Counter(), False
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("# Symbols:"):
        symbols = True
    elif not symbols:
        m = re.match(r"\[\s*(\d+)\]\s+(\S+)$", line.strip())
        if m:
            objects[m.group(1)] = m.group(2)
    else:
        m = re.match(r"0x[0-9A-Fa-f]+\s+0x([0-9A-Fa-f]+)\s+\[\s*(\d+)\]", line)
        path = objects.get(m.group(2), "") if m else ""
        if "/HTTPDNS" in path and ".build/" in path:
            module = path.split("/")[-2].removesuffix(".build")
            sizes[module + "/" + path.split("/")[-1].removesuffix(".swift.o")] += int(m.group(1), 16)
print("== our own code kept, by source file (symbol bytes, top 25 of %d)" % len(sizes))
for name, size in sizes.most_common(25):
    print("   %-60s %8d" % (name, size))
PY
    compare ios-stripped "$ios"
else
    echo "app-size: ios SKIPPED, no iOS SDK (set HTTPDNS_APPLE_SDK and HTTPDNS_APPLE_APINOTES to run it);" \
        "baseline $(value ios-stripped)"
fi

if [ "$update" = 1 ]; then
    {
        sed -n '/^#/p' "$baseline"
        echo "ios-products $products"
        echo "linux-debug-text $own"
        echo "proxy-debug-text $proxy"
        echo "ios-stripped ${ios:-$(value ios-stripped)}"
    } > "$baseline.new"
    mv "$baseline.new" "$baseline"
    echo "app-size: $baseline updated"
fi
exit "$status"
