#!/usr/bin/env python3
"""The rows of scripts/rtt-bench.sh: rttlink's bench.py (its runners, caches, rounds and table) with this
project's rows added: the first request after the resolver's connection is up (--warm-resolver), and
the dual-stack relaunch and second-host rows on port 443 as well as 8443. Runs inside the client
namespace: ip netns exec rttc python3 scripts/rtt_rows.py --rttlink DIR --bin HTTPDNS --ca CA --out DIR."""
import argparse
import json
import os
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rttlink", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--capture", action="store_true")
    ap.add_argument("--net", choices=["v4", "dual"], default="v4")
    a = ap.parse_args()
    sys.path.insert(0, a.rttlink)
    import bench  # rttlink's

    class Rows(bench.Bench):
        def ours(self, url, resolver, expect, *extra):
            # bench.py's run, and the waits --trace-json now reports beside it.
            res = super().ours(url, resolver, expect, *extra)
            last = self.last_trace
            res.update(recordsWait=last.get("recordsWaitMs"), stalled=last.get("stalledMs"))
            return res

        def run(self, argv, timeout=30):
            p, wall = super().run(argv, timeout)
            if argv and argv[0] == self.a.bin and "--trace-json" in argv and p.returncode == 0:
                self.last_trace = json.loads(p.stderr.strip().splitlines()[-1])
            return p, wall

        def table(self):
            # bench.py's table, with the median HTTPS-record wait and stall (ms) of our rows after it.
            lines = super().table().splitlines()
            out = [lines[0] + f" {'rwait':>6s} {'stall':>6s}"]
            for line in lines[1:]:
                rs = self.results.get(line.split()[0], [])

                def med(field):
                    v = [r[field] for r in rs if r.get(field) is not None]
                    return f"{statistics.median(v):6.0f}" if v else f"{'-':>6s}"
                out.append(line + f" {med('recordsWait')} {med('stalled')}")
            return "\n".join(out)

        def variants(self):
            V = super().variants()
            o = self.out
            stale = ("--cache-file", f"{o}/stale.json", "--serve-expired", "86400")
            fresh = ("--cache-file", f"{o}/fresh.json")
            if self.a.net == "v4":
                at = next(i for i, v in enumerate(V) if v[0] == "cold_ours_dns53") + 1
                V[at:at] = [("warm_ours", "ours", "warm", 4,
                             lambda: self.ours(bench.A_URL, bench.DOH_KRESD, "doh:", "--warm-resolver"))]
                # TCP Fast Open to origins that offer it (scripts/rtt-bench.sh turns it on in nginx).
                V += [
                    ("tfo_curl_doh", "curl", "tfo", 4,
                     lambda: self.curl(1, "-o", "/dev/null", "--tcp-fastopen", "--doh-url", bench.DOH_KRESD[4:],
                                       bench.A_URL)),
                    ("tfo_cold_ours", "ours", "tfo", 4,
                     lambda: self.ours(bench.A_URL, bench.DOH_KRESD, "doh:", "--tcp-fastopen")),
                    ("PREPARE", None, None, None, self.prepare_caches),
                    ("tfo_curl_resolve", "curl", "tfo", 2,
                     lambda: self.curl(1, "-o", "/dev/null", "--tcp-fastopen", "--resolve", "a.test:443:10.200.0.10",
                                       bench.A_URL)),
                    ("tfo_stale_ours", "ours", "tfo", 2,
                     lambda: self.ours(bench.A_URL, bench.DOH_KRESD, "stale(", "--tcp-fastopen", *stale)),
                    ("tfo_fresh_ours", "ours", "tfo", 2,
                     lambda: self.ours(bench.B_URL, bench.DOH_KRESD, "cache(", "--tcp-fastopen", *fresh)),
                ]
            else:
                # The dual-stack rows on port 443 too, where the origin's HTTPS records are asked.
                V[1:1] = [
                    ("dual_stale_ours", "ours", "stale", 3, lambda: self.ours(bench.A_URL, bench.DOH_KRESD, "", *stale)),
                    ("dual_fresh_ours", "ours", "fresh", 3, lambda: self.ours(bench.B_URL, bench.DOH_KRESD, "", *fresh)),
                ]
            only = set(self.a.only.split(",")) if self.a.only else None
            return [v for v in V if v[0] == "PREPARE" or only is None or v[0] in only]

    b = Rows(a)
    b.set_net(a.net)
    b.rounds()
    t = b.table()
    with open(os.path.join(a.out, f"table-{a.net}.txt"), "w") as f:
        f.write(t + "\n")
    print(t)


if __name__ == "__main__":
    main()
