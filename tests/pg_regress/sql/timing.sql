-- The run time as a release (issue 44, item 4): an analyst's fresh
-- statement pays dpnoise.timing_epsilon and dpnoise.timing_delta for its
-- run time and holds its answer for a random delay calibrated to what one
-- protected row can make it do; a repeat served from the store pays
-- nothing and is not held. The delay's distribution is measured by
-- bench/timing.py; here, what can be checked exactly.
DO $$ BEGIN
    CREATE ROLE dp_timing_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE tm_staff (person_id int PRIMARY KEY, region text, salary float8);
INSERT INTO tm_staff SELECT i, (ARRAY['north', 'south'])[1 + i % 2], 1000 * (i % 97) FROM generate_series(1, 2000) i;
SELECT dp_protect('tm_staff', 'person_id'), dp_track('tm_staff');
SELECT dp_analyst('dp_timing_analyst');
SELECT dp_budget_grant('dp_timing_analyst', 1000, 1);
SHOW dpnoise.timing_epsilon;
SHOW dpnoise.timing_delta;
SHOW dpnoise.timing_row_microseconds;
\c - dp_timing_analyst
\set VERBOSITY terse
-- An analyst can neither lower nor lift them.
SELECT outcome('SET dpnoise.timing_epsilon = 0');
SELECT outcome('SET dpnoise.timing_row_microseconds = 0.001');
-- A fresh statement: its releases and its run time, in one charge.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT dp_count(1.0) > 0 AS answered FROM tm_staff;
SELECT region, dp_count(1.0) > 0 AS answered FROM tm_staff GROUP BY region ORDER BY region;
-- Asked again: served from the store, free, not held.
SELECT region, dp_count(1.0) > 0 AS answered FROM tm_staff GROUP BY region ORDER BY region;
SELECT mechanism, epsilon, delta FROM dp_my_ledger WHERE id > :seen ORDER BY id;
\c - postgres
-- A long delay (a row counted as 0.2 s), to see what ends a held statement.
ALTER ROLE dp_timing_analyst SET dpnoise.timing_row_microseconds = 200000;
\c - dp_timing_analyst
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- statement_timeout fires during the delay as it would during the run:
-- the same error, and the statement was paid for before it ran.
SET statement_timeout = '300ms';
SELECT outcome('SELECT dp_count(1.0) > 0 AS answered FROM tm_staff WHERE salary > 5000');
RESET statement_timeout;
-- A cursor's answer stays held through a rolled-back savepoint.
BEGIN;
DECLARE held CURSOR FOR SELECT dp_count(1.0) FROM tm_staff WHERE salary > 6000;
SAVEPOINT s;
SELECT outcome('SELECT 1 / 0');
ROLLBACK TO s;
SET LOCAL statement_timeout = '300ms';
FETCH ALL FROM held;
ROLLBACK;
SELECT mechanism, epsilon, delta FROM dp_my_ledger WHERE id > :seen ORDER BY id;
\c - postgres
ALTER ROLE dp_timing_analyst RESET dpnoise.timing_row_microseconds;
\c - dp_timing_analyst
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- The statement that timed out during its delay stored no answer (a free
-- repeat would tell that its run alone ended before the timeout): asked
-- again, it runs and pays; only then is it served.
SELECT dp_count(1.0) > 0 AS answered FROM tm_staff WHERE salary > 5000;
SELECT dp_count(1.0) > 0 AS answered FROM tm_staff WHERE salary > 5000;
SELECT mechanism, epsilon, delta FROM dp_my_ledger WHERE id > :seen ORDER BY id;
\c - postgres
SELECT dp_unprotect('tm_staff');
DROP TABLE tm_staff;
