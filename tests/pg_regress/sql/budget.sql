-- The privacy budget (issue 5). Each numbered block is one must-hold.
CREATE ROLE analyst;
CREATE ROLE curator;
GRANT SELECT ON t TO analyst;
GRANT CREATE ON SCHEMA public TO analyst;
GRANT EXECUTE ON FUNCTION dp_budget_grant(regrole, float8, float8) TO curator;
-- What a role has spent, from the ledger.
CREATE FUNCTION spent(r regrole) RETURNS numeric LANGUAGE sql AS
  $$ SELECT coalesce(sum(epsilon * releases), 0) FROM dpnoise.ledger WHERE role = r $$;

-- No budget: refused with ZB001, nothing released.
SET ROLE analyst;
SELECT outcome('SELECT dp_count(1.0) FROM t');
RESET ROLE;
SELECT spent('analyst');

-- 8. Exact accounting: 1.0 pays for exactly ten releases at 0.1.
SELECT dp_budget_grant('analyst', 1.0);
SET ROLE analyst;
SELECT count(*) FILTER (WHERE o = 'ok') AS released, count(*) FILTER (WHERE o LIKE 'ZB001%') AS refused
FROM (SELECT outcome('SELECT dp_count(0.1) FROM t') AS o FROM generate_series(1, 12)) r;
SELECT * FROM dp_budget_remaining();
SELECT count(*), sum(epsilon) FROM dp_my_ledger;
RESET ROLE;

-- The refusal names what was asked and what remains.
SELECT dp_budget_grant('analyst', 0.25);
SET ROLE analyst;
\set VERBOSITY verbose
SELECT dp_count(0.5) FROM t;
\set VERBOSITY default
RESET ROLE;

-- 1. ROLLBACK keeps the charge; so does an error later in the statement
-- or the transaction, and a failed subtransaction.
SELECT dp_budget_grant('analyst', 10);
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
BEGIN;
SELECT dp_count(1.0) IS NOT NULL FROM t;
ROLLBACK;
SELECT outcome('SELECT dp_count(1.0) / 0 FROM t');
BEGIN;
SELECT dp_count(1.0) IS NOT NULL FROM t;
SELECT 1 / 0;
COMMIT;
RESET ROLE;
SELECT spent('analyst') - :before AS charged_despite_rollback;

-- 7. One charge per call site per statement, decided from its plan before
-- it runs, whatever the number of groups or rows.
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
SELECT count(*) FROM (SELECT g, dp_count(0.01) FROM t CROSS JOIN generate_series(1, 100) g GROUP BY g) s;
SELECT count(dp_laplace(5, 0.01, 1.0)) FROM generate_series(1, 1000);
RESET ROLE;
SELECT spent('analyst') - :before AS default_role_paid;
-- A cursor pays as it opens, for its whole plan; fetching costs nothing more.
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
BEGIN;
DECLARE paid_cursor CURSOR FOR SELECT g, dp_count(0.01) FROM t CROSS JOIN generate_series(1, 100) g GROUP BY g;
MOVE 10 IN paid_cursor;
MOVE 10 IN paid_cursor;
COMMIT;
RESET ROLE;
SELECT (spent('analyst') - :before) / 0.01 AS cursor_paid_releases;
-- A role switched to in the middle of a statement pays for each of its
-- grouping sets itself (the statement's charge was the first role's).
CREATE ROLE default_b;
GRANT SELECT ON t TO default_b;
SELECT dp_budget_grant('default_b', 10);
CREATE SEQUENCE switch_again;
GRANT USAGE ON SEQUENCE switch_again TO analyst, default_b;
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
SELECT count(*) FROM (SELECT g, h, dp_count(0.01),
    set_config('role', CASE WHEN nextval('switch_again') >= 3 THEN 'default_b' ELSE current_user END, false)
    FROM t CROSS JOIN generate_series(1, 20) g CROSS JOIN (VALUES (1)) v(h) GROUP BY GROUPING SETS ((g), (h))) s;
RESET ROLE;
SELECT (spent('analyst') - :before) / 0.01 AS first_role_paid_sets, spent('default_b') / 0.01 AS switched_role_paid_sets;
DROP SEQUENCE switch_again;

-- An ε that varies by row is refused before anything is charged.
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
SELECT count(dp_laplace(5, e, 1.0)) FROM (VALUES (0.01), (0.02), (0.01)) v(e);
RESET ROLE;
SELECT spent('analyst') - :before AS varying_epsilon_refused_and_free;

-- Re-executions pay again: a prepared statement, a SQL function body,
-- a correlated subquery (the aggregate is rescanned per outer row).
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
PREPARE q AS SELECT dp_count(0.01) IS NOT NULL FROM t;
EXECUTE q;
EXECUTE q;
CREATE FUNCTION analyst_count() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT dp_count(0.01) FROM t $$;
SELECT count(analyst_count()) FROM generate_series(1, 3);
SELECT count((SELECT dp_count(0.01) FROM t WHERE t.i <= g)) FROM generate_series(1, 4) g;
DROP FUNCTION analyst_count();
DEALLOCATE q;
RESET ROLE;
SELECT spent('analyst') - :before AS reexecutions_paid;

-- A window is refused (overlapping frames), and charges nothing.
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
SELECT outcome('SELECT dp_count(1.0) OVER (ORDER BY i) FROM t');
RESET ROLE;
SELECT spent('analyst') - :before AS window_paid;

-- 5. Parallel plans charge: forced parallel query and a partial aggregate.
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
-- force_parallel_mode is debug_parallel_query from PostgreSQL 16 on.
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END AS force_parallel \gset
SET :force_parallel = on;
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
SELECT dp_count(0.01) IS NOT NULL FROM t;
SELECT count(*) FROM (SELECT i % 7, dp_count(0.01) FROM t GROUP BY 1) s;
RESET ROLE;
SELECT spent('analyst') - :before AS parallel_default_paid;
RESET :force_parallel;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- 4. An analyst cannot touch the budget: not the tables, not the grant
-- functions, not the settings; a curator with EXECUTE can grant.
SET ROLE analyst;
SELECT outcome($$INSERT INTO dpnoise.budget VALUES ('analyst', 1000, 0)$$);
SELECT outcome($$UPDATE dpnoise.spent SET epsilon = 0$$);
SELECT outcome($$DELETE FROM dpnoise.ledger$$);
SELECT outcome($$SELECT dp_budget_grant('analyst', 1000)$$);
SELECT outcome($$SELECT dp_budget_revoke('default_b')$$);
SELECT outcome($$SELECT dp_budget_set_global(NULL)$$);
SELECT outcome($$SELECT * FROM dpnoise.charge_batch('{1}', '{0}', '{0}', '{1}', '{x}', '{y}', '{0}', '{}', '{}', '{}')$$);
SELECT outcome('SET dpnoise.enforce_budget = off');
SELECT outcome('SET dpnoise.seed = 1');
SELECT count(*) AS mine FROM dp_my_ledger \gset
SELECT count(*) AS my_rows FROM dp_my_budget;
RESET ROLE;
SELECT :mine = (SELECT count(*) FROM dpnoise.ledger WHERE role = 'analyst'::regrole)
   AND :mine < (SELECT count(*) FROM dpnoise.ledger) AS sees_only_own_ledger_rows;
-- The curator may grant; the grant function's search_path is pinned, so a
-- curator's own operator for numeric + numeric (which would grant a
-- million more) is never called.
GRANT CREATE ON SCHEMA public TO curator;
SET ROLE curator;
CREATE FUNCTION public.hijack(numeric, numeric) RETURNS numeric LANGUAGE sql AS $$ SELECT 1000000::numeric $$;
CREATE OPERATOR public.+ (LEFTARG = numeric, RIGHTARG = numeric, FUNCTION = public.hijack);
SET search_path = public, pg_catalog;
SELECT 1::numeric + 1::numeric AS hijacked_here;
SELECT dp_budget_grant('analyst', 1);
RESET search_path;
DROP OPERATOR public.+ (numeric, numeric);
DROP FUNCTION public.hijack(numeric, numeric);
RESET ROLE;
SELECT epsilon_granted < 1000 AS not_hijacked FROM dp_budgets WHERE role = 'analyst'::regrole;

-- 6. Bad arguments: 22023 or undefined_object, and nothing changes.
SELECT epsilon_granted AS granted_before FROM dp_budgets WHERE role = 'analyst'::regrole \gset
SELECT outcome($$SELECT dp_budget_grant('analyst', -1)$$);
SELECT outcome($$SELECT dp_budget_grant('analyst', 'NaN')$$);
SELECT outcome($$SELECT dp_budget_grant('analyst', 'Infinity')$$);
SELECT outcome($$SELECT dp_budget_grant('analyst', NULL)$$);
SELECT outcome($$SELECT dp_budget_grant('analyst', 1, 2)$$);
SELECT outcome($$SELECT dp_budget_grant('analyst', 1, -0.5)$$);
SELECT outcome($$SELECT dp_budget_grant(NULL, 1)$$);
SELECT outcome($$SELECT dp_budget_grant('no_such_role', 1)$$);
SELECT outcome($$SELECT dp_budget_grant(424242::oid::regrole, 1)$$);
SELECT outcome($$SELECT dp_budget_set_global('NaN')$$);
SELECT epsilon_granted = :granted_before AS unchanged FROM dp_budgets WHERE role = 'analyst'::regrole;
-- Bad release arguments charge nothing.
SELECT spent('analyst') AS before \gset
SET ROLE analyst;
SELECT outcome('SELECT dp_count(-1.0) FROM t');
SELECT outcome('SELECT dp_laplace(1, 1.0, 0)');
SELECT outcome($$SELECT dp_sum_staircase(x, 1.0, 1, 'nonsense') FROM t$$);
RESET ROLE;
SELECT spent('analyst') - :before AS bad_arguments_paid;

-- The global cap binds every role together.
-- (Its delta is what all roles have spent so far: earlier files spend some.)
SELECT sum(epsilon_spent) AS total, sum(delta_spent) AS total_delta FROM dp_budgets \gset
SELECT dp_budget_set_global(:total + 0.05, :total_delta);
SET ROLE analyst;
SELECT outcome('SELECT dp_count(0.05) FROM t');
SELECT outcome('SELECT dp_count(0.05) FROM t');
RESET ROLE;
SELECT dp_budget_set_global(NULL);

-- The ledger worker's batch, called as the worker calls it: a role without
-- a budget first, two roles, the global cap, a request exactly at the
-- boundary, zero-cost ones. Granted greedily in request order; answers and
-- ledger rows in request order.
CREATE ROLE batch_a;
CREATE ROLE batch_b;
CREATE ROLE batch_none;
SELECT dp_budget_grant('batch_a', 1.0);
SELECT dp_budget_grant('batch_b', 0.5);
SELECT sum(epsilon_spent) AS total FROM dp_budgets \gset
SELECT dp_budget_set_global(:total + 1.2, 1);
SELECT * FROM dpnoise.charge_batch(
    ARRAY['batch_none', 'batch_a', 'batch_b', 'batch_a', 'batch_b', 'batch_a', 'batch_b']::regrole[]::oid[],
    ARRAY[0.1, 0.6, 0.5, 0.4, 0.1, 0, 0]::numeric[], ARRAY[0, 0, 0, 0, 0, 0, 0]::numeric[],
    ARRAY[1, 1, 1, 1, 1, 1, 1]::bigint[], ARRAY['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7'],
    ARRAY['batch', 'batch', 'batch', 'batch', 'batch', 'batch', 'batch'], ARRAY[1, 2, 3, 4, 5, 6, 7],
    array_fill(now(), ARRAY[7]), array_fill(NULL::bytea, ARRAY[7]), array_fill(false, ARRAY[7]));
SELECT mechanism, pid, role::text FROM dpnoise.ledger WHERE statement = 'batch' ORDER BY id;
SELECT role_name, epsilon_spent FROM dp_budgets WHERE role_name LIKE 'batch%' ORDER BY 1;
SELECT dp_budget_set_global(NULL);
-- Identities (repeated releases): a request pays for the identities it
-- carries once and for all, and records them; a repeat (repeats[i]) whose identities
-- were all paid, in the batch or before, by any role (even one without a
-- budget), is granted free, with no ledger row.
SELECT dp_budget_grant('batch_a', 1.0);
SELECT dp_budget_grant('batch_b', 1.0);
\set one 'decode(repeat(''01'', 32), ''hex'')'
\set two 'decode(repeat(''02'', 32), ''hex'')'
SELECT granted, is_free FROM dpnoise.charge_batch(
    ARRAY['batch_a', 'batch_b', 'batch_none', 'batch_b', 'batch_a']::regrole[]::oid[],
    ARRAY[0.25, 0.25, 0.25, 0.25, 0.25]::numeric[], ARRAY[0, 0, 0, 0, 0]::numeric[], ARRAY[1, 1, 1, 1, 1]::bigint[],
    ARRAY['i1', 'i2', 'i3', 'i4', 'i5'], array_fill('identity'::text, ARRAY[5]), ARRAY[1, 2, 3, 4, 5],
    array_fill(now(), ARRAY[5]),
    ARRAY[:one, :one, :one, :two, :one || :two]::bytea[], ARRAY[true, true, true, true, true]);
SELECT granted, is_free FROM dpnoise.charge_batch(
    ARRAY['batch_b', 'batch_a', 'batch_a']::regrole[]::oid[], ARRAY[0.25, 0.25, 0.25]::numeric[], ARRAY[0, 0, 0]::numeric[],
    ARRAY[1, 1, 1]::bigint[], ARRAY['i6', 'i7', 'i8'], array_fill('identity'::text, ARRAY[3]), ARRAY[6, 7, 8],
    array_fill(now(), ARRAY[3]), ARRAY[:two, :one || :two, :one]::bytea[], ARRAY[true, true, false]);
SELECT l.mechanism, l.role::text, encode(substring(p.identity FOR 2), 'hex') AS identity
FROM dpnoise.ledger l LEFT JOIN dpnoise.paid_releases p ON p.ledger_id = l.id
WHERE l.statement = 'identity' ORDER BY l.id, 3;

-- Revoking ends releases; what was spent stays.
SELECT dp_budget_revoke('analyst');
SET ROLE analyst;
SELECT outcome('SELECT dp_count(1.0) FROM t');
SELECT * FROM dp_budget_remaining();
RESET ROLE;
SELECT spent('analyst') > 0 AS history_kept;
-- A new grant adds to nothing: the remaining budget is exactly what is granted.
SELECT dp_budget_grant('analyst', 0.5);
SELECT epsilon_remaining FROM dp_budgets WHERE role = 'analyst'::regrole;

-- Enforcement off (superusers only): nothing charged.
SELECT count(*) AS ledger_rows FROM dpnoise.ledger \gset
SET dpnoise.enforce_budget = off;
SELECT dp_count(1.0) IS NOT NULL FROM t;
RESET dpnoise.enforce_budget;
SELECT count(*) - :ledger_rows AS charged_with_enforcement_off FROM dpnoise.ledger;

-- The ledger records who, what and how much, in numeric.
SELECT role, mechanism, epsilon, delta, releases, left(statement, 40) FROM dpnoise.ledger
WHERE role = 'analyst'::regrole ORDER BY id LIMIT 3;

-- A session that reserves (dpnoise.charge_ahead, superusers only, as
-- ALTER ROLE ... SET would): one charge for 8 times its first statement's
-- cost, which the next statements draw on, by any amount, without asking
-- the ledger; one the reservation cannot cover gives back what is left and
-- reserves again; the session's end gives back the rest.
\c -
CREATE ROLE ahead_a;
GRANT SELECT ON t TO ahead_a;
SELECT dp_budget_grant('ahead_a', 10);
SELECT coalesce(max(id), 0) AS last FROM dpnoise.ledger \gset
SET dpnoise.charge_ahead = 8;
SET ROLE ahead_a;
SELECT outcome('SET dpnoise.charge_ahead = 100');
DO $$ BEGIN FOR i IN 1 .. 10 LOOP PERFORM dp_count(0.1) FROM t; END LOOP; END $$;
SELECT dp_count(0.2) IS NOT NULL AS released FROM t;
RESET ROLE;
SELECT string_agg(releases || ' x ' || epsilon, ', ' ORDER BY id) AS charges FROM dpnoise.ledger
WHERE role = 'ahead_a'::regrole AND id > :last;
\c -
-- The old session's give-back is posted as it exits: wait for it.
DO $$ BEGIN
    FOR i IN 1 .. 200 LOOP
        EXIT WHEN EXISTS (SELECT FROM dpnoise.ledger WHERE role = 'ahead_a'::regrole AND releases < 0);
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT string_agg(releases || ' x ' || epsilon || ' ' || mechanism, ', ' ORDER BY id) AS charges FROM dpnoise.ledger
WHERE role = 'ahead_a'::regrole AND id > :last AND releases < 0;
SELECT epsilon_spent FROM dp_budgets WHERE role = 'ahead_a'::regrole;
-- A reservation is its role's: another role in the same session reserves
-- its own (the first role's is kept, charged), and gives it back at the end.
\c -
CREATE ROLE ahead_b;
GRANT SELECT ON t TO ahead_b;
SELECT dp_budget_grant('ahead_b', 10);
SET dpnoise.charge_ahead = 8;
SET ROLE ahead_a;
SELECT dp_count(0.3) IS NOT NULL AS released FROM t;
RESET ROLE;
SET ROLE ahead_b;
SELECT dp_count(0.3) IS NOT NULL AS released FROM t;
SELECT dp_count(0.3) IS NOT NULL AS released FROM t;
RESET ROLE;
SELECT role::text, releases, epsilon, mechanism FROM dpnoise.ledger WHERE epsilon = 2.4 ORDER BY id;
\c -
DO $$ BEGIN
    FOR i IN 1 .. 200 LOOP
        EXIT WHEN EXISTS (SELECT FROM dpnoise.ledger WHERE role = 'ahead_b'::regrole AND releases < 0);
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT role_name, epsilon_spent FROM dp_budgets WHERE role_name LIKE 'ahead_%' ORDER BY 1;
-- A change to a budget reaches a session holding a reservation at its next
-- statement (dp_budget_changed): granted more, the reservation is given
-- back and made again; revoked, its next release is refused, not drawn on
-- the reservation.
\c -
SELECT coalesce(max(id), 0) AS last FROM dpnoise.ledger \gset
SET dpnoise.charge_ahead = 8;
SET ROLE ahead_b;
SELECT dp_count(0.4) IS NOT NULL AS released FROM t;
RESET ROLE;
SELECT dp_budget_grant('ahead_b', 1);
SET ROLE ahead_b;
SELECT count(*) FROM (SELECT g, dp_count(0.4) FROM t CROSS JOIN generate_series(1, 5) g GROUP BY g) s;
RESET ROLE;
SELECT dp_budget_revoke('ahead_b');
SET ROLE ahead_b;
SELECT outcome('SELECT dp_count(0.4) FROM t');
RESET ROLE;
SELECT string_agg(releases::text, ' ' ORDER BY id) AS charges FROM dpnoise.ledger
WHERE role = 'ahead_b'::regrole AND id > :last;
SELECT outcome('SELECT dp_budget_changed()') AS superuser_may_call;
SET ROLE ahead_a;
SELECT outcome('SELECT dp_budget_changed()') AS others_may_not;
RESET ROLE;
-- Which limit ran out (issue 49): a budget granted without delta refuses a
-- release that spends delta, and says that delta ran out, not epsilon.
CREATE ROLE budget_no_delta;
GRANT SELECT ON t TO budget_no_delta;
SELECT dp_budget_grant('budget_no_delta', 10, 0);
SET ROLE budget_no_delta;
SELECT outcome('SELECT dp_count(1.0, 1e-6, ''gaussian'') FROM t');
SELECT outcome('SELECT dp_count(20.0) FROM t');
RESET ROLE;
