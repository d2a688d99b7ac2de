-- The plan check (docs/analysts.md): for an analyst, nothing PostgreSQL
-- executes depends on a protected row except the inputs of the dpnoise
-- aggregates. Each probe asks about person 17 (salary 17000) twice, once
-- with a condition that holds and once with one that does not: both must
-- get the same outcome (here: the same refusal, before any charge).
DO $$ BEGIN
    CREATE ROLE dp_plan_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE pc_staff (person_id int PRIMARY KEY, region text, salary float8, age int);
INSERT INTO pc_staff SELECT i, (ARRAY['north', 'south'])[1 + i % 2], 1000 * i, 20 + i % 40 FROM generate_series(1, 2000) i;
CREATE TABLE pc_visits (person_id int, site text, amount float8);
INSERT INTO pc_visits SELECT i % 200, 's' || (i % 4), i % 100 FROM generate_series(1, 2000) i;
-- Public: a dimension with a unique key, one with a key repeated 5000
-- times, and a small list.
CREATE TABLE pc_people (person_id int PRIMARY KEY, label text);
INSERT INTO pc_people SELECT i, 'x' FROM generate_series(1, 5000) i;
CREATE TABLE pc_small (person_id int PRIMARY KEY);
INSERT INTO pc_small SELECT generate_series(1, 500);
CREATE TABLE pc_same (person_id int);
INSERT INTO pc_same SELECT 17 FROM generate_series(1, 5000);
CREATE TABLE pc_regions (region text);
INSERT INTO pc_regions VALUES ('north'), ('south');
CREATE TABLE pc_places (region text PRIMARY KEY);
INSERT INTO pc_places VALUES ('north'), ('south'), ('east');
ANALYZE pc_staff, pc_visits, pc_people, pc_small, pc_same, pc_regions, pc_places;
GRANT SELECT ON pc_people, pc_small, pc_same, pc_regions, pc_places TO dp_plan_analyst;
SELECT dp_protect('pc_staff', 'person_id'), dp_protect('pc_visits', 'person_id', 2);
SELECT dp_analyst('dp_plan_analyst');
SELECT dp_budget_grant('dp_plan_analyst', 1000, 1);
-- Runs a probe with its condition true and false: the outcomes, or 'differ'.
CREATE FUNCTION pc_probe(statement text, holds text, fails text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text := outcome(format(statement, holds)); b text := outcome(format(statement, fails));
BEGIN
    RETURN CASE WHEN a = b THEN a ELSE 'differ: ' || a || ' / ' || b END;
END $$;
GRANT EXECUTE ON FUNCTION pc_probe(text, text, text) TO dp_plan_analyst;
\c - dp_plan_analyst
\set VERBOSITY terse

-- 1. Listed keys over a public side that is not a pure function of the
-- query: two evaluations of it (the list, the rows) would disagree.
SELECT pc_probe($q$SELECT count(*) FROM (SELECT g FROM (SELECT k.g, k.n, dp_count(1e-9) FROM
  (SELECT g, random() AS n FROM generate_series(1, 30) g) k LEFT JOIN pc_staff s ON s.person_id = k.g AND %s
  GROUP BY k.g, k.n) x GROUP BY g HAVING count(*) > 1) y$q$, 's.salary > 10000', 's.salary > 90000');
SELECT pc_probe($q$SELECT k.g, dp_count(1e-9) FROM (SELECT g FROM generate_series(1, 30) g WHERE random() < 2) k
  LEFT JOIN pc_staff s ON s.person_id = k.g AND %s GROUP BY k.g$q$, 's.salary > 10000', 's.salary > 90000');
SELECT pc_probe($q$SELECT k.g, dp_count(1e-9) FROM (SELECT g, clock_timestamp() AS t FROM generate_series(1, 30) g) k
  LEFT JOIN pc_staff s ON s.person_id = k.g AND %s GROUP BY k.g, k.t$q$, 's.salary > 10000', 's.salary > 90000');
-- Admitted: a pure list; only its keys are shown (the gate's HAVING keeps
-- a key only if the list's own row is in its group).
SELECT r.region, abs(dp_count(10.0) - 1000) < 30 AS near FROM pc_regions r LEFT JOIN pc_staff s ON s.region = r.region
GROUP BY r.region ORDER BY 1;
SELECT m, dp_count(1.0) IS NOT NULL AS answered FROM (SELECT g AS m FROM generate_series(1, 6) g LIMIT 3) l
LEFT JOIN pc_visits v ON v.person_id = l.m GROUP BY m ORDER BY m;

-- 2. Expressions PostgreSQL does not fold, run on the rows a CASE sends to
-- them: a domain's check, XML, a text-to-integer coercion.
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff WHERE person_id = 17
  AND CASE WHEN %s THEN (-1)::information_schema.cardinal_number IS NULL ELSE true END$q$, 'salary > 10000', 'salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff WHERE person_id = 17
  AND CASE WHEN %s THEN 'maybe'::information_schema.yes_or_no IS NULL ELSE true END$q$, 'salary > 10000', 'salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff WHERE person_id = 17
  AND CASE WHEN %s THEN xmlparse(content '<a') IS NULL ELSE true END$q$, 'salary > 10000', 'salary > 90000');

-- Collations (found by an independent attack): two implicit collations
-- that clash leave a LEAKPROOF comparison without one, and it fails only
-- where it runs; a nondeterministic one makes starts_with fail when called.
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s,
  (SELECT region COLLATE "C" AS c FROM pc_regions WHERE region = 'north') a,
  (SELECT region COLLATE "POSIX" AS e FROM pc_regions WHERE region = 'north') b
  WHERE s.person_id = 17 AND (NOT (%s) OR a.c = b.e)$q$, 's.salary > 10000', 's.salary > 90000');
CREATE COLLATION pg_temp.pc_nd (provider = icu, locale = 'und', deterministic = false);
CREATE TEMP TABLE pc_nd_text (c text COLLATE pg_temp.pc_nd);
INSERT INTO pc_nd_text VALUES ('x');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s, pc_nd_text t
  WHERE s.person_id = 17 AND (NOT (%s) OR starts_with(s.region, t.c))$q$, 's.salary > 10000', 's.salary > 90000');

-- 3. A public subquery the planner pulls up into a join clause.
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s, (SELECT ln(g - 1) AS y FROM generate_series(1, 1) g) p
  WHERE s.person_id = 17 AND %s AND s.age < p.y$q$, 's.salary > 10000', 's.salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s, (SELECT (g || 'x')::int AS y FROM generate_series(1, 1) g) p
  WHERE s.person_id = 17 AND %s AND s.age < p.y$q$, 's.salary > 10000', 's.salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s, (SELECT sqrt(-g::float8) AS y FROM generate_series(1, 1) g) p
  WHERE s.person_id = 17 AND %s AND s.age < p.y$q$, 's.salary > 10000', 's.salary > 90000');

-- 4. Public parts run once per protected row: a sequence, the access
-- statistics (in the statement, or read by the next one), an aggregate
-- subquery, a function in FROM that can fail.
CREATE TEMP SEQUENCE pc_seq;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s, (SELECT nextval('pc_seq') AS n, g FROM generate_series(1, 3) g) p
  WHERE %s$q$, 's.salary > 10000', 's.salary > 90000');
SELECT nextval('pc_seq') AS sequence_untouched;
RESET enable_hashjoin;
RESET enable_mergejoin;
SELECT outcome($q$SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'pc_regions'$q$);
SELECT outcome($q$SELECT pg_stat_get_xact_tuples_returned('pc_staff_pkey'::regclass)$q$);
SELECT outcome($q$SELECT idx_blks_hit FROM pg_statio_user_indexes$q$);
-- A PL/pgSQL simple expression never reaches ExecutorStart: refused as planned.
CREATE FUNCTION pg_temp.scans() RETURNS bigint LANGUAGE plpgsql AS
  $f$ BEGIN RETURN pg_stat_get_xact_numscans('pc_regions'::regclass); END $f$;
SELECT outcome($q$SELECT pg_temp.scans()$q$);
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff, (SELECT ln(max(g) - 1) AS z FROM generate_series(1, 1) g) k
  WHERE person_id = 17 AND %s AND age > z$q$, 'salary > 10000', 'salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff, generate_series(1, 3, 0) g WHERE person_id = 17 AND %s$q$,
  'salary > 10000', 'salary > 90000');

-- 5. Run time amplified by a public side: refused past
-- dpnoise.max_public_fanout (1000), judged from the public side alone.
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff CROSS JOIN generate_series(1, 300000) WHERE person_id = 17 AND %s$q$,
  'salary > 10000', 'salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s CROSS JOIN pc_people p WHERE s.person_id = 17 AND %s$q$,
  's.salary > 10000', 's.salary > 90000');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s JOIN pc_same p ON p.person_id = s.person_id WHERE %s$q$,
  's.salary > 10000', 's.salary > 90000');
-- A join with a public table of 1500 rows, one for each key, is refused
-- whatever PostgreSQL does with it: a nested loop, by index too, reads it
-- for each protected row (its work follows dead index entries as much as
-- rows); hashed, each probe walks a bucket's chain, which an analyst can
-- fill with distinct keys that hash alike (found by an independent attack:
-- 60 000 keys under person 17's hash, 118 ms against 17 ms).
CREATE TEMP TABLE pc_keys AS SELECT person_id FROM pc_people WHERE person_id <= 1500;
ALTER TABLE pc_keys ADD PRIMARY KEY (person_id);
ANALYZE pc_keys;
SET enable_nestloop = off;
SET enable_mergejoin = off;
SELECT outcome($q$SELECT dp_count(10.0) FROM pc_staff s JOIN pc_keys k ON k.person_id = s.person_id$q$) AS hashed;
RESET enable_nestloop;
RESET enable_mergejoin;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT outcome($q$SELECT dp_count(10.0) FROM pc_staff s JOIN pc_people p ON p.person_id = s.person_id$q$);
RESET enable_hashjoin;
RESET enable_mergejoin;
-- A hashed public side that spills to disk: a batch is read back only if a
-- protected row fell into it (found by an independent attack: 130 ms).
-- Counted whole, in one batch or several.
CREATE TEMP TABLE pc_spill AS SELECT g AS k FROM generate_series(1, 200000) g;
ALTER TABLE pc_spill ADD PRIMARY KEY (k);
ANALYZE pc_spill;
SET max_parallel_workers_per_gather = 0;
SET enable_nestloop = off;
SET enable_mergejoin = off;
SET work_mem = '64kB';
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s
  JOIN pc_spill t ON t.k = CASE WHEN s.person_id = 17 AND %s THEN 5 END$q$, 's.salary > 10000', 's.salary > 90000');
SET work_mem = '64MB';
SELECT pc_probe($q$SELECT dp_count(1e-9) IS NOT NULL FROM pc_staff s
  JOIN pc_spill t ON t.k = CASE WHEN s.person_id = 17 AND %s THEN 5 END$q$, 's.salary > 10000', 's.salary > 90000') AS one_batch;
RESET ALL;
-- Dead rows cost a scan as much as live ones (found by an independent
-- attack): a public table of one live row over a million dead index
-- entries under key 17 counts its pages.
CREATE TEMP TABLE pc_dead (k int, pad text);
CREATE INDEX ON pc_dead (k);
INSERT INTO pc_dead SELECT 17, repeat('x', 50) FROM generate_series(1, 100000);
DELETE FROM pc_dead;
INSERT INTO pc_dead VALUES (17, 'live');
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s JOIN pc_dead d ON d.k = s.person_id
  WHERE s.person_id BETWEEN 17 AND 17 AND %s$q$, 's.salary > 10000', 's.salary > 90000');

-- Wide public values (found by an independent attack): 100 rows, but each
-- decompressed and compared for every protected row; a row counts once more
-- for each 8 kB read of it.
CREATE TEMP TABLE pc_wide (k int, v text);
INSERT INTO pc_wide SELECT g, repeat('a', 1000000) || g FROM generate_series(1, 100) g;
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s JOIN pc_wide b ON true
  WHERE s.person_id = 17 AND %s AND b.v > s.region$q$, 's.salary > 10000', 's.salary > 90000');
-- A wide listed key, carried through the per-person levels for each
-- protected row that meets it (found by an independent attack: 7.9 MB,
-- 10 ms a protected row, admitted at 8 kB a row); 1 MB is 8000 rows now.
CREATE TEMP TABLE pc_wide_key (k text);
ALTER TABLE pc_wide_key ALTER COLUMN k SET STORAGE EXTERNAL;
INSERT INTO pc_wide_key SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32000) i;
SELECT pc_probe($q$SELECT count(*) FROM (SELECT w.k, dp_count(1e-9) FROM pc_wide_key w
  LEFT JOIN pc_staff s ON s.person_id = 17 AND %s GROUP BY w.k) x$q$, 's.salary > 10000', 's.salary > 90000');
-- A long array compared with protected values, behind a condition (found
-- by an independent attack: 13 ms against 0.8 ms with 3 million elements):
-- bounded like public rows; from a query parameter, refused.
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff WHERE person_id = 17 AND %s
  AND age < ALL(array_fill(1000000, ARRAY[100000]))$q$, 'salary > 10000', 'salary > 90000');
PREPARE pc_array(int[]) AS SELECT dp_count(1e-9) FROM pc_staff WHERE person_id = 17 AND salary > 10000 AND age < ALL($1);
SET plan_cache_mode = force_generic_plan;
SELECT outcome($q$EXECUTE pc_array(ARRAY[1, 2, 3])$q$);
RESET plan_cache_mode;
DEALLOCATE pc_array;
SELECT dp_count(1.0) IS NOT NULL AS short_list FROM pc_staff WHERE region IN ('north', 'east') AND age = ANY(ARRAY[30, 31]);
-- A long chain of cheap comparisons behind a condition: work for the one
-- protected row that reaches it; every 10 steps weigh one row more.
SELECT outcome(format($q$SELECT dp_count(1e-9) FROM pc_staff WHERE person_id = 17 AND salary > 10000 AND (%s)$q$,
  (SELECT string_agg(format('age <> %s', g), ' AND ') FROM generate_series(1000, 21000) g)));
-- Comparisons under a locale's collation, for each of 500 public rows (found
-- by an independent attack: 30 ICU comparisons of Hangul strings a row,
-- 37 ms against 1.6 ms): each weighs ten steps, for each public row met.
CREATE TEMP TABLE pc_icu (t text COLLATE "und-x-icu");
INSERT INTO pc_icu SELECT repeat(U&'\AC00', 40) FROM generate_series(1, 500);
ANALYZE pc_icu;
SELECT pc_probe(format($q$SELECT dp_count(1e-9) FROM pc_staff s JOIN pc_icu p ON s.person_id = 17 AND %%s AND %s$q$,
  (SELECT string_agg(format('p.t < %L', repeat(U&'\AC00', 39) || chr(44033 + g)), ' AND ') FROM generate_series(1, 30) g)),
  's.salary > 10000', 's.salary > 90000');
-- A long query parameter compared behind a condition: a text comparison
-- copies both its inputs (found by an independent attack: 10 MB, 30
-- comparisons, 22 ms against 1 ms); its bytes count as steps.
CREATE FUNCTION pg_temp.wide_parameter(threshold float8) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE answer float8; v text := repeat('~', 1000000);
BEGIN
    SELECT dp_count(1e-9) INTO answer FROM pc_staff
    WHERE person_id = 17 AND (CASE WHEN salary > threshold THEN region < v AND region < v ELSE true END);
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $f$;
SET plan_cache_mode = force_generic_plan;
SELECT pg_temp.wide_parameter(10000) = pg_temp.wide_parameter(90000) AS alike, pg_temp.wide_parameter(10000) AS outcome;
RESET plan_cache_mode;
-- Its narrow column alone is read: admitted.
SELECT dp_count(10.0) IS NOT NULL AS narrow FROM pc_staff s JOIN pc_wide b ON b.k = s.age;

-- A person's rows multiplied by joining a table of several rows per person
-- with itself: n^k rows for k copies, a run time one person controls.
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_visits v1 JOIN pc_visits v2 USING (person_id)
  JOIN pc_visits v3 USING (person_id) WHERE person_id = 17 AND %s$q$, 'v1.amount >= 0', 'v1.amount > 1000');

-- 5b. Under SERIALIZABLE, a scan that runs leaves a predicate lock, shown in
-- pg_locks: an index scan of a public table run only once a protected row
-- passes would tell (found by an independent attack on the plan check).
CREATE FUNCTION pg_temp.serializable_probe(condition text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE o text; locks int;
BEGIN
    o := outcome(format('SELECT dp_count(1e-9) FROM pc_staff s JOIN pc_small p ON p.person_id = s.person_id
                         WHERE s.person_id = 17 AND %s', condition));
    SELECT count(*) INTO locks FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE l.pid = pg_backend_pid() AND l.mode = 'SIReadLock' AND c.relname = 'pc_small_pkey';
    RETURN o || ', index locks: ' || locks;
END $f$;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.serializable_probe('s.salary > 10000') AS holds;
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.serializable_probe('s.salary > 90000') AS fails;
ROLLBACK;
-- Under REPEATABLE READ no predicate lock is taken: admitted.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.serializable_probe('s.salary > 10000') AS repeatable_read;
ROLLBACK;

-- Parallel workers for a public part on the inner side of a nested loop
-- start only once a protected row arrives, and again at each rescan:
-- milliseconds each (found by an independent attack).
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
SELECT pc_probe($q$SELECT dp_count(1e-9) FROM pc_staff s JOIN pc_places r ON r.region = s.region
  WHERE s.person_id = 17 AND %s$q$, 's.salary > 10000', 's.salary > 90000');
SET max_parallel_workers_per_gather = 0;
SELECT pc_probe($q$SELECT dp_count(1e-9) IS NOT NULL FROM pc_staff s JOIN pc_places r ON r.region = s.region
  WHERE s.person_id = 17 AND %s$q$, 's.salary > 10000', 's.salary > 90000') AS without_workers;
RESET ALL;

-- 6. A dpnoise aggregate the plan reads again for each row of another
-- part of the query (the nullable side of a LEFT JOIN, rescanned by a
-- nested loop) is held: it runs once and hands out the same rows again, so
-- every outer row meets the same release, and the statement is admitted
-- (and charged once) whichever join the planner picks. Hashed, sorted and
-- plain aggregation alike.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT x.region, count(DISTINCT x.c) AS values_seen, count(*) AS outer_rows FROM generate_series(1, 40) g
  LEFT JOIN (SELECT region, dp_count(0.05) AS c FROM pc_staff GROUP BY region) x ON x.c > g - 1e9
GROUP BY x.region ORDER BY x.region;
SET enable_hashagg = off;
SELECT x.region, count(DISTINCT x.c) AS values_seen, count(*) AS outer_rows FROM generate_series(1, 40) g
  LEFT JOIN (SELECT region, dp_count(0.05) AS c FROM pc_staff GROUP BY region) x ON x.c > g - 1e9
GROUP BY x.region ORDER BY x.region;
SELECT count(DISTINCT x.c) AS values_seen, count(*) AS outer_rows FROM generate_series(1, 40) g
  LEFT JOIN (SELECT dp_count(0.05) AS c FROM pc_staff WHERE age > 30) x ON x.c > g - 1e9;
RESET ALL;
-- A release in parallel workers: the inner (hashed) side of a join that
-- each worker builds whole would be drawn in every worker, and again at
-- each rescan (an attack averaged about 40 draws of one count for one
-- charge). Such a statement is planned again without workers: one value.
\c - postgres
CREATE TABLE pc_huge AS SELECT g AS k FROM generate_series(1, 3000000) g;
ANALYZE pc_huge;
GRANT SELECT ON pc_huge TO dp_plan_analyst;
\c - dp_plan_analyst
\set VERBOSITY terse
SET max_parallel_workers_per_gather = 4; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = '200kB'; SET enable_parallel_hash = off; SET enable_material = off;
SET enable_mergejoin = off;
SELECT o.i, count(DISTINCT x.c) AS values_seen FROM generate_series(1, 3) o(i) LEFT JOIN
  (SELECT s.g, s.c, count(*) AS n FROM pc_huge p
     JOIN (SELECT age % 5 AS g, dp_count(0.05) AS c FROM pc_staff GROUP BY 1) s ON p.k % 5 = s.g GROUP BY 1, 2) x
  ON x.g < o.i - o.i + 1 GROUP BY o.i ORDER BY o.i;
RESET ALL;
\c - postgres
DROP TABLE pc_huge;
\c - dp_plan_analyst
\set VERBOSITY terse
-- Correlated, it would be a new release for each outer row: refused,
-- under every plan.
SELECT outcome($q$SELECT g, (SELECT dp_count(0.05) FROM pc_staff WHERE age > g) FROM generate_series(1, 40) g$q$);
SELECT outcome($q$SELECT g, l.c FROM generate_series(1, 40) g, LATERAL (SELECT dp_count(0.05) AS c FROM pc_staff WHERE age > g) l$q$);
-- Computed once instead, it is admitted.
WITH x AS MATERIALIZED (SELECT dp_count(0.05) AS c FROM pc_staff)
SELECT count(*) FROM generate_series(1, 40) g LEFT JOIN x ON x.c > -1e9;

-- Nothing above was charged, but the admitted answers.
\c - postgres
SELECT count(*) AS charges, sum(epsilon) AS epsilon FROM dpnoise.ledger WHERE role = 'dp_plan_analyst'::regrole;

-- The per-query cap counts every release, those no plan shows too (a
-- per-row release over released answers, charged as it runs).
ALTER ROLE dp_plan_analyst SET dpnoise.max_epsilon_per_query = 1;
\c - dp_plan_analyst
\set VERBOSITY terse
SELECT outcome($q$SELECT dp_laplace(c, 0.5, 1) FROM (SELECT region, dp_count(0.1) AS c FROM pc_staff GROUP BY region) x$q$);
SELECT outcome($q$SELECT dp_laplace(c, 0.1, 1) FROM (SELECT region, dp_count(0.1) AS c FROM pc_staff GROUP BY region) x$q$);
\c - postgres
ALTER ROLE dp_plan_analyst RESET dpnoise.max_epsilon_per_query;
-- The plan does not follow column statistics: one person's salary at the
-- top of the histogram (500000; everyone else at most 169990) no longer
-- decides between a refused and an admitted plan of the same recursive
-- query (attack 16: refused for C below 500000, admitted above, at no cost).
CREATE TABLE pc_stats AS
SELECT i AS person_id, (ARRAY['north', 'south'])[1 + i % 2] AS region, (i * 37 % 169990)::float8 AS salary
FROM generate_series(1, 4000) i;
UPDATE pc_stats SET salary = 500000 WHERE person_id = 17;
ANALYZE pc_stats;
SELECT dp_protect('pc_stats', 'person_id');
\c - dp_plan_analyst
\set VERBOSITY terse
SELECT pc_probe($q$WITH RECURSIVE r(n, k, c) AS (SELECT 1, 'x', 0::bigint UNION ALL
    SELECT r.n + 1, s.region, s.c FROM r CROSS JOIN (SELECT region, dp_count(1.0) c FROM pc_stats WHERE salary > %s GROUP BY region) s
    WHERE r.n < 4) SELECT count(*) FROM r$q$, '300000', '490000');
\c - postgres
DROP FUNCTION pc_probe(text, text, text);
