-- A public list in WHERE (issue 49): x IN (SELECT y FROM <public tables>)
-- becomes a join with the DISTINCT list before the gate's checks
-- (src/gate/semijoin.rs), answered as the join would be; so does a
-- correlated EXISTS on one equality; NOT IN, NOT EXISTS, other
-- comparisons, uncorrelated EXISTS, correlated or protected lists stay
-- refused.
DO $$ BEGIN
    CREATE ROLE dp_lists_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 3000 visits of 1000 persons at sites s0 to s2 (three each, one site a
-- person); a public table of sites, s1 listed twice.
CREATE TABLE pl_visits (person_id int, site text, amount int);
INSERT INTO pl_visits SELECT i % 1000, 's' || (i % 1000) % 3, i % 50 FROM generate_series(1, 3000) i;
CREATE TABLE pl_sites (site text, region text);
INSERT INTO pl_sites VALUES ('s0', 'north'), ('s1', 'north'), ('s1', 'north'), ('s2', 'south');
GRANT SELECT ON pl_visits, pl_sites TO dp_lists_analyst;
SELECT dp_protect('pl_visits', 'person_id', 2), dp_policy('pl_visits', 100, 3);
SELECT dp_analyst('dp_lists_analyst');
SELECT dp_budget_grant('dp_lists_analyst', 1e6, 1);
CREATE TABLE pl_truth AS SELECT
  (SELECT count(DISTINCT person_id) FROM pl_visits WHERE site IN ('s0', 's1')) AS persons,
  (SELECT count(*) FROM pl_visits WHERE site IN ('s0', 's1') AND amount > 3) AS rows;
SELECT * FROM pl_truth;
GRANT SELECT ON pl_truth TO dp_lists_analyst;
\c - dp_lists_analyst
\set VERBOSITY terse
-- The persons and the rows at the north's sites, each row once though s1
-- is listed twice (epsilon 100: a count's noise is a unit or so).
SELECT abs(n - t.persons) <= 3 AS persons_near
FROM (SELECT dp_count(100) AS n FROM pl_visits WHERE site IN (SELECT site FROM pl_sites WHERE region = 'north')) q,
     pl_truth t;
SELECT abs(n - t.rows) <= 10 AS rows_near
FROM (SELECT count(*) AS n FROM pl_visits WHERE amount > 3 AND site IN (SELECT site FROM pl_sites WHERE region = 'north')) q,
     pl_truth t;
-- Grouped by the list's own column, through = ANY.
SELECT site, abs(n - 333) <= 10 AS near FROM (
  SELECT site, dp_count(100) AS n FROM pl_visits WHERE site = ANY (SELECT site FROM pl_sites) GROUP BY site) q ORDER BY 1;
-- A correlated EXISTS on the public side is the IN list it asks (the
-- same persons; s1 listed twice still counts each row once), either way
-- round, with other conditions on the public side.
SELECT abs(n - t.persons) <= 3 AS persons_near
FROM (SELECT dp_count(100) AS n FROM pl_visits v
      WHERE EXISTS (SELECT 1 FROM pl_sites s WHERE s.site = v.site AND s.region = 'north')) q, pl_truth t;
SELECT abs(n - t.rows) <= 10 AS rows_near
FROM (SELECT count(*) AS n FROM pl_visits v
      WHERE v.amount > 3 AND EXISTS (SELECT * FROM pl_sites s WHERE s.region = 'north' AND v.site = s.site)) q, pl_truth t;
-- Stay refused, before any charge: NOT EXISTS, an EXISTS correlated on
-- two columns or by anything but an equality, one of protected rows.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT outcome($$SELECT dp_count(1) FROM pl_visits v WHERE NOT EXISTS (SELECT 1 FROM pl_sites s WHERE s.site = v.site)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits v WHERE EXISTS (SELECT 1 FROM pl_sites s WHERE s.site = v.site AND s.region > v.site)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits v WHERE EXISTS (SELECT 1 FROM pl_sites s WHERE s.site > v.site)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits v WHERE EXISTS (SELECT 1 FROM pl_visits w WHERE w.person_id = v.person_id AND w.amount > 40)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits v WHERE EXISTS (SELECT 1 FROM pl_sites s WHERE s.site = v.site LIMIT 1)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE site NOT IN (SELECT site FROM pl_sites)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE site > ANY (SELECT site FROM pl_sites)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE EXISTS (SELECT 1 FROM pl_sites WHERE region = 'north')$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits v WHERE site IN (SELECT site FROM pl_sites s WHERE s.region = v.site)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE site IN (SELECT site FROM pl_sites LIMIT 1)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE person_id IN (SELECT person_id FROM pl_visits WHERE amount > 40)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE site IN (SELECT site FROM pl_sites) OR amount > 3$$);
SELECT outcome($$WITH n AS (SELECT site FROM pl_visits WHERE amount > 40)
  SELECT dp_count(1) FROM pl_visits WHERE site IN (SELECT site FROM n)$$);
SELECT outcome($$SELECT dp_count(1) FROM pl_visits WHERE site || random()::text IN (SELECT site FROM pl_sites)$$);
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
