"""dp_median against OpenDP's make_private_quantile at the same ε on the same
data (issue 36 item 4): RMSE to the true median and mean absolute rank error,
R runs each. Not a test. OpenDP goes in a virtual environment:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install opendp
    /tmp/venv/bin/python bench/quantile_vs_opendp.py --port 5432

dpnoise runs in database dpnoise_bench (created, with a budget for the
caller) on the server at --port. OpenDP scores a grid of candidates (its
API needs them): 1001 evenly spaced points in [lower, upper]; its noise scale
is found by OpenDP's binary search for ε under SymmetricDistance (add/remove,
as dpnoise's), so both spend exactly ε.
"""
import argparse
import bisect
import math
import random
import subprocess

import opendp.prelude as dp

dp.enable_features("contrib")


def psql(port, db, sql):
    out = subprocess.run(["psql", "-X", "-qAt", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", db, "-c", sql],
                         check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=5432)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    rng = random.Random(36)
    lower, upper = 0.0, 100.0
    datasets = {
        "uniform n=1000": [rng.uniform(0, 100) for _ in range(1000)],
        "lognormal n=1000": [min(100.0, rng.lognormvariate(3, 0.6)) for _ in range(1000)],
        "lognormal n=100": [min(100.0, rng.lognormvariate(3, 0.6)) for _ in range(100)],
    }
    psql(args.port, "postgres", "DROP DATABASE IF EXISTS dpnoise_bench")
    psql(args.port, "postgres", "CREATE DATABASE dpnoise_bench")
    psql(args.port, "dpnoise_bench", "CREATE EXTENSION dpnoise; SELECT dp_budget_grant('postgres', 1e9, 1)")
    print(f"{'data':18} {'eps':>5} {'dpnoise RMSE':>13} {'OpenDP RMSE':>12} {'dpnoise rank':>13} {'OpenDP rank':>12}")
    for name, values in datasets.items():
        s = sorted(values)
        n = len(s)
        true = (s[(n - 1) // 2] + s[n // 2]) / 2
        psql(args.port, "dpnoise_bench", "DROP TABLE IF EXISTS d; CREATE TABLE d (x float8);"
             + "INSERT INTO d VALUES " + ",".join(f"({v!r})" for v in values))
        rank = lambda v: abs(bisect.bisect_left(s, v) - n / 2)
        for eps in (0.1, 1.0):
            ours = [float(v) for v in psql(args.port, "dpnoise_bench",
                    f"SELECT dp_median(x, {eps}, {lower}, {upper}) FROM d, generate_series(1, {args.runs}) r GROUP BY r")]
            candidates = [lower + (upper - lower) * i / 1000 for i in range(1001)]
            space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance())
            make = lambda scale: dp.m.make_private_quantile(*space, dp.max_divergence(), candidates, 0.5, scale)
            scale = dp.binary_search_param(make, d_in=1, d_out=eps)
            m = make(scale)
            theirs = [m(values) for _ in range(args.runs)]
            rmse = lambda xs: math.sqrt(sum((x - true) ** 2 for x in xs) / len(xs))
            ranks = lambda xs: sum(rank(x) for x in xs) / len(xs)
            print(f"{name:18} {eps:5} {rmse(ours):13.3f} {rmse(theirs):12.3f} {ranks(ours):13.2f} {ranks(theirs):12.2f}")
    psql(args.port, "postgres", "DROP DATABASE dpnoise_bench")


if __name__ == "__main__":
    main()
