"""Reads a compare.sh / net run.sh results.tsv (server, metric, value per line).

Medians over the wrk rounds, as the harness's net/ratios.py computes them.
"""
import re
from collections import defaultdict

from ratioplot import median

RUNTIME_PEERS = ["asio", "tokio", "go_raw", "go_nethttp"]
REFERENCES = ["epoll_st", "epoll_reuseport"]


class NetResults:
    def __init__(self, path):
        self.d = defaultdict(dict)
        self.order = []
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            s, k, v = parts
            if s not in self.order:
                self.order.append(s)
            self.d[s][k] = v
        conns, ks, self.reps = set(), set(), 0
        for s in self.order:
            for k in self.d[s]:
                m = re.fullmatch(r"rps_c(\d+)_r(\d+)", k)
                if m:
                    conns.add(int(m.group(1)))
                    self.reps = max(self.reps, int(m.group(2)))
                m = re.fullmatch(r"idle(\d+)_rss_delta_per_conn_b", k)
                if m:
                    ks.add(int(m.group(1)))
        self.conns = sorted(conns)
        self.ks = sorted(ks)
        self.shoal = [s for s in self.order if s.startswith("shoal")]
        others = [s for s in self.order if s not in self.shoal]
        self.peers = [s for s in RUNTIME_PEERS + REFERENCES if s in others]
        self.peers += [s for s in others if s not in self.peers]

    def f(self, s, k):
        try:
            return float(self.d[s][k])
        except (KeyError, ValueError):
            return None

    def rounds(self, s, name):
        """Per-round values of rps_cN / p99_cN / upr_cN (server CPU µs per request)."""
        out = []
        for r in range(1, self.reps + 1):
            if name.startswith("upr_"):
                c = name[4:]
                cpu, q = self.f(s, f"srvcpu_{c}_r{r}"), self.f(s, f"rps_{c}_r{r}")
                out.append(cpu * 1e4 / q if (cpu is not None and q) else None)
            else:
                out.append(self.f(s, f"{name}_r{r}"))
        return [v for v in out if v is not None]

    def metric(self, s, name):
        if name.startswith(("rps_", "p99_", "upr_")):
            return median(self.rounds(s, name))
        if name == "churn":
            return self.f(s, "churn_conns_per_s")
        if name == "churn_upc":
            cpu, q = self.f(s, "srvcpu_churn"), self.f(s, "churn_conns_per_s")
            return cpu * 1e4 / q if (cpu is not None and q) else None
        return self.f(s, name)

    def k_eff(self, k):
        """The K a run really used (clamped to the fd limit), if all servers agree."""
        eff = {self.d[s].get(f"idle{k}_k") for s in self.order} - {None, "", "n/a", "START-FAILED"}
        return int(eff.pop()) if len(eff) == 1 else k

    def rows(self):
        """(key, label, higher is better) for every metric the file has, in ratios.py's order."""
        rows = []
        for c in self.conns:
            rows += [(f"rps_c{c}", f"{c} connections: requests/s", True),
                     (f"upr_c{c}", f"{c} connections: server CPU µs per request", False),
                     (f"p99_c{c}", f"{c} connections: p99 latency", False)]
        if any("churn_conns_per_s" in self.d[s] for s in self.order):
            rows += [("churn", "churn: connections/s", True),
                     ("churn_upc", "churn: server CPU µs per connection", False)]
        for k in self.ks:
            rows.append((f"idle{k}_rss_delta_per_conn_b", f"{self.k_eff(k):,} idle connections: RSS per connection", False))
        if any("rss_after_load_kb" in self.d[s] for s in self.order):
            rows.append(("rss_after_load_kb", "RSS after the load", False))
        return rows
