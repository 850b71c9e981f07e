"""Shared style and saving for the matplotlib pictures (run by scripts/pictures.sh).

SVGs are kept small and reproducible: text stays text (no embedded glyphs),
ids come from a fixed hash salt, and the metadata carries no date, so running
a script twice on the same data writes the same bytes. Set PICTURES_PNG=DIR
to also write a PNG of each picture to DIR (for looking at, not for the
repository).
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({
    "svg.fonttype": "none",
    "svg.hashsalt": "shoal-pictures",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "sans-serif"],
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.labelsize": 10,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": True,
})

# One colour and marker per server or peer, the same in every picture.
STYLE = {
    "shoal": ("#1f5fa8", "o"),
    "shoal_minimal": ("#6aa2dc", "o"),
    "tokio": ("#d2691e", "s"),
    "go": ("#17a2b8", "D"),
    "go_raw": ("#17a2b8", "D"),
    "go_nethttp": ("#0b6b7a", "d"),
    "asio": ("#8e44ad", "^"),
    "tbb": ("#2e8b57", "v"),
    "cpp-baseline": ("#555555", "x"),
    "epoll_st": ("#555555", "x"),
    "epoll_reuseport": ("#999999", "+"),
}
AHEAD = "#e3f4e1"  # background on the side of 1.0 where shoal is ahead


def style(name, i=0):
    fallback = ["#b8860b", "#c0392b", "#7f8c8d", "#2c3e50"]
    return STYLE.get(name, (fallback[i % len(fallback)], "P"))


def save(fig, out_svg):
    fig.savefig(out_svg, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    png_dir = os.environ.get("PICTURES_PNG")
    if png_dir:
        os.makedirs(png_dir, exist_ok=True)
        png = os.path.join(png_dir, os.path.basename(out_svg)[:-4] + ".png")
        fig.savefig(png, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {out_svg}", file=sys.stderr)


def read_info(path):
    """key=value lines of a compare.sh info.txt (missing file: empty)."""
    info = {}
    if os.path.exists(path):
        for line in open(path):
            for part in line.split():
                if "=" in part:
                    k, v = part.split("=", 1)
                    info.setdefault(k, v)
    return info


def run_label(info, fallback):
    stamp = info.get("stamp") or fallback
    commit = info.get("commit")
    return f"run {stamp}" + (f", commit {commit}" if commit else "")
