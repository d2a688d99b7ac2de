#!/usr/bin/python3
"""What an honest analyst pays for the run time's release: the latency of
typical fresh statements with dpnoise.timing_epsilon at its default and at
0 (off), alternated, in one run, on a throwaway server.

Usage: bench/latency.py [PORT] [RUNS]   (default 54338, 200; run as root)

Prints, for each statement: the bound B the plan check gives it (from the
delay's definition: work x dpnoise.timing_row_microseconds), the median
and 90th percentile of its run time held and not held, and the median
added; then the (epsilon, delta) each statement pays for its run time.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from analyst import Server  # noqa: E402

SETUP = """
CREATE EXTENSION dpnoise;
CREATE ROLE lat_on LOGIN;
CREATE ROLE lat_off LOGIN;
CREATE TABLE staff (person_id int PRIMARY KEY, region text, salary float8, age int);
INSERT INTO staff SELECT i, (ARRAY['north', 'south', 'east'])[1 + i % 3], 1000 * (i % 200), 20 + i % 40
FROM generate_series(1, 20000) i;
CREATE TABLE visits (person_id int, site text, amount float8);
INSERT INTO visits SELECT i % 5000, 's' || (i % 20), i % 100 FROM generate_series(1, 40000) i;
CREATE TABLE regions (region text);
INSERT INTO regions VALUES ('north'), ('south'), ('east'), ('west');
GRANT SELECT ON regions TO lat_on, lat_off;
ANALYZE staff, visits, regions;
SELECT dp_protect('staff', 'person_id'), dp_protect('visits', 'person_id', 3);
SELECT dp_analyst('lat_on'), dp_analyst('lat_off');
SELECT dp_budget_grant('lat_on', 1e9, 1), dp_budget_grant('lat_off', 1e9, 1);
ALTER ROLE lat_off SET dpnoise.timing_epsilon = 0;
"""

# Fresh each time: the tables are not tracked (dp_track), so no repeat is served.
STATEMENTS = [
    ("a count with a WHERE", "SELECT dp_count(1.0) FROM staff WHERE age >= 30"),
    ("sum and avg", "SELECT dp_sum(salary, 1.0, 0, 200000), dp_avg(salary, 1.0, 0, 200000) FROM staff"),
    ("GROUP BY (partition selection)", "SELECT region, dp_count(1.0) FROM staff GROUP BY region"),
    ("listed keys (a public table)", "SELECT r.region, dp_count(1.0) FROM regions r LEFT JOIN staff s USING (region) GROUP BY r.region"),
    ("several rows per person, GROUP BY", "SELECT site, dp_count(1.0) FROM visits GROUP BY site"),
    ("a BI chart (Superset's wrapper)",
     "SELECT region, MAX(n) FROM (SELECT region, dp_count(1.0) AS n FROM staff GROUP BY region) AS virtual_table GROUP BY region LIMIT 1000"),
]


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 54338
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    server = Server(port)
    server.start()
    try:
        admin = server.connect("postgres")
        admin.execute(SETUP)
        eps, delta, row = (admin.execute(f"SHOW dpnoise.timing_{x}").fetchone()[0] for x in ("epsilon", "delta", "row_microseconds"))
        on, off = server.connect("lat_on"), server.connect("lat_off")
        print(f"dpnoise.timing_epsilon = {eps}, timing_delta = {delta}, timing_row_microseconds = {row}; {runs} alternated runs each")
        print(f"{'statement':<36} | {'held: median / p90':>20} | {'not held':>20} | added (median)")
        added = []
        for name, sql in STATEMENTS:
            times = {"on": [], "off": []}
            for i in range(runs + 5):
                for label, conn in (("on", on), ("off", off)):
                    t = time.perf_counter()
                    conn.execute(sql).fetchall()
                    if i >= 5:
                        times[label].append((time.perf_counter() - t) * 1000)
            med = {k: statistics.median(v) for k, v in times.items()}
            p90 = {k: statistics.quantiles(v, n=10)[-1] for k, v in times.items()}
            added.append(med["on"] - med["off"])
            print(f"{name:<36} | {med['on']:>8.2f} / {p90['on']:>7.2f} ms | {med['off']:>8.2f} / {p90['off']:>7.2f} ms | {med['on'] - med['off']:+.2f} ms")
        print(f"median added over these statements: {statistics.median(added):.2f} ms; "
              f"each fresh statement pays epsilon {eps} and delta {delta} for its run time")
        ledger = admin.execute("SELECT mechanism, epsilon, delta FROM dpnoise.ledger WHERE role = 'lat_on'::regrole ORDER BY id DESC LIMIT 1").fetchone()
        print(f"last ledger row of the held role: {ledger}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
