-- AT TIME ZONE (issue 48), as Metabase writes it under a report time zone:
-- admitted through its total form (src/total/dates.rs), which gives NULL
-- where PostgreSQL raises (a zone it does not know, a timestamp near its
-- type's ends), so a zone read from a protected column cannot tell its
-- value by an error.
SET TimeZone = 'UTC';
-- The total forms agree with PostgreSQL's wherever it answers: full names,
-- abbreviations (EST, a fixed offset; the session's list first, as
-- PostgreSQL looks them up), POSIX specifications, any case...
SELECT z, bool_and(dp_total_timestamptz_zone(z, t) IS NOT DISTINCT FROM timezone(z, t)) AS tz_same,
       bool_and(dp_total_timestamp_zone(z, t::timestamp) IS NOT DISTINCT FROM timezone(z, t::timestamp)) AS ts_same
FROM unnest(ARRAY['UTC', 'utc', 'America/New_York', 'EST', 'est', 'CET', 'UTC+5', '<+0330>-3:30', 'Europe/Paris']) z,
     unnest(ARRAY[timestamptz '2024-01-15 12:00+00', timestamptz '2024-07-15 12:00+00', 'infinity', '-infinity']) t
GROUP BY z ORDER BY z;
-- ...and give NULL where it raises: an unknown zone, a name over the
-- longest zone name, a timestamp at the end of its type; ±infinity stays,
-- whatever the zone.
SELECT outcome($$SELECT timezone('no such zone', timestamptz '2024-01-01')$$);
SELECT dp_total_timestamptz_zone('no such zone', timestamptz '2024-01-01') IS NULL AS unknown,
       dp_total_timestamptz_zone(repeat('x', 300), timestamptz '2024-01-01') IS NULL AS long_name,
       dp_total_timestamp_zone('UTC', timestamp '294276-12-31 23:59:59') IS NULL AS at_the_end,
       dp_total_timestamptz_zone('no such zone', 'infinity') = 'infinity' AS infinite;

DO $$ BEGIN
    CREATE ROLE dp_zone_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 600 persons, one visit each, every 6 hours from 2024-01-01 UTC; each
-- with a zone of their own, a third of them not a zone at all.
CREATE TABLE zone_visits (person_id int PRIMARY KEY, ts timestamptz, zone text);
INSERT INTO zone_visits SELECT i, timestamptz '2024-01-01 00:00+00' + (i - 1) * interval '6 hours',
    (ARRAY['America/New_York', 'Asia/Tokyo', 'not a zone'])[1 + i % 3]
FROM generate_series(1, 600) i;
-- The true months in New York time (a public table the analyst compares with).
CREATE TABLE zone_truth AS SELECT date_trunc('month', ts AT TIME ZONE 'America/New_York') AS month, count(*) AS n
FROM zone_visits WHERE ts < timestamptz '2024-03-01 00:00+00' GROUP BY 1;
SELECT * FROM zone_truth ORDER BY 1;
GRANT SELECT ON zone_visits, zone_truth TO dp_zone_analyst;
SELECT dp_protect('zone_visits', 'person_id'), dp_policy('zone_visits', 100);
SELECT dp_analyst('dp_zone_analyst');
SELECT dp_budget_grant('dp_zone_analyst', 1e6, 1);
\c - dp_zone_analyst
SET TimeZone = 'UTC';
\set VERBOSITY terse
-- Months in New York time, as Metabase groups them (the first UTC
-- visit falls in December there): near the truth at epsilon 100.
SELECT s.month, abs(s.count - t.n) <= 3 AS near
FROM (SELECT DATE_TRUNC('month', (ts AT TIME ZONE 'America/New_York')) AS month, COUNT(*) AS count
      FROM zone_visits WHERE ts < timestamptz '2024-03-01 00:00+00' GROUP BY 1) s
JOIN zone_truth t ON t.month = s.month ORDER BY 1;
-- A zone read from a column is refused, before any charge, even through
-- the total form written by hand: PostgreSQL reads a zone's file the
-- first time a session uses it, so a zone first met among protected rows
-- would leave, in how long a later lookup takes, which rows reached it.
-- A constant zone is loaded by the gate before any row is read.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT outcome($$SELECT count(*) FROM zone_visits WHERE person_id = 3 AND (ts AT TIME ZONE zone) > timestamp '2000-01-01'$$);
SELECT outcome($$SELECT count(*) FROM zone_visits WHERE person_id = 2 AND (ts AT TIME ZONE zone) > timestamp '2000-01-01'$$);
SELECT outcome($$SELECT count(*) FROM zone_visits WHERE dp_total_timestamptz_zone(zone, ts) IS NULL$$);
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
-- In an analyst's session the total forms know only the zones the gate
-- loaded from statements' constants: here New York (above) and Tokyo,
-- not Cairo, whatever rows were read.
SELECT count(*) > 0 AS answered FROM zone_visits WHERE (ts AT TIME ZONE 'Asia/Tokyo') > timestamp '2000-01-01';
SELECT z, dp_total_timestamptz_zone(z, timestamptz '2024-01-01 00:00+00') AS local
FROM unnest(ARRAY['America/New_York', 'Asia/Tokyo', 'Africa/Cairo']) z ORDER BY 1;
-- A zone is known under the abbreviations it was loaded with: under
-- another list the same name may name another zone, not loaded.
SET timezone_abbreviations = 'Australia';
SELECT dp_total_timestamptz_zone('Asia/Tokyo', timestamptz '2024-01-01 00:00+00') IS NULL AS not_loaded_here;
SELECT count(*) > 0 AS answered FROM zone_visits WHERE (ts AT TIME ZONE 'Asia/Tokyo') > timestamp '2000-01-01';
SELECT dp_total_timestamptz_zone('Asia/Tokyo', timestamptz '2024-01-01 00:00+00') AS loaded_again;
