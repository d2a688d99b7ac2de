-- dp_avg centred, dp_var, dp_stddev, dp_quantile, dp_median, dp_min,
-- dp_max (issue 36 item 4, issue 39 item 1).
CREATE FUNCTION ledger_rows() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM dpnoise.ledger $$;
-- Fixed outputs under a fixed seed (t.x is i % 10: mean 4.5, variance 8.25, median 4.5).
SET dpnoise.seed = '36';
SELECT round(dp_avg(x, 1.0, 0, 10)::numeric, 6) AS avg,
       round(dp_var(x, 1.0, 0, 10)::numeric, 6) AS var,
       round(dp_stddev(x, 1.0, 0, 10)::numeric, 6) AS sd,
       round(dp_quantile(x, 1.0, 0, 10, 0.25)::numeric, 6) AS q25,
       round(dp_median(x, 1.0, 0, 10)::numeric, 6) AS median,
       round(dp_min(x, 1.0, 0, 10)::numeric, 6) AS min,
       round(dp_max(x, 1.0, 0, 10)::numeric, 6) AS max
FROM t;
-- Each SET restarts the stream: the same answers again.
SET dpnoise.seed = '36';
CREATE TEMP TABLE first_answers AS
SELECT dp_avg(x, 1.0, 0, 10) AS avg, dp_var(x, 1.0, 0, 10) AS var, dp_median(x, 1.0, 0, 10) AS median FROM t;
SET dpnoise.seed = '36';
SELECT f.avg = a.avg AS same_avg, f.var = a.var AS same_var, f.median = a.median AS same_median
FROM first_answers f, (SELECT dp_avg(x, 1.0, 0, 10) AS avg, dp_var(x, 1.0, 0, 10) AS var, dp_median(x, 1.0, 0, 10) AS median FROM t) a;
RESET dpnoise.seed;
-- Near the truth at a large ε, and always inside the feasible range.
SELECT abs(dp_avg(x, 50, 0, 10) - 4.5) < 0.05 AS avg_near,
       abs(dp_var(x, 50, 0, 10) - 8.25) < 0.2 AS var_near,
       abs(dp_stddev(x, 50, 0, 10) - sqrt(8.25)) < 0.05 AS sd_near,
       dp_median(x, 50, 0, 10) BETWEEN 4 AND 5 AS median_near,
       -- Rank 950 falls among the 9s: the groups (8, 9] and (9, 10] are equally far.
       dp_quantile(x, 50, 0, 10, 0.95) BETWEEN 8 AND 10 AS q95_near,
       dp_max(x, 50, 0, 10) BETWEEN 9 AND 10 AS max_near,
       dp_min(x, 50, 0, 10) BETWEEN 0 AND 1 AS min_near
FROM t;
SELECT bool_and(v BETWEEN 0 AND 25) AS var_feasible, bool_and(s BETWEEN 0 AND 5) AS sd_feasible,
       bool_and(m BETWEEN 0 AND 10) AS median_feasible, bool_and(a BETWEEN 0 AND 10) AS avg_feasible
FROM (SELECT dp_var(x, 0.01, 0, 10) v, dp_stddev(x, 0.01, 0, 10) s, dp_median(x, 0.01, 0, 10) m, dp_avg(x, 0.01, 0, 10) a
      FROM t GROUP BY i % 20) g;
-- An empty group releases too (zero values: the mechanisms' noise alone).
SELECT dp_median(x, 1, 0, 10) BETWEEN 0 AND 10 AS empty_median, dp_var(x, 1, 0, 10) BETWEEN 0 AND 25 AS empty_var FROM t WHERE i < 0;
-- Bad parameters: a clear error, a documented SQLSTATE, nothing charged.
SELECT ledger_rows() AS before \gset
SELECT outcome('SELECT dp_quantile(x, 1, 0, 10, 1.5) FROM t');
SELECT outcome('SELECT dp_quantile(x, 1, 0, 10, NULL) FROM t');
SELECT outcome('SELECT dp_quantile(x, 1, 0, 10, ''NaN'') FROM t');
SELECT outcome('SELECT dp_median(x, 0, 0, 10) FROM t');
SELECT outcome('SELECT dp_median(x, 1, 10, 0) FROM t');
SELECT outcome('SELECT dp_var(x, 1, 3, 3) FROM t');
SELECT outcome('SELECT dp_stddev(x, 1, 0, ''Infinity'') FROM t');
SELECT outcome('SELECT dp_max(x, 1, -1e308, 1e308) FROM t');
SELECT outcome('SELECT dp_median(x, 1, 0, x) FROM t');
SELECT outcome('SELECT dp_var(x, 1, 0, 10) OVER () FROM t');
SELECT ledger_rows() - :before AS charged_for_refusals;
-- One charge per release, at the ε written.
SELECT ledger_rows() AS before \gset
SELECT dp_median(x, 0.5, 0, 10) IS NOT NULL AS released FROM t;
SELECT mechanism, epsilon, releases FROM dpnoise.ledger ORDER BY id DESC LIMIT (SELECT ledger_rows() - :before);
-- Parallel workers: the same seed gives the same answers as a serial plan
-- (the sums are exact, the quantile sorts its values).
CREATE TABLE wide AS SELECT (i % 997) * 0.01 AS x FROM generate_series(1, 200000) i;
ANALYZE wide;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT dp_median(x, 1, 0, 10), dp_var(x, 1, 0, 10) FROM wide;
SET dpnoise.seed = '39';
CREATE TEMP TABLE parallel_answers AS
SELECT dp_avg(x, 1, 0, 10) a, dp_var(x, 1, 0, 10) v, dp_median(x, 1, 0, 10) m, dp_max(x, 1, 0, 10) mx FROM wide;
SET max_parallel_workers_per_gather = 0;
SET dpnoise.seed = '39';
CREATE TEMP TABLE serial_answers AS
SELECT dp_avg(x, 1, 0, 10) a, dp_var(x, 1, 0, 10) v, dp_median(x, 1, 0, 10) m, dp_max(x, 1, 0, 10) mx FROM wide;
SELECT p.a = s.a AS same_avg, p.v = s.v AS same_var, p.m = s.m AS same_median, p.mx = s.mx AS same_max
FROM parallel_answers p, serial_answers s;
RESET dpnoise.seed;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE wide;
-- The split and the error, before spending anything.
SELECT units, epsilon_split, round(std_dev::numeric, 4) AS std_dev FROM dp_aggregate_accuracy('avg', 1, 0, 100, 1000);
SELECT units, epsilon_split, round(std_dev::numeric, 4) AS std_dev FROM dp_aggregate_accuracy('var', 1, 0, 100, 1000);
SELECT units, epsilon_split, round(mean_abs_error::numeric, 4) AS mean_abs, round(std_dev::numeric, 4) AS std_dev, ci_half_width
FROM dp_aggregate_accuracy('quantile', 1, 0, 100, 1000);
SELECT outcome($$SELECT * FROM dp_aggregate_accuracy('max', 1, 0, 100, 1000)$$);
SELECT outcome($$SELECT * FROM dp_query_accuracy('avg', 1, ARRAY['t'])$$);
-- Analysts: admitted over a table of one row per person, and where the
-- gate bounds a person's rows (several per person, issue 45 item 2): each
-- person adds one value to a group, their own quantile at the aggregate's
-- p (dp_median: their median), or for dp_var and dp_stddev one of their
-- rows drawn by the choice key. 200 persons with 10 stays each (0 to 14
-- nights, nearly all distinct: the exponential mechanism's answer among
-- tied values is another matter), and one person with 2000 stays of 100
-- nights, who moves the median and the variance of the rows far, and
-- those of persons by little.
DO $$ BEGIN
    CREATE ROLE dp_aggs_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE members (person_id int PRIMARY KEY, age float8);
INSERT INTO members SELECT i, 20 + i % 50 FROM generate_series(1, 2000) i;
CREATE TABLE stays (person_id int, nights float8);
INSERT INTO stays SELECT i % 200, (i * 7919) % 1400 / 100.0 FROM generate_series(1, 2000) i;
INSERT INTO stays SELECT 9999, 100 FROM generate_series(1, 2000);
SELECT dp_protect('members', 'person_id'), dp_protect('stays', 'person_id');
SELECT dp_analyst('dp_aggs_analyst');
SELECT dp_budget_grant('dp_aggs_analyst', 1000, 1);
-- The truths: over rows, and over each person's own median.
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY nights) AS row_median,
       var_pop(nights) AS row_variance FROM stays \gset
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY m) AS person_median
FROM (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY nights) m FROM stays GROUP BY person_id) p \gset
SELECT :row_median - :person_median >= 3 AS one_person_moves_the_row_median,
       :row_variance > 1000 AS one_person_moves_the_row_variance;
-- The per-person step itself: a person's own quantile by nearest rank,
-- from values held in memory (101 rows) and by bisection over the run
-- (10 001 rows, past the 8 192 held), in any order of the rows; and one
-- of their rows, the same whatever the order.
SELECT n, p, max(q) AS own_quantile, count(q) AS rows_carrying_it
FROM (SELECT n, p, dp_bound_quantile(0, 1, v, p) OVER (PARTITION BY n, p ORDER BY 0) AS q
      FROM (SELECT n, p::float8, ((i * 7919) % n)::float8 AS v FROM (VALUES (101), (10001)) s(n),
            (VALUES (0.0), (0.5), (0.99), (1.0)) t(p), generate_series(0, n - 1) i) r) w
GROUP BY n, p ORDER BY n, p;
SELECT count(DISTINCT q) AS one_row_whatever_the_order, bool_and(q BETWEEN 0 AND 10000 AND q = floor(q)) AS one_of_the_values
FROM (SELECT o, max(q) AS q
      FROM (SELECT o, dp_bound_row(42, 1, v) OVER (PARTITION BY o ORDER BY 0) AS q
            FROM (SELECT o, ((i * 7919) % 10001)::float8 AS v FROM generate_series(1, 3) o, generate_series(0, 10000) i
                  ORDER BY o, md5((i * o)::text)) r) w GROUP BY o) x;
\c - dp_aggs_analyst
\set VERBOSITY terse
SELECT dp_median(age, 1, 0, 100) BETWEEN 0 AND 100 AS median_admitted,
       dp_var(age, 1, 0, 100) BETWEEN 0 AND 2500 AS var_admitted,
       dp_avg(age, 1, 0, 100) BETWEEN 0 AND 100 AS avg_admitted
FROM members;
SELECT epsilon_spent AS before FROM dp_my_budget \gset
-- At ε = 50 the noise is small: the answers are those of persons, the
-- heavy person one value among 201 (a rewrite that let every row in
-- gives about 14 and 2000).
SELECT abs(dp_median(nights, 50, 0, 100) - :person_median) <= 1.5 AS median_of_persons,
       dp_var(nights, 50, 0, 100) < 200 AS variance_of_persons,
       dp_stddev(nights, 50, 0, 100) < sqrt(200) AS stddev_of_persons,
       dp_max(nights, 50, 0, 100) < 20 AS max_of_persons,
       dp_min(nights, 50, 0, 100) <= 1.5 AS min_of_persons,
       dp_quantile(nights, 50, 0, 100, 0.9) < 20 AS quantile_of_persons
FROM stays;
SELECT epsilon_spent - :before AS charged FROM dp_my_budget;
-- Grouped: a person adds to at most k groups (k = 1 here), each spending its share.
SELECT count(*) <= 2 AS groups_shown, bool_and(m BETWEEN 0 AND 100) AS in_bounds
FROM (SELECT person_id % 2 AS g, dp_median(nights, 5, 0, 100) AS m FROM stays GROUP BY person_id % 2) q;
-- Refused before any charge: p that is not a constant in [0, 1].
SELECT epsilon_spent AS before FROM dp_my_budget \gset
SELECT outcome('SELECT dp_quantile(nights, 1, 0, 14, 1.5) FROM stays');
SELECT outcome('SELECT dp_quantile(nights, 1, 0, 14, (SELECT 0.5)) FROM stays');
SELECT epsilon_spent - :before AS charged_for_refusals FROM dp_my_budget;
SELECT dp_avg(nights, 1, 0, 14) BETWEEN 0 AND 14 AS bounded_avg_admitted FROM stays;
\c - postgres
SELECT dp_analyst('dp_aggs_analyst', false);
SELECT dp_unprotect('members'), dp_unprotect('stays');
DROP TABLE members, stays;
DROP ROLE dp_aggs_analyst;
