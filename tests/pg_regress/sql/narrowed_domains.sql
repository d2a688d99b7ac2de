-- An analyst's narrower domains (issue 48): dpnoise.narrowed_domains
-- narrows the DBA's dp_domain of a column for the session's plain
-- aggregates, never widens it (src/gate/policy/narrowed.rs, docs/bi.md).
DO $$ BEGIN
    CREATE ROLE dp_narrow_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 1000 persons of one row each, amount 0 to 99, under a domain of [0, 1000].
CREATE TABLE nd_persons (person_id int PRIMARY KEY, amount int, score float8);
INSERT INTO nd_persons SELECT i, i % 100, i % 7 FROM generate_series(1, 1000) i;
SELECT dp_protect('nd_persons', 'person_id'), dp_policy('nd_persons', 100), dp_domain('nd_persons', 'amount', 0, 1000);
SELECT dp_analyst('dp_narrow_analyst');
SELECT dp_budget_grant('dp_narrow_analyst', 1e6, 1);

\c - dp_narrow_analyst
\set VERBOSITY terse
-- The error of a sum under the DBA's domain, then under [0, 100]: a
-- tenth (the error is of the bounds, not the data).
SELECT dp_error(sum(amount)) AS dba, sum(amount) > 0 AS answered FROM nd_persons \gset
SET dpnoise.narrowed_domains = 'nd_persons.amount=0:100';
SELECT round((dp_error(sum(amount)) / :dba)::numeric, 3) AS ratio, abs(sum(amount) - 49500) < 100 AS near FROM nd_persons;
-- With the schema, and values clamped into the narrowed bounds: the
-- average of amounts clamped to [0, 10] is 9.45.
SET dpnoise.narrowed_domains = 'public.nd_persons.amount=0:10';
SELECT abs(avg(amount) - 9.45) < 0.1 AS clamped FROM nd_persons;
-- Wider than the DBA's, or partly outside it: intersected, never wider.
SET dpnoise.narrowed_domains = 'nd_persons.amount=-1e9:1e9';
SELECT round((dp_error(sum(amount)) / :dba)::numeric, 3) AS ratio, sum(amount) > 0 AS answered FROM nd_persons;
SET dpnoise.narrowed_domains = 'nd_persons.amount=500:5000';
SELECT round((dp_error(sum(amount)) / :dba)::numeric, 3) AS ratio, sum(amount) > 0 AS answered FROM nd_persons;
-- Another table's entry, or a column without a domain: nothing changes
-- (score has none: its sum is refused as before, nothing charged).
SET dpnoise.narrowed_domains = 'other.amount=0:1, nd_persons.score=0:6';
SELECT round((dp_error(sum(amount)) / :dba)::numeric, 3) AS ratio, sum(amount) > 0 AS answered FROM nd_persons;
SELECT outcome('SELECT sum(score) FROM nd_persons');
-- Malformed entries: 22023 when set, the setting unchanged.
SELECT outcome($$SET dpnoise.narrowed_domains = 'nd_persons.amount'$$);
SELECT outcome($$SET dpnoise.narrowed_domains = 'nd_persons.amount=9:1'$$);
SELECT outcome($$SET dpnoise.narrowed_domains = 'amount=0:1'$$);
SELECT outcome($$SET dpnoise.narrowed_domains = 'nd_persons.amount=0:NaN'$$);
SHOW dpnoise.narrowed_domains;
RESET dpnoise.narrowed_domains;
