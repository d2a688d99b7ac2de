"""Times dpnoise's aggregates and per-row noise against PostgreSQL's own.

One psql session, no parallel query, queries alternated within each run so
drift in the machine's speed hits both sides alike. Prints the median time of
each query and the median of the per-run ratios.
"""
import argparse
import re
import statistics
import os
import subprocess

# Targets: issue 17's for count, the Laplace sum and the per-row noise;
# the earlier issues' for the rest.
PAIRS = [
    ("dp_count(1.0)", "SELECT count(*) FROM bench", "SELECT dp_count(1.0) FROM bench", 1.1),
    ("dp_sum_laplace", "SELECT sum(x) FROM bench", "SELECT dp_sum_laplace(x, 1.0, 0, 100) FROM bench", 1.2),
    ("dp_sum_staircase", "SELECT sum(x) FROM bench", "SELECT dp_sum_staircase(x, 1.0, 100) FROM bench", 1.3),
    ("dp_laplace (per row)", "SELECT max(x + random()) FROM bench",
     "SELECT max(dp_laplace(x, 1.0, 1.0)) FROM bench", 2.0),
    ("dp_staircase (per row)", "SELECT max(x + random()) FROM bench",
     "SELECT max(dp_staircase(x, 1.0, 1.0)) FROM bench", 2.0),
    ("dp_count(ε,δ,'auto')", "SELECT count(*) FROM bench", "SELECT dp_count(1.0, 1e-6, 'auto') FROM bench", 1.2),
    ("dp_sum(ε,δ) auto", "SELECT sum(x) FROM bench", "SELECT dp_sum(x, 1.0, 0, 100, 1e-6) FROM bench", 1.3),
    ("dp_sum gaussian", "SELECT sum(x) FROM bench", "SELECT dp_sum(x, 1.0, 0, 100, 1e-6, 'gaussian') FROM bench", 1.3),
    # 'auto' plans once per call site, not once per group.
    ("dp_sum auto, 10^4 groups", "SELECT count(s) FROM (SELECT sum(x) s FROM bench GROUP BY (x * 1000)::int % 10000) g",
     "SELECT count(s) FROM (SELECT dp_sum(x, 1.0, 0, 100, 1e-6) s FROM bench GROUP BY (x * 1000)::int % 10000) g", 1.5),
    ("dp_sum_multi (2 comp.)", "SELECT sum(a[1]), sum(a[2]) FROM (SELECT ARRAY[x, 2 * x] a FROM bench) s",
     "SELECT dp_sum_multi(ARRAY[x, 2 * x], 1.0, ARRAY[100, 200]) FROM bench", 2.0),
    ("dp_noise gaussian (row)", "SELECT max(x + random()) FROM bench",
     "SELECT max(dp_noise(x, 1.0, 1.0, 1e-6, 'gaussian')) FROM bench", 3.0),
]


def psql(port, script):
    out = subprocess.run(
        ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres",
         "-v", "ON_ERROR_STOP=1"],
        input=script, capture_output=True, text=True, check=True,
        # The benchmark times the functions, not the ledger (bench/budget.sh does).
        env={**os.environ, "PGOPTIONS": "-c dpnoise.enforce_budget=off"})
    return out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pairs", default="", help="comma-separated labels to run (default: all)")
    args = ap.parse_args()
    pairs = [p for p in PAIRS if not args.pairs or p[0] in args.pairs.split(",")]

    psql(args.port, f"""
        -- Always the build just installed: an old catalog would miss new
        -- functions. A bench database's ledger is not worth keeping.
        SET dpnoise.drop_ledger = on;
        DROP EXTENSION IF EXISTS dpnoise CASCADE;
        CREATE EXTENSION dpnoise;
        DO $$ BEGIN
            IF to_regclass('bench') IS NULL OR (SELECT reltuples FROM pg_class WHERE oid = to_regclass('bench')) <> {args.rows} THEN
                DROP TABLE IF EXISTS bench;
                CREATE TABLE bench AS SELECT (random() * 100)::float8 AS x FROM generate_series(1, {args.rows});
            END IF;
        END $$;
        VACUUM ANALYZE bench;
    """)
    lines = ["SET max_parallel_workers_per_gather = 0;", "\\timing on"]
    # One warm-up pass, then the timed runs.
    for _ in range(args.runs + 1):
        for _, base, dp, _ in pairs:
            lines += [base + ";", dp + ";"]
    out = psql(args.port, "\n".join(lines) + "\n")
    times = [float(t) for t in re.findall(r"Time: ([0-9.]+) ms", out)]
    per_run = 2 * len(pairs)
    times = times[per_run:]  # drop the warm-up
    print(f"{args.rows:,} rows, {args.runs} runs, no parallel query; median ms and median per-run ratio")
    print(f"{'function':<24} {'postgres ms':>12} {'dpnoise ms':>12} {'ratio':>7} {'target':>7}")
    for i, (label, _, _, target) in enumerate(pairs):
        base = [times[r * per_run + 2 * i] for r in range(args.runs)]
        dp = [times[r * per_run + 2 * i + 1] for r in range(args.runs)]
        ratio = statistics.median(d / b for d, b in zip(dp, base))
        print(f"{label:<24} {statistics.median(base):>12.1f} {statistics.median(dp):>12.1f} "
              f"{ratio:>7.2f} {'<= ' + str(target):>7}")


if __name__ == "__main__":
    main()
