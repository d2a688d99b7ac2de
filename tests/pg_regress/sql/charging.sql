-- Hardening (issue 12): no input reaches XX000, a refusal never charges,
-- parameters never come from the data, and the default model's charge is
-- decided by the query, not by the plan.
\set VERBOSITY terse
CREATE FUNCTION charges() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM dpnoise.ledger $$;

-- dp_avg: the transition and the final function split ε the same way
-- (a grid of 396 (ε, bounds) pairs; 18 of them failed before).
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE o <> 'ok') AS failed
FROM (SELECT outcome(format('SELECT dp_avg(x, %s, %s, %s) FROM t', e, lo, lo + w)) AS o
      FROM unnest(ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9, 1.1, 1.3, 2.2, 3.3]) e,
           unnest(ARRAY[-1.5, 0, 0.1, 0.3, 2, 7]) lo,
           unnest(ARRAY[0.1, 0.8, 1.6, 3.3, 10, 1000]) w) r;

-- Privacy parameters from the data are refused before anything is charged:
-- columns, scalar subqueries over the table, correlated values, stable and
-- volatile functions, in per-row functions and in aggregates.
SELECT charges() AS before \gset
SELECT outcome('SELECT dp_laplace(0, x + 1, 1) FROM t');
SELECT outcome('SELECT dp_laplace(0, 1, x + 1) FROM t');
SELECT outcome('SELECT dp_staircase(0, 1, 1, CASE WHEN x > 5 THEN ''l1'' ELSE ''l2'' END) FROM t');
SELECT outcome('SELECT dp_noise(0, 1, 1, 1e-6, ''gaussian'', (SELECT min(x)::text FROM t)) FROM t');
SELECT outcome('SELECT dp_sum(x, (SELECT max(x) FROM t), 0, 10) FROM t');
SELECT outcome('SELECT dp_sum(x, 1.0, 0, (SELECT max(x) FROM t)) FROM t');
SELECT outcome('SELECT dp_count((SELECT max(x) FROM t)) FROM t');
SELECT outcome('SELECT dp_sum_laplace(x, 1.0, 0, (SELECT max(x) FROM t)) FROM t');
SELECT outcome('SELECT (SELECT dp_count(u.x + 1) FROM t) FROM t u LIMIT 1');
SELECT outcome('SELECT dp_sum_multi(ARRAY[x], 1.0, ARRAY[(SELECT max(x) FROM t)]) FROM t');
SELECT outcome('SELECT dp_noise_box(ARRAY[x], x + 1, ARRAY[1.0]) FROM t');
SELECT outcome('SELECT dp_refine(x, dp_prior_uniform(0, x + 1), 1.0) FROM t');
SELECT outcome($$SELECT dp_laplace(0, current_setting('server_version_num')::float8 / 1e5, 1)$$);
SELECT charges() - :before AS charged_by_refusals;
-- The same as a role of its own with a budget, which is charged nothing.
CREATE ROLE hardening_analyst;
GRANT SELECT ON t TO hardening_analyst;
GRANT EXECUTE ON FUNCTION outcome(text) TO hardening_analyst;
GRANT CREATE ON SCHEMA public TO hardening_analyst;
SELECT dp_budget_grant('hardening_analyst', 10);
SET ROLE hardening_analyst;
SELECT outcome('SELECT dp_laplace(0, x + 1, 1) FROM t');
SELECT outcome('SELECT dp_sum(x, (SELECT max(x) FROM t), 0, 10) FROM t');
SELECT outcome('SELECT dp_count(x / 10 + 0.5) FROM t GROUP BY x');
SELECT outcome('SELECT dp_refine(x, dp_prior_uniform(0, (SELECT max(x) FROM t)), 1.0) FROM t');
-- A function of one's own, labelled IMMUTABLE, that reads the table: the
-- planner would fold it into a constant, so it is refused before planning.
CREATE FUNCTION hardening_leak() RETURNS float8 IMMUTABLE LANGUAGE sql AS 'SELECT (SELECT x FROM public.t WHERE i = 3)';
SELECT outcome('SELECT dp_count(hardening_leak() + 5000) FROM t');
SELECT outcome('SELECT dp_sum(x, 1.0, 0, hardening_leak()) FROM t');
SELECT outcome($$SELECT dp_count(1, 'x' || hardening_leak()) FROM t$$);
-- A statement is checked whole before it runs: a valid call site is not
-- charged before another one's refusal.
SELECT outcome('SELECT dp_count(1.0) FROM t GROUP BY x HAVING dp_count(x / 10 + 0.5) > 0');
SELECT outcome('SELECT (SELECT dp_laplace(1, 1, 1)), (SELECT dp_sum(x, (SELECT max(x) FROM t), 0, 1) FROM t)');
RESET ROLE;
SELECT coalesce(sum(epsilon), 0) AS analyst_charged FROM dpnoise.ledger WHERE role = 'hardening_analyst'::regrole;
-- Constants, query parameters and immutable expressions of them are fine.
PREPARE q(float8, numeric) AS SELECT dp_laplace(0, $1, $2::float8 * 2) IS NOT NULL, dp_count($1 / 2) >= -1e9 FROM t LIMIT 1;
EXECUTE q(1.0, 1);
DEALLOCATE q;

-- A refusal never charges, and no argument reaches XX000: every function of
-- the extension (but the budget administration) called with NULL in each
-- argument position, and with extreme finite values in each numeric one.
CREATE TEMP TABLE calls (fn text, call text, sqlstate text, charged boolean, data boolean);
CREATE FUNCTION sample_argument(name text, type regtype) RETURNS text LANGUAGE sql AS $$
SELECT CASE type
    WHEN 'double precision'::regtype THEN CASE name WHEN 'delta' THEN '0' WHEN 'confidence' THEN '0.95' WHEN 'lower' THEN '0' WHEN 'p' THEN '0.5' ELSE '10' END
    WHEN 'bigint'::regtype THEN CASE name WHEN 'lower' THEN '0' ELSE '10' END
    WHEN 'text'::regtype THEN CASE name WHEN 'mechanism' THEN '''laplace''' WHEN 'loss' THEN '''l2''' ELSE '''a''' END
    WHEN 'double precision[]'::regtype THEN CASE name WHEN 'edges' THEN '''{0,1}''' WHEN 'weights' THEN '''{1}''' WHEN 'probs' THEN '''{1}''' WHEN 'inner' THEN 'NULL' ELSE '''{1,2}''' END
    WHEN 'text[]'::regtype THEN '''{a}'''
    WHEN 'dp_prior'::regtype THEN 'dp_prior_uniform(0, 10)'
    WHEN 'anyelement'::regtype THEN '1'
    WHEN 'boolean'::regtype THEN 'false'
END || '::' || type::text $$;
SET statement_timeout = '300s';
DO $$
DECLARE
    f record;
    args text[];
    call text;
    i integer;
    v text;
    before bigint;
    state text;
BEGIN
    FOR f IN
        SELECT p.oid, p.proname, p.prokind, ARRAY(SELECT unnest(p.proargtypes::regtype[])) AS types,
               coalesce(p.proargnames, '{}') AS names
        FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
        JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
        WHERE p.pronamespace = 'public'::regnamespace
          -- It lowers this session's cap for good: its bad input is checked last.
          AND p.proname <> 'dp_session_budget'
          AND p.proname NOT LIKE 'dp\_budget\_%' ESCAPE '\' OR p.proname = 'dp_budget_remaining'
        ORDER BY p.oid
    LOOP
        CONTINUE WHEN 'internal'::regtype = ANY (f.types) OR 'cstring'::regtype = ANY (f.types);
        FOR i IN 0 .. cardinality(f.types) LOOP
            FOREACH v IN ARRAY CASE
                WHEN i = 0 THEN ARRAY['sample']
                WHEN f.types[i] IN ('double precision'::regtype) THEN ARRAY['NULL', '1e308', '-1e308', '5e-324', '0', '-1', 'NaN', 'Infinity']
                WHEN f.types[i] IN ('bigint'::regtype) THEN ARRAY['NULL', '9223372036854775807', '-9223372036854775808', '0']
                WHEN f.types[i] IN ('double precision[]'::regtype) THEN ARRAY['NULL', '{1e308,1e308}', '{}', '{NULL}', '{NaN}', '{-1,1}']
                WHEN f.types[i] IN ('text'::regtype) THEN ARRAY['NULL', 'bogus', '', 'ci=2', 'gamma=-1']
                ELSE ARRAY['NULL'] END
            LOOP
                CONTINUE WHEN i = 0 AND cardinality(f.types) > 0 AND v <> 'sample';
                args := ARRAY(SELECT CASE WHEN k = i AND v = 'NULL' THEN 'NULL::' || replace(f.types[k]::text, 'anyelement', 'integer')
                                          WHEN k = i THEN format('%L::%s', v, f.types[k])
                                          ELSE sample_argument(f.names[k], f.types[k]) END
                              FROM generate_subscripts(f.types, 1) k ORDER BY k);
                call := format('SELECT %I(%s)%s', f.proname, array_to_string(args, ', '),
                               CASE WHEN f.prokind = 'a' THEN ' FROM generate_series(1, 3)' ELSE '' END);
                before := charges();
                BEGIN
                    EXECUTE call;
                    state := 'ok';
                EXCEPTION WHEN OTHERS THEN
                    state := SQLSTATE;
                END;
                -- Argument 1 of these is the data, not a privacy parameter (and
                -- dp_refine's sample text value, 'a', is not a number: data too).
                INSERT INTO calls VALUES (f.proname, call, state, charges() > before,
                    (i = 0 AND f.proname = 'dp_refine') OR i = 1 AND f.proname IN ('dp_laplace', 'dp_staircase', 'dp_noise', 'dp_sum', 'dp_sum_laplace',
                                            'dp_sum_staircase', 'dp_avg', 'dp_merge_count', 'dp_merge_sum', 'dp_merge_selected',
                                            'dp_noise_box', 'dp_noise_l1_staircase', 'dp_refine', 'dp_sum_multi',
                                            'dp_var', 'dp_stddev', 'dp_quantile', 'dp_median', 'dp_min', 'dp_max'));
            END LOOP;
        END LOOP;
    END LOOP;
END $$;
RESET statement_timeout;
SELECT count(*) > 400 AS many_calls, count(DISTINCT fn) AS functions,
       count(*) FILTER (WHERE sqlstate <> 'ok') > 100 AS many_refused
FROM calls;
-- Nothing internal, nothing slow, and no refusal of a privacy parameter
-- charged: they are checked from the plan, before the statement pays.
SELECT fn, call, sqlstate FROM calls WHERE sqlstate IN ('XX000', '57014') ORDER BY 1, 2;
SELECT fn, call, sqlstate FROM calls WHERE sqlstate <> 'ok' AND charged AND NOT data ORDER BY 1, 2;
-- A value that cannot be released (NaN, out of range) is found as it is
-- read, after the statement paid what its plan said: charged, so that no
-- charge depends on the data.
SELECT count(*) > 10 AS data_refusals_charged FROM calls WHERE sqlstate <> 'ok' AND data AND charged;
SELECT sqlstate, count(*) > 0 AS seen FROM calls GROUP BY 1 ORDER BY 1;

-- A statement's charge is decided from its plan, whatever the data: a
-- hashed and a sorted GROUP BY pay once per call site; ROLLUP and GROUPING
-- SETS once per set, hashed or sorted; LIMIT changes nothing. charged_by
-- counts the releases paid for (each here at epsilon 1).
CREATE TABLE days AS SELECT i, i % 200 AS day, (i % 7)::float8 AS v FROM generate_series(1, 4000) i;
CREATE FUNCTION charged_by(statement text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE before bigint := (SELECT coalesce(max(id), 0) FROM dpnoise.ledger);
BEGIN
    EXECUTE statement;
    RETURN (SELECT coalesce(sum(epsilon), 0) FROM dpnoise.ledger WHERE id > before);
END $$;
SET enable_hashagg = on;
EXPLAIN (COSTS OFF) SELECT day, dp_count(1.0) FROM days GROUP BY day;
SELECT charged_by('SELECT day, dp_count(1.0), dp_sum(v, 1.0, 0, 7) FROM days GROUP BY day') AS hashed;
SELECT charged_by('SELECT day, dp_count(1.0) FROM days GROUP BY ROLLUP (day)') AS hashed_rollup;
EXPLAIN (COSTS OFF) SELECT dp_count(1.0) FROM days GROUP BY GROUPING SETS ((day), (i > 10), (i > 20), ());
SELECT charged_by('SELECT dp_count(1.0) FROM days GROUP BY GROUPING SETS ((day), (i > 10), (i > 20), ())') AS hashed_four_sets;
SET enable_hashagg = off;
EXPLAIN (COSTS OFF) SELECT day, dp_count(1.0) FROM days GROUP BY day;
SELECT charged_by('SELECT day, dp_count(1.0), dp_sum(v, 1.0, 0, 7) FROM days GROUP BY day') AS sorted;
SELECT charged_by('SELECT day, dp_count(1.0) FROM days GROUP BY day LIMIT 5') AS sorted_limit;
SELECT charged_by('SELECT day, dp_count(1.0) FROM days GROUP BY ROLLUP (day)') AS sorted_rollup;
EXPLAIN (COSTS OFF) SELECT dp_count(1.0) FROM days GROUP BY GROUPING SETS ((day), (i > 10), (i > 20), ());
SELECT charged_by('SELECT dp_count(1.0) FROM days GROUP BY GROUPING SETS ((day), (i > 10), (i > 20), ())') AS sorted_four_sets;
RESET enable_hashagg;
-- The charge does not depend on the data, for a curator too: a GROUP BY
-- that matches no row and one that matches every row write the same
-- ledger row (the old default model charged the first nothing).
SELECT charges() AS before \gset
SELECT day, dp_count(1.0), dp_sum(v, 1.0, 0, 7) FROM days WHERE i < 0 GROUP BY day;
SELECT count(*) FROM (SELECT day, dp_count(1.0), dp_sum(v, 1.0, 0, 7) FROM days WHERE i > 0 GROUP BY day) s;
SELECT mechanism, epsilon, delta, releases FROM dpnoise.ledger ORDER BY id DESC LIMIT (SELECT charges() - :before);
-- A per-row release on the left of ANY, ALL or IN (subquery) would be drawn
-- again for each row of the subquery (no rescan to charge it): refused, for
-- every role, before anything is charged (attack 16 drew one value 20 000
-- times for one charge).
SELECT charges() AS before \gset
SELECT outcome($$SELECT dp_laplace(1, 1, 1) > ANY (SELECT g::float8 FROM generate_series(1, 1000) g)$$);
SELECT outcome($$SELECT (SELECT dp_laplace(v, 1, 1) > ALL (SELECT 1e9::float8 FROM generate_series(1, 10) WHERE days.i > 0) FROM days LIMIT 1)$$);
SELECT charges() - :before AS redrawn_charged;
-- A rescanned aggregate releases everyone again, and pays again: once per outer row.
SELECT charged_by('SELECT (SELECT dp_count(1.0) FROM days WHERE day = g) FROM generate_series(1, 3) g') AS rescanned_three_times;
-- So does a per-row function in a rescanned subquery: the same rows
-- released again with fresh noise pay again (correlated: once per outer row;
-- uncorrelated, or behind a Materialize, once).
SELECT charged_by('SELECT (SELECT max(dp_laplace(d.v, 1, 1)) FROM days d WHERE d.day = u.g) FROM (VALUES (1), (1), (1)) u(g)') AS per_row_rescanned_three_times;
SELECT charged_by('SELECT (SELECT max(dp_laplace(d.v, 1, 1)) FROM days d) FROM (VALUES (1), (1), (1)) u(g)') AS per_row_uncorrelated_once;
SELECT charged_by('SELECT * FROM (VALUES (1), (2)) u(g), LATERAL (SELECT dp_laplace(d.v, 1, 1) FROM days d WHERE d.day = u.g LIMIT 1) l') AS per_row_lateral_twice;
SELECT charged_by('SELECT day, dp_laplace(count(*), 1, 1) FROM days GROUP BY day') AS per_row_over_groups_once;
-- The ledger row of the sorted plan: one for the statement.
SET enable_hashagg = off;
SELECT charges() AS before \gset
SELECT count(*) FROM (SELECT day, dp_count(0.5), dp_sum(v, 0.25, 0, 7) FROM days GROUP BY day) s;
SELECT mechanism, epsilon, releases FROM dpnoise.ledger ORDER BY id DESC LIMIT (SELECT charges() - :before);
RESET enable_hashagg;

-- A function's call site pays once per top-level statement: five
-- statements in one transaction pay five times; one statement over many
-- rows pays once; so does a trigger's, once per statement.
CREATE FUNCTION noisy(v float8) RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN RETURN dp_laplace(v, 1, 1); END $$;
SELECT charges() AS before \gset
BEGIN;
SELECT noisy(1) IS NOT NULL;
SELECT noisy(1) IS NOT NULL;
SELECT noisy(1) IS NOT NULL;
SELECT noisy(1) IS NOT NULL;
SELECT noisy(1) IS NOT NULL;
COMMIT;
SELECT charges() - :before AS five_statements;
SELECT charged_by('SELECT count(noisy(v)) FROM days') AS one_statement;
CREATE TABLE published (v float8);
CREATE FUNCTION publish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.v := dp_laplace(NEW.v, 1, 1); RETURN NEW; END $$;
CREATE TRIGGER publish BEFORE INSERT ON published FOR EACH ROW EXECUTE FUNCTION publish();
SELECT charges() AS before \gset
INSERT INTO published SELECT v FROM days LIMIT 10;
INSERT INTO published SELECT v FROM days LIMIT 10;
SELECT charges() - :before AS two_inserts;

-- A SCROLL cursor fetched again returns what it released, not new noise.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT i, dp_laplace(v, 1, 1) AS noisy FROM days ORDER BY i;
FETCH ABSOLUTE 3 FROM c \gset first_
MOVE FORWARD 5 IN c;
FETCH ABSOLUTE 3 FROM c \gset again_
SELECT :first_noisy = :again_noisy AS same_release;
COMMIT;

-- So does a cursor declared without SCROLL whose plan could run backwards.
BEGIN;
DECLARE c2 CURSOR FOR SELECT i, dp_laplace(v, 1, 1) AS noisy FROM days ORDER BY i;
FETCH ABSOLUTE 3 FROM c2 \gset first_
MOVE BACKWARD 2 IN c2;
FETCH ABSOLUTE 3 FROM c2 \gset again_
SELECT :first_noisy = :again_noisy AS same_release_without_scroll;
COMMIT;

-- An advisory lock any role can take no longer blocks releases.
SELECT pg_advisory_lock(7237431504613648229);
SET statement_timeout = '5s';
SELECT dp_count(1.0) IS NOT NULL AS released_while_locked FROM t;
RESET statement_timeout;
SELECT pg_advisory_unlock(7237431504613648229);

-- DROP EXTENSION would delete the ledger: refused while it holds charges,
-- unless a superuser says so.
SELECT regexp_replace(outcome('DROP EXTENSION dpnoise'), '\d+ charges', 'N charges') AS refused;
BEGIN;
SET LOCAL dpnoise.drop_ledger = on;
DROP EXTENSION dpnoise CASCADE;
ROLLBACK;
SELECT count(*) > 0 AS ledger_kept FROM dpnoise.ledger;

-- Every object of the extension has a comment. (Not the row types of its
-- tables and views, nor array types, which PostgreSQL 18 records as members
-- too: PostgreSQL makes them with the table or type.)
SELECT pg_describe_object(d.classid, d.objid, 0) AS uncommented
FROM pg_depend d JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
WHERE d.deptype = 'e' AND obj_description(d.objid, d.classid::regclass::name) IS NULL
  AND NOT EXISTS (SELECT FROM pg_type t WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                  AND (t.typrelid <> 0 OR EXISTS (SELECT FROM pg_type e WHERE e.typarray = t.oid)))
ORDER BY 1;

-- dp_prior has a binary form (drivers' binary mode): a round trip through
-- COPY … (FORMAT binary) gives the priors back, checked again on the way in.
CREATE TABLE priors AS
SELECT dp_prior_uniform(0, 120) AS p UNION ALL SELECT dp_prior_categorical(ARRAY['a', 'b'], ARRAY[1, 3])
UNION ALL SELECT dp_prior_normal(50, 10, 0, 100);
COPY priors TO '/tmp/dpnoise_regress_priors.bin' (FORMAT binary);
CREATE TABLE priors_back (p dp_prior);
COPY priors_back FROM '/tmp/dpnoise_regress_priors.bin' (FORMAT binary);
SELECT count(*) AS round_tripped FROM priors_back b JOIN priors a ON a.p::text = b.p::text;
-- Untyped parameters, as drivers send them: dp_refine reads a number for a numeric prior.
PREPARE refine_untyped AS SELECT dp_refine($1, $2, $3) IS NOT NULL AS released;
EXECUTE refine_untyped('42', '{"kind":"histogram","edges":[0,120],"weights":[1]}', '1.0');
DEALLOCATE refine_untyped;

-- A dropped role's budget stays, named as a dropped role.
CREATE ROLE short_lived;
SELECT dp_budget_grant('short_lived', 1.0);
DROP ROLE short_lived;
SELECT role_name ~ '^dropped role \d+$' AS named_dropped, epsilon_granted FROM dp_budgets
WHERE role_name LIKE 'dropped role %';

-- No error message shows a value read from a table.
CREATE TABLE secret AS SELECT 73456.78::float8 AS salary, 'Zebulon'::text AS name;
SELECT left(o, 5) AS sqlstate, o ~ '(7345|7\.345|Zebulon)' AS shows_the_value
FROM (VALUES (outcome('SELECT dp_laplace(salary * 1e30, 1, 1) FROM secret')),
             (outcome('SELECT dp_staircase(salary * 1e30, 1, 1) FROM secret')),
             (outcome('SELECT dp_noise(salary * 1e30, 1, 1) FROM secret')),
             (outcome($$SELECT dp_refine(name, dp_prior_categorical(ARRAY['a', 'b'], ARRAY[1, 1]), 1.0) FROM secret$$)),
             (outcome($$SELECT dp_noise_box(ARRAY[salary * 'Infinity'::float8], 1, ARRAY[1.0]) FROM secret$$)),
             (outcome('SELECT dp_noise_box(ARRAY[salary, salary], 1, ARRAY[1.0]) FROM secret')),
             (outcome('SELECT dp_noise_l1_staircase(ARRAY[salary * 1e30, 0], 1, 1) FROM secret'))) v(o);

-- dp_session_budget's bad input (left out of the calls above: a cap it
-- sets holds for the rest of the session), then a cap of 0, which ends
-- this session's releases; nothing charged.
SELECT charges() AS before \gset
SELECT v, left(outcome(format('SELECT dp_session_budget(%s)', v)), 5) AS sqlstate
FROM unnest(ARRAY['''NaN''', '''Infinity''', '-1', '''-Infinity''', 'NULL, 2', 'NULL, -1', 'NULL, ''NaN''']) v;
SELECT dp_session_budget(0);
SELECT left(outcome('SELECT dp_laplace(1, 1, 1)'), 5) AS capped_at_zero, left(outcome('SELECT dp_session_budget(0.1)'), 5) AS not_raised;
SELECT charges() - :before AS charged;
