-- A bounded level without GROUP BY keys (issue 47): each person's rows are
-- combined by the person (GROUP BY the privacy unit: dp_person_sum and
-- dp_person_avg, exact), not by the window over person and choice key that
-- grouped levels use. The same answers and the same charges either way
-- (dpnoise.bounding_by_person = off forces the window), and both bound a
-- person: counted once, their sum clamped as one value.
DO $$ BEGIN
    CREATE ROLE dp_total_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 2000 persons with 1 to 5 rows (NULLs, negatives, -0, values that cancel
-- only when summed exactly), and one person with 3000 rows of 100.
CREATE TABLE total_visits (person_id int, amount float8, n bigint);
INSERT INTO total_visits
SELECT p, CASE WHEN j = 1 AND p % 7 = 0 THEN NULL WHEN p % 11 = 0 THEN -0.0
               WHEN p % 13 = 0 THEN (CASE j WHEN 1 THEN 1e17 WHEN 2 THEN -1e17 ELSE 0.1 * j END)
               ELSE (p * 37 + j * 11) % 90 - 20 + 0.1 * j END,
       (p + j) % 40
FROM generate_series(1, 2000) p, generate_series(1, 1 + p % 5) j;
INSERT INTO total_visits SELECT 9999, 100, 1 FROM generate_series(1, 3000);
SELECT dp_protect('total_visits', 'person_id', 3);
SELECT dp_analyst('dp_total_analyst');
SELECT dp_budget_grant('dp_total_analyst', 1e6, 1);
-- The truths: persons, persons with a value, clamped sums and averages of
-- each person's values, summed in numeric (float8's sum of 1e17, 0.3 and
-- -1e17 follows their order).
SELECT count(*) AS persons, count(s) AS with_value,
       sum(greatest(-50, least(s, 100))) FILTER (WHERE s IS NOT NULL) AS clamped_sum,
       sum(greatest(0, least(n, 30))) AS clamped_n,
       avg(greatest(-50, least(a, 100))) FILTER (WHERE a IS NOT NULL) AS average
FROM (SELECT person_id, sum(amount::numeric) s, avg(amount::numeric) a, sum(n) n FROM total_visits GROUP BY person_id) p \gset truth_
-- The statement, and the settings that force workers on a small table.
\set total 'SELECT dp_count(1000) AS c, dp_count(amount, 1000) AS cv, dp_sum(amount, 1000, -50, 100) AS s, dp_sum(n, 1000, 0, 30) AS si, dp_avg(amount, 1000, -50, 100) AS a FROM total_visits'
\set workers 'SET parallel_setup_cost = 0; SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2'
\c - dp_total_analyst
:total \gset by_person_
SELECT epsilon, delta, releases FROM dp_my_ledger ORDER BY id DESC LIMIT 1 \gset by_person_
-- Parallel workers share the sort by person (the planner hook prices their
-- Gather Merge low): forced here on a small table, the same answers.
:workers;
:total \gset parallel_
\c - postgres
ALTER ROLE dp_total_analyst SET dpnoise.bounding_by_person = off;
\c - dp_total_analyst
SHOW dpnoise.bounding_by_person;
:total \gset window_
SELECT epsilon, delta, releases FROM dp_my_ledger ORDER BY id DESC LIMIT 1 \gset window_
-- The window under workers (the leader leaves them the sort).
:workers;
:total \gset parallel_window_
-- At epsilon 1000 a count's noise is 0 and a sum's a few hundredths.
SELECT :by_person_c = :truth_persons AND :window_c = :truth_persons AS persons_counted_once,
       :by_person_cv = :truth_with_value AND :window_cv = :truth_with_value AS with_a_value,
       abs(:by_person_s - :truth_clamped_sum) < 1 AND abs(:window_s - :truth_clamped_sum) < 1 AS sums_clamped_per_person,
       :by_person_si = :truth_clamped_n AND :window_si = :truth_clamped_n AS integer_sums,
       abs(:by_person_a - :truth_average) < 0.01 AND abs(:window_a - :truth_average) < 0.01 AS averages,
       :by_person_epsilon = :window_epsilon AND :by_person_delta = :window_delta
           AND :by_person_releases = :window_releases AS charged_the_same,
       :parallel_c = :truth_persons AND :parallel_window_c = :truth_persons
           AND :parallel_cv = :truth_with_value AND :parallel_window_cv = :truth_with_value
           AND :parallel_si = :truth_clamped_n AND :parallel_window_si = :truth_clamped_n
           AND abs(:parallel_s - :truth_clamped_sum) < 1 AND abs(:parallel_window_s - :truth_clamped_sum) < 1
           AND abs(:parallel_a - :truth_average) < 0.01 AND abs(:parallel_window_a - :truth_average) < 0.01
           AS the_same_under_workers;
\c - postgres
ALTER ROLE dp_total_analyst RESET dpnoise.bounding_by_person;
-- Only a superuser sets it.
SET ROLE dp_total_analyst;
SET dpnoise.bounding_by_person = off;
RESET ROLE;
SELECT dp_analyst('dp_total_analyst', false);
SELECT dp_unprotect('total_visits');
DROP TABLE total_visits;
DROP ROLE dp_total_analyst;
