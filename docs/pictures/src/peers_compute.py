#!/usr/bin/env python3
"""shoal / peer per compute benchmark, from one compare.sh compute run.

Usage: peers_compute.py DATA_DIR OUT.svg
Reads DATA_DIR/compute-raw.jsonl (run.sh's raw lines, one JSON object per
run) and DATA_DIR/compute-info.txt. A cell is the median of the peer's ok
runs, as in the harness's ratios.py; the ratio is shoal's median divided by
the peer's. per_sec rows: higher is better; ns and ms rows: lower is better.
"""
import json
import os
import sys
from collections import defaultdict

import matplotlib.pyplot as plt

import ratioplot
from plotstyle import read_info, run_label, save

RUNTIME_PEERS = ["tokio", "go", "asio", "tbb"]
REFERENCES = ["cpp-baseline"]
UNIT = {  # what one unit of the metric counts (compute/README.md)
    "spawn_join": "tasks/s", "spawn_join_handles": "tasks/s", "chan_pingpong": "ns per round trip",
    "chan_throughput": "messages/s", "cancel_fanout": "ms", "cancel_fanout_timer": "ms",
    "cancel_fanout_token": "ms", "mutex_contention": "increments/s", "sleep_timers": "ms wall",
}


def main():
    data, out = sys.argv[1], sys.argv[2]
    runs = defaultdict(list)
    order = []
    for line in open(os.path.join(data, "compute-raw.jsonl")):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        runs[(r["bench"], r["peer"])].append(r)
        if r["bench"] not in order:
            order.append(r["bench"])
    info = read_info(os.path.join(data, "compute-info.txt"))

    def med(b, p):
        ok = [r for r in runs.get((b, p), []) if r.get("ok")]
        if not ok:
            return None, None
        m = ok[0]["metric"]
        return ratioplot.median([r.get(m) for r in ok]), m

    present = {p for (_, p) in runs}
    peers = [p for p in RUNTIME_PEERS + REFERENCES if p in present]
    peers += sorted(p for p in present if p not in peers and p != "shoal")
    reps = max((len(v) for (b, p), v in runs.items() if p == "shoal"), default=0)

    rows = []
    for b in order:
        s, m = med(b, "shoal")
        if s is None:
            continue
        higher = m == "per_sec"
        ratios = {}
        for p in peers:
            v, _ = med(b, p)
            if v:
                ratios[p] = s / v
        if not ratios:
            continue
        rt = [(p, r) for p, r in ratios.items() if p in RUNTIME_PEERS]
        best = None
        if rt:  # the best peer has the best median: the smallest ratio if higher is better
            best = (min if higher else max)(rt, key=lambda x: x[1])
        unit = UNIT.get(b, "per second" if higher else m)
        rows.append((f"{b}\n{unit}, {'higher' if higher else 'lower'} is better", higher, ratios, best))

    fig, ax = plt.subplots(figsize=(10, 0.62 * len(rows) + 1.9))
    ratioplot.draw(ax, rows, peers, ratioplot.x_limits(rows))
    ax.set_xlabel("shoal's median ÷ the peer's median, same run (log scale)")
    ax.set_title("shoal against its peers, compute benchmarks\n"
                 f"compare.sh compute, {run_label(info, os.path.basename(data))}, "
                 f"2 workers each, medians of {reps} runs", fontsize=11)
    names = {"cpp-baseline": "cpp-baseline (std::mutex, no runtime)"}
    ax.legend(handles=ratioplot.legend_handles(peers, names), loc="upper center", bbox_to_anchor=(0.5, -0.07 - 0.4 / len(rows)),
              ncol=len(peers) + 1, frameon=False, fontsize=8.5, handletextpad=0.3, columnspacing=1.2)
    save(fig, out)


if __name__ == "__main__":
    main()
