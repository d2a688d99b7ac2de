-- Plain aggregates with a condition (issue 48), as BI tools write them:
-- FILTER (WHERE ...) on count, sum, avg and the rest, and Metabase's "count where"
-- and "sum where" (SUM(CASE WHEN c THEN 1 ELSE 0.0 END)), answered under
-- the table's policy like the unconditioned forms (src/gate/policy/).
DO $$ BEGIN
    CREATE ROLE dp_filter_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 1000 persons of one row each (amount 0 to 99); 3000 visits, three per
-- person at sites s0, s1, s2 (amount 0 to 49).
CREATE TABLE pf_persons (person_id int PRIMARY KEY, region text, amount int);
INSERT INTO pf_persons SELECT i, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END, i % 100
FROM generate_series(1, 1000) i;
CREATE TABLE pf_visits (person_id int, site text, amount numeric(10, 2));
INSERT INTO pf_visits SELECT i % 1000 + 1, 's' || i % 3, i % 50 FROM generate_series(1, 3000) i;
-- 400 persons with 8 visits each, every amount 70: more rows than the
-- policy's R = 5 counts.
CREATE TABLE pf_heavy (person_id int, site text, amount float8);
INSERT INTO pf_heavy SELECT p, 's' || (p % 2), 70 FROM generate_series(1, 400) p, generate_series(1, 8);
GRANT SELECT ON pf_persons, pf_visits, pf_heavy TO dp_filter_analyst;
SELECT dp_protect('pf_persons', 'person_id'), dp_protect('pf_visits', 'person_id', 3);
SELECT dp_protect('pf_heavy', 'person_id', 2), dp_policy('pf_heavy', 100, 5), dp_domain('pf_heavy', 'amount', 0, 100);
SELECT dp_policy('pf_persons', 100), dp_policy('pf_visits', 100, 3);
SELECT dp_domain('pf_persons', 'amount', 0, 100), dp_domain('pf_visits', 'amount', 0, 50);
SELECT dp_analyst('dp_filter_analyst');
SELECT dp_budget_grant('dp_filter_analyst', 1e6, 1);
-- The truths the analyst compares with.
CREATE TABLE pf_truth AS SELECT
    (SELECT count(*) FROM pf_persons WHERE amount >= 50) AS persons_50,
    (SELECT sum(amount) FROM pf_persons WHERE region = 'north') AS north_sum,
    (SELECT avg(amount) FROM pf_persons WHERE region = 'north') AS north_avg,
    (SELECT count(*) FROM pf_visits WHERE site = 's1') AS s1_visits,
    (SELECT sum(amount) FROM pf_visits WHERE site = 's1') AS s1_sum;
SELECT * FROM pf_truth;
GRANT SELECT ON pf_truth TO dp_filter_analyst;
\c - dp_filter_analyst
\set VERBOSITY terse
-- FILTER on one row per person: as the dpnoise forms would answer (ε 100
-- split three ways: a count's noise is a few units at most).
SELECT pg_typeof(c) AS count_type, abs(c - t.persons_50) <= 3 AS count_near,
       abs(s - t.north_sum) <= 300 AS sum_near, abs(a - t.north_avg) <= 1 AS avg_near
FROM (SELECT count(*) FILTER (WHERE amount >= 50) c, sum(amount) FILTER (WHERE region = 'north') s,
             avg(amount) FILTER (WHERE region = 'north') a FROM pf_persons) q, pf_truth t;
-- FILTER over several rows per person (R = 3 of a person's rows).
SELECT abs(c - t.s1_visits) <= 10 AS count_near, abs(s - t.s1_sum) <= 500 AS sum_near
FROM (SELECT count(*) FILTER (WHERE site = 's1') c, sum(amount) FILTER (WHERE site = 's1') s FROM pf_visits) q,
     pf_truth t;
-- Metabase's count where, sum where and share, as it sends them.
SELECT abs(cw - t.s1_visits) <= 10 AS count_where_near, abs(sw - t.s1_sum) <= 500 AS sum_where_near,
       abs(share - t.s1_visits / 3000.0) < 0.01 AS share_near
FROM (SELECT SUM(CASE WHEN "public"."pf_visits"."site" = 's1' THEN 1 ELSE 0.0 END) AS cw,
             SUM(CASE WHEN "public"."pf_visits"."site" = 's1' THEN "public"."pf_visits"."amount" ELSE 0.0 END) AS sw,
             SUM(CASE WHEN "public"."pf_visits"."site" = 's1' THEN 1 ELSE 0.0 END) / COUNT(*) AS share
      FROM "public"."pf_visits") q, pf_truth t;
-- A sum of a constant counts rows.
SELECT abs(n - 3000) <= 10 AS rows_near FROM (SELECT sum(1) AS n FROM pf_visits) q;
-- The error beside a conditioned sum is the domain's: [0, 1] a row.
SELECT e = (SELECT ci_half_width FROM dp_query_accuracy('sum', 100, ARRAY['pf_visits'], 0, 3)) AS error_of_count_where
FROM (SELECT SUM(CASE WHEN site = 's1' THEN 1 ELSE 0 END) AS cw, dp_error(SUM(CASE WHEN site = 's1' THEN 1 ELSE 0 END)) AS e
      FROM pf_visits) q;

-- An average over persons with more rows than R: the rows it sums are
-- the rows it counts (R of a person's at most, at their mean), so it is
-- 70, not 500 / 5 = 100, without keys (a person's rows combined by the
-- person) and by site (the window keeps a person's first groups).
SELECT abs(a - 70) < 1 AS avg_near FROM (SELECT avg(amount) AS a FROM pf_heavy) q;
SELECT site, abs(a - 70) < 1 AS avg_near FROM (SELECT site, avg(amount) AS a FROM pf_heavy GROUP BY site) q ORDER BY 1;

-- FILTER on a spread, an order statistic, a percentile: the value only
-- where the condition holds (north: even amounts 0 to 98, spread 28.9;
-- south: odd ones, median 50).
SELECT m BETWEEN 85 AND 100 AS max_high, abs(sd - 28.9) < 3 AS spread_near, abs(md - 50) < 4 AS median_near
FROM (SELECT max(amount) FILTER (WHERE region = 'north') m, stddev(amount) FILTER (WHERE region = 'north') sd,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FILTER (WHERE region = 'south') md FROM pf_persons) q;

-- Left as written and refused, before any charge: an expression without
-- a domain, an order statistic of a CASE, FILTER with DISTINCT.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT outcome($$SELECT sum(CASE WHEN site = 's1' THEN amount * 2 ELSE 0 END) FROM pf_visits$$);
SELECT outcome($$SELECT max(CASE WHEN region = 'north' THEN amount END) FROM pf_persons$$);
SELECT outcome($$SELECT count(DISTINCT person_id) FILTER (WHERE site = 's1') FROM pf_visits$$);
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
