#!/usr/bin/env python3
"""Repeated releases, on a running server.

    repeat.py PORT

A release asked again is answered identically and free; anything that could
change its true value makes it a new release, with new noise and a charge.
Checks:
- the same query twice: identical answers, charged once;
- the Superset shapes (the query, wrapped with LIMIT 1 and LIMIT 1000, a
  count(*) over it) together charged once, with the query's answers;
- another plan for the same query (parallel, sorted or hashed, GROUP BY
  items in another order) gives the same answers, free;
- two roles asking the same release get the same answer, the second free;
- INSERT, UPDATE, DELETE, TRUNCATE and COPY by another session, and a
  write with the tracking trigger disabled, each make a new release;
- the difference attack (release, add one row, release again) never
  yields the row's exact value;
- a write to a table read only in the call's FILTER makes a new release;
- a type shadowed in pg_temp never runs inside dpnoise's own reads;
- a long write log is compacted into one row, and a release's identity
  (its answer, its being paid) survives the compaction;
- dp_track refuses a partition; a HAVING that splits a group is another release;
- now(), an untracked table, a LIMIT subquery, random(), a whole-row
  comparison, a conversion to text, a write in the same transaction, a
  generic plan's parameter, a set operation that keeps one of several equal
  values of differing bytes: fresh releases, charged every time;
- a set operation over types whose equal values are the same bytes, and the
  same release in both arms of a UNION ALL: one release, charged once;
- custom plans' parameters: same value, same release; another, another;
- an analyst under the gate: repeated statements identical and charged once;
- a repeat is served from the release store, scanning no protected row;
  the store is a superuser's only (42501 even with EXECUTE granted); a
  paid release whose answer is gone is charged again, with fresh noise.
Exits non-zero on a failure.
"""
import sys
import time
from decimal import Decimal

import psycopg

FAILED = []


def check(name, ok, detail=""):
    print(("PASS  " if ok else "FAIL  ") + name + (f": {detail}" if detail else ""))
    if not ok:
        FAILED.append(name)


def connect(port, user="postgres", dbname="dpnoise_repeat"):
    return psycopg.connect(host="127.0.0.1", port=port, dbname=dbname, user=user, autocommit=True)


QUERY = "SELECT region, dp_count(1.0) AS n, dp_sum(salary, 1.0, 0, 200000) AS s FROM staff GROUP BY region"


def main(port):
    with psycopg.connect(host="127.0.0.1", port=port, dbname="postgres", user="postgres", autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS dpnoise_repeat")
        c.execute("CREATE DATABASE dpnoise_repeat")
    su = connect(port)
    for role in ["rep_a", "rep_b", "rep_analyst"]:
        su.execute(f"DROP ROLE IF EXISTS {role}")
        su.execute(f"CREATE ROLE {role} LOGIN")
    # A connection made before the extension exists (checked at the end).
    early = connect(port, "rep_a")
    early.execute("SELECT 1")
    su.execute("CREATE EXTENSION dpnoise")
    for role in ["rep_a", "rep_b", "rep_analyst"]:
        su.execute(f"SELECT dp_budget_grant('{role}', 1000, 1)")
    su.execute("""
        CREATE TABLE staff (id int PRIMARY KEY, region text, team int, salary float8);
        INSERT INTO staff SELECT i, (ARRAY['north', 'south', 'east'])[1 + i % 3], i % 4, 1000 + (i * 7919) % 150000
        FROM generate_series(1, 30000) i;
        CREATE TABLE loose AS SELECT * FROM staff;
        GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON staff, loose TO rep_a, rep_b;
        ANALYZE staff;
        SELECT dp_track('staff');
    """)
    # Exact decimals (numeric), as the ledger keeps them.
    spent = lambda role: su.execute(
        "SELECT coalesce(sum(epsilon * releases), 0) FROM dpnoise.ledger WHERE role = %s::regrole", (role,)).fetchone()[0]
    a = connect(port, "rep_a")
    b = connect(port, "rep_b")
    rows = lambda conn, sql, params=None: sorted(conn.execute(sql, params).fetchall())

    # The same query twice.
    before = spent("rep_a")
    first = rows(a, QUERY)
    after_first = spent("rep_a")
    second = rows(a, QUERY)
    check("the same query twice: identical answers", first == second, f"{first} / {second}")
    check("the same query twice: charged once (2 aggregates, epsilon 1 each)",
          after_first - before == 2 and spent("rep_a") == after_first, f"{before} {after_first} {spent('rep_a')}")

    # Superset's shapes.
    shapes = {
        "LIMIT 1": f"SELECT * FROM ({QUERY}) AS virtual_table LIMIT 1",
        "LIMIT 1000": f"SELECT * FROM ({QUERY}) AS virtual_table LIMIT 1000",
        "count(*)": f"SELECT count(*) FROM ({QUERY}) AS virtual_table",
        "ORDER BY, another alias": f"SELECT region, s, n FROM ({QUERY}) AS v ORDER BY s DESC",
    }
    out = {name: rows(a, sql) for name, sql in shapes.items()}
    check("Superset shapes: no further charge", spent("rep_a") == after_first, f"{spent('rep_a')} vs {after_first}")
    check("Superset shapes: LIMIT 1000 answers the query's values", out["LIMIT 1000"] == first)
    check("Superset shapes: LIMIT 1 is one of the query's rows", len(out["LIMIT 1"]) == 1 and out["LIMIT 1"][0] in first)
    check("Superset shapes: reordered columns carry the same values",
          sorted((r, n, s) for r, s, n in out["ORDER BY, another alias"]) == first)

    # Other plans for the same query.
    plans = [
        "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; "
        "SET min_parallel_table_scan_size = 0",
        "SET enable_hashagg = off",
        "SET enable_sort = off; SET enable_hashagg = on",
    ]
    for settings in plans:
        c = connect(port, "rep_a")
        for s in settings.split("; "):
            c.execute(s)
        got = rows(c, QUERY)
        check(f"another plan ({settings.split(';')[0]}): same answers, free",
              got == first and spent("rep_a") == after_first, f"{got}")
        c.close()
    by_two = "SELECT region, team, dp_count(1.0) FROM staff GROUP BY region, team"
    base = rows(a, by_two)
    base_spent = spent("rep_a")
    swapped = rows(a, by_two + " ORDER BY team, region")
    check("GROUP BY items in another plan order: same answers, free", base == swapped and spent("rep_a") == base_spent)

    # Two roles.
    b_before = spent("rep_b")
    check("another role: the same answers", rows(b, QUERY) == first)
    check("another role: not charged", spent("rep_b") == b_before, f"{b_before} -> {spent('rep_b')}")

    # Repeats are answered from the release store: a served repeat scans no
    # protected row, a fresh one does (the backend's scan counters not yet
    # sent, before and after).
    scans = lambda conn: conn.execute("SELECT pg_stat_get_xact_numscans('staff'::regclass)").fetchone()[0]
    with a.transaction():
        served_scans = -scans(a)
        served = rows(a, QUERY)
        served_scans += scans(a)
    check("a repeat is served from the store: no scan of the protected table", served == first and served_scans == 0,
          f"{served_scans} scans")
    with a.transaction():
        fresh_scans = -scans(a)
        rows(a, QUERY + " HAVING dp_count(1.0) > 0")
        fresh_scans += scans(a)
    check("a new release scans the table (the check above can fail)", fresh_scans > 0, f"{fresh_scans} scans")
    held = su.execute("SELECT count(*), coalesce(sum(rows), 0) FROM dp_release_store()").fetchone()
    check("dp_release_store shows the kept answers to a superuser", held[0] >= 2 and held[1] >= 3, f"{held}")
    for who, grant in (("rep_a", False), ("rep_a with EXECUTE granted", True)):
        if grant:
            su.execute("GRANT EXECUTE ON FUNCTION dp_release_store(), dp_release_store_reset() TO rep_a")
        for fn in ("dp_release_store()", "dp_release_store_reset()"):
            try:
                a.execute(f"SELECT * FROM {fn}").fetchall()
                state = None
            except psycopg.Error as e:
                state = e.sqlstate
            check(f"{who}: {fn} refused (42501)", state == "42501", f"{state}")
    su.execute("REVOKE EXECUTE ON FUNCTION dp_release_store(), dp_release_store_reset() FROM rep_a")
    # A paid release whose answer is gone (evicted, a restart) is charged
    # again with fresh noise, never re-executed for free with the old noise.
    dropped = su.execute("SELECT dp_release_store_reset()").fetchone()[0]
    before = spent("rep_a")
    again = rows(a, QUERY)
    check("after dp_release_store_reset: the paid release is charged again", spent("rep_a") - before == 2,
          f"{dropped} answers dropped, {before} -> {spent('rep_a')}")
    check("after dp_release_store_reset: with fresh noise", again != first, f"{again}")
    check("and its repeat is served again, free", rows(a, QUERY) == again and spent("rep_a") - before == 2)
    first = again
    after_first = spent("rep_a")

    # Writes by another session make a new release.
    writes = {
        "INSERT": "INSERT INTO staff VALUES (1000001, 'north', 1, 5000)",
        "UPDATE": "UPDATE staff SET salary = salary + 1 WHERE id = 1",
        "DELETE": "DELETE FROM staff WHERE id = 2",
        "COPY": None,
    }
    previous = first
    for name, sql in writes.items():
        if sql:
            b.execute(sql)
        else:
            with b.cursor().copy("COPY staff FROM STDIN") as copy:
                copy.write_row((1000002, "south", 2, 7000.0))
        charged = spent("rep_a")
        got = rows(a, QUERY)
        check(f"{name} by another session: new noise", got != previous, f"{got}")
        check(f"{name} by another session: charged", spent("rep_a") == charged + 2, f"{charged} -> {spent('rep_a')}")
        previous = got
    # A superuser writing with the trigger disabled.
    su.execute("ALTER TABLE staff DISABLE TRIGGER dpnoise_track")
    su.execute("INSERT INTO staff VALUES (1000003, 'east', 3, 9000)")
    su.execute("ALTER TABLE staff ENABLE ALWAYS TRIGGER dpnoise_track")
    got = rows(a, QUERY)
    check("a write with the trigger disabled: new noise", got != previous)
    previous = got

    # The difference attack: add one row of known value, release again.
    exact = []
    diffs = []
    count_q = "SELECT dp_sum(salary, 1.0, 0, 200000) FROM staff WHERE region = 'north'"
    for i in range(12):
        before_value = a.execute(count_q).fetchone()[0]
        b.execute("INSERT INTO staff VALUES (%s, 'north', 0, 100000)", (2000000 + i,))
        after_value = a.execute(count_q).fetchone()[0]
        diffs.append(after_value - before_value)
        exact.append(after_value - before_value == 100000)
    check("the difference attack never yields the row's value", not any(exact), f"differences {diffs[:4]}...")

    # TRUNCATE makes a new release (and one over an empty table is still noisy).
    charged = spent("rep_a")
    b.execute("TRUNCATE staff")
    b.execute("INSERT INTO staff SELECT * FROM loose")
    got = rows(a, QUERY)
    check("TRUNCATE and refill: new noise, charged", got != previous and spent("rep_a") == charged + 2)

    # A partition is written through its parent, without its own statement
    # triggers firing: never tracked.
    su.execute("CREATE TABLE parted (id int, v int) PARTITION BY RANGE (id)")
    su.execute("CREATE TABLE parted1 PARTITION OF parted FOR VALUES FROM (0) TO (100)")
    try:
        su.execute("SELECT dp_track('parted1')")
        check("dp_track refuses a partition", False)
    except psycopg.Error as e:
        check("dp_track refuses a partition (42809)", e.sqlstate == "42809", e.sqlstate)

    # HAVING on a group key can split a group (the planner moves it into
    # WHERE): it is part of the identity.
    su.execute("CREATE TABLE signs (f float8); INSERT INTO signs SELECT CASE WHEN i <= 100 THEN '-0' ELSE '0' END::float8 "
               "FROM generate_series(1, 1000) i; GRANT SELECT ON signs TO rep_a; SELECT dp_track('signs')")
    whole = a.execute("SELECT dp_count(0.001) FROM signs GROUP BY f").fetchone()[0]
    charged = spent("rep_a")
    # atan2(0, -1) = pi, atan2(-0, -1) = -pi: a condition on the key that -0 and 0 fail apart.
    part = a.execute("SELECT dp_count(0.001) FROM signs GROUP BY f HAVING atan2(f, -1) > 0").fetchone()[0]
    check("HAVING that splits a group: another release, charged",
          whole - part != 100 and spent("rep_a") == charged + Decimal("0.001"), f"{whole} {part}")

    # A table read in the call's own FILTER (a subquery) versions the release too.
    su.execute("CREATE TABLE flagged (id int PRIMARY KEY, flag int); INSERT INTO flagged SELECT i, i % 2 FROM generate_series(1, 30000) i; "
               "GRANT SELECT ON flagged TO rep_a; SELECT dp_track('flagged')")
    filtered = "SELECT dp_count(0.001) FILTER (WHERE id IN (SELECT id FROM flagged WHERE flag = 1)) FROM staff"
    before = a.execute(filtered).fetchone()[0]
    charged = spent("rep_a")
    su.execute("UPDATE flagged SET flag = 1 WHERE id = 2")
    after = a.execute(filtered).fetchone()[0]
    check("a write to a table read in FILTER: new noise, charged", after - before != 1 and spent("rep_a") == charged + Decimal("0.001"),
          f"{before} {after} {charged} -> {spent('rep_a')}")

    # Names in dpnoise's own reads are PostgreSQL's, whatever the caller's
    # search_path: a type shadowed in pg_temp never runs its CHECK.
    shadow = connect(port, "rep_a")
    shadow.execute("CREATE FUNCTION pg_temp.evil(x pg_catalog.text) RETURNS bool LANGUAGE plpgsql AS "
                   "$$ BEGIN RAISE EXCEPTION 'shadowing type ran as %', current_user; END $$")
    shadow.execute("CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_temp.evil(VALUE))")
    try:
        shadow.execute(QUERY).fetchall()
        check("a type shadowed in pg_temp is not used by dpnoise's reads", True)
    except psycopg.Error as e:
        check("a type shadowed in pg_temp is not used by dpnoise's reads", False, str(e).splitlines()[0])
    shadow.close()

    # The write log is compacted by the ledger worker when a statement finds
    # it long; a release's identity survives the compaction.
    su.execute("CREATE TABLE busy (id int PRIMARY KEY, v float8); INSERT INTO busy SELECT i, i FROM generate_series(1, 1000) i; "
               "GRANT SELECT, UPDATE ON busy TO rep_a, rep_b; SELECT dp_track('busy')")
    for i in range(100):
        b.execute("UPDATE busy SET v = v WHERE id = %s", (i + 1,))
    log_rows = lambda: su.execute("SELECT count(*), sum(n) FROM dpnoise.writes WHERE rel = 'busy'::regclass").fetchone()
    busy_q = "SELECT dp_sum(v, 1.0, 0, 1000) FROM busy"
    before_rows = log_rows()
    first_busy = a.execute(busy_q).fetchone()[0]
    charged = spent("rep_a")
    for _ in range(100):
        if log_rows()[0] == 1:
            break
        time.sleep(0.1)
    after_rows = log_rows()
    check("a long write log is compacted into one row, standing for every write",
          before_rows[0] >= 100 and after_rows == (1, before_rows[1]), f"{before_rows} -> {after_rows}")
    check("after compaction the release is the same, and free",
          a.execute(busy_q).fetchone()[0] == first_busy and spent("rep_a") == charged)

    # Fresh releases: charged every time.
    fresh = {
        "now()": "SELECT dp_count(1.0) FROM staff WHERE id < extract(epoch FROM now())",
        "an untracked table": "SELECT dp_count(1.0) FROM loose",
        "LIMIT in a subquery": "SELECT dp_count(1.0) FROM (SELECT * FROM staff ORDER BY region LIMIT 100) s",
        "random()": "SELECT dp_count(1.0) FROM staff WHERE random() < 2",
        "a whole-row comparison": "SELECT dp_count(1.0) FROM staff x, staff y WHERE y.id = x.id + 1 AND x < y",
        "a conversion to text": "SELECT dp_count(1.0) FROM staff WHERE salary::text LIKE '1%'",
        "a system column": "SELECT dp_count(1.0) FROM staff WHERE xmax = '0'::xid",
        "XMLTABLE": "SELECT dp_count(1.0) FROM staff, XMLTABLE('/a' PASSING CAST('<a>1</a>' AS xml) COLUMNS v int PATH '.') x "
                    "WHERE staff.team = x.v",
        "min over floats in a subquery": "SELECT dp_count(1.0) FROM staff WHERE id < (SELECT min(salary) FROM staff)",
        "a subquery grouping floats": "SELECT dp_count(1.0) FROM (SELECT salary FROM staff GROUP BY salary) s",
        "a subquery's UNION of numerics": "SELECT dp_count(1.0) FROM (SELECT round(salary::numeric, team) v FROM staff "
                                          "UNION SELECT 1000.0) s",
        # INTERSECT ALL and EXCEPT ALL keep which of the equal rows (3.0 or
        # 3.00) the plan meets first: plan-dependent true values.
        "a subquery's EXCEPT ALL of numerics": "SELECT dp_count(1.0) FROM (SELECT round(salary::numeric, team) v FROM staff "
                                               "EXCEPT ALL SELECT 1000.0) s WHERE v::float8 > 2000",
        "a subquery's INTERSECT ALL of floats": "SELECT dp_count(1.0) FROM (SELECT salary * 0 v FROM staff "
                                                "INTERSECT ALL SELECT -0.0::float8) s",
    }
    for name, sql in fresh.items():
        charged = spent("rep_a")
        a.execute(sql).fetchall()
        a.execute(sql).fetchall()
        check(f"{name}: charged every time", spent("rep_a") == charged + 2, f"{charged} -> {spent('rep_a')}")
    # EXCEPT ALL of integers keeps no one of several equal rows that differ:
    # still one release. The same release in both arms of a UNION ALL is
    # one release too, charged once (issue 44, item 5).
    for name, exact_q in [("EXCEPT ALL of integers", "SELECT dp_count(1.0) FROM (SELECT team FROM staff EXCEPT ALL SELECT 1) s"),
                          ("UNION of texts", "SELECT dp_count(1.0) FROM (SELECT region FROM staff UNION SELECT region FROM staff) s")]:
        charged = spent("rep_a")
        first, again = a.execute(exact_q).fetchone(), a.execute(exact_q).fetchone()
        check(f"a subquery's {name}: one release, charged once",
              first == again and spent("rep_a") == charged + 1, f"{first} {again} {charged} -> {spent('rep_a')}")
    union_q = "SELECT dp_count(1.0) FROM staff WHERE team = 3 UNION ALL SELECT dp_count(1.0) FROM staff WHERE team = 3"
    charged = spent("rep_a")
    both = a.execute(union_q).fetchall()
    check("the same release in both arms of a UNION ALL: identical, charged once",
          len(both) == 2 and both[0] == both[1] and spent("rep_a") == charged + 1, f"{both} {charged} -> {spent('rep_a')}")
    with a.transaction():
        a.execute("INSERT INTO staff VALUES (3000000, 'north', 0, 1)")
        charged = spent("rep_a")
        a.execute(QUERY).fetchall()
        a.execute(QUERY).fetchall()
        check("a write in the same transaction: charged every time", spent("rep_a") == charged + 4)

    # Parameters: custom plans identify by value; a generic plan is fresh.
    param_q = "SELECT dp_count(1.0) FROM staff WHERE team = %s"
    charged = spent("rep_a")
    one = a.execute(param_q, (1,), prepare=True).fetchone()
    again = a.execute(param_q, (1,), prepare=True).fetchone()
    other = a.execute(param_q, (2,), prepare=True).fetchone()
    check("a parameter: same value, same release, charged once; another value, another",
          one == again and spent("rep_a") == charged + 2, f"{one} {again} {other} {charged} -> {spent('rep_a')}")
    g = connect(port, "rep_a")
    g.execute("SET plan_cache_mode = force_generic_plan")
    charged = spent("rep_a")
    g.execute(param_q, (1,), prepare=True).fetchone()
    g.execute(param_q, (1,), prepare=True).fetchone()
    check("a generic plan's parameter: charged every time", spent("rep_a") == charged + 2)

    # An analyst under the gate, over a protected table with one row per person.
    su.execute("""
        CREATE TABLE people (person_id int PRIMARY KEY, region text, income float8);
        INSERT INTO people SELECT p, (ARRAY['north', 'south'])[1 + p % 2], p % 50000 FROM generate_series(1, 20000) p;
        SELECT dp_protect('people', 'person_id');
        -- Even with SELECT granted, the gate alone keeps raw rows from an analyst.
        GRANT SELECT ON people TO rep_analyst;
        SELECT dp_track('people');
        SELECT dp_analyst('rep_analyst');
    """)
    an = connect(port, "rep_analyst")
    aq = "SELECT region, dp_count(0.5), dp_sum(income, 0.5, 0, 50000) FROM people GROUP BY region"
    charged = spent("rep_analyst")
    r1 = rows(an, aq)
    mid = spent("rep_analyst")
    r2 = rows(an, aq)
    check("analyst: the same statement twice gives identical answers", r1 == r2, f"{r1} / {r2}")
    check("analyst: charged once", mid > charged and spent("rep_analyst") == mid, f"{charged} {mid} {spent('rep_analyst')}")
    # A row count written dp_sum(1.0, ...) selects its groups by its own
    # noise (dp_sum_selected): repeated, the same groups and values, free.
    rq = "SELECT region, dp_sum(1.0, 1.0, 0, 1) AS n FROM people GROUP BY region"
    charged = spent("rep_analyst")
    r1 = rows(an, rq)
    mid = spent("rep_analyst")
    r2 = rows(an, rq)
    check("analyst: a thresholded row count twice gives identical answers", r1 == r2 and len(r1) == 2, f"{r1} / {r2}")
    check("analyst: a thresholded row count is charged once", mid > charged and spent("rep_analyst") == mid,
          f"{charged} {mid} {spent('rep_analyst')}")
    # The difference attack as an analyst: one person added between two releases.
    exact = []
    sq = "SELECT dp_sum(income, 0.5, 0, 50000) FROM people"
    for i in range(8):
        x = an.execute(sq).fetchone()[0]
        charged = spent("rep_analyst")
        su.execute("INSERT INTO people VALUES (%s, 'north', 40000)", (100000 + i,))
        y = an.execute(sq).fetchone()[0]
        exact.append(y - x == 40000 or spent("rep_analyst") == charged)
    check("analyst: the difference attack never yields the person's value, and pays", not any(exact))
    # An error inside dpnoise's version read (a statement timeout while the
    # write log is locked), caught by an EXCEPTION block, leaves the gate on.
    su.execute("""CREATE FUNCTION try_then_read() RETURNS text LANGUAGE plpgsql AS $$
        BEGIN
            BEGIN
                PERFORM dp_count(0.5) FROM people;
            EXCEPTION WHEN query_canceled THEN NULL;
            END;
            SET LOCAL statement_timeout = 0;
            RETURN (SELECT max(income)::text FROM people);
        END $$""")
    locker = connect(port)
    locker.execute("BEGIN")
    locker.execute("LOCK TABLE dpnoise.writes IN ACCESS EXCLUSIVE MODE")
    try:
        an.execute("SET statement_timeout = '300ms'")
        raw = an.execute("SELECT try_then_read()").fetchone()[0]
        check("an error in the version read leaves the gate on (raw read refused)", False, f"read {raw}")
    except psycopg.Error as e:
        check("an error in the version read leaves the gate on (raw read refused)",
              "timeout" not in str(e) and e.sqlstate != "57014", f"{e.sqlstate} {str(e).splitlines()[0]}")
    finally:
        locker.execute("ROLLBACK")
        an.execute("RESET statement_timeout")

    # dpnoise's own immutable functions leave a query repeatable in every
    # backend: one connected before CREATE EXTENSION, and one that lived
    # through DROP and CREATE EXTENSION (a backend keeps dpnoise's OID until
    # pg_proc changes, which both do).
    probe = "SELECT dp_count(1.0) FROM staff WHERE dp_prior_uniform(0, 120) IS NOT NULL"

    def repeats_free(conn):
        before = spent("rep_a")
        first, second = conn.execute(probe).fetchone()[0], conn.execute(probe).fetchone()[0]
        return first == second and spent("rep_a") == before + 1, f"{first} / {second}, {before} -> {spent('rep_a')}"

    check("a connection older than the extension: a repeat is free", *repeats_free(early))
    su.execute("SET dpnoise.drop_ledger = on")
    su.execute("DROP EXTENSION dpnoise CASCADE")
    su.execute("CREATE EXTENSION dpnoise")
    su.execute("SELECT dp_budget_grant('rep_a', 1000, 1), dp_track('staff')")
    check("a connection that lived through DROP and CREATE EXTENSION: a repeat is free", *repeats_free(early))

    su.close()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed: {FAILED}")
        sys.exit(1)
    print("all repeat checks passed")


if __name__ == "__main__":
    main(int(sys.argv[1]))
