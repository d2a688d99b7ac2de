-- Intervals of plain aggregates (issue 48, src/gate/policy/split.rs):
-- dp_interval_low and dp_interval_high beside any plain count, sum, avg,
-- variance or stddev, and dp_error beside an avg or a spread, are computed
-- by dp_estimate above the level that releases the value, from the same
-- releases: each drawn and charged once, as the statement without them.
DO $$ BEGIN
    CREATE ROLE dp_interval_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 1000 persons of one row each; 3000 visits, three per person.
CREATE TABLE iv_persons (person_id int PRIMARY KEY, region text, amount float8);
INSERT INTO iv_persons SELECT i, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END, i % 100
FROM generate_series(1, 1000) i;
CREATE TABLE iv_visits (person_id int, site text, amount float8);
INSERT INTO iv_visits SELECT i % 1000 + 1, 's' || i % 3, i % 50 FROM generate_series(1, 3000) i;
GRANT SELECT ON iv_persons, iv_visits TO dp_interval_analyst;
SELECT dp_protect('iv_persons', 'person_id'), dp_protect('iv_visits', 'person_id', 3);
SELECT dp_domain('iv_persons', 'amount', 0, 100), dp_domain('iv_visits', 'amount', 0, 50);
SELECT dp_policy('iv_persons', 100), dp_policy('iv_visits', 100, 3);
SELECT dp_analyst('dp_interval_analyst');
SELECT dp_budget_grant('dp_interval_analyst', 1e6, 1);
\c - dp_interval_analyst
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset

-- A count's interval is its value ± dp_error, the ends as float8.
SELECT DISTINCT n - lo = e AND hi - n = e AS symmetric, pg_typeof(n) AS count_type, pg_typeof(lo) AS end_type,
       e = (SELECT ci_half_width FROM dp_query_accuracy('count', 100, ARRAY['iv_persons'])) AS exact
FROM (SELECT region, COUNT(*) AS n, dp_interval_low(COUNT(*)) AS lo, dp_interval_high(COUNT(*)) AS hi,
             dp_error(COUNT(*)) AS e FROM iv_persons GROUP BY region) q;
-- An average and a standard deviation over one row per person: the value
-- inside its interval, the interval inside the domain, near the truth
-- (means 49 and 50, standard deviation 28.9; ε = 100 split among three).
SELECT region, lo <= a AND a <= hi AND 0 <= lo AND hi <= 100 AS avg_inside, abs(a - 49.5) < 2 AS avg_near,
       slo <= s AND s <= shi AS sd_inside, abs(s - 28.9) < 3 AS sd_near, e = greatest(a - lo, hi - a) AS error_is_wider_side
FROM (SELECT region, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS lo, dp_interval_high(AVG(amount)) AS hi,
             dp_error(AVG(amount)) AS e, STDDEV(amount) AS s, dp_interval_low(STDDEV(amount)) AS slo,
             dp_interval_high(STDDEV(amount)) AS shi
      FROM iv_persons GROUP BY region ORDER BY region) q;
-- Over several rows per person (R = 3), in a BI tool's shape: sorted by
-- the interval, limited, an output of the keys, FILTER and HAVING.
SELECT count(*) AS sites, bool_and(lo <= a AND a <= hi) AS inside, bool_and(up = upper(site)) AS keys
FROM (SELECT site, upper(site) AS up, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS lo,
             dp_interval_high(AVG(amount) FILTER (WHERE amount > 10)) AS hi_filtered,
             dp_interval_high(AVG(amount)) AS hi
      FROM iv_visits WHERE amount >= 0 GROUP BY site HAVING COUNT(*) > 10
      ORDER BY dp_error(AVG(amount)) DESC LIMIT 2) q;
-- A spread over several rows per person: one of each person's values in a
-- group, as dp_var reads it; the value inside its interval, within [0, 25].
SELECT site, lo <= s AND s <= hi AND 0 <= lo AND hi <= 25 AS inside, abs(s - 14.4) < 3 AS near
FROM (SELECT site, STDDEV(amount) AS s, dp_interval_low(STDDEV(amount)) AS lo, dp_interval_high(STDDEV(amount)) AS hi
      FROM iv_visits GROUP BY site ORDER BY site) q;
-- Charged as the same statement without intervals (its ε, split alike).
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT count(*) FROM (SELECT region, AVG(amount), STDDEV(amount) FROM iv_persons WHERE amount < 99 GROUP BY region) q;
SELECT sum(epsilon) AS without FROM dp_my_ledger WHERE id > :seen \gset
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT count(*) FROM (SELECT region, AVG(amount), dp_interval_low(AVG(amount)), STDDEV(amount), dp_error(STDDEV(amount))
                      FROM iv_persons WHERE amount < 99 GROUP BY region) q;
SELECT sum(epsilon) = :without AS same_charge FROM dp_my_ledger WHERE id > :seen;
-- A repeat (the tables are tracked) is free and the same.
SELECT string_agg(a || ':' || lo, ',' ORDER BY region) AS first FROM (
  SELECT region, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS lo FROM iv_persons GROUP BY region) q \gset
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT string_agg(a || ':' || lo, ',' ORDER BY region) = :'first' AS same FROM (
  SELECT region, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS lo FROM iv_persons GROUP BY region) q;
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;

-- Under forced plans the answers are one release: the same repeat, free.
SET enable_hashagg = off;
SET enable_seqscan = off;
SELECT string_agg(a || ':' || lo, ',' ORDER BY region) = :'first' AS same_sorted FROM (
  SELECT region, AVG(amount) AS a, dp_interval_low(AVG(amount)) AS lo FROM iv_persons GROUP BY region) q;
RESET enable_hashagg;
RESET enable_seqscan;
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;

-- Refused before any charge (ZB003): an interval tested in HAVING, two
-- confidences for one value, a quantile's, a minimum's,
-- beside a window function, at a confidence not a constant in (0, 1).
-- (A count's or sum's dp_error alone is a constant: HAVING may test it,
-- and two of them may have two confidences.)
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT outcome('SELECT region FROM iv_persons GROUP BY region HAVING dp_interval_low(AVG(amount)) > 10');
SELECT outcome('SELECT AVG(amount), dp_interval_low(AVG(amount), 0.9), dp_interval_high(AVG(amount), 0.99) FROM iv_persons');
SELECT outcome('SELECT dp_error(percentile_cont(0.5) WITHIN GROUP (ORDER BY amount)) FROM iv_persons');
SELECT outcome('SELECT dp_interval_low(MAX(amount)) FROM iv_persons');
SELECT outcome('SELECT region, rank() OVER (ORDER BY AVG(amount)), dp_interval_low(AVG(amount)) FROM iv_persons GROUP BY region');
SELECT outcome('SELECT AVG(amount), dp_interval_low(AVG(amount), 1.5) FROM iv_persons');
SELECT outcome('SELECT dp_interval_low(1)');
-- An interval the rewrite cannot answer, beside a value of a per-person
-- subquery or of a CTE's output, is refused too, before the charge (it
-- would fail when run; an attack found it charged, then 0A000).
SELECT outcome('SELECT AVG(n), dp_interval_low(AVG(n)) FROM (SELECT person_id, count(*) AS n FROM iv_visits GROUP BY person_id) p');
SELECT outcome('WITH s AS (SELECT count(*) AS c FROM iv_persons) SELECT c, dp_error(c) FROM s');
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
\c - postgres
-- As a curator there is nothing to rewrite (0A000), and dp_estimate reads
-- only the parts the gate writes.
SELECT outcome('SELECT dp_interval_high(1)');
SELECT outcome($$SELECT dp_estimate('{1, 0, 0, 5}', 1)$$);
SELECT dp_estimate('{1, 0, 0, 5, 2}', 2) AS low, dp_estimate('{1, 0, 0, 5, 2}', 3) AS high;
SELECT outcome($$SELECT dp_estimate('{1, 0, 0, 5, 2}', 7)$$);
