#!/usr/bin/env python3
"""The rows of scripts/rtt-bench.sh: rttlink's bench.py (its runners, caches, rounds and table) with this
project's rows added: the first request after the resolver's connection is up (--warm-resolver), the
dual-stack relaunch and second-host rows on port 443 as well as 8443, and the failure paths of issue 71
(an origin that moved while the cache held its old address, http:// to a known https origin, a dead
HTTPS-record port, a fast-open cookie for a dead first address). Runs inside the client namespace:
ip netns exec rttc python3 scripts/rtt_rows.py --rttlink DIR --bin HTTPDNS --ca CA --out DIR."""
import argparse
import json
import os
import statistics
import subprocess
import sys

# Where a moved origin's old address is: one that refuses (a host with nothing on :443 answers the SYN
# with a reset) and one that is silent (an address nobody has on the server side: the SYN is dropped).
REFUSING = "10.200.0.4"
SILENT = "10.200.0.99"
# An HTTPS record for a.test: `1 . alpn=h2 port=9443`, RDATA in base64 as the cache file keeps it.
DEAD_PORT_RECORD = "AAEAAAEAAwJoMgADAAIk4w=="


def dropped(rule, fn):
    """fn() while the server namespace drops TCP matching `rule` (a blackhole: no reset, no answer)."""
    cmd = ["ip", "netns", "exec", "rtts", "iptables"]
    subprocess.run(cmd + ["-I", "INPUT", *rule, "-j", "DROP"], check=True)
    try:
        return fn()
    finally:
        subprocess.run(cmd + ["-D", "INPUT", *rule, "-j", "DROP"], check=True)


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

        def failure_cache(self, base, name, change):
            """A copy of the cache file `base` (stale or fresh, made anew) changed by `change(snapshot,
            a_entry)`, as OUT/name.json; returns the --cache-file arguments for it."""
            self.prepare_caches()
            path = os.path.join(self.out, f"{name}.json")
            with open(os.path.join(self.out, f"{base}.json")) as f:
                snap = json.load(f)
            a = next(i["entry"] for i in snap["entries"] if i["key"]["name"] == "a.test")
            change(snap, a)
            with open(path, "w") as f:
                json.dump(snap, f)
            extra = ("--serve-expired", "86400") if base == "stale" else ()
            return ("--cache-file", path, *extra)

        def moved(self, base, old):
            """A relaunch (stale) or a second request (fresh) whose cached a.test address is `old`."""
            def change(snap, a):
                a["addresses"] = [old]
            return self.ours(bench.A_URL, bench.DOH_KRESD, "", *self.failure_cache(base, f"moved-{base}", change))

        def known_https(self):
            """http://a.test/ with a.test's HSTS in the cache file (and a fresh answer)."""
            def change(snap, a):
                snap["hsts"] = [{"host": "a.test", "expires": a["expiresAt"], "includesSubdomains": False}]
            return self.ours("http://a.test/", bench.DOH_KRESD, "", *self.failure_cache("fresh", "hsts", change))

        def dead_record_port(self):
            """a.test's HTTPS record names port 9443, which is blackholed."""
            def change(snap, a):
                snap["records"] = [{"key": {"network": bench.NETID, "name": "a.test"}, "rdata": [DEAD_PORT_RECORD],
                                    "ttl": 3600, "source": a["source"], "storedAt": a["storedAt"],
                                    "expiresAt": a["expiresAt"], "lastUsed": a["lastUsed"]}]
            cache = self.failure_cache("fresh", "records", change)
            return dropped(["-d", "10.200.0.10", "-p", "tcp", "--dport", "9443"],
                           lambda: self.ours(bench.A_URL, bench.DOH_KRESD, "", *cache))

        def fast_open_dead_first(self):
            """a.test answered [10.200.0.11, 10.200.0.10] with fast open: the kernel holds a cookie for .11
            (the tfo rows before this one reached b.test there), which is now blackholed."""
            def change(snap, a):
                a["addresses"] = ["10.200.0.11", "10.200.0.10"]
            cache = self.failure_cache("fresh", "tfo-dead-first", change)
            return dropped(["-d", "10.200.0.11", "-p", "tcp", "--dport", "443"],
                           lambda: self.ours(bench.A_URL, bench.DOH_KRESD, "", "--tcp-fastopen", *cache))

        def curl_hsts(self):
            path = os.path.join(self.out, "curl-hsts.txt")
            with open(path, "w") as f:
                f.write('a.test "20991231 00:00:00"\n')
            return self.curl(1, "-o", "/dev/null", "--hsts", path, "--resolve", "a.test:443:10.200.0.10",
                             "http://a.test/")

        def variants(self):
            V = super().variants()
            o = self.out
            stale = ("--cache-file", f"{o}/stale.json", "--serve-expired", "86400")
            fresh = ("--cache-file", f"{o}/fresh.json")
            if self.a.net == "v4":
                at = next((i + 1 for i, v in enumerate(V) if v[0] == "cold_ours_dns53"), len(V))
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
                    # Issue 71: never worse than no SDK. The resolver's connection opens when HTTPDNS is
                    # made (2), so a DoH query can go at 2. Floors: a relaunch, whose refresh starts with
                    # the lookup: the answer at 3, then TCP, TLS, request = 6, the old address's refusal
                    # or silence hidden under it; a fresh answer asks once the old address refused (1),
                    # on the connection ready at 2: 3, then 3 = 6; a silent fresh one asks after the
                    # 250 ms attempt delay: 3.5 + 3 = 6.5 (7 here; the goal: under 2 s);
                    # http:// straight to https = 3; a blackholed record port costs the 1 s its endpoint
                    # is given, then 3 = 13; fast open with a dead first address, the next after 250 ms,
                    # then TCP with the ClientHello in the SYN and the request = 4.5 (5 here).
                    ("moved_stale_refused", "ours", "moved", 6, lambda: self.moved("stale", REFUSING)),
                    ("moved_stale_silent", "ours", "moved", 6, lambda: self.moved("stale", SILENT)),
                    ("moved_fresh_refused", "ours", "moved", 6, lambda: self.moved("fresh", REFUSING)),
                    ("moved_fresh_silent", "ours", "moved", 7, lambda: self.moved("fresh", SILENT)),
                    ("http_known_https_curl", "curl", "http", 3, self.curl_hsts),
                    ("http_known_https_ours", "ours", "http", 3, self.known_https),
                    ("record_port_dead_ours", "ours", "records", 13, self.dead_record_port),
                    ("tfo_dead_first_ours", "ours", "tfo", 5, self.fast_open_dead_first),
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
