-- Privacy policies (issue 48): an analyst's plain count, sum and avg over
-- a protected table become dpnoise aggregates under the table's policy
-- (src/gate/policy/, docs/bi.md), with PostgreSQL's result types.
DO $$ BEGIN
    CREATE ROLE dp_policy_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 1000 persons of one row each; 3000 visits, three per person, and one
-- person (id 0) with 10 more.
CREATE TABLE pol_persons (person_id int PRIMARY KEY, region text, amount int, score float8);
INSERT INTO pol_persons SELECT i, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END, i % 100,
    CASE WHEN i % 10 = 0 THEN NULL ELSE i % 7 END FROM generate_series(1, 1000) i;
CREATE TABLE pol_visits (person_id int, site text, amount float8);
INSERT INTO pol_visits SELECT i % 1000 + 1, 's' || i % 3, i % 50 FROM generate_series(1, 3000) i;
INSERT INTO pol_visits SELECT 0, 's0', 49 FROM generate_series(1, 10);
GRANT SELECT ON pol_persons, pol_visits TO dp_policy_analyst;
SELECT dp_protect('pol_persons', 'person_id'), dp_protect('pol_visits', 'person_id', 3);
SELECT dp_analyst('dp_policy_analyst');
SELECT dp_budget_grant('dp_policy_analyst', 1e6, 1);

-- The DBA's mistakes: each a documented SQLSTATE, nothing written.
SELECT outcome($$SELECT dp_domain('pol_persons', 'nothing', 0, 1)$$);
SELECT outcome($$SELECT dp_domain('pol_persons', 'amount', 5, 1)$$);
SELECT outcome($$SELECT dp_domain('pol_persons', 'region', 0, 1)$$);
SELECT outcome($$SELECT dp_domain('pol_persons', 'amount', 0, 'Infinity')$$);
SELECT outcome($$SELECT dp_domain('pol_persons', 'amount', 0, NULL)$$);
SELECT outcome($$SELECT dp_domain('dp_policies', 'lower', 0, 1)$$);
SELECT outcome($$SELECT dp_policy('pol_persons', 0)$$);
SELECT outcome($$SELECT dp_policy('pol_persons', 1, 0)$$);
SELECT outcome($$SELECT dp_policy('dp_policies', 1)$$);
SELECT count(*) AS domains FROM dp_policies WHERE column_name IS NOT NULL AND table_name::text LIKE 'pol\_%';

-- The default policy (dpnoise.policy_epsilon, policy_rows_per_person).
SHOW dpnoise.policy_epsilon;
SHOW dpnoise.policy_rows_per_person;
\c - dp_policy_analyst
\set VERBOSITY terse
-- An analyst reads the policies, and can neither change them nor the defaults.
SELECT table_name, statement_epsilon, rows_per_person, column_name FROM dp_policies
WHERE table_name::text LIKE 'pol\_%' ORDER BY 1, 4;
SELECT outcome($$SELECT dp_policy('pol_persons', 100)$$);
SELECT outcome($$SELECT dp_domain('pol_persons', 'amount', 0, 1)$$);
SELECT outcome('SET dpnoise.policy_epsilon = 100');
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- COUNT(*) is answered as a bigint, charged the default 1.0 and 0.1 for
-- its run time (timing.sql); noise of scale 1: within 20 of the truth but
-- for a chance of 2e-9.
SELECT pg_typeof(n), abs(n - 1000) <= 20 AS near FROM (SELECT COUNT(*) AS n FROM pol_persons) s;
SELECT epsilon FROM dp_my_ledger WHERE id > :seen;
-- A sum without a domain is refused, naming the domain.
\set VERBOSITY default
SELECT sum(amount) FROM pol_persons;
\set VERBOSITY terse

\c - postgres
SELECT dp_domain('pol_persons', 'amount', 0, 100), dp_domain('pol_persons', 'score', 0, 10),
       dp_domain('pol_visits', 'amount', 0, 50);
SELECT dp_policy('pol_persons', 100), dp_policy('pol_visits', 100, 3);
\c - dp_policy_analyst
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- One row per person: each of the five aggregates spends 100 / 5 = 20
-- (noise of scale 5 at most for the counts, 0.1 for the average).
SELECT pg_typeof(c) c_type, pg_typeof(cs) cs_type, pg_typeof(s) s_type, pg_typeof(a) a_type,
       pg_typeof(af) af_type, abs(c - 1000) <= 100 AS count_near, abs(cs - 900) <= 100 AS count_score_near,
       abs(s - 49500) <= 1000 AS sum_near, abs(a - 49.5) <= 2 AS avg_near, abs(af - 3.0) <= 0.5 AS avg_score_near
FROM (SELECT COUNT(*) c, count(score) cs, SUM(amount) s, AVG(amount) a, avg(score) af FROM pol_persons) q;
SELECT count(*) AS releases, sum(epsilon) AS epsilon FROM dp_my_ledger WHERE id > :seen;
-- Several rows per person: rows are counted, 3 at most of each person's
-- (person 0's 10 visits count 3, their sum at most 3 x 50); an average
-- is a sum over a count.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT abs(c - 3003) <= 30 AS rows_near, abs(s - (73500 + 150)) <= 1500 AS sum_near,
       abs(a - 24.5) <= 1 AS avg_near, pg_typeof(c)
FROM (SELECT count(*) c, sum(amount) s, avg(amount) a FROM pol_visits) q;
SELECT count(*) AS releases, round(sum(epsilon)) AS epsilon FROM dp_my_ledger WHERE id > :seen;
-- Unique persons, as a BI tool's COUNT_DISTINCT metric writes them: the
-- persons (1001), whatever their rows; count(DISTINCT site) stays refused.
SELECT pg_typeof(n), abs(n - 1001) <= 10 AS persons_near FROM (SELECT count(DISTINCT person_id) n FROM pol_visits) q;
SELECT outcome('SELECT count(DISTINCT site) FROM pol_visits');
-- Spreads and order statistics of a column with a domain: the dpnoise
-- aggregate of the same question (min and max are private low and high
-- percentiles), in PostgreSQL's result types.
SELECT pg_typeof(v) v_type, pg_typeof(mn) min_type, pg_typeof(md) median_type, pg_typeof(pd) disc_type,
       abs(sd - 28.9) < 5 AS stddev_near, abs(md - 49.5) < 10 AS median_near, mn < 20 AS min_low, mx > 80 AS max_high
FROM (SELECT variance(amount) v, stddev(amount) sd, min(amount) mn, max(amount) mx,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) md,
             percentile_disc(0.5) WITHIN GROUP (ORDER BY amount) pd FROM pol_persons) q;
-- A descending order asks for the other end: the 0.9 quantile of amounts
-- 0 to 99 read downwards is near 9.9, not 89.1.
SELECT abs(q - 9.9) < 10 AS descending_near FROM (
  SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY amount DESC) q FROM pol_persons) s;
SELECT abs(md - 24.5) < 8 AS visits_median_near FROM (
  SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) md FROM pol_visits) q;
-- Superset's bar chart, as it sends it: the three sites (each person in
-- at most 3 of them), counts as bigints.
SELECT site, pg_typeof(count), abs(count - 1000) <= 60 AS near FROM (
  SELECT site AS site, COUNT(*) AS count FROM public.pol_visits GROUP BY site ORDER BY count DESC LIMIT 10000) s
ORDER BY site;

-- A dashboard reload: the tables dp_policy tracks are unchanged, so the
-- bar chart above, asked twice more under another wrapper, is the same
-- release: the same answer, free.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT string_agg(site || '=' || count, ',' ORDER BY site) AS first FROM (
  SELECT site AS site, COUNT(*) AS count FROM public.pol_visits GROUP BY site ORDER BY count DESC LIMIT 10000) s \gset
SELECT string_agg(site || '=' || count, ',' ORDER BY site) AS second FROM (
  SELECT site AS site, COUNT(*) AS count FROM public.pol_visits GROUP BY site ORDER BY count DESC LIMIT 10000) s \gset
SELECT :'first' = :'second' AS same_answer, count(*) AS charges FROM dp_my_ledger WHERE id > :seen;

-- The error beside a value (dp_error): the half-width of its 95 %
-- interval, as dp_query_accuracy gives it for the release (the count and
-- the sum split epsilon 100; each person in at most 3 sites, 3 rows, a
-- sum up to 3 x 50), charged nothing more.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT DISTINCT e = (SELECT ci_half_width FROM dp_query_accuracy('rows', 50, ARRAY['pol_visits'], 0, 3)) AS count_error,
       se = (SELECT ci_half_width FROM dp_query_accuracy('sum', 50, ARRAY['pol_visits'], 0, 150)) AS sum_error FROM (
  SELECT site, COUNT(*) AS n, dp_error(COUNT(*)) AS e, SUM(amount) AS s, dp_error(SUM(amount)) AS se
  FROM pol_visits GROUP BY site) q;
SELECT count(*) AS releases FROM dp_my_ledger WHERE id > :seen;
-- Refused: an error without its value, at a confidence not in (0, 1); an
-- average's is answered (intervals.sql); as a curator there is nothing to
-- rewrite (0A000).
SELECT outcome('SELECT dp_error(COUNT(*)) FROM pol_visits');
SELECT outcome('SELECT AVG(amount), dp_error(AVG(amount)) FROM pol_visits');
SELECT outcome('SELECT COUNT(*), dp_error(COUNT(*), 1.5) FROM pol_visits');
\c - postgres
SELECT outcome('SELECT dp_error(1)');
\c - dp_policy_analyst
\set VERBOSITY terse

-- Left as written: a per-person subquery (PostgreSQL's count per person)
-- feeding a dpnoise aggregate, answered as before...
SELECT abs(dp_avg(n, 100, 0, 10) - 3.0) < 0.5 AS per_person
FROM (SELECT person_id, count(*) n FROM pol_visits GROUP BY person_id) p;
-- ...and count(*) over a per-person subquery is the persons (dp_count),
-- while over a release grouped by the unit it counts the groups shown
-- (gate.sql: none).
SELECT abs(persons - 1001) <= 10 AS persons_near FROM (
  SELECT count(*) AS persons FROM (SELECT person_id, count(*) AS n FROM pol_visits GROUP BY person_id) p) q;
-- ...and a subquery of plain aggregates feeding one, refused as before.
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT site, count(*) n FROM pol_visits GROUP BY site) p');
-- A sum of an expression has no domain: refused.
SELECT outcome('SELECT sum(amount * 2) FROM pol_persons');
SELECT outcome('SELECT sum(DISTINCT amount) FROM pol_persons');

-- The rewrite is what stands between a plain count and the data: at a
-- tiny epsilon the answer is noise (it equals the truth with probability
-- about 5e-5), never the exact count.
\c - postgres
SELECT dp_policy('pol_persons', 0.0001);
\c - dp_policy_analyst
SELECT count(*) <> 1000 AS noisy FROM pol_persons;
