#!/usr/bin/env python3
"""A BI tool's plain SQL, replayed as an analyst, on a running server.

    bi.py PORT

The statements Apache Superset 6.1 sent for a bar chart with COUNT(*), a
time series by month over a time range, a big number, a table chart with
SUM and AVG, a filter on region and SQL Lab (../shared/bi/superset-6.1.md),
with their default metrics in place of the custom dp_* ones, and shapes
Metabase and Grafana send (a virtual dataset, a question on a saved
question and a saved question as a CTE among them), replayed through psycopg as an analyst over a
protected `visits` table (several rows per person) with a privacy policy
(docs/bi.md). Checks:
- each statement is answered; counts are integers (bigint), near the truth
  the noise allows;
- the whole replay again (a dashboard reload, Explore's second send)
  charges nothing and gives the same answers;
- a malformed time literal is refused before any charge (22007), with
  rows in its range and without;
- dp_error beside a bar chart's counts holds the true counts at 95 %
  (pooled over groups and 200 runs with a write between them), and charges
  nothing more; half the error fails that check;
- dp_interval_low and dp_interval_high beside AVG and STDDEV hold the
  noiseless values at 95 % and charge nothing more; a tenth of them fails
  that check;
- the filter-value query over the protected table shows the keys private
  partition selection keeps, charged once, or, for a column with a list
  of values, the list, free; a raw preview is refused before any charge
  (ZB003).
Exits non-zero on a failure.
"""
import sys

import psycopg

FAILED = []
ANALYST = "dp_bi_analyst"


def check(name, ok, detail=""):
    print(("PASS  " if ok else "FAIL  ") + name + (f": {detail}" if detail else ""))
    if not ok:
        FAILED.append(name)


def connect(port, user="postgres", dbname="dpnoise_bi"):
    return psycopg.connect(host="127.0.0.1", port=port, dbname=dbname, user=user, autocommit=True)


# Superset's statements (each preceded by `set search_path = "public"`),
# Metabase's and Grafana's. The time range covers 2024-01 to 2024-06.
RANGE = ("ts >= TO_TIMESTAMP('2024-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') "
         "AND ts < TO_TIMESTAMP('2024-07-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')")
CHARTS = {
    "superset bar chart COUNT(*)":
        "SELECT site AS site, COUNT(*) AS count FROM public.visits GROUP BY site ORDER BY count DESC LIMIT 10000",
    "superset time series by month, time range":
        "SELECT DATE_TRUNC('MONTH', ts) AS ts, COUNT(*) AS count FROM public.visits WHERE " + RANGE +
        " GROUP BY DATE_TRUNC('MONTH', ts) ORDER BY count DESC LIMIT 10000",
    "superset big number":
        "SELECT COUNT(*) AS count FROM public.visits LIMIT 50000",
    "superset table SUM and AVG":
        'SELECT region AS region, SUM(amount) AS "SUM(amount)", AVG(amount) AS "AVG(amount)" FROM public.visits '
        'GROUP BY region ORDER BY "SUM(amount)" DESC LIMIT 1000',
    "superset filter applied":
        "SELECT site AS site, COUNT(*) AS count FROM public.visits WHERE region IN ('north') "
        "GROUP BY site ORDER BY count DESC LIMIT 10000",
    "metabase count":
        'SELECT COUNT(*) AS "count" FROM "public"."visits"',
    "metabase sum by site":
        'SELECT "public"."visits"."site" AS "site", SUM("public"."visits"."amount") AS "sum" FROM "public"."visits" '
        'GROUP BY "public"."visits"."site" ORDER BY "public"."visits"."site" ASC',
    "metabase count last 30 days":
        'SELECT COUNT(*) AS "count" FROM "public"."visits" WHERE "public"."visits"."ts" >= '
        "DATE_TRUNC('day', (NOW() + INTERVAL '-100000 day')) AND \"public\".\"visits\".\"ts\" < DATE_TRUNC('day', NOW())",
    # A Superset virtual dataset (its SQL wrapped as virtual_table), a
    # Metabase question on a saved question (wrapped as "source"), and a
    # saved question referenced as a CTE: raw rows through a wrapper,
    # taken into the level that aggregates them (src/gate/inline.rs).
    "superset virtual dataset":
        "SELECT site AS site, COUNT(*) AS count FROM (SELECT * FROM public.visits WHERE region = 'south') AS virtual_table "
        "GROUP BY site ORDER BY count DESC LIMIT 10000",
    "metabase question on a saved question":
        'SELECT "source"."region" AS "region", SUM("source"."amount") AS "sum" FROM (SELECT "public"."visits"."region" '
        'AS "region", "public"."visits"."amount" AS "amount" FROM "public"."visits") AS "source" '
        'GROUP BY "source"."region" ORDER BY "source"."region" ASC',
    "metabase saved question as a CTE":
        'WITH "recent" AS (SELECT * FROM "public"."visits" WHERE "ts" >= DATE \'2024-07-01\') '
        'SELECT COUNT(*) AS "count" FROM "recent"',
    "grafana time series":
        "SELECT date_trunc('month', ts) AS \"time\", count(*) AS \"visits\" FROM visits "
        "WHERE ts BETWEEN '2024-01-01T00:00:00Z' AND '2024-06-30T23:59:59Z' GROUP BY 1 ORDER BY 1",
    "grafana stat":
        "SELECT count(*) AS value FROM visits WHERE ts BETWEEN '2024-01-01T00:00:00Z' AND '2024-12-31T23:59:59Z'",
}


def replay(an):
    answers = {}
    for name, sql in CHARTS.items():
        an.execute('set search_path = "public"')
        try:
            answers[name] = an.execute(sql).fetchall()
        except psycopg.Error as e:
            answers[name] = e
    return answers


def errors(su, an):
    """dp_error beside a bar chart's counts: pooled over groups and runs
    (a write between runs, so each is a new release), the share of true
    counts within value ± error is at least the confidence minus three
    standard errors; the error is free; the same with half the error fails
    (the check can fail)."""
    su.execute("""
        CREATE TABLE members (person_id int PRIMARY KEY, site text);
        INSERT INTO members SELECT i, 's' || i % 4 FROM generate_series(1, 2000) i;
        SELECT dp_protect('members', 'person_id');
        SELECT dp_policy('members', 0.5);
    """)
    runs, inside, halved, total, charges = 200, 0, 0, 0, []
    sql = "SELECT site AS site, COUNT(*) AS count, dp_error(COUNT(*)) AS error FROM public.members GROUP BY site"
    for r in range(runs):
        su.execute("INSERT INTO members VALUES (%s, %s)", (10000 + r, f"s{r % 4}"))
        truth = dict(su.execute("SELECT site, count(*) FROM members GROUP BY site").fetchall())
        before = su.execute("SELECT coalesce(sum(epsilon), 0) FROM dpnoise.ledger WHERE role = %s::regrole",
                            (ANALYST,)).fetchone()[0]
        rows = an.execute(sql).fetchall()
        after = su.execute("SELECT coalesce(sum(epsilon), 0) FROM dpnoise.ledger WHERE role = %s::regrole",
                           (ANALYST,)).fetchone()[0]
        charges.append(float(after - before))
        for site, count, error in rows:
            total += 1
            inside += abs(count - truth[site]) <= error
            halved += abs(count - truth[site]) <= error / 2
    share, half = inside / total, halved / total
    floor = 0.95 - 3 * (0.95 * 0.05 / total) ** 0.5
    check("dp_error: value ± error holds the true count at 95 % (three standard errors)",
          share >= floor, f"{share:.3f} of {total} (floor {floor:.3f})")
    check("dp_error: with half the error the same check fails", half < floor, f"{half:.3f} of {total}")
    check("dp_error: charges nothing beyond the counts (0.5 + selection + run time a statement)",
          all(abs(c - charges[0]) < 1e-9 for c in charges) and charges[0] <= 1.2, f"{sorted(set(charges))}")


def intervals(su, an):
    """dp_interval_low and dp_interval_high beside an AVG and a STDDEV over
    one row per person, and an AVG and a STDDEV over several rows per
    person (R = 3; each person's fare the same on all their rows):
    pooled over groups and runs (a write between runs), the share of
    noiseless values (computed by the superuser: each person's values
    clamped to the domain, over several rows a person's mean at most R of
    their rows' weight) within [low, high] is at least the confidence minus
    three standard errors; the value lies inside its interval; the same
    statement without the intervals is charged as much. A tenth of the
    interval fails the check (it can fail)."""
    su.execute("""
        CREATE TABLE incomes (person_id int PRIMARY KEY, site text, amount float8);
        INSERT INTO incomes SELECT i, 's' || i % 4, (i * 37 % 1000) / 10.0 + i % 4 * 10 FROM generate_series(1, 2000) i;
        SELECT dp_protect('incomes', 'person_id');
        SELECT dp_policy('incomes', 1.0);
        SELECT dp_domain('incomes', 'amount', 0, 100);
        CREATE TABLE trips (person_id int, site text, amount float8);
        INSERT INTO trips SELECT i % 1500, 's' || i % 4, (i * 37 % 600) / 10.0 FROM generate_series(1, 6000) i;
        SELECT dp_protect('trips', 'person_id', 4);
        SELECT dp_policy('trips', 1.0, 3);
        SELECT dp_domain('trips', 'amount', 0, 50);
        CREATE TABLE rides (person_id int, site text, fare float8);
        INSERT INTO rides SELECT i % 1500, 's' || i % 4, (i % 1500) % 90 - 10 FROM generate_series(1, 6000) i;
        SELECT dp_protect('rides', 'person_id', 4);
        SELECT dp_policy('rides', 20.0, 3);
        SELECT dp_domain('rides', 'fare', 0, 60);
    """)
    su.execute(f"SELECT dp_budget_grant('{ANALYST}', 5000, 0.01)")
    one = ("SELECT site, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS al, dp_interval_high(AVG(amount)) AS ah, "
           "STDDEV(amount) AS s, dp_interval_low(STDDEV(amount)) AS sl, dp_interval_high(STDDEV(amount)) AS sh "
           "FROM public.incomes GROUP BY site")
    several = ("SELECT site, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS al, dp_interval_high(AVG(amount)) AS ah "
               "FROM public.trips GROUP BY site")
    spread = ("SELECT site, STDDEV(fare) AS s, dp_interval_low(STDDEV(fare)) AS sl, dp_interval_high(STDDEV(fare)) AS sh "
              "FROM public.rides GROUP BY site")
    ledger = "SELECT coalesce(sum(epsilon), 0) FROM dpnoise.ledger WHERE role = %s::regrole"
    runs = 100
    inside, tenth, total, outside_value, charges = 0, 0, 0, 0, set()
    for r in range(runs):
        su.execute("INSERT INTO incomes VALUES (%s, %s, %s)", (10000 + r, f"s{r % 4}", float(r % 100)))
        su.execute("INSERT INTO trips VALUES (%s, %s, %s)", (90000 + r, f"s{r % 4}", float(r % 60)))
        # A person's fare is the same on each of their rows: whichever row
        # the bounding reads, the person's value is known.
        su.execute("INSERT INTO rides VALUES (%s, %s, %s)", (90000 + r, f"s{r % 4}", float(r % 70)))
        truth_spread = dict(su.execute(
            "SELECT site, stddev_pop(least(greatest(f, 0), 60)) FROM (SELECT DISTINCT person_id, site, fare f "
            "FROM rides) p GROUP BY site").fetchall())
        truth_one = {site: (mean, sd) for site, mean, sd in su.execute(
            "SELECT site, avg(least(greatest(amount, 0), 100)), stddev_pop(least(greatest(amount, 0), 100)) "
            "FROM incomes GROUP BY site").fetchall()}
        truth_several = dict(su.execute(
            "SELECT site, sum(m * least(n, 3)) / sum(least(n, 3)) FROM (SELECT person_id, site, count(amount) n, "
            "avg(least(greatest(amount, 0), 50)) m FROM trips GROUP BY 1, 2) p GROUP BY site").fetchall())
        before = su.execute(ledger, (ANALYST,)).fetchone()[0]
        rows_one = an.execute(one).fetchall()
        mid = su.execute(ledger, (ANALYST,)).fetchone()[0]
        rows_several = an.execute(several).fetchall()
        after = su.execute(ledger, (ANALYST,)).fetchone()[0]
        charges.add((round(float(mid - before), 9), round(float(after - mid), 9)))
        cases = []
        for site, a, al, ah, s, sl, sh in rows_one:
            cases += [(truth_one[site][0], a, al, ah), (truth_one[site][1], s, sl, sh)]
        for site, a, al, ah in rows_several:
            cases.append((float(truth_several[site]), float(a), al, ah))
        for site, sd, sl, sh in an.execute(spread).fetchall():
            cases.append((float(truth_spread[site]), float(sd), sl, sh))
        for true, value, low, high in cases:
            total += 1
            inside += low <= true <= high
            outside_value += not (low <= value <= high)
            tenth += value - (value - low) / 10 <= true <= value + (high - value) / 10
    share, narrow = inside / total, tenth / total
    floor = 0.95 - 3 * (0.95 * 0.05 / total) ** 0.5
    check("intervals of AVG and STDDEV hold the noiseless values at 95 % (three standard errors)",
          share >= floor, f"{share:.3f} of {total} (floor {floor:.3f})")
    check("intervals: a tenth of each fails the same check", narrow < floor, f"{narrow:.3f} of {total}")
    check("intervals: each value lies inside its interval", outside_value == 0, f"{outside_value} outside")
    bare_one = su.execute(ledger, (ANALYST,)).fetchone()[0]
    su.execute("INSERT INTO incomes VALUES (20000, 's0', 1)")
    an.execute("SELECT site, AVG(amount) AS a, STDDEV(amount) AS s FROM public.incomes GROUP BY site").fetchall()
    bare = float(su.execute(ledger, (ANALYST,)).fetchone()[0] - bare_one)
    check("intervals: a statement charges the same with its intervals and without",
          len(charges) == 1 and abs(next(iter(charges))[0] - bare) < 1e-9, f"{sorted(charges)}, without: {bare}")


def main(port):
    with psycopg.connect(host="127.0.0.1", port=port, dbname="postgres", user="postgres", autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS dpnoise_bi")
        c.execute("CREATE DATABASE dpnoise_bi")
    su = connect(port)
    su.execute(f"DROP ROLE IF EXISTS {ANALYST}")
    su.execute(f"CREATE ROLE {ANALYST} LOGIN")
    su.execute("CREATE EXTENSION dpnoise")
    # 4000 persons, 3 visits each over 2024, at 4 sites in 2 regions.
    su.execute("""
        CREATE TABLE visits (person_id int, ts timestamptz, site text, region text, amount numeric(10, 2));
        INSERT INTO visits SELECT i % 4000, timestamptz '2024-01-01 00:00+00' + (i % 8760) * interval '1 hour',
               's' || i % 4, CASE WHEN i % 4 < 2 THEN 'north' ELSE 'south' END, (i % 500) / 10.0
        FROM generate_series(1, 12000) i;
        ANALYZE visits;
    """)
    su.execute("SELECT dp_protect('visits', 'person_id', 4)")
    su.execute("SELECT dp_policy('visits', 40.0, 3)")
    su.execute("SELECT dp_domain('visits', 'amount', 0, 50)")
    su.execute(f"SELECT dp_analyst('{ANALYST}')")
    su.execute(f"SELECT dp_budget_grant('{ANALYST}', 1000, 0.01)")
    charges = lambda: su.execute(
        "SELECT count(*) FROM dpnoise.ledger WHERE role = %s::regrole", (ANALYST,)).fetchone()[0]

    an = connect(port, ANALYST)
    # SQL Lab asks for its backend first.
    check("SQL Lab's pg_backend_pid()", an.execute("SELECT pg_backend_pid()").fetchone()[0] > 0)
    before = charges()
    first = replay(an)
    failed = {n: str(a).splitlines()[0] for n, a in first.items() if isinstance(a, Exception)}
    check(f"each of {len(CHARTS)} chart statements is answered", not failed, str(failed))
    charged = charges() - before
    # Superset's big number and Metabase's count are one release (a LIMIT
    # only post-processes it): the second is a repeat, free.
    check("the first load is charged once per release", charged == len(CHARTS) - 1, f"{charged} charges")

    # Counts are integers near the truth (ε = 40 per statement: a count's
    # noise is a few persons' rows at most).
    (total,), = su.execute("SELECT count(*) FROM visits").fetchall()
    big = first.get("superset big number")
    ok = isinstance(big, list) and isinstance(big[0][0], int) and abs(big[0][0] - total) <= 100
    check("the big number is an integer near the row count", ok, f"{big} (true {total})")
    bars = first.get("superset bar chart COUNT(*)")
    ok = isinstance(bars, list) and len(bars) == 4 and all(isinstance(n, int) and abs(n - 3000) <= 300 for _, n in bars)
    check("the bar chart's counts are integers near 3000 a site", ok, str(bars))
    series = first.get("superset time series by month, time range")
    ok = isinstance(series, list) and len(series) == 6 and all(isinstance(n, int) for _, n in series)
    check("the time series has the range's six months, as integers", ok, str(series))
    table = first.get("superset table SUM and AVG")
    ok = isinstance(table, list) and len(table) == 2 and all(abs(float(a) - 25) < 3 for _, _, a in table)
    check("the table chart's averages are near the truth (25)", ok, str(table))

    # A dashboard reload: the same answers, nothing charged.
    before = charges()
    second = replay(an)
    charged = charges() - before
    same = [n for n in CHARTS if n not in ("metabase count last 30 days",) and first[n] != second[n]]
    check("a reload repeats every chart for free (NOW() ranges excepted: a new transaction, a new time)",
          not same and charged <= 1, f"{charged} charges; differing: {same}")

    # A malformed time literal: refused before any charge, whatever the rows.
    before = charges()
    states = []
    for cond in ["amount > 1e6", "amount >= 0"]:
        try:
            an.execute(f"SELECT COUNT(*) FROM visits WHERE {cond} AND ts >= TO_TIMESTAMP('2024-13-45', 'YYYY-MM-DD')")
            states.append(None)
        except psycopg.Error as e:
            states.append(e.sqlstate)
    check("a malformed time literal fails alike with and without rows in range, charged nothing",
          states[0] is not None and states[0] == states[1] and charges() == before, str(states))

    # Filter values read from the protected table: the keys private
    # partition selection shows (a subset of the true ones), charged once;
    # a raw preview is refused before any charge.
    before = charges()
    values = an.execute("SELECT region AS region FROM public.visits GROUP BY region ORDER BY region ASC LIMIT 1000").fetchall()
    check("filter values from the protected table are the selected keys, charged once",
          set(values) <= {("north",), ("south",)} and charges() == before + 1, f"{values}")
    # With a list of values (dp_domain with an array), the filter box is
    # filled from the list: every listed site, one without visits among
    # them, free.
    su.execute("SELECT dp_domain('visits', 'site', ARRAY['s0', 's1', 's2', 's3', 's4'])")
    before = charges()
    values = an.execute("SELECT site AS site FROM public.visits GROUP BY site ORDER BY site ASC LIMIT 1000").fetchall()
    check("filter values of a listed column are its list, free",
          values == [(f"s{i}",) for i in range(5)] and charges() == before, f"{values}")
    # The bar chart of that column then shows every listed site (s4, with
    # no visits, near 0), its keys from the list: no partition selection,
    # so no selection δ (the run time's 1e-7 alone).
    before = su.execute("SELECT coalesce(max(id), 0) FROM dpnoise.ledger").fetchone()[0]
    bars = an.execute("SELECT site AS site, COUNT(*) AS count FROM public.visits GROUP BY site ORDER BY site").fetchall()
    deltas = [d for (d,) in su.execute("SELECT delta FROM dpnoise.ledger WHERE id > %s", (before,)).fetchall()]
    check("a bar chart of a listed column shows every listed key, without selection δ",
          [b[0] for b in bars] == [f"s{i}" for i in range(5)]
          and all(abs(n - 3000) < 600 for _, n in bars[:4]) and abs(bars[4][1]) < 600
          and len(deltas) == 1 and deltas[0] < 1e-6, f"{bars} {deltas}")
    before = charges()
    try:
        an.execute("SELECT * FROM visits LIMIT 1001").fetchall()
        state = None
    except psycopg.Error as e:
        state = e.sqlstate
    check("a raw preview of the protected table is refused (ZB003), charged nothing",
          state == "ZB003" and charges() == before, str(state))

    errors(su, an)
    intervals(su, an)
    an.close()
    su.close()
    print(f"bi: {'all passed' if not FAILED else f'{len(FAILED)} failed'}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
