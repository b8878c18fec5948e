#!/usr/bin/env bash
# Counts the public declarations of every library module from the symbol graph (synthesized members are
# not counted). Prints one line per module and the total. There is no cap (a declaration is public when
# a user needs it, and the CHANGELOG says why), so the count is printed for review. It fails when a
# public declaration has no `///` comment of its own (members that implement a documented protocol requirement, such as `description` or `==`, take that
# requirement's documentation and are exempt), or when a LIMIT is given and passed.
# Usage: scripts/public-api.sh [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-0}"
# dump-symbol-graph exits 1 on test modules; the library graphs are written all the same.
swift package --traits OpenAPI dump-symbol-graph --minimum-access-level public --skip-synthesized-members \
    >/tmp/httpdns-symbol-graph.log 2>&1 || true
dir="$(find .build -type d -name symbolgraph -path '*/symbolgraph' | head -1)"
[ -n "$dir" ] || { echo "no symbol graph written; see /tmp/httpdns-symbol-graph.log" >&2; exit 2; }
python3 - "$dir" "$limit" <<'PY'
import json, os, sys
directory, limit = sys.argv[1], int(sys.argv[2])
libraries = [l for l in sys.argv[3:]] or None
counts = {}
undocumented = []
for name in sorted(os.listdir(directory)):
    if not name.endswith(".symbols.json"):
        continue
    module = name.split(".symbols.json")[0].split("@")[0]
    if not module.startswith("HTTPDNS") or module.endswith("Tests"):
        continue
    with open(os.path.join(directory, name)) as f:
        graph = json.load(f)
    counts[module] = counts.get(module, 0) + len(graph["symbols"])
    # What implements a protocol requirement (a "requirementOf"/"defaultImplementationOf" edge, or the
    # symbol graph's own note that it comes from a protocol) is documented by the protocol.
    implements = {r["source"] for r in graph.get("relationships", [])
                  if r["kind"] in ("requirementOf", "defaultImplementationOf", "overrides")}
    for symbol in graph["symbols"]:
        doc = symbol.get("docComment")
        if doc and any(line.get("text", "").strip() for line in doc.get("lines", [])):
            continue
        if symbol["identifier"]["precise"] in implements or symbol["kind"]["identifier"] == "swift.extension":
            continue
        location = symbol.get("location", {})
        uri = location.get("uri", "")
        if "/Sources/" not in uri:
            continue  # declared outside this package (a re-exported or inherited member)
        path = uri.split("/Sources/", 1)[1]
        line = location.get("position", {}).get("line", 0) + 1
        undocumented.append(f"Sources/{path}:{line}: public {symbol['kind']['displayName'].lower()} "
                            f"{'.'.join(symbol['pathComponents'])} has no /// comment")
total = 0
for module, count in sorted(counts.items()):
    print(f"{module:24} {count:5}")
    total += count
print(f"{'total':24} {total:5}" + (f"  (limit {limit})" if limit else ""))
for line in sorted(set(undocumented)):
    print(line, file=sys.stderr)
if undocumented:
    print(f"public-api: {len(set(undocumented))} public declarations without a /// comment: document them "
          "(why a user needs them) or make them package", file=sys.stderr)
sys.exit(0 if not undocumented and (not limit or total <= limit) else 1)
PY
