#!/usr/bin/python3
"""The plan walk: dpnoise's plan check under every plan an analyst can force.

Usage: tests/e2e/plans.py [PORT]   (default 54335; run as root)

Starts a throwaway PostgreSQL 15 server (as tests/e2e/analyst.py does;
DPNOISE_E2E_LIBDIR=dir loads dir's dpnoise.so) and, as an analyst role, runs
under 192 plans: each of the 64 combinations of enable_hashjoin,
enable_mergejoin, enable_nestloop, enable_material, enable_hashagg and
enable_sort, in each of three scan regimes: sequential (index, index-only and
bitmap scans off), index (sequential and bitmap scans off) and bitmap
(sequential, index and index-only scans off). The tables have indexes on the
columns the queries filter, group and join on, and are vacuumed, so each
regime has its scans to use; the superuser's EXPLAIN of the queries (an
analyst may not EXPLAIN) checks that each regime reads the protected tables
with its own scans.

- admitted queries (aggregates, GROUP BY, listed keys, per-person bounding,
  joins on the privacy unit and with public tables): each is admitted with
  an answer or refused with ZB003 before any charge, never another error;
- probes, each twice, asking whether person 17's salary passes a threshold
  (true, then false): the two runs must look the same to the analyst (the
  same outcome and SQLSTATE, the same charges, the same sequence value and
  the same keys), whatever the plan. A probe that differs is a leak.

Exits non-zero if any check fails.
"""
import itertools
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyst import Server, psycopg  # noqa: E402  (the same throwaway server)

ANALYST = "e2e_plans"
FLAGS = ["enable_hashjoin", "enable_mergejoin", "enable_nestloop", "enable_material", "enable_hashagg", "enable_sort"]
# The scan regimes: each turns off the scans the others use.
SCANS = {
    "seq": {"enable_seqscan": "on", "enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_bitmapscan": "off"},
    "index": {"enable_seqscan": "off", "enable_indexscan": "on", "enable_indexonlyscan": "on", "enable_bitmapscan": "off"},
    "bitmap": {"enable_seqscan": "off", "enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_bitmapscan": "on"},
}
# The 192 plans: each scan regime with each of the 64 join/agg combinations.
PLANS = [(regime, values) for regime in SCANS for values in itertools.product(["on", "off"], repeat=len(FLAGS))]


def settings(plan):
    """One statement that sets every planner setting of `plan`."""
    regime, values = plan
    pairs = list(zip(FLAGS, values)) + list(SCANS[regime].items())
    return "; ".join(f"SET {flag} = {value}" for flag, value in pairs)


def plan_name(plan):
    regime, values = plan
    return f"scan={regime}," + ",".join(f"{f[7:]}={v}" for f, v in zip(FLAGS, values))


SETUP = f"""
CREATE EXTENSION dpnoise;
CREATE ROLE {ANALYST} LOGIN;
CREATE TABLE pw_staff (person_id int PRIMARY KEY, region text, salary float8, age int);
INSERT INTO pw_staff SELECT i, (ARRAY['north', 'south', 'east'])[1 + i % 3], 1000 * i, 20 + i % 40
FROM generate_series(1, 600) i;
CREATE TABLE pw_visits (person_id int, month int, site text, amount float8);
INSERT INTO pw_visits SELECT i % 300, 1 + i % 12, 's' || (i % 4), i % 100 FROM generate_series(1, 3000) i;
CREATE INDEX ON pw_staff (age); CREATE INDEX ON pw_staff (region); CREATE INDEX ON pw_staff (salary);
CREATE INDEX ON pw_visits (person_id); CREATE INDEX ON pw_visits (month); CREATE INDEX ON pw_visits (site);
-- Public: regions, persons' labels (one row a person, indexed), a sequence.
CREATE TABLE pw_regions (region text PRIMARY KEY);
INSERT INTO pw_regions VALUES ('north'), ('south'), ('east'), ('west');
CREATE TABLE pw_people (person_id int PRIMARY KEY, label text);
INSERT INTO pw_people SELECT i, 'l' || (i % 5) FROM generate_series(1, 300) i;
CREATE SEQUENCE pw_seq;
GRANT SELECT ON pw_regions, pw_people TO {ANALYST};
GRANT USAGE, SELECT ON SEQUENCE pw_seq TO {ANALYST};
SELECT dp_protect('pw_staff', 'person_id'), dp_protect('pw_visits', 'person_id', 2);
SELECT dp_analyst('{ANALYST}');
SELECT dp_budget_grant('{ANALYST}', 1e9, 1);
"""

# Admitted shapes: answered or refused (ZB003), never another error.
ADMITTED = [
    ("count", "SELECT dp_count(1.0) FROM pw_staff WHERE age > 30"),
    ("group by", "SELECT region, dp_count(1.0), dp_sum(salary, 1.0, 0, 100000) FROM pw_staff GROUP BY region"),
    ("listed keys, table", "SELECT r.region, dp_count(1.0) FROM pw_regions r LEFT JOIN pw_staff s ON s.region = r.region "
                           "GROUP BY r.region"),
    ("listed keys, series", "SELECT m, dp_count(0.5) FROM generate_series(1, 12) m LEFT JOIN pw_visits v ON v.month = m "
                            "GROUP BY m"),
    ("bounding", "SELECT site, dp_count(1.0), dp_sum(amount, 1.0, 0, 100) FROM pw_visits GROUP BY site"),
    ("join on the unit", "SELECT dp_sum(v.amount, 1.0, 0, 100) FROM pw_visits v JOIN pw_staff s "
                         "ON s.person_id = v.person_id WHERE s.age > 30"),
    ("public join", "SELECT dp_count(1.0) FROM pw_staff s JOIN pw_people p ON p.person_id = s.person_id "
                    "WHERE p.label = 'l1'"),
    ("answers post-processed", "SELECT count(*), max(c) FROM (SELECT region, dp_count(1.0) AS c FROM pw_staff "
                               "GROUP BY region) x"),
]

# Probes about person 17 (salary 17000): {c} is a condition that holds, then one that does not.
HOLDS, FAILS = "s.salary > 10000", "s.salary > 90000"
PROBES = [
    ("pulled-up division", "SELECT dp_count(1e-9) FROM pw_staff s, (SELECT 1 / (g - 1) AS y FROM generate_series(1, 1) g) p "
                           "WHERE s.person_id = 17 AND {c} AND s.age < p.y"),
    ("unfolded domain", "SELECT dp_count(1e-9) FROM pw_staff s WHERE s.person_id = 17 "
                        "AND CASE WHEN {c} THEN (-1)::information_schema.cardinal_number IS NULL ELSE true END"),
    ("lazy aggregate subquery", "SELECT dp_count(1e-9) FROM pw_staff s, (SELECT max(g) / 0 AS z FROM generate_series(1, 1) g) k "
                                "WHERE s.person_id = 17 AND {c} AND s.age > k.z"),
    ("public text cast", "SELECT dp_count(1e-9) FROM pw_staff s JOIN pw_people p ON p.person_id = s.person_id "
                         "WHERE s.person_id = 17 AND {c} AND p.label::int > 0"),
    ("sequence per row", "SELECT dp_count(1e-9) FROM pw_staff s, (SELECT nextval('pw_seq') AS n, g FROM generate_series(1, 3) g) p "
                         "WHERE {c}"),
    ("listed keys, volatile list", "SELECT k.g, dp_count(1e-9) FROM (SELECT g, random() AS n FROM generate_series(1, 30) g) k "
                                   "LEFT JOIN pw_staff s ON s.person_id = k.g AND {c} GROUP BY k.g, k.n"),
    ("listed keys, pure list", "SELECT k.g, dp_count(1e-9) FROM generate_series(10, 20) k(g) LEFT JOIN pw_staff s ON s.person_id = k.g AND {c} "
                               "GROUP BY k.g ORDER BY k.g"),
    ("rescanned aggregate", "SELECT g, x.c FROM generate_series(1, 20) g LEFT JOIN "
                            "(SELECT dp_count(0.01) AS c FROM pw_staff s WHERE {c}) x ON x.c > g"),
    ("amplified run time", "SELECT dp_count(1e-9) FROM pw_staff s CROSS JOIN generate_series(1, 200000) "
                           "WHERE s.person_id = 17 AND {c}"),
]

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append((bool(ok), name, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def run(an, sql):
    """What the analyst sees: (outcome, the keys of a listed-key answer or None)."""
    try:
        rows = an.execute(sql).fetchall()
    except psycopg.Error as e:
        return (f"error {e.sqlstate}", None)
    return ("answered", sorted(r[0] for r in rows) if "k.g" in sql else None)


def charges(an):
    return an.execute("SELECT count(*), coalesce(sum(epsilon), 0) FROM dp_my_ledger").fetchone()


def scan_nodes(plan_json):
    """(node type, relation) of every scan in an EXPLAIN (FORMAT JSON) plan."""
    found, stack = set(), [plan_json[0]["Plan"]]
    while stack:
        node = stack.pop()
        if "Relation Name" in node:
            found.add((node["Node Type"], node["Relation Name"]))
        stack.extend(node.get("Plans", []))
    return found


def scans_reached(su, label, queries, protected):
    """Whether each scan regime's plans (the superuser's EXPLAIN: an analyst may not
    EXPLAIN) read the protected tables with the scans it leaves on, and only those."""
    wanted = {"seq": {"Seq Scan"}, "index": {"Index Scan", "Index Only Scan"}, "bitmap": {"Bitmap Heap Scan"}}
    for regime in SCANS:
        su.execute(settings((regime, ["on"] * len(FLAGS))))
        seen = {}
        for sql in queries:
            try:
                nodes = scan_nodes(su.execute(f"EXPLAIN (COSTS OFF, FORMAT JSON) {sql}").fetchone()[0])
            except psycopg.Error as e:
                seen[f"error {e.sqlstate}"] = seen.get(f"error {e.sqlstate}", 0) + 1
                continue
            for node, relation in nodes:
                if relation in protected:
                    seen[node] = seen.get(node, 0) + 1
        others = {n for n in seen if n not in ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")}
        check(f"scan regime {regime} reaches its scans ({label})",
              wanted[regime] <= set(seen) and not others
              and (regime != "seq" or set(seen) == {"Seq Scan"}),
              ", ".join(f"{n}: {c}" for n, c in sorted(seen.items())))
    su.execute("RESET ALL")


def walk(an):
    outcomes = {name: {} for name, _ in ADMITTED}
    bad_admitted, leaks = [], []
    probe_outcomes = {name: set() for name, _ in PROBES}
    for plan in PLANS:
        an.execute(settings(plan))
        combo = plan_name(plan)
        for name, sql in ADMITTED:
            before = charges(an)
            outcome, _ = run(an, sql)
            after = charges(an)
            outcomes[name][outcome] = outcomes[name].get(outcome, 0) + 1
            refused_free = outcome != "error ZB003" or after == before
            if outcome not in ("answered", "error ZB003") or not refused_free:
                bad_admitted.append(f"{name} [{combo}]: {outcome}, charges {before} -> {after}")
        for name, sql in PROBES:
            seen = []
            for condition in (HOLDS, FAILS):
                before = charges(an)
                seq_before = an.execute("SELECT last_value FROM pw_seq").fetchone()[0]
                outcome, keys = run(an, sql.format(c=condition))
                after = charges(an)
                seq_after = an.execute("SELECT last_value FROM pw_seq").fetchone()[0]
                seen.append((outcome, keys, after[0] - before[0], after[1] - before[1], seq_after - seq_before))
            probe_outcomes[name].add(seen[0][0])
            if seen[0] != seen[1] or seen[0][0] not in ("answered", "error ZB003"):
                leaks.append(f"{name} [{combo}]: holds {seen[0]} / fails {seen[1]}")
    for name, _ in ADMITTED:
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes[name].items()))
        check(f"admitted query under {len(PLANS)} plans: {name}", "answered" in outcomes[name]
              and all(k in ("answered", "error ZB003") for k in outcomes[name]), summary)
    check("admitted queries: every run answered or refused with ZB003, refusals charge nothing", not bad_admitted,
          "; ".join(bad_admitted[:5]))
    for name, _ in PROBES:
        mine = [leak for leak in leaks if leak.startswith(name + " ")]
        check(f"probe under {len(PLANS)} plans, condition true and false look alike: {name}", not mine,
              "; ".join(mine[:3]) if mine else "outcomes " + ", ".join(sorted(probe_outcomes[name])))


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 54335
    server = Server(port)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.time()
    try:
        server.start()
        with server.connect("postgres") as su:
            su.execute(SETUP)
            su.execute("VACUUM ANALYZE")  # the visibility map, for index-only scans
            with server.connect(ANALYST) as an:
                check("analyst session", an.execute("SHOW dpnoise.analyst").fetchone()[0] == "on")
                scans_reached(su, "admitted queries and probes",
                              [sql for _, sql in ADMITTED] + [sql.format(c=HOLDS) for _, sql in PROBES],
                              {"pw_staff", "pw_visits"})
                walk(an)
    except Exception as e:
        check("server, set-up and walk", False, f"{type(e).__name__}: {e}")
    finally:
        server.stop()
    failed = [r for r in RESULTS if not r[0]]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks passed in {time.time() - t0:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
