#!/usr/bin/python3
"""The timing residual: how much run time one protected row can add to an
analyst's statement, with and without dpnoise.max_public_fanout.

Usage: bench/timing.py [PORT] [RUNS]   (default 54337, 300; run as root)

Starts a throwaway server (tests/e2e/analyst.py's), protects a table of
2000 persons, and as an analyst times `SELECT dp_count(1e-9) FROM staff
CROSS JOIN <public rows> WHERE person_id = 17 AND <condition>` with the
condition true (person 17 passes: their row meets every public row) and
false (no row passes), alternated, for public sides of 1 row, 1000 rows
(the default bound) and 300 000 rows (the bound raised for this bench).
Prints the mean and median time of each, and the difference: the signal
an attacker would time.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from analyst import Server  # noqa: E402

SETUP = """
CREATE EXTENSION dpnoise;
CREATE ROLE timing_analyst LOGIN;
CREATE TABLE staff (person_id int PRIMARY KEY, salary float8);
INSERT INTO staff SELECT i, 1000 * i FROM generate_series(1, 200000) i;
-- Public, a key each row holds once: a hash join looks it up by key.
CREATE TABLE labels (person_id int, label text);
INSERT INTO labels SELECT i, 'l' || i FROM generate_series(1, 50000) i;
GRANT SELECT ON labels TO timing_analyst;
ANALYZE staff, labels;
SELECT dp_protect('staff', 'person_id');
SELECT dp_analyst('timing_analyst');
SELECT dp_budget_grant('timing_analyst', 1e9, 1);
ALTER ROLE timing_analyst SET dpnoise.max_public_fanout = 1000000;
"""


def alternate(an, true_sql, false_sql, rounds):
    """Runs the two statements alternately (after a warm-up): their times in ms."""
    times = ([], [])
    for i in range(rounds + 3):
        for sql, into in zip((true_sql, false_sql), times):
            t = time.perf_counter()
            an.execute(sql).fetchall()
            if i >= 3:
                into.append((time.perf_counter() - t) * 1000)
    return times


def line(label, times, per):
    t_true, t_false = times
    diff = statistics.fmean(t_true) - statistics.fmean(t_false)
    print(f"{label:>12} | {statistics.fmean(t_true):>10.3f} / {statistics.median(t_true):>10.3f} | "
          f"{statistics.fmean(t_false):>10.3f} / {statistics.median(t_false):>10.3f} | "
          f"{diff:>15.3f} ms | {per(diff)}")


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 54337
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    server = Server(port)
    try:
        server.start()
        with server.connect("postgres") as su:
            su.execute(SETUP)
        with server.connect("timing_analyst") as an:
            print(f"{'public rows':>12} | {'true: mean / median ms':>24} | {'false: mean / median ms':>24} | "
                  f"{'difference (mean)':>18} | per public row")
            for n in (1, 1000, 300000):
                sql = (f"SELECT dp_count(1e-9) FROM staff CROSS JOIN generate_series(1, {n}) "
                       "WHERE person_id = 17 AND salary {} 10000")
                rounds = runs if n < 300000 else max(runs // 10, 20)
                line(str(n), alternate(an, sql.format(">"), sql.format("<"), rounds), lambda d: f"{d / n * 1e6:.0f} ns")
            # A hash join whose build side is a public table of 50 000 rows:
            # PostgreSQL would skip building it when no protected row passes;
            # the gate has it built first. The condition keeps one row or none
            # (a CASE, whose selectivity the planner guesses at one half, so it
            # hashes the smaller, public side).
            an.execute("SET enable_nestloop = off")
            an.execute("SET enable_mergejoin = off")
            sql = ("SELECT dp_count(1e-9) FROM staff s JOIN labels l ON l.person_id = s.person_id "
                   "WHERE CASE WHEN s.salary = {} THEN true ELSE false END")
            times = alternate(an, sql.format("50000000"), sql.format("50000000.5"), max(runs // 5, 20))
            line("hash 50 000", times, lambda d: "(one row against none)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
