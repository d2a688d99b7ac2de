-- An analyst's natural mistakes (issue 49): each gets the documented
-- refusal, never an internal error, before anything is charged.
DO $$ BEGIN
    CREATE ROLE dp_mistakes_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 200 persons with 3 visits each, and a table of one row per person.
CREATE TABLE mistake_visits (person_id int, site text, amount float8);
INSERT INTO mistake_visits SELECT i % 200, 's' || i % 5, i % 90 FROM generate_series(1, 600) i;
CREATE TABLE mistake_persons (person_id int PRIMARY KEY, age int);
INSERT INTO mistake_persons SELECT i, 20 + i % 50 FROM generate_series(0, 199) i;
SELECT dp_protect('mistake_visits', 'person_id', 2), dp_protect('mistake_persons', 'person_id');
SELECT dp_analyst('dp_mistakes_analyst');
SELECT dp_budget_grant('dp_mistakes_analyst', 1e6, 1);
\c - dp_mistakes_analyst
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset

-- A privacy parameter read from a column is refused as for every role
-- (22023), with or without GROUP BY: without one, the level bounded per
-- person once failed in the planner (XX000 could not find attribute 3 in
-- subquery targetlist).
SELECT outcome('SELECT dp_sum(amount, amount / 100, 0, 100) FROM mistake_visits');
SELECT outcome('SELECT site, dp_sum(amount, amount / 100, 0, 100) FROM mistake_visits GROUP BY site');
SELECT outcome('SELECT dp_count(amount) FROM mistake_visits');
SELECT outcome('SELECT dp_sum(v.amount, 1.0, 0, p.age) FROM mistake_visits v JOIN mistake_persons p USING (person_id)');
SELECT outcome('SELECT dp_sum(age, age / 100.0, 0, 100) FROM mistake_persons');

-- GROUP BY the privacy unit, over several rows per person or a join,
-- makes a group of each person, which partition selection (almost) never
-- shows: refused (ZB003), naming the per-person subquery, instead of
-- charged for an empty answer.
\set VERBOSITY default
SELECT person_id, dp_count(1.0) FROM mistake_visits GROUP BY person_id;
\set VERBOSITY terse
SELECT outcome('SELECT person_id, site, dp_count(1.0) FROM mistake_visits GROUP BY person_id, site');
SELECT outcome('SELECT person_id::bigint, dp_count(1.0) FROM mistake_visits GROUP BY 1');
SELECT outcome('SELECT person_id, dp_sum(v.amount, 1.0, 0, 100) FROM mistake_visits v JOIN mistake_persons p USING (person_id) GROUP BY person_id');
SELECT outcome('SELECT p.person_id, dp_count(1.0) FROM mistake_visits v JOIN mistake_persons p USING (person_id) GROUP BY p.person_id');
-- NaN bounds on a row count that would select its own groups: the
-- parameter error, never an internal one (f64::clamp panicked; CI fuzz
-- seed 599962607).
SELECT outcome($$SELECT site, dp_sum(1e-100, 1.0, 'NaN'::float8, 'NaN'::float8) FROM mistake_visits GROUP BY site$$);
-- A built-in aggregate over protected rows that the tables' policy does
-- not answer (policy.sql answers count(*), and sum and avg of a column
-- with a domain) is refused (ZB003) with, as its hint, the dpnoise
-- aggregate that answers the same question.
\set VERBOSITY default
SELECT count(DISTINCT site) FROM mistake_visits;
SELECT site, sum(amount) FROM mistake_visits GROUP BY site;
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM mistake_visits;
SELECT stddev(amount), max(amount) FROM mistake_visits;
SELECT avg(age) FROM mistake_persons;
-- More natural mistakes (issue 49, item 3): each refusal names what was
-- written and, as its hint, the form that answers the same question.
SELECT * FROM mistake_visits LIMIT 5;
SELECT site FROM mistake_visits WHERE amount > 50;
SELECT dp_count(1.0) OVER () FROM mistake_visits;
SELECT dp_count(1.0) FROM mistake_visits WHERE site ~ '^s1';
SELECT dp_count(1.0) FROM mistake_visits WHERE amount > (SELECT avg(amount) FROM mistake_visits);
SELECT dp_count(1.0) FILTER (WHERE amount > 3) FROM mistake_visits;
SELECT dp_sum(amount, 1.0, 0, 100) FROM mistake_visits TABLESAMPLE SYSTEM (10);
SELECT site, dp_count(1.0) FROM mistake_visits GROUP BY ROLLUP (site);
SELECT count(*) FROM mistake_visits a JOIN mistake_visits b USING (person_id);
SELECT dp_sum(amount, 1.0, 100, 0) FROM mistake_visits;
SELECT dp_count(1.0, 'gaussian') FROM mistake_visits;
SELECT dp_quantile(amount, 1.0, 0, 100, amount / 100) FROM mistake_visits;
WITH big AS MATERIALIZED (SELECT * FROM mistake_visits WHERE amount > 10) SELECT dp_count(1.0) FROM big;
SELECT dp_count(1.0) FROM (SELECT * FROM mistake_visits LIMIT 100) v;
\set VERBOSITY terse
SELECT count(*) AS charged_for_refusals FROM dp_my_ledger WHERE id > :seen;
-- Once mistakes, now answered as written (src/gate/inline.rs): a CTE of
-- filtered raw rows, and the same rows as a subquery, are taken into the
-- level that aggregates them (200 persons have a visit over 10).
WITH big AS (SELECT * FROM mistake_visits WHERE amount > 10) SELECT abs(dp_count(1000) - 200) < 1 AS near FROM big;
SELECT abs(dp_count(1000) - 200) < 1 AS near FROM (SELECT person_id, site FROM mistake_visits WHERE amount > 10) v;
-- The suggested forms, as written, answer over several rows per person
-- too (issue 45 item 2: a person's own median, one of their rows).
SELECT dp_median(amount, 1000, 0, 100) BETWEEN 0 AND 100 AS median,
       dp_stddev(amount, 1000, 0, 100) BETWEEN 0 AND 50 AS stddev,
       dp_max(amount, 1000, 0, 100) BETWEEN 0 AND 100 AS max,
       dp_quantile(amount, 1000, 0, 100, 0.5) BETWEEN 0 AND 100 AS quantile
FROM mistake_visits;

-- A person's value per site, then summarised per site (a subquery
-- grouped by the person and a key): refused, with the table grouped by
-- the key itself as the form (dp_avg averages the persons' averages in a
-- group), written from the statement's own names.
\set VERBOSITY default
SELECT site, avg(a) FROM (SELECT site, avg(amount) AS a FROM mistake_visits GROUP BY person_id, site) s GROUP BY site;
SELECT site, sum(n) FROM (SELECT site, count(*) AS n FROM mistake_visits GROUP BY person_id, site) s GROUP BY site;
\set VERBOSITY terse

-- What the refusal suggests answers per-person questions: at epsilon
-- 1000 the noise is almost surely 0.
SELECT dp_count(1000.0) AS persons, round(dp_avg(n, 1000.0, 0, 10)::numeric, 2) AS visits_per_person
FROM (SELECT person_id, count(*) AS n FROM mistake_visits GROUP BY person_id) p;
-- An expression of the unit groups persons, and stays admitted (a person
-- is in one group: at k = 1 each half of 100 persons is always shown).
SET dpnoise.max_groups_contributed = 1;
SELECT sum(c) AS persons FROM (SELECT person_id % 2 AS half, dp_count(1000.0) AS c FROM mistake_visits GROUP BY 1) s;
\c - postgres
-- A call PostgreSQL cannot resolve (a missing bound, a missing epsilon)
-- gets the function's forms and an example as its hint (src/hints.rs);
-- nothing ran, nothing was charged.
\set VERBOSITY default
SELECT count(*) AS charges FROM dpnoise.ledger \gset
SELECT dp_sum(x, 1.0) FROM t;
SELECT dp_count() FROM t;
SELECT dp_median(x, 1.0, 0) FROM t;
SELECT lower(1);
SELECT count(*) - :charges AS new_charges FROM dpnoise.ledger;
