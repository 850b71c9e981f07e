"""One panel of "shoal / peer" ratios: a row per benchmark, a marker per peer.

rows: list of (label, higher_is_better, {peer: ratio}, best) where best is
(peer, ratio) for the best runtime peer or None. The x axis is logarithmic
with a line at 1.0; on each row the side where shoal is ahead is shaded.
"""
import math

from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from plotstyle import AHEAD, style

TICKS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200]


def x_limits(rows, pad=1.6):
    vals = [r for _, _, ratios, _ in rows for r in ratios.values() if r and r > 0]
    if not vals:
        return 0.5, 2
    lo, hi = min(min(vals), 1.0), max(max(vals), 1.0)
    lo, hi = lo / pad, hi * pad
    # at least a factor of 2 each side of 1, so the shading reads
    return min(lo, 0.5), max(hi, 2.0)


def draw(ax, rows, peers, xlim, show_labels=True, best_note=True):
    lo, hi = xlim
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    n = len(rows)
    ax.set_ylim(n - 0.5, -0.5)
    span = 0.4 if len(peers) > 1 else 0.0
    offsets = {p: (i - (len(peers) - 1) / 2) * (span / max(len(peers) - 1, 1)) for i, p in enumerate(peers)}
    for y, (label, higher, ratios, best) in enumerate(rows):
        if higher:
            ax.fill_betweenx([y - 0.48, y + 0.48], 1, hi, color=AHEAD, lw=0, zorder=0)
        else:
            ax.fill_betweenx([y - 0.48, y + 0.48], lo, 1, color=AHEAD, lw=0, zorder=0)
        if y > 0:
            ax.axhline(y - 0.5, color="#dddddd", lw=0.6, zorder=1)
        for i, p in enumerate(peers):
            r = ratios.get(p)
            if r is None or r <= 0:
                continue
            c, m = style(p, i)
            ax.plot([r], [y + offsets[p]], marker=m, color=c, ms=7, ls="none", zorder=3,
                    mfc=c if m not in ("x", "+") else None, mew=1.6 if m in ("x", "+") else 0.8)
        if best_note and best:
            bp, br = best
            ax.text(0.995, y + 0.47, f"best runtime peer: {bp}, {br:.2f}", transform=ax.get_yaxis_transform(),
                    ha="right", va="bottom", fontsize=7.5, color="#333333", zorder=4)
    ax.axvline(1.0, color="black", lw=1.1, zorder=2)
    ax.xaxis.set_major_locator(FixedLocator([t for t in TICKS if lo <= t <= hi]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(axis="x", color="#cccccc", lw=0.5, zorder=0)
    ax.set_yticks(range(n))
    if show_labels:
        ax.set_yticklabels([r[0] for r in rows])
    else:
        ax.tick_params(axis="y", labelleft=False)
    ax.tick_params(axis="y", length=0)


def legend_handles(peers, names=None):
    from matplotlib.lines import Line2D
    hs = []
    for i, p in enumerate(peers):
        c, m = style(p, i)
        hs.append(Line2D([], [], marker=m, color=c, ls="none", ms=7, mfc=c if m not in ("x", "+") else None,
                         mew=1.6 if m in ("x", "+") else 0.8, label=(names or {}).get(p, p)))
    hs.append(Patch(color=AHEAD, label="side of 1.0 where shoal is ahead"))
    return hs


def median(vals):
    vals = sorted(v for v in vals if v is not None and not math.isnan(v))
    if not vals:
        return None
    k = len(vals)
    return vals[k // 2] if k % 2 else (vals[k // 2 - 1] + vals[k // 2]) / 2
