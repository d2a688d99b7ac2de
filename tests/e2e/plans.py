#!/usr/bin/python3
"""The plan walk: dpnoise's plan check and release identities under every plan.

Usage: tests/e2e/plans.py [PORT]   (default 54335; run as root)

Starts a throwaway PostgreSQL 15 server (as tests/e2e/analyst.py does;
DPNOISE_E2E_LIBDIR=dir loads dir's dpnoise.so) and runs statements under 192
plans: each of the 64 combinations of enable_hashjoin, enable_mergejoin,
enable_nestloop, enable_material, enable_hashagg and enable_sort, in each of
three scan regimes: sequential (index, index-only and bitmap scans off),
index (sequential and bitmap scans off) and bitmap (sequential, index and
index-only scans off). No plan is sampled: every statement runs under all
192. The tables have indexes on the columns the queries filter, group and
join on, and are vacuumed, so each regime has its scans to use; the
superuser's EXPLAIN of the queries (an analyst may not EXPLAIN) checks that
each regime reads the protected tables with its own scans. The connections
never prepare a statement (psycopg would after 5 runs, and a prepared
statement keeps its first plan whatever the settings say later).

As an analyst role:

- admitted queries (aggregates, GROUP BY, listed keys, per-person bounding,
  joins on the privacy unit and with public tables): each is admitted with
  an answer or refused with ZB003 before any charge, never another error;
- probes, each twice, asking whether person 17's salary passes a threshold
  (true, then false): the two runs must look the same to the analyst (the
  same outcome and SQLSTATE, the same charges, the same sequence value and
  the same keys), whatever the plan. A probe that differs is a leak.

Release identities, over tables tracked with dp_track: an identified
release's answer is meant to be a function of its identity, so it must be
the same under every plan. Each of 18 identified shapes (GROUP BY one and two
keys, bounded sums over several rows per person, with and without keys, a per-person subquery, a
join on the unit, raw rows through a CTE and a subquery, HAVING, ORDER BY ...
LIMIT above the release, a count(*)
over it as a BI tool sends, plain count(*) under ORDER BY the key DESC LIMIT
on its own and on listed keys (a sorted plan's LIMIT stops the aggregation
early, and the count's cast is computed in the Agg or above the Sort by
plan), a plain count(*) with its interval (a level split in two); as a role without the gate: listed keys, a
public join, a subquery's UNION of texts, EXCEPT ALL of integers, INTERSECT
ALL of texts) runs under each of the 192 plans at epsilon = 1000 (a count's
noise is 0, a sum's below 0.01 and rounded), with the release store emptied
(dp_release_store_reset) before each run, so each run executes its plan and
is charged: every answer must be the superuser's exact SQL's. Then, without
emptying the store, the same shape under another plan (every join/agg
setting flipped, the next scan regime) must be free (the ledger does not
grow) and identical, rows in the same order for an analyst (a curator's
without ORDER BY as a multiset): the shape is identified. The negative control, a
subquery's EXCEPT ALL of numerics (3, 3.0 and 3.00 are equal, and the
plan decides which one is kept), must be charged on every run, and its true
answer must follow the plan (3 answers over the 192 plans: the identity
checks can tell). These connections run with jit = off (see identities()).

Exits non-zero if any check fails.
"""
import itertools
import os
import signal
import sys
import time
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyst import Server, psycopg  # noqa: E402  (the same throwaway server)

ANALYST = "e2e_plans"
CURATOR = "e2e_plans_curator"  # budget and SELECT, not an analyst
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
-- Public lists of values: group keys from the policy (no partition selection).
SELECT dp_domain('pw_staff', 'age', (SELECT array_agg(a::text) FROM generate_series(15, 65) a));
SELECT dp_domain('pw_visits', 'month', (SELECT array_agg(m::text) FROM generate_series(1, 13) m));
SELECT dp_analyst('{ANALYST}');
SELECT dp_budget_grant('{ANALYST}', 1e9, 1);
"""

# The identity check's tables: tracked (dp_track), so their releases are
# identified and a repeat is answered from the release store. id_staff has
# one row per person; id_visits 6 rows per person, in one site and two
# months (k = 2: a person counts in both months, so the exact answers are
# plain SQL). Public: id_regions (west has nobody), id_people (persons 1-300).
IDENTITY_SETUP = f"""
CREATE ROLE {CURATOR} LOGIN;
CREATE TABLE id_staff (person_id int PRIMARY KEY, region text, team int, age int, pay numeric);
INSERT INTO id_staff SELECT i, (ARRAY['north', 'south', 'east'])[1 + i % 3], i % 4, 20 + i % 40,
    round((i % 7)::numeric, i % 3) FROM generate_series(1, 1200) i;
CREATE INDEX ON id_staff (region, team); CREATE INDEX ON id_staff (age); CREATE INDEX ON id_staff (team);
CREATE INDEX ON id_staff (pay);
CREATE TABLE id_visits (person_id int, month int, site text, amount int);
INSERT INTO id_visits SELECT p, 1 + (p + (j % 2) * 5) % 12, 's' || (p % 4), (p * 7 + j * 13) % 100
FROM generate_series(1, 1200) p, generate_series(0, 5) j;
CREATE INDEX ON id_visits (person_id); CREATE INDEX ON id_visits (month); CREATE INDEX ON id_visits (site);
CREATE TABLE id_regions (region text PRIMARY KEY);
INSERT INTO id_regions VALUES ('north'), ('south'), ('east'), ('west');
CREATE TABLE id_people (person_id int PRIMARY KEY, label text);
INSERT INTO id_people SELECT i, 'l' || (i % 5) FROM generate_series(1, 300) i;
GRANT SELECT ON id_regions, id_people TO {ANALYST}, {CURATOR};
GRANT SELECT ON id_staff, id_visits TO {CURATOR};
SELECT dp_protect('id_staff', 'person_id'), dp_protect('id_visits', 'person_id', 2);
SELECT dp_track('id_staff'), dp_track('id_visits'), dp_track('id_regions'), dp_track('id_people');
SELECT dp_domain('id_staff', 'pay', ARRAY['0', '1', '2', '3', '4', '5', '6', '7']);
SELECT dp_policy('id_staff', 100);
SELECT dp_budget_grant('{CURATOR}', 1e9, 1);
"""

# Identified shapes: (name, role, the release, the superuser's exact SQL).
# epsilon = 1000 (dpnoise's largest): a count's noise is 0 (two-sided
# geometric, q = e^-500 a group at k = 2); a sum's is below 0.01 (bounds of
# at most 5 at epsilon 500), compared after rounding. The analyst's shapes
# are admitted by the gate; the curator (budget, SELECT, no gate) asks those
# the gate refuses (set operations over protected rows) and those it makes
# fresh (its listed keys and public joins are rewritten with a UNION ALL and
# a window over public columns). A top-level ORDER BY is compared in order.
IDENTIFIED = [
    ("GROUP BY one key", ANALYST,
     "SELECT region, dp_count(1000) FROM id_staff WHERE age > 25 GROUP BY region",
     "SELECT region, count(*) FROM id_staff WHERE age > 25 GROUP BY region"),
    ("GROUP BY two keys, a sum", ANALYST,
     "SELECT region, team, dp_count(1000), dp_sum(team, 1000, 0, 3) FROM id_staff WHERE region > 'a' GROUP BY region, team",
     "SELECT region, team, count(*), sum(team) FROM id_staff WHERE region > 'a' GROUP BY region, team"),
    ("several rows per person, bounded sums", ANALYST,
     "SELECT month, dp_count(1000), dp_sum(amount % 3, 1000, 0, 5) FROM id_visits WHERE site > 's0' GROUP BY month",
     "SELECT month, count(*), sum(least(s, 5)) FROM (SELECT person_id, month, sum(amount % 3) AS s FROM id_visits "
     "WHERE site > 's0' GROUP BY person_id, month) x GROUP BY month"),
    ("all rows, several rows per person (bounded by person)", ANALYST,
     "SELECT dp_count(1000), dp_sum(amount % 3, 1000, 0, 5), dp_sum((amount % 4)::float8, 1000, 0, 5) FROM id_visits "
     "WHERE site > 's0'",
     "SELECT count(*), sum(least(s, 5)), sum(least(f, 5)) FROM (SELECT person_id, sum(amount % 3) AS s, "
     "sum(amount % 4) AS f FROM id_visits WHERE site > 's0' GROUP BY person_id) x"),
    ("per-person subquery", ANALYST,
     "SELECT dp_count(1000), dp_sum(n, 1000, 0, 5) FROM (SELECT person_id, count(*) AS n FROM id_visits "
     "WHERE month > 6 GROUP BY person_id) p",
     "SELECT count(*), sum(least(n, 5)) FROM (SELECT person_id, count(*) AS n FROM id_visits WHERE month > 6 "
     "GROUP BY person_id) p"),
    ("join on the unit", ANALYST,
     "SELECT s.region, dp_count(1000), dp_sum(v.amount % 2, 1000, 0, 5) FROM id_staff s JOIN id_visits v "
     "ON v.person_id = s.person_id WHERE s.age > 30 GROUP BY s.region",
     "SELECT region, count(*), sum(least(a, 5)) FROM (SELECT s.person_id, s.region, sum(v.amount % 2) AS a "
     "FROM id_staff s JOIN id_visits v ON v.person_id = s.person_id WHERE s.age > 30 GROUP BY 1, 2) x GROUP BY region"),
    ("HAVING", ANALYST,
     "SELECT team, dp_count(1000) FROM id_staff GROUP BY team HAVING dp_count(1000) > 100 AND team < 3",
     "SELECT team, count(*) FROM id_staff GROUP BY team HAVING count(*) > 100 AND team < 3"),
    ("ORDER BY ... LIMIT above the release", ANALYST,
     "SELECT region, team, dp_count(1000) AS n FROM id_staff WHERE age < 50 GROUP BY region, team "
     "ORDER BY n DESC, region, team LIMIT 5",
     "SELECT region, team, count(*) AS n FROM id_staff WHERE age < 50 GROUP BY region, team "
     "ORDER BY n DESC, region, team LIMIT 5"),
    ("raw rows through a wrapper and a CTE, as BI tools send", ANALYST,
     "WITH recent AS (SELECT * FROM id_visits WHERE month <= 6) SELECT site, dp_count(1000), "
     "dp_sum(amount % 3, 1000, 0, 5) FROM (SELECT site, amount, person_id FROM recent WHERE site > 's0') "
     "AS virtual_table GROUP BY site",
     "SELECT site, count(*), sum(least(s, 5)) FROM (SELECT person_id, site, sum(amount % 3) AS s FROM id_visits "
     "WHERE month <= 6 AND site > 's0' GROUP BY person_id, site) x GROUP BY site"),
    ("count(*) over it, as a BI tool sends", ANALYST,
     "SELECT count(*), sum(n) FROM (SELECT site, dp_count(1000) AS n FROM id_visits WHERE month <= 6 GROUP BY site) "
     "AS virtual_table",
     "SELECT count(*), sum(n) FROM (SELECT site, count(DISTINCT person_id) AS n FROM id_visits WHERE month <= 6 "
     "GROUP BY site) AS virtual_table"),
    ("keys from the policy's list, numerics of several scales (3, 3.0, 3.00)", ANALYST,
     "SELECT pay, dp_count(1000) FROM id_staff WHERE age > 25 GROUP BY pay",
     "SELECT v, count(s.pay) FROM unnest('{0,1,2,3,4,5,6,7}'::numeric[]) v LEFT JOIN id_staff s "
     "ON s.pay = v AND s.age > 25 GROUP BY v"),
    ("plain count(*), ORDER BY the key DESC LIMIT (cast in the Agg or above the Sort; a sorted plan's LIMIT "
     "stops early)", ANALYST,
     "SELECT age, count(*) FROM id_staff WHERE team < 3 GROUP BY age ORDER BY age DESC LIMIT 3",
     "SELECT age, count(*) FROM id_staff WHERE team < 3 GROUP BY age ORDER BY age DESC LIMIT 3"),
    ("plain count(*) of listed keys, ORDER BY the key DESC LIMIT", ANALYST,
     "SELECT pay, count(*) FROM id_staff WHERE age > 22 GROUP BY pay ORDER BY pay DESC LIMIT 2",
     "SELECT v, count(s.pay) FROM unnest('{0,1,2,3,4,5,6,7}'::numeric[]) v LEFT JOIN id_staff s "
     "ON s.pay = v AND s.age > 22 GROUP BY v ORDER BY v DESC LIMIT 2"),
    ("plain count(*) with its interval (the level split under one above it), ORDER BY the value LIMIT", ANALYST,
     "SELECT region, COUNT(*) AS n, dp_interval_high(COUNT(*)) - dp_interval_low(COUNT(*)) AS width "
     "FROM id_staff WHERE age > 25 GROUP BY region ORDER BY n DESC, region LIMIT 2",
     # At epsilon 100 a count's noise is 0 but for a chance of e^-100: its 95 % interval has width 0.
     "SELECT region, count(*) AS n, 0.0::float8 AS width FROM id_staff WHERE age > 25 GROUP BY region "
     "ORDER BY n DESC, region LIMIT 2"),
    ("listed keys, public table", CURATOR,
     "SELECT r.region, dp_count(1000) FROM id_regions r LEFT JOIN id_staff s ON s.region = r.region AND s.age > 30 "
     "GROUP BY r.region",
     "SELECT r.region, count(*) FROM id_regions r LEFT JOIN id_staff s ON s.region = r.region AND s.age > 30 "
     "GROUP BY r.region"),
    ("public join", CURATOR,
     "SELECT p.label, dp_count(1000) FROM id_staff s JOIN id_people p ON p.person_id = s.person_id "
     "WHERE s.age > 30 GROUP BY p.label",
     "SELECT p.label, count(*) FROM id_staff s JOIN id_people p ON p.person_id = s.person_id "
     "WHERE s.age > 30 GROUP BY p.label"),
    ("a subquery's UNION of texts", CURATOR,
     "SELECT dp_count(1000) FROM (SELECT region FROM id_staff WHERE age > 30 UNION SELECT site FROM id_visits "
     "WHERE month < 4) s",
     "SELECT count(*) FROM (SELECT region FROM id_staff WHERE age > 30 UNION SELECT site FROM id_visits "
     "WHERE month < 4) s"),
    ("a subquery's EXCEPT ALL of integers", CURATOR,
     "SELECT team, dp_count(1000) FROM (SELECT team FROM id_staff WHERE age > 30 EXCEPT ALL SELECT team FROM id_staff "
     "WHERE age > 50) s GROUP BY team",
     "SELECT team, count(*) FROM (SELECT team FROM id_staff WHERE age > 30 EXCEPT ALL SELECT team FROM id_staff "
     "WHERE age > 50) s GROUP BY team"),
    ("a subquery's INTERSECT ALL of texts", CURATOR,
     "SELECT dp_count(1000) FROM (SELECT site FROM id_visits WHERE month <= 3 INTERSECT ALL SELECT site FROM id_visits "
     "WHERE month >= 10) s",
     "SELECT count(*) FROM (SELECT site FROM id_visits WHERE month <= 3 INTERSECT ALL SELECT site FROM id_visits "
     "WHERE month >= 10) s"),
]
# The negative control: EXCEPT ALL keeps, of the equal numerics 3, 3.0 and
# 3.00, the one its plan meets first (and repeats it), so how many of the
# rows have one decimal follows the plan: a fresh release, charged every time.
CONTROL = ("a subquery's EXCEPT ALL of numerics (negative control)", CURATOR,
           "SELECT dp_count(1000) FROM (SELECT pay FROM id_staff WHERE age > 25 EXCEPT ALL SELECT 3.0) s "
           "WHERE scale(pay) = 1",
           "SELECT count(*) FROM (SELECT pay FROM id_staff WHERE age > 25 EXCEPT ALL SELECT 3.0) s WHERE scale(pay) = 1")

# Admitted shapes: answered or refused (ZB003), never another error.
ADMITTED = [
    ("count", "SELECT dp_count(1.0) FROM pw_staff WHERE age > 30"),
    ("group by", "SELECT region, dp_count(1.0), dp_sum(salary, 1.0, 0, 100000) FROM pw_staff GROUP BY region"),
    ("listed keys, table", "SELECT r.region, dp_count(1.0) FROM pw_regions r LEFT JOIN pw_staff s ON s.region = r.region "
                           "GROUP BY r.region"),
    ("listed keys, series", "SELECT m, dp_count(0.5) FROM generate_series(1, 12) m LEFT JOIN pw_visits v ON v.month = m "
                            "GROUP BY m"),
    ("bounding", "SELECT site, dp_count(1.0), dp_sum(amount, 1.0, 0, 100) FROM pw_visits GROUP BY site"),
    ("bounded total", "SELECT dp_count(1.0), dp_sum(amount, 1.0, 0, 100), dp_avg(amount, 1.0, 0, 100) "
                      "FROM pw_visits WHERE month > 3"),
    ("join on the unit", "SELECT dp_sum(v.amount, 1.0, 0, 100) FROM pw_visits v JOIN pw_staff s "
                         "ON s.person_id = v.person_id WHERE s.age > 30"),
    ("public join", "SELECT dp_count(1.0) FROM pw_staff s JOIN pw_people p ON p.person_id = s.person_id "
                    "WHERE p.label = 'l1'"),
    ("a virtual dataset", "SELECT region, count(*) FROM (SELECT * FROM pw_staff WHERE age > 30) AS virtual_table "
                          "GROUP BY region"),
    ("keys from the policy's list", "SELECT age, count(*) FROM pw_staff WHERE salary > 1000 GROUP BY age"),
    ("keys from the policy's list, bounded", "SELECT month, count(*), dp_sum(amount, 1.0, 0, 100) FROM pw_visits "
                                             "WHERE amount > 10 GROUP BY month"),
    ("a public EXISTS", "SELECT dp_count(1.0) FROM pw_staff s WHERE EXISTS (SELECT 1 FROM pw_people p "
                        "WHERE p.person_id = s.person_id AND p.label = 'l1')"),
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
    ("keys from the policy's list", "SELECT s.age, dp_count(1e-9) FROM pw_staff s WHERE s.person_id = 17 AND {c} "
                                    "GROUP BY s.age ORDER BY s.age"),
    ("keys from the policy's list, joined", "SELECT v.month, dp_count(1e-9) FROM pw_visits v JOIN pw_staff s "
                                            "ON s.person_id = v.person_id WHERE s.person_id = 17 AND {c} "
                                            "GROUP BY v.month ORDER BY v.month"),
    ("rescanned aggregate", "SELECT g, x.c FROM generate_series(1, 20) g LEFT JOIN "
                            "(SELECT dp_count(0.01) AS c FROM pw_staff s WHERE {c}) x ON x.c > g"),
    ("raw rows through a wrapper", "SELECT dp_count(1e-9) FROM (SELECT * FROM pw_staff s WHERE s.person_id = 17 AND {c}) w"),
    ("a CTE's division, pulled up", "WITH s AS (SELECT *, 1000 / (salary - 17000) AS z FROM pw_staff) "
                                    "SELECT dp_count(1e-9) FROM s WHERE s.person_id = 17 AND {c} AND s.z >= 0"),
    ("a zone read from a protected column", "SELECT dp_count(1e-9) FROM pw_staff s WHERE s.person_id = 17 AND {c} "
                                            "AND (timestamptz '2024-01-01 00:00+00' AT TIME ZONE s.region) IS NOT NULL"),
    ("a public IN list with a division", "SELECT dp_count(1e-9) FROM pw_staff s WHERE s.person_id = 17 AND {c} "
                                         "AND s.age IN (SELECT 100 / (g - 1) FROM generate_series(1, 2) g)"),
    ("a public EXISTS with a division", "SELECT dp_count(1e-9) FROM pw_staff s WHERE s.person_id = 17 AND {c} "
                                        "AND EXISTS (SELECT 1 FROM pw_people p WHERE p.person_id = s.age "
                                        "AND 100 / (p.person_id - 50) > 0)"),
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


def connect(server, role):
    """A connection that never prepares: psycopg prepares a statement it has
    run 5 times, and a prepared statement keeps its cached plan whatever the
    planner settings say afterwards, so every later plan would be that one."""
    conn = server.connect(role)
    conn.prepare_threshold = None
    return conn


def other_plan(plan):
    """Another plan than `plan`: every join/agg setting flipped, the next scan regime."""
    regime, values = plan
    regimes = list(SCANS)
    return (regimes[(regimes.index(regime) + 1) % len(regimes)], tuple("off" if v == "on" else "on" for v in values))


def normal(rows, ordered):
    """Rows as compared: numbers rounded to integers (a sum's noise is below 0.01)."""
    out = [tuple(int(round(v)) if isinstance(v, (int, float, Decimal)) else v for v in row) for row in rows]
    return out if ordered else sorted(out, key=repr)


def identities(server, su):
    """Each shape under every plan, the release store emptied before each run:
    charged, and the exact answer; then, without emptying it, the same shape
    under another plan: free and identical (identified). The control: charged
    both times."""
    shapes = IDENTIFIED + [CONTROL]
    exact = {name: normal(su.execute(sql).fetchall(), " ORDER BY " in sql) for name, _, _, sql in shapes}
    conns = {role: (connect(server, role), connect(server, role)) for role in (ANALYST, CURATOR)}
    for pair in conns.values():
        for conn in pair:
            # With index scans off, dpnoise's read of the tables' versions
            # (which turns sequential and bitmap scans off itself) is planned
            # with every scan disabled, costed above jit_above_cost, and
            # JIT-compiled: 150-340 ms a statement. JIT changes no answer.
            conn.execute("SET jit = off")
    seen = {name: {"answers": {}, "refused": 0, "wrong": [], "uncharged": [], "repeat": [], "errors": []}
            for name, _, _, _ in shapes}
    ledger = "SELECT (SELECT coalesce(max(id), 0) FROM dpnoise.ledger)"
    try:
        for plan in PLANS:
            for first, second in conns.values():
                first.execute(settings(plan))
                second.execute(settings(other_plan(plan)))
            for name, role, sql, _ in shapes:
                mine, first, second = seen[name], *conns[role]
                before = su.execute(ledger + ", dp_release_store_reset()").fetchone()[0]
                try:
                    got = first.execute(sql).fetchall()
                except psycopg.Error as e:
                    after = su.execute(ledger).fetchone()[0]
                    if e.sqlstate == "ZB003" and after == before:
                        mine["refused"] += 1
                    else:
                        mine["errors"].append(f"[{plan_name(plan)}] {e.sqlstate} {str(e).splitlines()[0]}, "
                                              f"ledger {before} -> {after}")
                    continue
                after = su.execute(ledger).fetchone()[0]
                answer = normal(got, " ORDER BY " in sql)
                mine["answers"].setdefault(repr(answer), []).append(plan_name(plan))
                if answer != exact[name]:
                    mine["wrong"].append(f"[{plan_name(plan)}] {answer} (exact {exact[name]})")
                if after == before:
                    mine["uncharged"].append(plan_name(plan))
                try:
                    again = second.execute(sql).fetchall()
                except psycopg.Error as e:
                    again = f"error {e.sqlstate}"
                final = su.execute(ledger).fetchone()[0]
                # An analyst's rows come in one order under every plan
                # (src/output/order.rs); a curator's, without ORDER BY, in
                # the plan's (a repeat served under a sorted plan comes
                # sorted), compared as a multiset.
                same = again == got
                if role == CURATOR and " ORDER BY " not in sql and isinstance(again, list):
                    same = sorted(map(repr, again)) == sorted(map(repr, got))
                mine["repeat"].append((plan_name(other_plan(plan)), same, final - after, got, again))
    finally:
        for pair in conns.values():
            for conn in pair:
                conn.close()
    n = len(PLANS)
    for name, role, sql, exact_sql in shapes:
        mine = seen[name]
        answered = sum(len(p) for p in mine["answers"].values())
        summary = (f"{answered} answered, {mine['refused']} refused (ZB003, free), "
                   f"{len(mine['answers'])} distinct answer(s)")
        check(f"identity under {n} plans, store emptied before each run: {name}: no error but ZB003",
              not mine["errors"], "; ".join(mine["errors"][:3]) or summary)
        check(f"identity under {n} plans: {name}: each run after the reset charged",
              answered and not mine["uncharged"], f"uncharged under {mine['uncharged'][:3]}" if mine["uncharged"] else "")
        repeats = mine["repeat"]
        if (name, role, sql, exact_sql) == CONTROL:
            check(f"{name}: fresh, its second run under another plan charged too",
                  repeats and all(r[2] > 0 for r in repeats),
                  f"{sum(r[2] > 0 for r in repeats)}/{len(repeats)} second runs charged")
            check(f"{name}: its true answer follows the plan (so a wrong identity would show above)",
                  len(mine["answers"]) > 1,
                  "; ".join(f"{a}: {len(p)} plans, e.g. [{p[0]}]" for a, p in mine["answers"].items()))
            continue
        check(f"identity under {n} plans: {name}: every answer is the exact SQL's {exact[name]}",
              answered and not mine["wrong"],
              "; ".join(mine["wrong"][:3]) + (f" ({len(mine['wrong'])} plans); release: {sql}; exact: {exact_sql}"
                                                if mine["wrong"] else ""))
        bad = [r for r in repeats if not r[1] or r[2] != 0]
        check(f"identity under {n} plans: {name}: identified: the second run, under another plan, free and identical",
              repeats and not bad,
              "; ".join(f"[{r[0]}] charged {r[2]}, {r[3]} then {r[4]}" for r in bad[:3]) + (f" ({len(bad)} runs)" if bad else ""))



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
        with connect(server, "postgres") as su:
            su.execute(SETUP)
            su.execute("VACUUM ANALYZE")  # the visibility map, for index-only scans
            with connect(server, ANALYST) as an:
                check("analyst session", an.execute("SHOW dpnoise.analyst").fetchone()[0] == "on")
                scans_reached(su, "admitted queries and probes",
                              [sql for _, sql in ADMITTED] + [sql.format(c=HOLDS) for _, sql in PROBES],
                              {"pw_staff", "pw_visits"})
                t = time.time()
                walk(an)
                print(f"(the walk: {time.time() - t:.1f} s)", flush=True)
            su.execute(IDENTITY_SETUP)
            su.execute("VACUUM ANALYZE")
            scans_reached(su, "identity shapes", [sql for _, _, sql, _ in IDENTIFIED + [CONTROL]],
                          {"id_staff", "id_visits"})
            t = time.time()
            identities(server, su)
            print(f"(the identities: {time.time() - t:.1f} s)", flush=True)
    except Exception as e:
        check("server, set-up and walk", False, f"{type(e).__name__}: {e}")
    finally:
        server.stop()
    failed = [r for r in RESULTS if not r[0]]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks passed in {time.time() - t0:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
