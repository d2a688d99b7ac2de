#!/usr/bin/env python3
"""Cached plans follow the analyst's settings that shape the query (issue 39).

    prepared.py PORT

An analyst's statement is rewritten with the session's
dpnoise.max_groups_contributed (k) and charged its partition selection at
dpnoise.selection_epsilon / selection_delta. psycopg prepares a statement
after `prepare_threshold` executions; a BI tool then runs the cached plan.
Checks, with automatic preparation (and plan_cache_mode forcing the
generic plan, the plan PostgreSQL would keep):
- after SET dpnoise.max_groups_contributed = 1, the prepared statement
  counts each person in one group (the sum of its groups' counts is the
  persons', not k times it);
- after SET dpnoise.selection_epsilon, the prepared statement is charged
  the new selection ε;
- the statement was prepared (pg_prepared_statements) all along;
- a prepared plain count run 12 times with its value on a tracked table is
  charged once (its plan is made with the values each time); under
  force_generic_plan each run is charged.
Exits non-zero on a failure.
"""
import sys

import psycopg

FAILED = []
ANALYST = "dp_prepared_analyst"
PERSONS = 300


def check(name, ok, detail=""):
    print(("PASS  " if ok else "FAIL  ") + name + (f": {detail}" if detail else ""))
    if not ok:
        FAILED.append(name)


def connect(port, user="postgres"):
    return psycopg.connect(host="127.0.0.1", port=port, dbname="postgres", user=user, autocommit=True)


def main(port):
    admin = connect(port)
    admin.execute("CREATE EXTENSION IF NOT EXISTS dpnoise")
    admin.execute("DROP TABLE IF EXISTS prepared_visits")
    admin.execute(f"DROP ROLE IF EXISTS {ANALYST}")
    admin.execute(f"CREATE ROLE {ANALYST} LOGIN")
    # Each person visits 6 sites (of 6), 2 rows each.
    admin.execute("CREATE TABLE prepared_visits (person_id int, site int)")
    admin.execute(f"INSERT INTO prepared_visits SELECT p, s FROM generate_series(1, {PERSONS}) p, "
                  "generate_series(1, 6) s, generate_series(1, 2) r")
    admin.execute(f"GRANT SELECT ON prepared_visits TO {ANALYST}")
    admin.execute("SELECT dp_protect('prepared_visits', 'person_id', 4)")
    admin.execute(f"SELECT dp_analyst('{ANALYST}')")
    admin.execute(f"SELECT dp_budget_grant('{ANALYST}', 1e9, 1)")

    conn = connect(port, ANALYST)
    conn.prepare_threshold = 2
    conn.execute("SET plan_cache_mode = force_generic_plan")
    query = "SELECT sum(n)::float8 FROM (SELECT site, dp_count(600.0) AS n FROM prepared_visits GROUP BY site) x"
    last_charge = lambda: float(admin.execute(
        "SELECT epsilon FROM dpnoise.ledger WHERE role = %s::regrole ORDER BY id DESC LIMIT 1", (ANALYST,)).fetchone()[0])
    prepared = lambda: conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql").fetchone()[0]

    conn.execute("SET dpnoise.max_groups_contributed = 4")
    at4 = [conn.execute(query).fetchone()[0] for _ in range(5)]
    check("k = 4: each person counts in 4 groups", all(abs(t - 4 * PERSONS) < 20 for t in at4), str(at4))
    check("psycopg prepared the statement", prepared() >= 1, str(prepared()))
    conn.execute("SET dpnoise.max_groups_contributed = 1")
    at1 = [conn.execute(query).fetchone()[0] for _ in range(3)]
    check("after SET dpnoise.max_groups_contributed = 1 the prepared statement runs at k = 1",
          all(abs(t - PERSONS) < 20 for t in at1), str(at1))
    check("still prepared", prepared() >= 1, str(prepared()))
    conn.execute("SET dpnoise.max_groups_contributed = 4")
    back = conn.execute(query).fetchone()[0]
    check("and at k = 4 again after SET back", abs(back - 4 * PERSONS) < 20, str(back))

    # Each statement pays for its run time too (dpnoise.timing_epsilon, timing_delta).
    t_eps, t_delta = (float(conn.execute(f"SELECT current_setting('dpnoise.timing_{x}')").fetchone()[0]) for x in ("epsilon", "delta"))
    # The count selects its groups by its own noise: no selection ε. A sum
    # of a column pays the separate selection's ε on top of its own 600.
    conn.execute(query).fetchone()
    counted = last_charge()
    check("a count that selects its groups by its own noise pays no selection epsilon",
          abs(counted - 600 - t_eps) < 1e-9, str(counted))
    sum_query = "SELECT count(*)::float8 FROM (SELECT site, dp_sum(person_id, 600.0, 0, 1) AS n FROM prepared_visits GROUP BY site) x"
    for _ in range(3):
        conn.execute(sum_query).fetchone()
    before = last_charge()
    conn.execute("SET dpnoise.selection_epsilon = 0.25")
    conn.execute(sum_query).fetchone()
    after = last_charge()
    check("after SET dpnoise.selection_epsilon = 0.25 the prepared statement is charged it",
          abs(before - 600.5 - t_eps) < 1e-9 and abs(after - 600.25 - t_eps) < 1e-9, f"{before} then {after}")
    conn.execute("SET dpnoise.selection_delta = 1e-3")
    conn.execute(query).fetchone()
    delta = float(admin.execute(
        "SELECT delta FROM dpnoise.ledger WHERE role = %s::regrole ORDER BY id DESC LIMIT 1", (ANALYST,)).fetchone()[0])
    check("after SET dpnoise.selection_delta = 1e-3 the prepared statement is charged it", abs(delta - 1e-3 - t_delta) < 1e-12, str(delta))

    # A BI tool's driver keeps a statement prepared and sends it with its
    # values (pgjdbc after 5 uses, psycopg after prepare_threshold): past 5
    # runs PostgreSQL would keep a generic plan, whose releases have no
    # identity. Under plan_cache_mode auto the plan is made with the values
    # every run, so the repeat on a tracked table stays free; forcing the
    # generic plan pays each run.
    admin.execute("DROP TABLE IF EXISTS prepared_people")
    admin.execute("CREATE TABLE prepared_people (person_id int PRIMARY KEY, site int)")
    admin.execute(f"INSERT INTO prepared_people SELECT p, p % 6 FROM generate_series(1, {PERSONS}) p")
    admin.execute(f"GRANT SELECT ON prepared_people TO {ANALYST}")
    admin.execute("SELECT dp_protect('prepared_people', 'person_id')")
    admin.execute("SELECT dp_policy('prepared_people', 1.0)")
    conn.execute("RESET plan_cache_mode")
    conn.prepare_threshold = 0
    rows = lambda: admin.execute("SELECT count(*) FROM dpnoise.ledger WHERE role = %s::regrole", (ANALYST,)).fetchone()[0]
    plain = "SELECT COUNT(*) FROM prepared_people WHERE site = %s"
    before = rows()
    answers = [conn.execute(plain, (3,)).fetchone()[0] for _ in range(12)]
    check("a prepared plain count run 12 times with its value is charged once, the same each time",
          rows() - before == 1 and len(set(answers)) == 1, f"{rows() - before} charges, {sorted(set(answers))}")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    before = rows()
    for _ in range(3):
        conn.execute(plain, (4,)).fetchone()
    check("under force_generic_plan each run is charged (no identity without the values)",
          rows() - before == 3, f"{rows() - before} charges")
    conn.close()
    admin.execute("DROP TABLE prepared_people")
    admin.execute("DROP TABLE prepared_visits")
    admin.close()
    print(f"prepared statements: {'FAILED ' + str(len(FAILED)) if FAILED else 'all passed'}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
