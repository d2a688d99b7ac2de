#!/usr/bin/env python3
"""dpnoise on a Citus cluster (scripts/citus.sh starts it).

    suite.py test COORDINATOR_PORT WORKER_PORT WORKER_PORT
    suite.py demo COORDINATOR_PORT WORKER_PORT WORKER_PORT

`test` checks, on a table of ROWS rows in 32 shards and a local copy:
- every dpnoise aggregate is split: EXPLAIN VERBOSE shows dp_partials on the
  coordinator, and the partials' own plan Citus's tasks on the workers;
- answers are within the noise of the exact ones, and with the same seed
  the distributed release equals the serial one bit for bit (so the exact
  lattice sums are identical);
- after each statement, the coordinator's ledger has one more row, for all
  its call sites, and every worker's ledger none, for every plan shape (two phases,
  GROUP BY the distribution column, one shard, empty input, per-row);
- a release on a worker, directly or through run_command_on_shards, is
  refused and charges nothing; an analyst gets nothing exact on any node.
Exits non-zero on the first failure.
"""
import math
import re
import sys

import psycopg

ROWS = 100_000
DB = "dpnoise_citus"
FAILED = []


def connect(port, user="postgres"):
    return psycopg.connect(host="127.0.0.1", port=port, dbname=DB, user=user, autocommit=True)


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + (f": {detail}" if detail else ""))
    if not ok:
        FAILED.append(name)


def one(conn, sql, params=None):
    return conn.execute(sql, params).fetchone()


def refused(conn, sql, sqlstate):
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        return e.sqlstate == sqlstate, f"{e.sqlstate}: {str(e).splitlines()[0]}"
    return False, "not refused"


def setup(coord):
    coord.execute("DROP TABLE IF EXISTS staff, staff_local")
    coord.execute("CREATE TABLE staff (id bigint, region text, salary float8, age bigint)")
    coord.execute("SELECT create_distributed_table('staff', 'id', shard_count => 32)")
    coord.execute(
        f"""INSERT INTO staff SELECT i, (ARRAY['north','south','east','west'])[1 + i % 4],
                   round((30000 + 40000 * ((i * 7919) % 1000) / 1000.0)::numeric, 2)::float8, 18 + i % 50
            FROM generate_series(1, {ROWS}) i"""
    )
    coord.execute("CREATE TABLE staff_local AS SELECT * FROM staff")
    coord.execute("SELECT dp_budget_grant('postgres', 1e6, 0.5)")


def ledger_counts(coord, workers):
    return [one(c, "SELECT count(*) FROM dpnoise.ledger")[0] for c in [coord] + workers]


# (query over staff, call sites that release): every plan shape Citus has.
SHAPES = [
    ("SELECT region, dp_count(1.0) FROM staff GROUP BY region", 1),
    ("SELECT dp_count(1.0), dp_sum(salary, 1.0, 0, 100000), dp_avg(salary, 1.0, 0, 100000) FROM staff", 3),
    ("SELECT id, dp_count(1.0), dp_sum(age, 1.0, 0, 100) FROM staff WHERE id < 20 GROUP BY id", 2),
    ("SELECT dp_count(1.0), dp_sum_staircase(salary, 1.0, 100000) FROM staff WHERE id = 5", 2),
    ("SELECT dp_count(salary, 1.0), dp_sum_laplace(age, 1.0, 0, 100) FROM staff WHERE false", 2),
    ("SELECT dp_count(0.5, 1e-6, 'auto'), dp_sum(salary, 1.0, 0, 100000, 1e-6, 'truncated_laplace') FROM staff", 2),
    ("SELECT region, count(*), dp_count(1.0, 'staircase') FROM staff GROUP BY region HAVING count(*) > 0", 1),
    ("SELECT id, dp_laplace(salary, 1.0, 1000) FROM staff WHERE id < 50 ORDER BY id LIMIT 5", 1),
]


def test(ports):
    coord = connect(ports[0])
    workers = [connect(p) for p in ports[1:]]
    setup(coord)

    # Pushed down: the coordinator releases over dp_partials, whose query
    # Citus runs as tasks on the workers (count and sum of lattice steps).
    for sql, _ in SHAPES:
        plan = "\n".join(r[0] for r in coord.execute("EXPLAIN (VERBOSE, COSTS OFF) " + sql))
        inner = re.search(r"dp_partials\('(.*?)'::text\)", plan, re.S)
        ok = inner is not None
        detail = "no dp_partials in the plan"
        if ok:
            text = inner.group(1).replace("''", "'")
            inner_plan = "\n".join(r[0] for r in coord.execute("EXPLAIN (VERBOSE, COSTS OFF) " + text))
            ok = "Task Count" in inner_plan and "Query: SELECT" in inner_plan and "dp_" not in re.sub(
                r"dp_lattice_steps", "", "\n".join(l for l in inner_plan.splitlines() if "Query:" in l))
            detail = "the partials ran on workers, with no release there" if ok else inner_plan[:400]
        check(f"pushed down: {sql[:70]}", ok, detail)

    # Ledger: one row per statement, for all its call sites, on the
    # coordinator only.
    for sql, sites in SHAPES:
        before = ledger_counts(coord, workers)
        coord.execute(sql).fetchall()
        after = ledger_counts(coord, workers)
        delta = [a - b for a, b in zip(after, before)]
        named = one(coord, "SELECT mechanism FROM dpnoise.ledger ORDER BY id DESC LIMIT 1")[0]
        wanted = f"query ({sites} release{'' if sites == 1 else 's'})"
        check(f"ledger {delta}, {named}: {sql[:60]}", delta == [1] + [0] * len(workers) and named == wanted)

    # Within the noise of the exact answers (tails below e^-30).
    exact_count, exact_sum = one(coord, "SELECT count(*), sum(salary) FROM staff_local")
    noisy_count, noisy_sum = one(coord, "SELECT dp_count(1.0), dp_sum_laplace(salary, 1.0, 0, 100000) FROM staff")
    check("dp_count within noise", abs(noisy_count - exact_count) <= 30, f"{noisy_count} vs {exact_count}")
    check("dp_sum_laplace within noise", abs(noisy_sum - exact_sum) <= 30 * 100000, f"{noisy_sum:.1f} vs {exact_sum:.1f}")

    # Same seed, same draws: the distributed release is the serial one.
    for agg in [
        "dp_count(1.0)",
        "dp_sum(salary, 1.0, 0, 100000)",
        "dp_sum(age, 1.0, 0, 100)",
        "dp_avg(salary, 1.0, 20000, 80000)",
        "dp_sum_staircase(salary, 0.5, 70000)",
        "dp_sum(salary, 1.0, 0, 100000, 1e-6, 'gaussian')",
    ]:
        answers = []
        for table in ["staff", "staff_local"]:
            coord.execute("SET dpnoise.seed = '12345'")
            answers.append(coord.execute(f"SELECT region, {agg} FROM {table} GROUP BY region ORDER BY region").fetchall())
        coord.execute("RESET dpnoise.seed")
        check(f"bit-identical to serial: {agg}", answers[0] == answers[1], f"{answers[0][:1]} vs {answers[1][:1]}")

    # A release, and the split's catalog reads, assign no transaction ID: a
    # parallel query's leader (where a release runs) and a standby cannot.
    for table in ["staff_local", "staff"]:
        with connect(ports[0]) as fresh:
            fresh.autocommit = False
            fresh.execute(f"SELECT dp_count(1.0) FROM {table}").fetchall()
            xid = one(fresh, "SELECT pg_current_xact_id_if_assigned()")[0]
            fresh.rollback()
        check(f"no transaction ID assigned by a release over {table}", xid is None, str(xid))

    # A prepared statement: parameters folded at planning (custom plans).
    coord.execute("PREPARE q(float8, bigint) AS SELECT dp_count($1) FROM staff WHERE id < $2")
    got = [one(coord, "EXECUTE q(1.0, 1000)")[0] for _ in range(7)]
    check("prepared statement", all(abs(g - 999) <= 30 for g in got), str(got))

    # A curator that is not a superuser: SELECT on the table and a budget.
    coord.execute("DROP ROLE IF EXISTS citus_curator")
    coord.execute("CREATE ROLE citus_curator LOGIN")
    coord.execute("GRANT SELECT ON staff TO citus_curator")
    coord.execute("SELECT dp_budget_grant('citus_curator', 10)")
    curator = connect(ports[0], "citus_curator")
    before = ledger_counts(coord, workers)
    rows = curator.execute("SELECT region, dp_count(1.0), dp_sum(salary, 1.0, 0, 100000) FROM staff GROUP BY region").fetchall()
    after = ledger_counts(coord, workers)
    check("a non-superuser curator", len(rows) == 4 and [a - b for a, b in zip(after, before)] == [1, 0, 0])

    # One budget authority: a release on a worker is refused, charges nothing.
    for i, w in enumerate(workers):
        ok, detail = refused(w, "SELECT dp_count(1.0) FROM staff", "ZB002")
        check(f"worker {i + 1}: a release over the distributed table is refused", ok, detail)
        ok, detail = refused(w, "SELECT dp_laplace(1.0, 1.0, 1.0)", "ZB002")
        check(f"worker {i + 1}: a per-row release is refused", ok, detail)
    shard_runs = coord.execute(
        "SELECT success FROM run_command_on_shards('staff', $$SELECT dp_count(1.0) FROM %s$$)").fetchall()
    check("run_command_on_shards: every shard refuses", shard_runs and not any(r[0] for r in shard_runs))
    check("no worker ledger has a row", ledger_counts(coord, workers)[1:] == [0] * len(workers))

    analysts(coord, workers, ports)

    print(f"citus suite: {'FAILED ' + str(len(FAILED)) if FAILED else 'all passed'}")
    return 1 if FAILED else 0


def analyst_charges(coord):
    """The analyst's ledger rows: their count and the last one's epsilon."""
    return one(coord, "SELECT count(*), (array_agg(epsilon ORDER BY id DESC))[1] FROM dpnoise.ledger "
                      "WHERE role = 'citus_analyst'::regrole")


def plan_constants(conn, sql):
    """Runs sql with debug_print_plan on, as an analyst may, and returns the
    text and bytea constants of the plans printed (the seals among them)."""
    details = []
    conn.add_notice_handler(lambda d: details.append(d.message_detail or ""))
    conn.execute("SET client_min_messages = log")
    conn.execute("SET debug_pretty_print = off")
    conn.execute("SET debug_print_plan = on")
    try:
        conn.execute(sql).fetchall()
    finally:
        conn.execute("RESET debug_print_plan")
        conn.execute("RESET client_min_messages")
    found = re.findall(r":consttype (\d+) .*?:constisnull false .*?:constvalue \d+ \[ ([^\]]*) \]", re.sub(r"\s+", " ", " ".join(details)))
    value = lambda raw: bytes(int(x) & 0xFF for x in raw.split())[4:]  # a 4-byte varlena header
    texts = [value(raw).decode() for kind, raw in found if kind == "25"]
    seals = [value(raw) for kind, raw in found if kind == "17"]
    # (format_node_dump breaks its lines at spaces only.)
    return [t for t in texts if "count(" in t], seals


def analysts(coord, workers, ports):
    """An analyst over distributed protected tables: admitted queries run
    pushed down (the partials sealed, as the extension's owner), bounded per
    person across shards, charged once on the coordinator; nothing exact on
    any route."""
    coord.execute("DROP TABLE IF EXISTS visits, visits_by_site, open_data, site_list")
    # A person's visits (up to 7 sites each), distributed by the person, and
    # a copy distributed by the site.
    coord.execute("CREATE TABLE visits (person bigint, site text, minutes float8)")
    coord.execute("SELECT create_distributed_table('visits', 'person', shard_count => 8)")
    coord.execute("INSERT INTO visits SELECT i % 1000, 's' || (i % 7), i % 60 FROM generate_series(1, 21000) i")
    coord.execute("CREATE TABLE visits_by_site AS SELECT * FROM visits")
    coord.execute("SELECT create_distributed_table('visits_by_site', 'site', shard_count => 8)")
    coord.execute("CREATE TABLE open_data (id bigint, x float8)")
    coord.execute("SELECT create_distributed_table('open_data', 'id', shard_count => 8)")
    coord.execute("INSERT INTO open_data SELECT i, i FROM generate_series(1, 1000) i")
    coord.execute("CREATE TABLE site_list (site text)")
    coord.execute("SELECT create_reference_table('site_list')")
    coord.execute("INSERT INTO site_list SELECT 's' || i FROM generate_series(0, 9) i")
    coord.execute("GRANT SELECT ON site_list TO PUBLIC")
    coord.execute("SELECT dp_protect('staff', 'id')")
    # A Citus table cannot be tracked for writes: dp_policy says so (NOTICE).
    coord.execute("SELECT dp_policy('staff', 4.0, 1)")
    coord.execute("SELECT dp_domain('staff', 'salary', 0, 100000)")
    coord.execute("SELECT dp_protect('visits', 'person', 3)")
    coord.execute("SELECT dp_protect('visits_by_site', 'person', 3)")
    coord.execute("DROP ROLE IF EXISTS citus_analyst")
    coord.execute("CREATE ROLE citus_analyst LOGIN")
    coord.execute("SELECT dp_analyst('citus_analyst')")
    coord.execute("SELECT dp_budget_grant('citus_analyst', 1000, 0.01)")
    # The suite reads the shard queries and the printed plans (their seals)
    # from LOG messages, which analysts are otherwise refused.
    coord.execute("ALTER ROLE citus_analyst SET dpnoise.analyst_server_messages = on")
    analyst = connect(ports[0], "citus_analyst")

    # Admitted: one ledger row per statement on the coordinator, with the
    # whole epsilon (the bounded query's groups share it, 2.5 in all, not 2.5/3).
    remote = []
    analyst.add_notice_handler(lambda d: remote.append(d.message_primary or ""))
    analyst.execute("SET citus.log_remote_commands = on")
    analyst.execute("SET client_min_messages = log")
    for sql, epsilon, check_rows in [
        ("SELECT dp_count(1.0) FROM staff", 1.0, lambda rows: abs(rows[0][0] - ROWS) <= 30),
        ("SELECT region, dp_count(1.0), dp_sum(salary, 1.0, 0, 100000) FROM staff GROUP BY region", 2.5,
         lambda rows: len(rows) == 4 and all(abs(r[1] - ROWS / 4) <= 30 for r in rows)),
        # A row count written as a sum: on Citus the separate selection stays
        # (its dp_sum_selected becomes the merge's), epsilon 1 + 0.5.
        ("SELECT region, dp_sum(1.0, 1.0, 0, 1) FROM staff GROUP BY region", 1.5,
         lambda rows: len(rows) == 4 and all(abs(r[1] - ROWS / 4) <= 30 for r in rows)),
        # Plain SQL under the table's policy (docs/bi.md: epsilon 4 split in
        # two, one row a person), as a BI tool sends it: the same partials.
        ("SELECT region, COUNT(*) AS n, COUNT(DISTINCT id) AS persons FROM staff GROUP BY region", 4.5,
         lambda rows: len(rows) == 4 and all(isinstance(r[1], int) and abs(r[1] - ROWS / 4) <= 30
                                             and abs(r[2] - ROWS / 4) <= 30 for r in rows)),
        # Each person visits all 7 sites; k = 3 keeps 3 of them: 3000 in all
        # (7000 unbounded), each count's noise at epsilon 1/3.
        ("SELECT site, dp_count(1.0), dp_avg(minutes, 1.0, 0, 60) FROM visits GROUP BY site", 2.5,
         lambda rows: abs(sum(r[1] for r in rows) - 3000) <= 7 * 90 and all(0 <= r[2] <= 60 for r in rows)),
    ]:
        before, lw = analyst_charges(coord), ledger_counts(coord, workers)[1:]
        remote.clear()
        rows = analyst.execute(sql).fetchall()
        shards = [c for c in remote if "issuing" in c and re.search(r"\b(staff|visits)_\d+", c)]
        after, aw = analyst_charges(coord), ledger_counts(coord, workers)[1:]
        check(f"analyst, admitted: {sql[:70]}", check_rows(rows), str(rows[:2]))
        check(f"analyst, pushed down to the shards: {sql[:50]}",
              len(shards) >= 8 and not any(re.search(r"dp_(count|sum|avg|merge|partition)", c) for c in shards),
              shards[0][:160] if shards else "no shard query")
        # Its run time is charged with it (dpnoise.timing_epsilon), on the coordinator.
        t_eps = float(analyst.execute("SELECT current_setting('dpnoise.timing_epsilon')").fetchone()[0])
        check(f"analyst, charged once, epsilon {epsilon} + {t_eps} for its run time: {sql[:50]}",
              after[0] == before[0] + 1 and abs(float(after[1]) - epsilon - t_eps) < 1e-9 and aw == lw, f"{before} -> {after}, workers {lw} -> {aw}")
    analyst.execute("RESET citus.log_remote_commands")
    analyst.execute("RESET client_min_messages")

    # A spread and a median in plain SQL over the distributed table (issue
    # 48: dp_stddev and dp_quantile under the policy, epsilon 2 each): near
    # the truth and charged once, or refused with a hint (0A000: the spread
    # and quantiles are not split across workers yet) and charged nothing;
    # never wrong.
    true_sd, true_median = one(coord, "SELECT stddev(salary), percentile_cont(0.5) WITHIN GROUP (ORDER BY salary) "
                                      "FROM staff_local")
    before = analyst_charges(coord)
    try:
        sd, median = analyst.execute("SELECT stddev(salary) AS sd, percentile_cont(0.5) WITHIN GROUP (ORDER BY salary) "
                                     "AS median FROM staff").fetchone()
        after = analyst_charges(coord)
        check("analyst, plain stddev and median over a distributed table: near the truth, charged once",
              abs(sd - true_sd) < 0.05 * true_sd and abs(median - true_median) < 2000 and after[0] == before[0] + 1,
              f"{sd} {median} (true {true_sd} {true_median}), charges {before} -> {after}")
    except psycopg.Error as e:
        after = analyst_charges(coord)
        check("analyst, plain stddev and median over a distributed table: refused with a hint, charged nothing",
              e.sqlstate in ("ZB003", "0A000") and bool(e.diag.message_hint) and after[0] == before[0],
              f"{e.sqlstate} {str(e).splitlines()[0]}")

    # An average with its interval (docs/bi.md, "Errors and intervals"):
    # the level split in two above the distributed one; answered with the
    # value inside its interval, near the truth, charged once, or refused
    # with a hint and charged nothing; never wrong.
    true_mean = one(coord, "SELECT avg(salary) FROM staff_local")[0]
    before = analyst_charges(coord)
    try:
        mean, low, high = analyst.execute("SELECT AVG(salary) AS mean, dp_interval_low(AVG(salary)) AS low, "
                                          "dp_interval_high(AVG(salary)) AS high FROM staff").fetchone()
        after = analyst_charges(coord)
        check("analyst, plain AVG with its interval over a distributed table: inside, near the truth, charged once",
              low <= float(mean) <= high and abs(float(mean) - float(true_mean)) < 0.05 * float(true_mean)
              and after[0] == before[0] + 1, f"{mean} [{low}, {high}] (true {true_mean}), charges {before} -> {after}")
    except psycopg.Error as e:
        after = analyst_charges(coord)
        check("analyst, plain AVG with its interval over a distributed table: refused with a hint, charged nothing",
              e.sqlstate in ("ZB003", "0A000") and bool(e.diag.message_hint) and after[0] == before[0],
              f"{e.sqlstate} {str(e).splitlines()[0]}")

    # The same analyst under the zCDP accountant: the coordinator charges
    # the statement's rho (the sum, the separate selection of a Citus level
    # and the run time, each at epsilon^2/2), once, the workers nothing;
    # past the rho it is refused, charged nothing.
    coord.execute("DROP ROLE IF EXISTS citus_zanalyst")
    coord.execute("CREATE ROLE citus_zanalyst LOGIN")
    coord.execute("SELECT dp_analyst('citus_zanalyst')")
    coord.execute("SELECT dp_budget_grant_rho('citus_zanalyst', 1.0, 0.01)")
    zanalyst = connect(ports[0], "citus_zanalyst")
    zsql = "SELECT region, dp_sum(salary, 1.0, 0, 100000) FROM staff GROUP BY region"
    lw = ledger_counts(coord, workers)[1:]
    rows = zanalyst.execute(zsql).fetchall()
    zrow = one(coord, "SELECT count(*), sum(rho), sum(epsilon) FROM dpnoise.ledger WHERE role = 'citus_zanalyst'::regrole")
    t_eps = float(zanalyst.execute("SELECT current_setting('dpnoise.timing_epsilon')").fetchone()[0])
    expected = 0.5 + 0.5 * 0.5 * 0.5 + t_eps * t_eps / 2
    check("zCDP analyst: admitted and pushed down, charged its rho once on the coordinator",
          len(rows) == 4 and zrow[0] == 1 and abs(float(zrow[1]) - expected) < 1e-9
          and ledger_counts(coord, workers)[1:] == lw, f"{rows[:1]} {zrow} (expected rho {expected})")
    ok, detail = refused(zanalyst, zsql, "ZB001")
    check("zCDP analyst: past its rho, refused and charged nothing",
          ok and "rho ran out" in detail and one(coord, "SELECT count(*) FROM dpnoise.ledger WHERE role = 'citus_zanalyst'::regrole")[0] == 1,
          detail)
    zanalyst.close()

    # A table that is not distributed by its privacy unit: refused, clearly.
    ok, detail = refused(analyst, "SELECT site, dp_count(1.0) FROM visits_by_site GROUP BY site", "ZB003")
    check("analyst: a table not distributed by its privacy unit is refused", ok and "privacy unit" in detail, detail)
    # A distributed table that is not protected: the analyst's own SELECT privilege.
    ok, detail = refused(analyst, "SELECT dp_count(1.0) FROM open_data", "42501")
    check("analyst: an unprotected table needs SELECT", ok, detail)
    # The partials run as the owner: a public table joined to a protected
    # one still needs the analyst's SELECT, checked when planned.
    before = analyst_charges(coord)
    ok, detail = refused(analyst, "SELECT dp_count(1.0) FROM staff s JOIN open_data o ON o.id = s.id", "42501")
    check("analyst: a public table joined to a protected one needs SELECT", ok and analyst_charges(coord) == before, detail)
    # Distributed tables that are not co-located: refused before anything is charged.
    coord.execute("GRANT SELECT ON open_data TO citus_analyst")
    ok, detail = refused(analyst, "SELECT dp_count(1.0) FROM staff s JOIN open_data o ON o.id = s.id", "ZB003")
    check("analyst: tables that are not co-located are refused, charged nothing",
          ok and "co-located" in detail and analyst_charges(coord) == before, detail)
    coord.execute("REVOKE SELECT ON open_data FROM citus_analyst")
    # A cached plan is checked again when it runs: SELECT through a role,
    # the membership revoked after the statement was prepared.
    coord.execute("DROP TABLE IF EXISTS staff_extra")
    coord.execute("CREATE TABLE staff_extra (id bigint, bonus float8)")
    coord.execute("SELECT create_distributed_table('staff_extra', 'id', colocate_with => 'staff')")
    coord.execute("INSERT INTO staff_extra SELECT i, i FROM generate_series(1, 1000) i")
    coord.execute("DROP ROLE IF EXISTS citus_reader")
    coord.execute("CREATE ROLE citus_reader")
    coord.execute("GRANT SELECT ON staff_extra TO citus_reader")
    coord.execute("GRANT citus_reader TO citus_analyst")
    analyst.execute("PREPARE joined AS SELECT dp_count(1.0) FROM staff s JOIN staff_extra e ON e.id = s.id")
    got = one(analyst, "EXECUTE joined")[0]
    check("analyst: a co-located public table joined on the distribution column", abs(got - 1000) <= 30, str(got))
    coord.execute("REVOKE citus_reader FROM citus_analyst")
    ok, detail = refused(analyst, "EXECUTE joined", "42501")
    check("analyst: a cached plan is checked again after a REVOKE", ok, detail)
    analyst.execute("DEALLOCATE joined")
    # Keys listed by a public table: not yet on a distributed table; refused clearly, charged nothing.
    before = analyst_charges(coord)
    ok, detail = refused(analyst, "SELECT k.site, dp_count(1.0) FROM site_list k LEFT JOIN visits v ON v.site = k.site "
                                  "GROUP BY k.site", "ZB003")
    check("analyst: keys listed by a public table are refused", ok and "listed" in detail and analyst_charges(coord) == before, detail)
    coord.execute("GRANT SELECT ON open_data TO citus_analyst")
    got = one(analyst, "SELECT dp_count(1.0) FROM open_data")[0]
    check("analyst: with SELECT, as a curator would", abs(got - 1000) <= 30, str(got))

    # Nothing exact: a seal read from a printed plan, replayed directly or
    # through a SQL function the planner inlines or a PL/pgSQL EXECUTE; a
    # forged seal; the shards and partial aggregates on the workers.
    texts, seals = plan_constants(analyst, "SELECT dp_count(1.0) FROM staff")
    check("the printed plan shows the partials and their seal", bool(texts) and len(seals) >= 1, f"{len(texts)} texts, {len(seals)} seals")
    text, seal = (texts[0], seals[0]) if texts and seals else ("SELECT count(*) FROM public.staff", b"\0" * 32)
    analyst.execute("CREATE FUNCTION pg_temp.inlined(text, bytea) RETURNS SETOF record LANGUAGE sql "
                    "AS 'SELECT * FROM dp_partials_sealed($1, $2) AS t(n bigint)'")
    analyst.execute("CREATE FUNCTION pg_temp.dynamic(q text, s bytea) RETURNS SETOF record LANGUAGE plpgsql "
                    "AS $f$ BEGIN RETURN QUERY EXECUTE 'SELECT * FROM dp_partials_sealed($1, $2) AS t(n bigint)' USING q, s; END $f$")
    analyst.execute("CREATE TEMP TABLE seen (who text)")
    analyst.execute("CREATE FUNCTION pg_temp.whoami() RETURNS int LANGUAGE plpgsql "
                    "AS $f$ BEGIN INSERT INTO seen SELECT current_user; RETURN 1; END $f$")
    coord.execute("DROP TABLE IF EXISTS secret")
    coord.execute("CREATE TABLE secret (x int)")
    before = ledger_counts(coord, workers) + [analyst_charges(coord)[0]]
    for name, sql, params, state in [
        # The same admitted query in an unreferenced CTE writes the same text
        # in the same planning: its seal must still differ (a fresh nonce).
        ("a leaked seal, replayed beside the query that wrote it",
         "WITH a AS (SELECT dp_count(1.0) FROM staff) SELECT * FROM dp_partials_sealed(%s, %s) AS t(n bigint)", (text, seal), "ZB003"),
        # Code the analyst wrote would run as the extension's owner.
        ("the analyst's function, in a public subquery",
         "SELECT dp_count(1.0) FROM staff s, (SELECT pg_temp.whoami() AS w) x", None, "ZB003"),
        # A table the analyst cannot read, in a sublink of a public subquery.
        ("a table without SELECT, in a sublink",
         "SELECT dp_count(1.0) FROM staff s, (SELECT 1 AS one WHERE EXISTS (SELECT 1 FROM secret)) x", None, "42501"),
        ("a leaked seal, replayed", "SELECT * FROM dp_partials_sealed(%s, %s) AS t(n bigint)", (text, seal), "ZB003"),
        ("a leaked seal, in an inlined SQL function", "SELECT * FROM pg_temp.inlined(%s, %s) AS t(n bigint)", (text, seal), "ZB003"),
        ("a leaked seal, in PL/pgSQL EXECUTE", "SELECT * FROM pg_temp.dynamic(%s, %s) AS t(n bigint)", (text, seal), "ZB003"),
        ("a forged seal", "SELECT * FROM dp_partials_sealed(%s, %s) AS t(n bigint)", (text, b"\0" * 32), "ZB003"),
        ("the seal check itself", "SELECT dp_check_seal(%s, %s)", (text, b"\0" * 32), "42501"),
    ]:
        try:
            rows = analyst.execute(sql, params).fetchall()
            check(f"analyst: {name}", False, f"answered {rows[:1]}")
        except psycopg.Error as e:
            check(f"analyst: {name}", e.sqlstate == state, f"{e.sqlstate}: {str(e).splitlines()[0]}")
    for sql, state in [
        ("SELECT * FROM staff LIMIT 1", "ZB003"),
        ("SELECT worker_partial_agg('dp_count(double precision)'::regprocedure, 1.0) FROM staff", "ZB003"),
        # An exact partial through the function that reads them: refused as
        # the raw sum it is (a plain count, or a sum of a column with a
        # domain, would be answered, with noise, under the table's policy,
        # as if asked directly).
        ("SELECT * FROM dp_partials('SELECT sum(age) FROM staff') AS p(s float8)", "ZB003"),
    ]:
        ok, detail = refused(analyst, sql, state)
        check(f"analyst on the coordinator: {sql[:60]}", ok, detail)
    for i, port in enumerate(ports[1:]):
        # A shard placed on this worker, read directly, and the exact partial aggregate.
        shard = one(coord, "SELECT 'staff_' || min(s.shardid) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) "
                           "JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'staff'::regclass AND n.nodeport = %s",
                    (port,))[0]
        w = connect(port, "citus_analyst")
        for sql in [f"SELECT count(*) FROM {shard}",
                    f"SELECT worker_partial_agg('dp_count(double precision)'::regprocedure, 1.0::float8) FROM {shard}",
                    "SELECT worker_partial_agg('dp_count(double precision)'::regprocedure, 1.0::float8) FROM pg_class"]:
            ok, detail = refused(w, sql, "42501")
            check(f"analyst on worker {i + 1}: {sql[:70]}", ok, detail)
        ok, detail = refused(w, "SELECT dp_check_seal('SELECT count(*) FROM staff', '\\x00')", "42501")
        check(f"analyst on worker {i + 1}: a seal from another session", ok, detail)
    after = ledger_counts(coord, workers) + [analyst_charges(coord)[0]]
    check("analyst refusals charge nothing", after == before, f"{before} -> {after}")
    seen = analyst.execute("SELECT who FROM seen").fetchall()
    check("nothing the analyst wrote ran", seen == [], str(seen))
    for table in ["staff", "visits", "visits_by_site"]:
        coord.execute(f"SELECT dp_unprotect('{table}')")
    coord.execute("DROP TABLE IF EXISTS staff_extra")


def demo(ports):
    coord = connect(ports[0])
    setup(coord)
    print("Exact answers next to dpnoise's on a Citus cluster (coordinator + 2 workers, 32 shards):")
    for sql in [
        """SELECT region, count(*) AS exact_count, dp_count(1.0) AS noisy_count,
                  round(sum(salary)::numeric, 2) AS exact_sum,
                  round(dp_sum_laplace(salary, 1.0, 0, 100000)::numeric, 2) AS noisy_sum
           FROM staff GROUP BY region ORDER BY region""",
        "SELECT salary AS exact_salary, dp_laplace(salary, 1.0, 1000) AS noisy_salary FROM staff ORDER BY id LIMIT 3",
        "SELECT * FROM dp_budget_remaining()",
    ]:
        cur = coord.execute(sql)
        names = [d.name for d in cur.description]
        rows = cur.fetchall()
        widths = [max(len(n), *(len(str(r[i])) for r in rows)) for i, n in enumerate(names)]
        print(" | ".join(n.ljust(w) for n, w in zip(names, widths)))
        print("-+-".join("-" * w for w in widths))
        for r in rows:
            print(" | ".join(str(v).ljust(w) for v, w in zip(r, widths)))
        print()
    print("Ledger rows per node (coordinator, workers):", ledger_counts(coord, [connect(p) for p in ports[1:]]))
    return 0


if __name__ == "__main__":
    mode, *ports = sys.argv[1:]
    sys.exit({"test": test, "demo": demo}[mode]([int(p) for p in ports]))
