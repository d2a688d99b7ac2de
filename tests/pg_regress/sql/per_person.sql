-- Per-person subqueries (issue 36): a level over protected tables grouped
-- by exactly their privacy unit, with built-in aggregates that cannot fail,
-- feeding a level of dpnoise aggregates (src/gate/persons.rs,
-- docs/analysts.md "Per-person features").
DO $$ BEGIN
    CREATE ROLE dp_person_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE ppv (person_id int, site text, amount float8, n int, num numeric, d date);
INSERT INTO ppv SELECT i % 300, 's' || (i % 7), (i % 50)::float8, i % 9, i % 13, date '2024-01-01' + (i % 300)
FROM generate_series(0, 2999) i;
CREATE TABLE ppp (person_id int PRIMARY KEY, region text, born int);
INSERT INTO ppp SELECT i, (ARRAY['north', 'south', 'east'])[1 + i % 3], 1950 + i % 50 FROM generate_series(0, 299) i;
CREATE TABLE ppsites (site text, region text);
INSERT INTO ppsites SELECT 's' || i, (ARRAY['north', 'south', 'east'])[1 + i % 3] FROM generate_series(0, 6) i;
GRANT SELECT ON ppsites TO dp_person_analyst;
SELECT dp_protect('ppv', 'person_id', 3);
SELECT dp_protect('ppp', 'person_id');
SELECT dp_analyst('dp_person_analyst');
SELECT dp_budget_grant('dp_person_analyst', 1e9, 1);
\c - dp_person_analyst
\set VERBOSITY terse

-- 1. Admitted: one row per person, then dpnoise aggregates over persons.
-- At ε = 1000 the noise is far below the tolerances (true answers: 300
-- persons of 10 visits each, 245 spent on average; 129 persons with two
-- visits or more to s1; 300 visiting the north).
SELECT abs(dp_count(1000) - 300) < 1 AS persons, abs(dp_avg(visits, 1000, 0, 50) - 10) < 0.5 AS visits,
       abs(dp_avg(spent, 1000, 0, 1000) - 245) < 5 AS spent
FROM (SELECT person_id, count(*) AS visits, sum(amount) AS spent FROM ppv GROUP BY person_id) p;
-- HAVING filters persons.
SELECT abs(dp_count(1000) - 129) < 1 AS repeat_s1 FROM (SELECT person_id FROM ppv WHERE site = 's1' GROUP BY person_id HAVING count(*) > 1) p;
-- Keys from per-person values pass partition selection; each person is in one group.
SELECT visits, abs(dp_count(1000) - 300) < 1 AS persons FROM (SELECT person_id, count(*) AS visits FROM ppv GROUP BY person_id) p GROUP BY visits ORDER BY 1;
-- A join with a public table inside, and with a protected table of one row per person on the unit.
SELECT abs(dp_count(1000) - 300) < 1 AS north FROM (SELECT v.person_id, count(*) n FROM ppv v JOIN ppsites s ON s.site = v.site
                                  WHERE s.region = 'north' GROUP BY v.person_id) p;
SELECT region, abs(dp_avg(n, 1000, 0, 20) - 10) < 0.5 AS visits FROM (SELECT ppp.person_id, ppp.region, count(*) n
  FROM ppp JOIN ppv ON ppv.person_id = ppp.person_id GROUP BY ppp.person_id) p GROUP BY region ORDER BY 1;
-- Every admitted aggregate, total expressions on them, and the new aggregates over persons.
SELECT outcome($$SELECT dp_count(1.0), dp_sum(a, 1.0, 0, 50), dp_var(s, 1.0, 0, 500), dp_median(f, 1.0, 1, 12), dp_max(m, 1.0, 0, 50)
  FROM (SELECT person_id, avg(amount) a, sum(amount) s, extract(month FROM min(d)) f, max(amount) m, min(site) ms, bool_or(n > 3) b,
               bool_and(n > 0) ba, sum(n) sn, avg(n) an, sum(num) su, avg(num) au, count(num) cn, max(d) md, sum(n::bigint) sb,
               sum(amount) / count(*) per
        FROM ppv GROUP BY person_id HAVING count(*) > 3) p WHERE b AND ms < 's5'$$);
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY 1) p WHERE n > 3');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT p.person_id FROM ppv p GROUP BY p.person_id) p');
SELECT outcome('SELECT s.x FROM (SELECT dp_count(1.0) x FROM (SELECT person_id FROM ppv GROUP BY person_id) p) s');

-- 2. Refused, each saying why.
-- The inner output shown, or aggregated by anything but dpnoise aggregates.
SELECT outcome('SELECT * FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT n FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p GROUP BY n');
SELECT outcome('SELECT max(a) FROM (SELECT person_id, max(amount) a FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT n, dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p');
-- The person as a key.
SELECT outcome('SELECT person_id, dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p GROUP BY 1');
SELECT outcome('SELECT u, dp_count(1.0) FROM (SELECT person_id + 0 u, count(*) n FROM ppv GROUP BY person_id) p GROUP BY 1');
-- Not grouped by exactly the unit.
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT site, count(*) n FROM ppv GROUP BY site) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id, site) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id % 10, count(*) n FROM ppv GROUP BY person_id % 10) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT v.person_id, count(*) FROM ppv v JOIN ppsites s ON s.site = v.site GROUP BY s.region, v.person_id) p');
-- ORDER BY / LIMIT inside, an outer join inside, two tables of several rows per person.
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id ORDER BY n LIMIT 10) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT v.person_id, count(*) n FROM ppsites s LEFT JOIN ppv v ON v.site = s.site GROUP BY v.person_id) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT v.person_id, count(*) n FROM ppv v JOIN ppv w ON v.person_id = w.person_id GROUP BY v.person_id) p');
-- Aggregates that can fail, or are not among the built-ins admitted.
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, sum(amount::real) n FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, string_agg(site, '','') n FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(DISTINCT site) n FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, ln(sum(amount)) n FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id HAVING ln(sum(amount)) > 1) p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*), dp_count(1.0) FROM ppv GROUP BY person_id) p');
-- The outer level joins: protected tables, another per-person level, public tables.
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p JOIN ppp ON ppp.person_id = p.person_id');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p, (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) q');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p JOIN ppsites s ON s.site = ''s'' || p.n');
-- A CTE, and a subquery of a subquery.
SELECT outcome('WITH p AS (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) SELECT dp_count(1.0) FROM p');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT * FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) a) p');
-- A public side that one person's row meets too often (run time).
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT v.person_id, count(*) n FROM ppv v, generate_series(1, 10000000) g WHERE g < v.n GROUP BY v.person_id) p');
-- EXPLAIN reads estimates of the data.
SELECT outcome('EXPLAIN SELECT dp_count(1.0) FROM (SELECT person_id, count(*) n FROM ppv GROUP BY person_id) p');

-- 3. The attacks, at ε 2^-30: a statement whose error would depend on one
-- person's values (a float8 sum beyond float8's range; an average, whose
-- sum of squares overflows from 1e155 on; a numeric sum beyond the numeric
-- format, found by an independent attack). With the float sums in numeric
-- and numeric arguments read capped it succeeds whatever the values (each
-- run with two values of person 1's).
\c - postgres
UPDATE ppv SET amount = 1e308 WHERE person_id = 1;
\c - dp_person_analyst
\set VERBOSITY terse
CREATE TEMP TABLE attacks AS SELECT * FROM (VALUES
  ('float8 sum overflow', 'SELECT person_id, sum(amount) s FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('float8 average overflow', 'SELECT person_id, avg(amount) s FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('float8 sum overflow in HAVING', 'SELECT person_id, 1 s FROM ppv WHERE person_id = 1 GROUP BY person_id HAVING sum(amount) > 0'),
  ('float8 sum overflow, column unused', 'SELECT person_id, 1 s, sum(amount) t FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('product of sums', 'SELECT person_id, sum(amount) * sum(amount) s FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('numeric sum overflow', 'SELECT person_id, sum(CASE WHEN amount > 1e300 THEN 9e131071 ELSE 0 END) s FROM ppv CROSS JOIN generate_series(1, 2) g WHERE person_id = 1 GROUP BY person_id'),
  ('numeric average overflow', 'SELECT person_id, avg(CASE WHEN amount > 1e300 THEN 9e131071 ELSE 0 END) s FROM ppv CROSS JOIN generate_series(1, 2) g WHERE person_id = 1 GROUP BY person_id')) a(name, sql);
SELECT name, outcome('SELECT dp_count(2^(-30)) FROM (' || sql || ') p WHERE s > 0') FROM attacks ORDER BY 1;
\c - postgres
UPDATE ppv SET amount = 1 WHERE person_id = 1;
\c - dp_person_analyst
\set VERBOSITY terse
CREATE TEMP TABLE attacks AS SELECT * FROM (VALUES
  ('float8 sum overflow', 'SELECT person_id, sum(amount) s FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('float8 average overflow', 'SELECT person_id, avg(amount) s FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('float8 sum overflow in HAVING', 'SELECT person_id, 1 s FROM ppv WHERE person_id = 1 GROUP BY person_id HAVING sum(amount) > 0'),
  ('float8 sum overflow, column unused', 'SELECT person_id, 1 s, sum(amount) t FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('product of sums', 'SELECT person_id, sum(amount) * sum(amount) s FROM ppv WHERE person_id = 1 GROUP BY person_id'),
  ('numeric sum overflow', 'SELECT person_id, sum(CASE WHEN amount > 1e300 THEN 9e131071 ELSE 0 END) s FROM ppv CROSS JOIN generate_series(1, 2) g WHERE person_id = 1 GROUP BY person_id'),
  ('numeric average overflow', 'SELECT person_id, avg(CASE WHEN amount > 1e300 THEN 9e131071 ELSE 0 END) s FROM ppv CROSS JOIN generate_series(1, 2) g WHERE person_id = 1 GROUP BY person_id')) a(name, sql);
SELECT name, outcome('SELECT dp_count(2^(-30)) FROM (' || sql || ') p WHERE s > 0') FROM attacks ORDER BY 1;

-- 3. Plain aggregates of a person's values (issue 48), bounded by the
-- policy (src/gate/policy/bounds.rs, person_value): a person's count of
-- rows in [0, R], their sum R times the column's domain, their average,
-- minimum or maximum in the domain; a CASE of constants by its constants.
\c - postgres
SELECT dp_policy('ppv', 100, 20), dp_domain('ppv', 'amount', 0, 50);
SELECT avg(visits) AS visits, avg(spent) AS spent, percentile_cont(0.5) WITHIN GROUP (ORDER BY spent) AS median
FROM (SELECT person_id, count(*) AS visits, sum(amount) AS spent FROM ppv GROUP BY person_id) p \gset truth_
\c - dp_person_analyst
SELECT abs(avg(visits) - :truth_visits) < 0.5 AS visits, abs(avg(spent) - :truth_spent) < 5 AS spent,
       abs(percentile_cont(0.5) WITHIN GROUP (ORDER BY spent) - :truth_median) < 25 AS median,
       abs(avg(CASE WHEN visits > 3 THEN 1.0 ELSE 0 END) - 1) < 0.05 AS share, max(a) <= 50 AS top
FROM (SELECT person_id, count(*) AS visits, sum(amount) AS spent, max(amount) AS a FROM ppv GROUP BY person_id) p;
-- With R = 5 a person's 10 visits count as 5: the clamp is bounding's
-- bias, which no interval shows (dp_bounding_loss estimates it).
\c - postgres
SELECT dp_policy('ppv', 100, 5);
\c - dp_person_analyst
SELECT round(avg(visits)) AS visits FROM (SELECT person_id, count(*) AS visits FROM ppv GROUP BY person_id) p;
-- A person's value without bounds (a date, an aggregate of a column
-- without a domain) is refused as before.
SELECT outcome('SELECT max(d) FROM (SELECT person_id, max(d) d FROM ppv GROUP BY person_id) p');
SELECT outcome('SELECT avg(s) FROM (SELECT person_id, sum(num) s FROM ppv GROUP BY person_id) p');
