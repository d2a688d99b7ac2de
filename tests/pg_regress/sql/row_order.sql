-- The order of an analyst's rows is a function of the rows, never of the
-- plan (src/output/order.rs): the statement's ORDER BY, then each of its
-- columns in turn; a subquery with LIMIT too. As an analyst, under forced
-- plans: a hashed aggregation hands its groups out in its hash table's
-- order, a sorted one in its keys'.
DO $$ BEGIN
    CREATE ROLE dp_order_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 4000 persons in four regions of 1000, and a fifth region listed
-- without rows.
CREATE TABLE ro_staff (person_id int PRIMARY KEY, region text, team int);
INSERT INTO ro_staff SELECT i, (ARRAY['north', 'south', 'east', 'centre'])[1 + i % 4], i % 7
FROM generate_series(1, 4000) i;
ANALYZE ro_staff;
GRANT SELECT ON ro_staff TO dp_order_analyst;
SELECT dp_protect('ro_staff', 'person_id'), dp_policy('ro_staff', 10.0);
SELECT dp_domain('ro_staff', 'region', ARRAY['centre', 'east', 'north', 'south', 'west']);
SELECT dp_analyst('dp_order_analyst');
SELECT dp_budget_grant('dp_order_analyst', 1e6, 1);
\c - dp_order_analyst
-- No ORDER BY: the rows by their columns, hashed and sorted alike.
SET enable_hashagg = on;
SELECT region, count(*) > 500 AS many FROM ro_staff GROUP BY region;
SET enable_hashagg = off;
SELECT region, count(*) > 500 AS many FROM ro_staff GROUP BY region;
-- LIMIT without ORDER BY keeps the first rows by their columns.
SET enable_hashagg = on;
SELECT region, count(*) > 500 AS many FROM ro_staff GROUP BY region LIMIT 2;
SELECT region FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region LIMIT 3) s ORDER BY 1 DESC;
-- Ties of the ORDER BY (regions of one length) broken by the columns.
SELECT region, count(*) > 500 AS many FROM ro_staff GROUP BY region ORDER BY length(region) DESC;
SET enable_hashagg = off;
SELECT region, count(*) > 500 AS many FROM ro_staff GROUP BY region ORDER BY length(region) DESC;
RESET enable_hashagg;
-- Two keys, no ORDER BY: by the first column, then the second.
SELECT team, region, count(*) > 100 AS many FROM ro_staff WHERE team < 2 AND region < 'n' GROUP BY region, team;
-- Above the releases, values are shown, grouped, deduplicated and
-- compared in their normal form (src/output/normal.rs): 0.0, 0.00 and
-- 0.000 are one value, shown as 0, and -0 is 0, under hashed and sorted
-- plans alike (an attack read 0.0 from one and 0.000 from the other);
-- a subquery's released rows come to the level above in one order: a
-- float sum over them rounds alike.
SET enable_hashagg = on;
SELECT CASE WHEN region = 'east' THEN 0.00 ELSE 0.0 END AS z
FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
SELECT x FROM (SELECT CASE WHEN team = 4 THEN 1 WHEN team % 2 = 0 THEN 0.0 ELSE 0.00 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v UNION SELECT 0.000) u;
SELECT k, max(x) FROM (SELECT team % 2 AS k, CASE WHEN team < 3 THEN 0.0 ELSE 0.00 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v) w GROUP BY k;
SELECT DISTINCT x FROM (SELECT CASE WHEN team < 3 THEN '-0'::float8 ELSE 0 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v) w;
-- A value of a type without a normal form (an array) ties by its binary form.
SELECT CASE WHEN region = 'east' THEN ARRAY[0.00] ELSE ARRAY[0.0] END AS a
FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
SELECT sum(CASE region WHEN 'north' THEN 1e16::float8 WHEN 'south' THEN -1e16 ELSE 1 END) AS total
FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
SET enable_hashagg = off;
SELECT CASE WHEN region = 'east' THEN 0.00 ELSE 0.0 END AS z
FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
SELECT x FROM (SELECT CASE WHEN team = 4 THEN 1 WHEN team % 2 = 0 THEN 0.0 ELSE 0.00 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v UNION SELECT 0.000) u;
SELECT k, max(x) FROM (SELECT team % 2 AS k, CASE WHEN team < 3 THEN 0.0 ELSE 0.00 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v) w GROUP BY k;
SELECT DISTINCT x FROM (SELECT CASE WHEN team < 3 THEN '-0'::float8 ELSE 0 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v) w;
SELECT CASE WHEN region = 'east' THEN ARRAY[0.00] ELSE ARRAY[0.0] END AS a
FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
SELECT sum(CASE region WHEN 'north' THEN 1e16::float8 WHEN 'south' THEN -1e16 ELSE 1 END) AS total
FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
RESET enable_hashagg;
-- A float sum over the releases at a grouping level above them runs in
-- numeric (src/output/exact.rs): exact, so hashed and sorted groupings
-- round alike (an attack read 500 under one and 502 under the other).
SET enable_hashagg = on;
SELECT k, sum(x) AS total FROM (SELECT team % 2 AS k, CASE WHEN region = 'north' THEN 1e16::float8
  WHEN region = 'south' THEN -1e16::float8 ELSE 1.0 / 3 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v) w GROUP BY k;
SET enable_hashagg = off;
SELECT k, sum(x) AS total FROM (SELECT team % 2 AS k, CASE WHEN region = 'north' THEN 1e16::float8
  WHEN region = 'south' THEN -1e16::float8 ELSE 1.0 / 3 END AS x
  FROM (SELECT region, team, count(*) AS n FROM ro_staff GROUP BY region, team) v) w GROUP BY k;
RESET enable_hashagg;
-- The same through a CTE that reads a CTE of releases, and a float sum
-- over a window; a sum of one value is that value, and one beyond
-- float8's range is Infinity (helper-16's attack on the first forms).
SET enable_sort = off;
WITH r AS (SELECT team, count(*) AS c FROM ro_staff GROUP BY team),
q AS (SELECT team, CASE WHEN team = 1 THEN 1 WHEN team % 3 = 0 THEN 0.00 ELSE 0.0 END AS x,
  CASE WHEN team % 3 = 0 THEN interval '24 hours' ELSE interval '1 day' END AS i FROM r)
SELECT x, count(*), max(i) FROM q GROUP BY x;
SELECT g, sum(x) OVER () AS w, avg(x) OVER () AS wa FROM (SELECT region AS g,
  CASE region WHEN 'east' THEN 1e17 WHEN 'north' THEN -1e17 ELSE 1 END::float8 + n * 0 AS x
  FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v) q;
RESET enable_sort; SET enable_hashagg = off;
WITH r AS (SELECT team, count(*) AS c FROM ro_staff GROUP BY team),
q AS (SELECT team, CASE WHEN team = 1 THEN 1 WHEN team % 3 = 0 THEN 0.00 ELSE 0.0 END AS x,
  CASE WHEN team % 3 = 0 THEN interval '24 hours' ELSE interval '1 day' END AS i FROM r)
SELECT x, count(*), max(i) FROM q GROUP BY x;
SELECT g, sum(x) OVER () AS w, avg(x) OVER () AS wa FROM (SELECT region AS g,
  CASE region WHEN 'east' THEN 1e17 WHEN 'north' THEN -1e17 ELSE 1 END::float8 + n * 0 AS x
  FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v) q;
RESET enable_hashagg;
SELECT sum(0.1::float8 + 0.2::float8 + n * 0) = 0.1::float8 + 0.2::float8 AS one_value_kept
FROM (SELECT count(*) AS n FROM ro_staff) v;
SELECT sum(1e308::float8 + n * 0) AS beyond FROM (SELECT region, count(*) AS n FROM ro_staff GROUP BY region) v;
-- A set operation is ordered by its columns (its own target list takes no
-- other column: the fuzzer once met PostgreSQL's "resjunk output columns
-- are not implemented" here).
(SELECT count(*) * 0 + 2.5 AS x FROM ro_staff) UNION ALL (SELECT 1.50);
\c - postgres
SELECT dp_domain('ro_staff', 'region', NULL);
