-- Time ranges as BI tools write them (issue 48): calls on literals
-- (TO_TIMESTAMP, TO_DATE, casts of text) and the transaction's time (NOW(),
-- CURRENT_DATE) are computed by the gate before it checks the statement
-- (src/gate/constants.rs): admitted, with any error raised from the
-- analyst's text alone, whatever the rows, before any charge.
DO $$ BEGIN
    CREATE ROLE dp_time_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- One visit an hour from 2024-01-01 01:00 UTC: 743 in January, 696 in
-- February, 744 in March.
CREATE TABLE time_visits (person_id int PRIMARY KEY, ts timestamptz, d date, amount float8);
INSERT INTO time_visits SELECT i, timestamptz '2024-01-01 00:00+00' + i * interval '1 hour',
    date '2024-01-01' + (i - 1) / 24, i % 100 FROM generate_series(1, 5000) i;
GRANT SELECT ON time_visits TO dp_time_analyst;
SELECT dp_protect('time_visits', 'person_id'), dp_track('time_visits');
SELECT dp_analyst('dp_time_analyst');
SELECT dp_budget_grant('dp_time_analyst', 1e6, 1);
\c - dp_time_analyst
SET TimeZone = 'UTC';
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset

-- Superset's time series by month over a time range, as it sends it.
SELECT ts, abs(c - CASE extract(month FROM ts) WHEN 1 THEN 743 WHEN 2 THEN 696 ELSE 744 END) < 2 AS near FROM (
  SELECT DATE_TRUNC('MONTH', ts) AS ts, DP_COUNT(1000.0) AS c FROM public.time_visits
  WHERE ts >= TO_TIMESTAMP('2024-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')
    AND ts < TO_TIMESTAMP('2024-04-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')
  GROUP BY DATE_TRUNC('MONTH', ts) ORDER BY 1) s;
-- TO_DATE on a date column, a cast of text to timestamptz.
SELECT abs(dp_count(1000.0) - 696) < 2 AS february FROM time_visits
WHERE d >= TO_DATE('2024-02-01', 'YYYY-MM-DD') AND ts < CAST('2024-03-01'::text AS timestamptz);
-- Relative ranges on the transaction's time (every row is in them).
SELECT abs(dp_count(1000.0) - 5000) < 2 AS all_rows FROM time_visits
WHERE ts >= DATE_TRUNC('day', NOW() + INTERVAL '-100000 day') AND ts < CURRENT_TIMESTAMP;
SELECT abs(dp_count(1000.0) - 5000) < 2 AS all_rows FROM time_visits WHERE d >= CURRENT_DATE - 100000;

-- A column is never computed ahead: date_trunc on a column stays the
-- gate's total form, evaluated on each row.
SELECT outcome($$SELECT dp_count(1.0) FROM time_visits WHERE date_trunc('month', ts) = TO_TIMESTAMP('2024-02-01', 'YYYY-MM-DD')$$);
SELECT count(*) AS answered FROM dp_my_ledger WHERE id > :seen;
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- A constant that cannot be computed fails alike whether or not a row
-- would reach it (no row has amount > 1e9; every row has amount >= 0):
-- with the call left to the executor, the first would succeed and the
-- second fail, a bit about the rows.
SELECT outcome($$SELECT dp_count(1.0) FROM time_visits WHERE amount > 1e9 AND ts >= TO_TIMESTAMP('garbage', 'YYYY')$$);
SELECT outcome($$SELECT dp_count(1.0) FROM time_visits WHERE amount >= 0 AND ts >= TO_TIMESTAMP('garbage', 'YYYY')$$);
SELECT outcome($$SELECT dp_count(1.0) FROM time_visits WHERE amount > 1e9 AND ts >= NOW() - INTERVAL '300000 years'$$);
SELECT outcome($$SELECT dp_count(1.0) FROM time_visits WHERE amount >= 0 AND ts >= NOW() - INTERVAL '300000 years'$$);
-- statement_timestamp() differs within a transaction: left as a call, refused.
SELECT outcome('SELECT dp_count(1.0) FROM time_visits WHERE ts < statement_timestamp()');
-- Only dates and times are computed ahead: other STABLE built-ins stay
-- calls, judged by the checks. A statistics function counts what protected
-- rows did (an index probe per row passing a condition); a function that
-- runs a query would run it, and charge its releases, while the statement
-- is checked. Both refused (ZB003), nothing charged.
SELECT outcome($$SELECT dp_count(1.0), pg_stat_get_live_tuples('time_visits'::regclass) FROM time_visits$$);
CREATE TEMP VIEW time_release AS SELECT dp_count(0.5) AS c FROM time_visits;
SELECT outcome($$SELECT max(amount), table_to_xml('time_release'::regclass, true, false, '') FROM time_visits$$);
-- None of these was charged.
SELECT count(*) AS charged FROM dp_my_ledger WHERE id > :seen;

-- A prepared statement (kept as one generic plan: it has no parameters)
-- sees each transaction's own time, not that of its first plan.
PREPARE recent AS SELECT NOW() AS planned_at, dp_count(1000.0) AS n FROM time_visits WHERE ts < NOW();
-- NOW() is the transaction's start: each EXECUTE below is a transaction.
EXECUTE recent \gset first_
SELECT pg_sleep(0.001);
EXECUTE recent \gset second_
SELECT :'second_planned_at'::timestamptz > :'first_planned_at'::timestamptz AS later,
       abs(:'second_n'::float8 - 5000) < 2 AS second_answered;

-- A dashboard reload: the same time series again is the same release,
-- free (its range is a constant, and date_trunc on timestamptz follows the
-- TimeZone, which joins the release's identity); in another time zone
-- (the range is the same instant) its months are other groups, a new
-- release.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT string_agg(c::text, ',' ORDER BY ts) AS c FROM (
  SELECT DATE_TRUNC('MONTH', ts) AS ts, DP_COUNT(1.0) AS c FROM public.time_visits
  WHERE ts >= TO_TIMESTAMP('2024-01-01 00:00:00 +00', 'YYYY-MM-DD HH24:MI:SS TZH')
  GROUP BY DATE_TRUNC('MONTH', ts)) s \gset first_
SELECT string_agg(c::text, ',' ORDER BY ts) AS c FROM (
  SELECT DATE_TRUNC('MONTH', ts) AS ts, DP_COUNT(1.0) AS c FROM public.time_visits
  WHERE ts >= TO_TIMESTAMP('2024-01-01 00:00:00 +00', 'YYYY-MM-DD HH24:MI:SS TZH')
  GROUP BY DATE_TRUNC('MONTH', ts)) s \gset second_
SELECT :'first_c' = :'second_c' AS same_answer, count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
SET TimeZone = 'America/New_York';
SELECT string_agg(c::text, ',' ORDER BY ts) AS c FROM (
  SELECT DATE_TRUNC('MONTH', ts) AS ts, DP_COUNT(1.0) AS c FROM public.time_visits
  WHERE ts >= TO_TIMESTAMP('2024-01-01 00:00:00 +00', 'YYYY-MM-DD HH24:MI:SS TZH')
  GROUP BY DATE_TRUNC('MONTH', ts)) s \gset third_
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
