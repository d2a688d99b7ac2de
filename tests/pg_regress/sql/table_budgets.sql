-- Budgets per table (or group of tables) and per period (issue 46, item 2;
-- dpnoise.table_budgets, src/budget/schema.sql's charge_batch). Beside a
-- role's budget, a budget on tables limits every statement of the role
-- that reads any of them: the statement is charged to each such budget and
-- refused (ZB001, charged nothing anywhere) if it would pass one. With a
-- period, what was spent is forgotten when the period ends.
CREATE ROLE tb_curator;
CREATE TABLE tb_visits AS SELECT i AS person_id, i % 4 AS site FROM generate_series(1, 400) i;
CREATE TABLE tb_people AS SELECT i AS person_id, 20 + i % 50 AS age FROM generate_series(1, 400) i;
CREATE TABLE tb_sites AS SELECT i AS site FROM generate_series(0, 3) i;
GRANT SELECT ON tb_visits, tb_people, tb_sites TO tb_curator;
SELECT dp_budget_grant('tb_curator', 100, 1e-3);
-- 1 per day on visits; 2 in all on people and visits together.
SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_visits']::regclass[], 1.0, period => '1 day');
SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_people', 'tb_visits']::regclass[], 2.0);
-- Bad arguments: 22023, nothing granted.
SELECT outcome($$SELECT dp_budget_grant_tables('tb_curator', ARRAY[]::regclass[], 1.0)$$),
       outcome($$SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_people']::regclass[], 1.0, period => '-1 day')$$),
       outcome($$SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_people']::regclass[], 1.0, accountant => 'other')$$);
SELECT role_name, tables, accountant, period, epsilon_granted, epsilon_spent, epsilon_remaining
FROM dp_table_budgets ORDER BY id;
SET ROLE tb_curator;
-- Each statement is charged to the budgets on what it reads: visits to
-- both, people to the second, a public table to none, a join to both.
SELECT dp_count(0.4) IS NOT NULL FROM tb_visits;
SELECT dp_count(0.4) IS NOT NULL FROM tb_people;
SELECT dp_count(0.4) IS NOT NULL FROM tb_sites;
SELECT dp_count(0.4) IS NOT NULL FROM tb_visits v JOIN tb_sites s USING (site);
SELECT epsilon, tables FROM dp_my_ledger ORDER BY id;
SELECT tables, period, epsilon_spent, epsilon_remaining FROM dp_my_table_budgets ORDER BY id;
-- Over the day's budget on visits: refused, charged nothing anywhere.
\set VERBOSITY terse
SELECT dp_count(0.4) FROM tb_visits;
\set VERBOSITY default
SELECT count(*) AS charges FROM dp_my_ledger;
SELECT epsilon_remaining FROM dp_my_budget;
-- Another table of the group still has room: people alone.
SELECT dp_count(0.4) IS NOT NULL FROM tb_people;
-- The group's budget runs out too (0.4 + 0.4 + 0.4 + 0.4 = 1.6 of 2).
SELECT outcome('SELECT dp_count(0.5) FROM tb_people');
RESET ROLE;
-- The day ends (the window is moved back a day and an hour): the budget on
-- visits starts again; the one without a period does not.
UPDATE dpnoise.table_budgets SET period_start = period_start - interval '1 day 1 hour' WHERE period IS NOT NULL;
SET ROLE tb_curator;
SELECT outcome('SELECT dp_count(0.3) FROM tb_visits');
SELECT tables, epsilon_spent, epsilon_remaining, refreshes_at > now() AS refreshes_later FROM dp_my_table_budgets ORDER BY id;
RESET ROLE;
-- What cannot be told from the plan is charged to every budget on tables:
-- a statement that reads a set-returning function (which may read any
-- table).
SELECT dp_budget_revoke_tables('tb_curator');
SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_people']::regclass[], 1.0);
SET ROLE tb_curator;
SELECT dp_count(0.25) IS NOT NULL FROM generate_series(1, 10) g;
SELECT epsilon, tables FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
SELECT tables, epsilon_spent FROM dp_my_table_budgets;
RESET ROLE;
-- A zCDP budget on tables: rho from (epsilon, delta), half of delta for
-- releases; the Gaussian count costs its rho: 74 fit, as under a role's.
SELECT dp_budget_revoke_tables('tb_curator', ARRAY['tb_people']::regclass[]);
SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_people']::regclass[], 1.0, 1e-5, accountant => 'zcdp');
SET ROLE tb_curator;
SELECT count(*) FILTER (WHERE o = 'ok') AS released, min(o) FILTER (WHERE o <> 'ok') ~ 'the budget on .*tb_people ran out' AS refused_by_it
FROM (SELECT outcome('SELECT dp_count(0.1, 1e-6, ''gaussian'') FROM tb_people') AS o FROM generate_series(1, 100)) r;
SELECT tables, accountant, round(rho_granted, 6) AS rho_granted, rho_remaining < 0.00038 AS rho_left_below_one FROM dp_my_table_budgets;
RESET ROLE;
-- Only superusers (and roles granted EXECUTE) grant; an analyst sees only
-- their own budgets on tables.
SET ROLE tb_curator;
SELECT outcome($$SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_people']::regclass[], 100)$$);
SELECT outcome('SELECT * FROM dp_table_budgets');
RESET ROLE;
-- A short window, waited out: refused at its limit, admitted once the
-- window has passed; the ledger keeps every charge across the boundary.
SELECT dp_budget_revoke_tables('tb_curator');
SELECT dp_budget_grant_tables('tb_curator', ARRAY['tb_sites']::regclass[], 0.5, period => '4 seconds');
SET ROLE tb_curator;
SELECT count(*) AS charges FROM dp_my_ledger \gset
SELECT outcome('SELECT dp_count(0.5) FROM tb_sites') AS first,
       outcome('SELECT dp_count(0.5) FROM tb_sites') ~ '^ZB001.*tb_sites \(per 00:00:04\) ran out' AS refused_at_its_limit;
SELECT pg_sleep(4.2);
SELECT outcome('SELECT dp_count(0.5) FROM tb_sites') AS after_the_window;
SELECT count(*) - :charges AS charges_kept FROM dp_my_ledger;
RESET ROLE;
