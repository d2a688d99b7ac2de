-- What bounding drops (issue 48): dp_bounding_loss estimates, with its
-- own charge, the share of rows a plain count over several rows per
-- person keeps under R rows a person in a group and k groups a person,
-- for the DBA choosing them (src/gate/policy/bias.sql, docs/bi.md).
-- 2000 persons with 1 to 9 visits each at 4 sites.
CREATE TABLE bias_visits (person_id int, site text);
INSERT INTO bias_visits SELECT p, 's' || (p * j % 4) FROM generate_series(1, 2000) p, generate_series(1, 1 + p % 9) j;
SELECT dp_protect('bias_visits', 'person_id', 2);
-- The truths: rows kept at R = 5 without keys, and by site at k = 2 (each
-- person keeps k of their m sites, chosen at random: k / m of their rows
-- at R a site), and all rows.
CREATE TEMP TABLE bias_truth AS SELECT
  (SELECT sum(least(n, 5)) FROM (SELECT person_id, count(*) n FROM bias_visits GROUP BY 1) x) AS kept_total,
  (SELECT sum(kept) FROM (SELECT person_id, sum(least(n, 5)) * least(1.0, 2.0 / count(*)) AS kept
     FROM (SELECT person_id, site, count(*) n FROM bias_visits GROUP BY 1, 2) g GROUP BY 1) x) AS kept_sites,
  (SELECT count(*) FROM bias_visits) AS total;
SELECT * FROM bias_truth;
-- At epsilon 100 each estimate's noise is a few rows at most (scales 0.2 and 0.4).
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT abs(b.rows_kept - t.kept_total) < 10 AS kept_near, abs(b.rows_total - t.total) < 10 AS total_near,
       abs(b.share_dropped - (1 - t.kept_total / t.total)) < 0.01 AS share_near
FROM dp_bounding_loss('bias_visits', 100, 5, max_rows => 20) b, bias_truth t;
SELECT abs(b.rows_kept - t.kept_sites) < 10 AS kept_near, abs(b.share_dropped - (1 - t.kept_sites / t.total)) < 0.01 AS share_near
FROM dp_bounding_loss('bias_visits', 100, 5, 'site', max_rows => 20) b, bias_truth t;
-- Charged its epsilon to the caller, once a call.
SELECT count(*) AS charges, sum(epsilon) AS epsilon FROM dp_my_ledger WHERE id > :seen;
-- Mistakes: a documented SQLSTATE, nothing charged.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT outcome($$SELECT * FROM dp_bounding_loss('pg_class', 1)$$);
SELECT outcome($$SELECT * FROM dp_bounding_loss('bias_visits', 0)$$);
SELECT outcome($$SELECT * FROM dp_bounding_loss('bias_visits', 1, 0)$$);
SELECT outcome($$SELECT * FROM dp_bounding_loss('bias_visits', 1, 5, 'nothing')$$);
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
-- The DBA's tool: not for other roles.
DO $$ BEGIN
    CREATE ROLE dp_bias_other LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
\c - dp_bias_other
SELECT outcome($$SELECT * FROM dp_bounding_loss('bias_visits', 1)$$);
