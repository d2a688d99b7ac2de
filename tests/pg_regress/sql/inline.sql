-- Raw rows through a CTE or a subquery (issues 48 and 49): a BI tool's
-- wrapper (Superset's virtual_table, Metabase's "source") and an
-- analyst's CTE of filtered rows are taken into the level that aggregates
-- them before anything is checked (src/gate/inline.rs), and answered,
-- charged and refused as the same statement written without them.
DO $$ BEGIN
    CREATE ROLE dp_inline_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 1000 persons of one row each; 3000 visits, three per person; a public
-- list of sites.
CREATE TABLE inl_persons (person_id int PRIMARY KEY, region text, amount int);
INSERT INTO inl_persons SELECT i, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END, i % 100
FROM generate_series(1, 1000) i;
CREATE TABLE inl_visits (person_id int, site text, amount float8);
INSERT INTO inl_visits SELECT i % 1000 + 1, 's' || i % 3, i % 50 FROM generate_series(1, 3000) i;
CREATE TABLE inl_sites (site text, name text);
INSERT INTO inl_sites VALUES ('s0', 'zero'), ('s1', 'one'), ('s2', 'two');
CREATE VIEW inl_north AS SELECT * FROM inl_persons WHERE region = 'north';
GRANT SELECT ON inl_persons, inl_visits, inl_sites, inl_north TO dp_inline_analyst;
SELECT dp_protect('inl_persons', 'person_id'), dp_protect('inl_visits', 'person_id', 3);
SELECT dp_policy('inl_persons', 100), dp_policy('inl_visits', 100, 3);
SELECT dp_domain('inl_persons', 'amount', 0, 100), dp_domain('inl_visits', 'amount', 0, 50);
SELECT dp_analyst('dp_inline_analyst');
SELECT dp_budget_grant('dp_inline_analyst', 1e6, 1);
\c - dp_inline_analyst
\set VERBOSITY terse

-- Superset's virtual dataset: its SQL wrapped as virtual_table. ε = 100:
-- a count's noise is a few units at most.
SELECT region, pg_typeof(count), abs(count - 500) <= 20 AS near FROM (
  SELECT region AS region, COUNT(*) AS count FROM (SELECT * FROM inl_persons WHERE amount >= 0) AS virtual_table
  GROUP BY region ORDER BY count DESC LIMIT 10000) s ORDER BY region;
-- Metabase's question on a saved question: wrapped as "source", its
-- columns renamed.
SELECT site, abs(count - 1000) <= 60 AS near FROM (
  SELECT "source"."site" AS "site", COUNT(*) AS "count" FROM (SELECT "public"."inl_visits"."site" AS "site",
  "public"."inl_visits"."amount" AS "amount" FROM "public"."inl_visits") AS "source"
  GROUP BY "source"."site" ORDER BY "source"."site" ASC) s;
-- An analyst's CTE of filtered rows (persons with amount > 89: 100), and
-- CTEs that read CTEs.
WITH rich AS (SELECT * FROM inl_persons WHERE amount > 89)
SELECT abs(dp_count(100) - 100) <= 5 AS near FROM rich;
WITH v AS (SELECT * FROM inl_visits), big AS (SELECT site, amount * 2 AS twice FROM v WHERE amount >= 25)
SELECT abs(count(*) - 1500) <= 10 AS near FROM big WHERE twice > 0;
-- A wrapper joined to a public table, and one inside another.
SELECT s.name, abs(dp_count(100) - 1000) <= 10 AS near
FROM (SELECT * FROM inl_visits WHERE amount < 100) v JOIN inl_sites s ON s.site = v.site GROUP BY s.name ORDER BY 1;
SELECT abs(count(*) - 940) <= 20 AS near FROM (SELECT * FROM (SELECT person_id, amount * 2 AS a2 FROM inl_persons) x
WHERE a2 > 10) y;
-- A CTE read twice: each reading its own release.
WITH r AS (SELECT * FROM inl_persons)
SELECT abs((SELECT count(*) FROM r WHERE region = 'north') - 500) <= 10 AS north_near,
       abs((SELECT count(*) FROM r WHERE region = 'south') - 500) <= 10 AS south_near;

-- Charged as the statement without its wrapper: the same ε.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT count(*) > 0 AS answered FROM (SELECT site, count(*) FROM inl_visits WHERE amount > 1 GROUP BY site) q;
SELECT count(*) > 0 AS answered FROM (SELECT site, count(*) FROM (SELECT * FROM inl_visits WHERE amount > 1) w
GROUP BY site) q;
SELECT count(DISTINCT epsilon) AS one_price, count(*) AS releases FROM dp_my_ledger WHERE id > :seen;
-- ...and the same noise: a wrapper over a table of one row per person is
-- still one row per person (its count's error is a person's, not R rows').
SELECT e AS direct_error FROM (SELECT region, count(*), dp_error(count(*)) e FROM inl_persons GROUP BY region) q
LIMIT 1 \gset
SELECT e AS wrapped_error FROM (SELECT region, count(*), dp_error(count(*)) e
FROM (SELECT * FROM inl_persons) AS virtual_table GROUP BY region) q LIMIT 1 \gset
SELECT :direct_error = :wrapped_error AS same_error, :direct_error < 0.1 AS one_person;

-- Refused as before, before any charge: a wrapper that still passes raw
-- rows up (a LIMIT picks rows, MATERIALIZED keeps the CTE, a nullable
-- side of an outer join, LATERAL, a volatile output, a view), and raw
-- rows read through a wrapper.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT outcome('SELECT count(*) FROM (SELECT * FROM inl_persons LIMIT 10) p');
SELECT outcome('WITH r AS MATERIALIZED (SELECT * FROM inl_persons) SELECT count(*) FROM r');
SELECT outcome('SELECT count(*) FROM inl_sites s LEFT JOIN (SELECT * FROM inl_visits) v ON v.site = s.site');
SELECT outcome('SELECT count(*) FROM inl_sites s, LATERAL (SELECT * FROM inl_visits v WHERE v.site = s.site) v');
SELECT outcome('SELECT count(*) FROM (SELECT random() AS r, * FROM inl_persons) p WHERE r > 0.5');
SELECT outcome('SELECT count(*) FROM inl_north');
SELECT outcome('SELECT * FROM (SELECT * FROM inl_persons) p');
SELECT outcome('WITH r AS (SELECT amount FROM inl_persons) SELECT * FROM r ORDER BY amount LIMIT 1');
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;

-- A wrapper's references to levels above it keep pointing at them once
-- it is taken in (one level closer), and CTEs inlined into each other and
-- into a join keep their own WITH: refused or answered, never an internal
-- error.
SELECT outcome($$SELECT p.site, (SELECT n FROM (SELECT dp_count(1.0) n FROM (SELECT v.* FROM inl_visits v
  JOIN (SELECT site FROM inl_sites s2 WHERE s2.site = p.site) x USING (site)) r) y) FROM inl_sites p$$);
-- A public list correlated with an outer row is refused: it would be a
-- new release of the level for each outer row, all charged once.
SELECT outcome($$SELECT p.site, (SELECT dp_count(1.0) FROM inl_persons v
  JOIN (SELECT site FROM inl_sites s2 WHERE s2.site >= p.site) x ON true) FROM inl_sites p$$);
SELECT outcome($$WITH s AS (SELECT site FROM inl_sites), r AS (SELECT v.* FROM inl_visits v JOIN s USING (site))
  SELECT dp_count(1.0) FROM r$$);
WITH a AS (SELECT * FROM inl_visits), b AS (SELECT * FROM inl_persons), c AS (SELECT * FROM b WHERE amount >= 0)
SELECT abs(dp_count(100) - 1000) <= 5 AS near FROM a JOIN c USING (person_id);
