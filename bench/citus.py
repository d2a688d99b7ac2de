#!/usr/bin/env python3
"""dp_count and dp_sum against Citus's own count(*) and sum() on a cluster.

    bench/citus.py ROWS COORDINATOR_PORT WORKER_PORT WORKER_PORT
(scripts/citus.sh bench [ROWS] starts the cluster and runs this.)

Prints the median of RUNS timings of each query (taken in turn) over a distributed table of
ROWS rows (32 shards), the ratio of each dp aggregate to its plain
counterpart in the same run, and the same queries on one node (a local
copy on the coordinator) against the cluster.
"""
import statistics
import sys
import time

import psycopg

RUNS = 7


def timed(conn, *queries):
    """The median time of each query, RUNS rounds of each in turn (so a
    slow spell of the machine falls on all of them alike)."""
    times = [[] for _ in queries]
    for _ in range(RUNS):
        for i, sql in enumerate(queries):
            start = time.perf_counter()
            conn.execute(sql).fetchall()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main(rows, ports):
    conn = psycopg.connect(host="127.0.0.1", port=ports[0], dbname="dpnoise_citus", user="postgres", autocommit=True)
    conn.execute("SET dpnoise.enforce_budget = off")
    exists = conn.execute("SELECT to_regclass('bench') IS NOT NULL AND to_regclass('bench_local') IS NOT NULL").fetchone()[0]
    exists = exists and conn.execute("SELECT count(*) FROM bench_local").fetchone()[0] == rows
    if not exists:
        conn.execute("DROP TABLE IF EXISTS bench, bench_local")
        conn.execute("CREATE TABLE bench (id bigint, g int, v float8)")
        conn.execute("SELECT create_distributed_table('bench', 'id', shard_count => 32)")
        conn.execute(f"INSERT INTO bench SELECT i, i % 10, (i % 1000) * 1.5 FROM generate_series(1, {rows}) i")
        conn.execute("CREATE TABLE bench_local AS SELECT * FROM bench")
        conn.execute("VACUUM ANALYZE bench_local")
    print(f"{rows} rows, 32 shards on 2 workers; median of {RUNS} runs")
    pairs = [
        ("count(*)", "dp_count(1.0)"),
        ("sum(v)", "dp_sum(v, 1.0, 0, 1500)"),
    ]
    for plain, dp in pairs:
        for grouped in ["", " GROUP BY g"]:
            keys = "g, " if grouped else ""
            t_plain, t_dp, t_local = timed(
                conn,
                f"SELECT {keys}{plain} FROM bench{grouped}",
                f"SELECT {keys}{dp} FROM bench{grouped}",
                f"SELECT {keys}{dp} FROM bench_local{grouped}",
            )
            print(f"{dp:26s}{grouped:12s} cluster {t_dp * 1000:8.1f} ms | Citus {plain:8s} {t_plain * 1000:8.1f} ms "
                  f"| ratio {t_dp / t_plain:5.2f} | one node {t_local * 1000:8.1f} ms ({t_local / t_dp:4.2f}x the cluster's)")


if __name__ == "__main__":
    main(int(sys.argv[1]), [int(p) for p in sys.argv[2:]])
