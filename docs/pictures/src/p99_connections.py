#!/usr/bin/env python3
"""p99 latency against the number of concurrent keep-alive connections, per server.

Usage: p99_connections.py DATA_DIR OUT.svg
From DATA_DIR/net-results.tsv: wrk's p99 (--latency) of every round at every
connection count the run had (WRK_CONNS, 64 and 512 by default). The line
joins the medians; the bar spans the rounds' min and max.
"""
import os
import sys

import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from netdata import NetResults
from plotstyle import read_info, run_label, save, style

NAMES = {"shoal": "shoal (examples/http_server)", "shoal_minimal": "shoal_minimal (net_idle_server minimal)",
         "epoll_st": "epoll_st (hand-written epoll, 1 thread)",
         "epoll_reuseport": "epoll_reuseport (hand-written, 2 threads)"}


def main():
    data, out = sys.argv[1], sys.argv[2]
    res = NetResults(os.path.join(data, "net-results.tsv"))
    info = read_info(os.path.join(data, "net-info.txt"))
    servers = res.shoal + res.peers
    if not res.conns:
        sys.exit("p99_connections.py: no wrk rounds in the results")
    fig, ax = plt.subplots(figsize=(8, 5.2))
    n = len(servers)
    ys = []
    for i, s in enumerate(servers):
        xs, med, lo, hi = [], [], [], []
        for c in res.conns:
            v = res.rounds(s, f"p99_c{c}")
            m = res.metric(s, f"p99_c{c}")
            if m is None:
                continue
            # a small sideways shift per server, so the bars do not cover each other
            xs.append(c * 1.045 ** (i - (n - 1) / 2))
            med.append(m)
            lo.append(m - min(v))
            hi.append(max(v) - m)
        if not xs:
            continue
        ys += [m - l for m, l in zip(med, lo)] + [m + h for m, h in zip(med, hi)]
        c, mk = style(s, i)
        ax.errorbar(xs, med, yerr=[lo, hi], color=c, marker=mk, ms=7, lw=1.6, capsize=3,
                    mfc=c if mk not in ("x", "+") else None, mew=1.6 if mk in ("x", "+") else 0.8,
                    label=NAMES.get(s, s))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(res.conns))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlim(res.conns[0] / 1.6, res.conns[-1] * 1.6)
    ymin, ymax = min(ys), max(ys)
    ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if ymin / 1.5 <= t <= ymax * 1.5]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(ymin / 1.5, ymax * 1.5)
    ax.grid(color="#dddddd", lw=0.6)
    ax.set_xlabel("concurrent keep-alive connections, all ready (wrk -t1 -cN, log scale)")
    ax.set_ylabel("p99 latency, ms (log scale; lower is better)")
    ax.set_title("p99 latency against concurrent connections\n"
                 f"compare.sh net, {run_label(info, os.path.basename(data))}; "
                 f"median of {res.reps} rounds, bars: min to max", fontsize=11)
    ax.legend(loc="upper left", frameon=False, fontsize=9)
    save(fig, out)


if __name__ == "__main__":
    main()
