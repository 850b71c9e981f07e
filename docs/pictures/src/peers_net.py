#!/usr/bin/env python3
"""shoal / peer per net metric, from one compare.sh net run.

Usage: peers_net.py DATA_DIR OUT.svg
Reads DATA_DIR/net-results.tsv (net/run.sh's results.tsv) and
DATA_DIR/net-info.txt. One panel per shoal server (examples/http_server and
net_idle_server minimal); a marker per peer server in the file.
"""
import os
import sys

import matplotlib.pyplot as plt

import ratioplot
from netdata import RUNTIME_PEERS, NetResults
from plotstyle import read_info, run_label, save

TITLES = {"shoal": "shoal: examples/http_server", "shoal_minimal": "shoal_minimal: net_idle_server minimal"}
NAMES = {"epoll_st": "epoll_st (hand-written epoll, 1 thread)",
         "epoll_reuseport": "epoll_reuseport (hand-written, 2 threads)"}


def main():
    data, out = sys.argv[1], sys.argv[2]
    res = NetResults(os.path.join(data, "net-results.tsv"))
    info = read_info(os.path.join(data, "net-info.txt"))
    panels = []
    for s in res.shoal:
        rows = []
        for key, label, higher in res.rows():
            v = res.metric(s, key)
            ratios = {}
            for p in res.peers:
                pv = res.metric(p, key)
                if v is not None and pv:
                    ratios[p] = v / pv
            rt = [(p, r) for p, r in ratios.items() if p in RUNTIME_PEERS]
            best = (min if higher else max)(rt, key=lambda x: x[1]) if rt else None
            rows.append((f"{label}\n{'higher' if higher else 'lower'} is better", higher, ratios, best))
        panels.append((s, rows))
    if not panels:
        sys.exit("peers_net.py: no shoal server in the results")
    nrows = len(panels[0][1])
    lo = min(ratioplot.x_limits(r)[0] for _, r in panels)
    hi = max(ratioplot.x_limits(r)[1] for _, r in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.6, 0.6 * nrows + 2.0),
                             sharey=True, squeeze=False)
    for i, (s, rows) in enumerate(panels):
        ax = axes[0][i]
        ratioplot.draw(ax, rows, res.peers, (lo, hi), show_labels=(i == 0))
        ax.set_title(TITLES.get(s, s) + " ÷ peer", fontsize=10)
        ax.set_xlabel("shoal server's median ÷ the peer's, same run (log scale)", fontsize=9)
    fig.suptitle("shoal's HTTP servers against the peer servers, net benchmarks\n"
                 f"compare.sh net, {run_label(info, os.path.basename(data))}, 2 workers each, "
                 f"medians of {res.reps} wrk rounds; client and server share 2 cores", fontsize=11)
    fig.legend(handles=ratioplot.legend_handles(res.peers, NAMES), loc="lower center", ncol=len(res.peers) + 1,
               frameon=False, fontsize=8.5, bbox_to_anchor=(0.5, -0.01), handletextpad=0.3, columnspacing=1.2)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save(fig, out)


if __name__ == "__main__":
    main()
