"""Draws docs/img/*.png from the CSV files that the noise_figures and
delta_figures and multi_figures examples write.

    cargo run --release -p dpnoise-core --example noise_figures -- docs/data
    cargo run --release -p dpnoise-core --example delta_figures -- docs/data
    cargo run --release -p dpnoise-core --example multi_figures -- docs/data
    python3 docs/figures.py          # needs matplotlib (pip install matplotlib)
"""
import csv
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
IMG = os.path.join(HERE, "img")
LABELS = {
    "laplace": "Laplace (lattice)",
    "staircase_l1": "staircase, γ for mean |error|",
    "staircase_l2": "staircase, γ for variance",
    "staircase_ci": "staircase, γ for 95 % interval",
}


def read(name):
    with open(os.path.join(DATA, name)) as f:
        return list(csv.DictReader(f))


def density():
    series = defaultdict(lambda: ([], []))
    for row in read("density.csv"):
        xs, ys = series[row["mechanism"]]
        xs.append(float(row["bin_center"]))
        ys.append(float(row["density"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (xs, ys) in series.items():
        ax.step(xs, ys, where="mid", label=LABELS[name], linewidth=1.2)
    ax.set_xlabel("noise (Δ = 1)")
    ax.set_ylabel("density (10⁶ draws, bins of 0.05)")
    ax.set_title("Noise densities at ε = 1, sampled exactly on the lattice")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(IMG, "density_eps1.png"), dpi=110)


def error_curves():
    series = defaultdict(lambda: defaultdict(list))
    for row in read("error.csv"):
        s = series[row["mechanism"]]
        for key in ("epsilon", "mean_abs_error", "std_dev", "ci95_half_width"):
            s[key].append(float(row[key]))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key, title in zip(axes, ("mean_abs_error", "std_dev", "ci95_half_width"),
                              ("E|error|", "standard deviation", "95 % half-width")):
        lap = series["laplace"][key]
        for name, s in series.items():
            ax.plot(s["epsilon"], [v / l for v, l in zip(s[key], lap)], label=LABELS[name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_title(f"{title}, relative to Laplace")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(IMG, "error_vs_epsilon.png"), dpi=110)


def refine_error():
    rows = read("refine.csv")
    eps = [float(r["epsilon"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in (("laplace", "Laplace noise (Δ = 1.2)"), ("staircase_l1", "staircase, l1"),
                       ("refine_vague", "dp_refine, prior uniform(0, 120)"),
                       ("refine_tight", "dp_refine, prior normal(40, 2)")):
        ax.plot(eps, [float(r[key]) for r in rows], label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("mean |error| (years)")
    ax.set_title("Average of 100 ages in [0, 120], true value 41")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(IMG, "refine_error.png"), dpi=110)


def delta_curves():
    """E|X| and variance over ε at δ = 1e-6 and 1e-3 (delta_figures example)."""
    rows = read("delta.csv")
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for col, delta in enumerate(["1e-6", "1e-3"]):
        for row, (field, auto, label) in enumerate(
            [("mean_abs_error", "auto_l1", "E|X|"), ("variance", "auto_l2", "variance")]
        ):
            ax = axes[row][col]
            series = defaultdict(list)
            for r in rows:
                if r["delta"] == delta:
                    series[r["mechanism"]].append((float(r["epsilon"]), float(r[field]), r[auto] == "true"))
            for name, points in series.items():
                xs, ys, chosen = zip(*points)
                ax.plot(xs, ys, marker=".", label=name)
                picked = [(x, y) for x, y, c in points if c]
                if picked:
                    px, py = zip(*picked)
                    ax.scatter(px, py, s=110, facecolors="none", edgecolors="black", zorder=5)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{label}, δ = {delta}, Δ = 1 (ring: 'auto')")
            ax.grid(True, which="both", alpha=0.3)
            if row == 1:
                ax.set_xlabel("ε")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(IMG, "delta_error.png"), dpi=110)


def multi_density():
    """Example 2's box noise beside independent Laplace (multi_figures example)."""
    rows = read("multi_density.csv")
    xs = sorted({float(r["x"]) for r in rows})
    ys = sorted({float(r["y"]) for r in rows})
    grid = {(float(r["x"]), float(r["y"])): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, key, title in [
        (axes[0], "box", "box noise, S_0 = [-0.1, 0.1] x [-1, 1]"),
        (axes[1], "laplace", "independent Laplace, scale 11"),
    ]:
        z = [[float(grid[(x, y)][key]) for x in xs] for y in ys]
        im = ax.imshow(z, origin="lower", aspect="auto", extent=[xs[0], xs[-1], ys[0], ys[-1]],
                       norm=matplotlib.colors.LogNorm(vmin=1e-4, vmax=1), cmap="viridis")
        ax.set_title(title + ", ε = 1")
        ax.set_xlabel("component 1 (Δ = 1)")
    axes[0].set_ylabel("component 2 (Δ = 10)")
    fig.colorbar(im, ax=axes, label="density / its maximum")
    fig.savefig(os.path.join(IMG, "multi_density.png"), dpi=110)


if __name__ == "__main__":
    os.makedirs(IMG, exist_ok=True)
    density()
    error_curves()
    refine_error()
    delta_curves()
    multi_density()
    print("wrote", IMG)
