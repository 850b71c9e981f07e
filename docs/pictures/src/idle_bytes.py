#!/usr/bin/env python3
"""Where an idle connection's bytes go: shoal's census beside Tokio and hand-written epoll.

Usage: idle_bytes.py DATA_DIR OUT.svg
- DATA_DIR/idle-census.csv: the census table of docs/reactor.md (bytes per
  idle connection by allocation, for net_idle_server's `minimal` and `hello`
  handlers, and that day's RSS per connection).
- DATA_DIR/net-results.tsv: a compare.sh net run; RSS growth per idle
  connection (idle<K>_rss_delta_per_conn_b, largest K) of tokio, epoll_st and
  the two shoal servers.
The peers keep their 4 KiB read buffer for a connection's whole life (the
harness's protocol); shoal's servers release theirs while idle.
"""
import csv
import os
import sys

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from netdata import NetResults
from plotstyle import read_info, run_label, save

PART_COLORS = ["#1f5fa8", "#f0a202", "#6aa2dc", "#9ecae1"]
REST = "#d9d9d9"
BUFFER = "#f4c7a1"


def read_census(path):
    rows = [r for r in csv.reader(line for line in open(path) if not line.startswith("#"))]
    header, body = rows[0], rows[1:]
    parts = [(r[0], int(r[1]), int(r[2])) for r in body[:-1]]
    rss = (body[-1][0], int(body[-1][1]), int(body[-1][2]))
    return header[1:], parts, rss


def main():
    data, out = sys.argv[1], sys.argv[2]
    servers, parts, rss = read_census(os.path.join(data, "idle-census.csv"))
    res = NetResults(os.path.join(data, "net-results.tsv"))
    info = read_info(os.path.join(data, "net-info.txt"))
    k = res.ks[-1] if res.ks else None
    keff = res.k_eff(k) if k else None

    def run_rss(s):
        return res.f(s, f"idle{k}_rss_delta_per_conn_b") if k else None

    fig, ax = plt.subplots(figsize=(11.5, 5.8))
    labels = ["shoal_minimal\n(net_idle_server minimal)", "shoal\n(examples/http_server,\n\"hello\" in the census)"]
    run_names = ["shoal_minimal", "shoal"]
    width = 0.55
    # shoal: the census, stacked, topped by the rest of that day's RSS
    for x, col in enumerate((0, 1)):
        bottom = 0
        for j, (name, *vals) in enumerate(parts):
            v = vals[col]
            if v:
                ax.bar(x, v, width, bottom=bottom, color=PART_COLORS[j % len(PART_COLORS)], edgecolor="white", lw=0.8)
                if v >= 150:
                    ax.text(x, bottom + v / 2, f"{v:,}", ha="center", va="center", fontsize=8.5,
                            color="white" if j in (0, 2) else "black")
                bottom += v
        frames = bottom
        rest = rss[1 + col] - frames
        if rest > 0:
            ax.bar(x, rest, width, bottom=frames, color=REST, edgecolor="white", lw=0.8)
        ax.text(x + width / 2 + 0.04, frames, f"frames {frames:,} B", ha="left", va="center", fontsize=8)
        ax.text(x + width / 2 + 0.04, rss[1 + col] + 130, f"RSS {rss[1 + col]:,} B (census day)", ha="left", va="center",
                fontsize=8)
        r = run_rss(run_names[col])
        if r is not None:
            ax.plot([x], [r], marker="D", color="black", ms=6, ls="none", zorder=4)
    # the peers, from the run: 4 KiB buffer + the rest
    peers = [(p, lab) for p, lab in (("tokio", "tokio\n(a task per connection)"),
                                        ("epoll_st", "epoll_st\n(hand-written epoll)")) if run_rss(p) is not None]
    for i, (p, lab) in enumerate(peers):
        x = 2 + i
        v = run_rss(p)
        buf = min(4096, v)
        ax.bar(x, buf, width, color=BUFFER, edgecolor="white", lw=0.8)
        ax.text(x, buf / 2, "4,096\nread buffer", ha="center", va="center", fontsize=8.5)
        if v > buf:
            ax.bar(x, v - buf, width, bottom=buf, color=REST, edgecolor="white", lw=0.8)
        ax.text(x, v + 60, f"{v:,.0f} B\n({v - buf:,.0f} B besides the buffer)", ha="center", va="bottom", fontsize=8)
        labels.append(lab)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=9)
    ax.set_xlim(-0.6, len(labels) - 0.3)
    top = max([rss[1], rss[2]] + [run_rss(p) or 0 for p, _ in peers])
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("bytes per idle connection")
    ax.grid(axis="y", color="#e5e5e5", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title("Where an idle connection's bytes go\n"
                 "shoal: census of live frames, 2026-12-02 (docs/reactor.md)\n"
                 f"RSS growth per idle connection: compare.sh net, {run_label(info, os.path.basename(data))}"
                 + (f", K = {keff:,}" if keff else ""), fontsize=10.5)
    handles = [Patch(color=PART_COLORS[j % len(PART_COLORS)], label=name) for j, (name, *_) in enumerate(parts)]
    handles += [Patch(color=REST, label="rest of RSS (malloc chunk overhead, per-thread caches, runtime)"),
                Patch(color=BUFFER, label="the peers' 4 KiB read buffer, held for the connection's life"),
                Line2D([], [], marker="D", color="black", ls="none", ms=6,
                       label="shoal's RSS per connection in that compare.sh run")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False)
    save(fig, out)


if __name__ == "__main__":
    main()
