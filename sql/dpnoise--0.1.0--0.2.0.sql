-- dpnoise 0.1.0 → 0.2.0 (the hardening issue). ALTER EXTENSION dpnoise UPDATE
-- gives the catalog a fresh 0.2.0 install has (scripts/upgrade_test.sh).
\echo Use "ALTER EXTENSION dpnoise UPDATE TO '0.2.0'" to load this file. \quit

-- Charges serialise on a table no role but a superuser can lock, not on an
-- advisory lock any role could hold.
CREATE TABLE dpnoise.charge_lock ();
CREATE OR REPLACE FUNCTION dpnoise.charge_batch(
    requesters oid[], epsilons numeric[], deltas numeric[], releases bigint[],
    mechanisms text[], statements text[], pids integer[])
RETURNS TABLE (granted boolean, is_strict boolean, remaining_epsilon numeric, remaining_delta numeric)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    roles oid[];
    left_epsilon numeric[];
    left_delta numeric[];
    strict_of boolean[];
    capped boolean;
    cap_epsilon numeric;
    cap_delta numeric;
    g boolean[] := '{}';
    st boolean[] := '{}';
    re numeric[] := '{}';
    rd numeric[] := '{}';
    cost_epsilon numeric;
    cost_delta numeric;
    j integer;
BEGIN
    LOCK TABLE dpnoise.charge_lock IN EXCLUSIVE MODE;
    SELECT array_agg(x.r ORDER BY x.r), array_agg(b.epsilon - p.epsilon ORDER BY x.r),
           array_agg(b.delta - p.delta ORDER BY x.r), array_agg(b.strict ORDER BY x.r)
    INTO roles, left_epsilon, left_delta, strict_of
    FROM (SELECT DISTINCT unnest(requesters) AS r) x
    LEFT JOIN dpnoise.budget b ON b.role = x.r
    LEFT JOIN dpnoise.spent p ON p.role = x.r;
    SELECT c.epsilon - (SELECT sum(s.epsilon) FROM dpnoise.spent s), c.delta - (SELECT sum(s.delta) FROM dpnoise.spent s)
    INTO cap_epsilon, cap_delta FROM dpnoise.global_cap c;
    capped := FOUND;
    FOR i IN 1 .. cardinality(requesters) LOOP
        j := array_position(roles, requesters[i]);
        IF left_epsilon[j] IS NULL THEN
            -- No budget (never granted, or revoked).
            g[i] := false; st[i] := false; re[i] := 0; rd[i] := 0;
            CONTINUE;
        END IF;
        cost_epsilon := epsilons[i] * releases[i];
        cost_delta := deltas[i] * releases[i];
        st[i] := strict_of[j];
        g[i] := cost_epsilon <= left_epsilon[j] AND cost_delta <= left_delta[j]
                AND (NOT capped OR (cost_epsilon <= cap_epsilon AND cost_delta <= cap_delta));
        IF g[i] THEN
            left_epsilon[j] := left_epsilon[j] - cost_epsilon;
            left_delta[j] := left_delta[j] - cost_delta;
            cap_epsilon := cap_epsilon - cost_epsilon;
            cap_delta := cap_delta - cost_delta;
        END IF;
        re[i] := CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END;
        rd[i] := CASE WHEN capped THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END;
    END LOOP;
    UPDATE dpnoise.spent p SET epsilon = p.epsilon + c.e, delta = p.delta + c.d
    FROM (SELECT requesters[k] AS r, sum(epsilons[k] * releases[k]) AS e, sum(deltas[k] * releases[k]) AS d
          FROM generate_subscripts(requesters, 1) k WHERE g[k] GROUP BY 1) c
    WHERE p.role = c.r;
    INSERT INTO dpnoise.ledger (role, charged_at, statement, mechanism, epsilon, delta, releases, pid)
    SELECT requesters[k], clock_timestamp(), statements[k], mechanisms[k], epsilons[k], deltas[k], releases[k], pids[k]
    FROM generate_subscripts(requesters, 1) k WHERE g[k] ORDER BY k;
    RETURN QUERY SELECT g[k], st[k], re[k], rd[k] FROM generate_subscripts(requesters, 1) k ORDER BY k;
END $$;

-- dp_prior gets a binary form (drivers' binary mode, COPY … (FORMAT binary)).
CREATE FUNCTION "dp_prior_send"("prior" dp_prior) RETURNS bytea
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'dp_prior_send_wrapper';
CREATE FUNCTION "dp_prior_recv"("buffer" internal) RETURNS dp_prior
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'dp_prior_recv_wrapper';
ALTER TYPE dp_prior SET (SEND = dp_prior_send, RECEIVE = dp_prior_recv);
COMMENT ON FUNCTION dp_prior_send(dp_prior) IS 'Binary output function of dp_prior: a version byte, then its JSON text.';
COMMENT ON FUNCTION dp_prior_recv(internal) IS 'Binary input function of dp_prior, checked like the text input.';

-- dp_budgets names dropped roles (dp_my_budget is its SELECT *).
CREATE OR REPLACE VIEW dp_budgets AS
SELECT b.role, b.strict,
       b.epsilon AS epsilon_granted, coalesce(p.epsilon, 0) AS epsilon_spent,
       b.epsilon - coalesce(p.epsilon, 0) AS epsilon_remaining,
       b.delta AS delta_granted, coalesce(p.delta, 0) AS delta_spent,
       b.delta - coalesce(p.delta, 0) AS delta_remaining,
       -- A dropped role's budget and charges stay; its name does not.
       coalesce(r.rolname::text, 'dropped role ' || b.role::oid) AS role_name
FROM dpnoise.budget b LEFT JOIN dpnoise.spent p ON p.role = b.role
LEFT JOIN pg_catalog.pg_roles r ON r.oid = b.role;
CREATE OR REPLACE VIEW dp_my_budget WITH (security_barrier) AS
SELECT * FROM dp_budgets WHERE role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;

-- Comments: every object of the extension says what it is (\df+, \dT+, \dv+).
COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [lower, upper] at epsilon (delta 0); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [lower, upper] at (epsilon, delta); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision, double precision, text) IS
    'Noisy sum of values clamped to [lower, upper] at (epsilon, delta) with the named mechanism (or auto).';
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint) IS
    'Noisy sum of bigint values clamped to [lower, upper] at epsilon (delta 0); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint, double precision) IS
    'Noisy sum of bigint values clamped to [lower, upper] at (epsilon, delta); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint, double precision, text) IS
    'Noisy sum of bigint values clamped to [lower, upper] at (epsilon, delta) with the named mechanism (or auto).';
COMMENT ON FUNCTION dp_accuracy(text, double precision, double precision, text, double precision, double precision) IS
    'Exact error of a mechanism before spending: mean |error|, standard deviation, half-width of the confidence interval. Spends nothing.';
COMMENT ON FUNCTION dp_accuracy_multi(double precision, double precision[], double precision[]) IS
    'Exact figures of box noise before spending: per-component variances, inner half-widths, volumes holding 90/95/99 %. Spends nothing.';
COMMENT ON FUNCTION dp_noise_box(double precision[], double precision, double precision[], double precision[]) IS
    'values plus box noise (Soria-Comas & Domingo-Ferrer, Theorem 13) for per-component sensitivities: one charge of epsilon.';
COMMENT ON FUNCTION dp_noise_l1_staircase(double precision[], double precision, double precision) IS
    'Two values plus Geng''s two-dimensional staircase noise for an L1 sensitivity: one charge of epsilon.';
COMMENT ON FUNCTION dp_prior_uniform(double precision, double precision) IS 'A prior uniform on [lower, upper], for dp_refine.';
COMMENT ON FUNCTION dp_prior_histogram(double precision[], double precision[]) IS
    'A piecewise uniform prior: weights[i] on [edges[i], edges[i+1]), normalised; for dp_refine.';
COMMENT ON FUNCTION dp_prior_normal(double precision, double precision, double precision, double precision) IS
    'A normal prior (mean, sd) truncated to [lower, upper], for dp_refine.';
COMMENT ON FUNCTION dp_prior_categorical(text[], double precision[]) IS
    'A prior over a finite set of categories with their probabilities (normalised), for dp_refine on text.';
COMMENT ON FUNCTION dp_refine(double precision, dp_prior, double precision, boolean) IS
    'A draw from the prior sharpened around value (knowledge refinement, Soria-Comas & Domingo-Ferrer) at epsilon; NULL value: NULL, nothing charged.';
COMMENT ON FUNCTION dp_refine(text, dp_prior, double precision, boolean) IS
    'A category drawn from a categorical prior sharpened towards value at epsilon; with a numeric prior, a constant value is read as a number.';
COMMENT ON FUNCTION dp_prior_in(cstring) IS 'Input function of dp_prior: its JSON text form, checked like the constructors.';
COMMENT ON FUNCTION dp_prior_out(dp_prior) IS 'Output function of dp_prior: its JSON text form.';
COMMENT ON TYPE dp_prior IS 'A prior over a query''s answer, for dp_refine; text form JSON ({"kind":"histogram","edges":[0,120],"weights":[1]}).';
COMMENT ON SCHEMA dpnoise IS 'dpnoise''s budget and ledger: superusers only.';
COMMENT ON TABLE dpnoise.budget IS 'What each role was granted (epsilon, delta) and whether it is strict; written by the dp_budget_* functions.';
COMMENT ON TABLE dpnoise.spent IS 'What each role has spent; written by the ledger worker only.';
COMMENT ON TABLE dpnoise.global_cap IS 'An optional cap on what all roles together may spend in this database.';
COMMENT ON TABLE dpnoise.ledger IS 'One row per charge, committed before the release it pays for.';
COMMENT ON SEQUENCE dpnoise.ledger_id_seq IS 'Numbers the ledger''s charges.';
COMMENT ON TABLE dpnoise.charge_lock IS 'Never holds a row: the ledger workers lock it to charge one batch at a time.';
COMMENT ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[]) IS
    'Charges a batch of releases; called by the ledger worker only.';
COMMENT ON FUNCTION dpnoise.amount(text, double precision, double precision) IS 'Checks a granted amount and returns it as the exact decimal written.';
COMMENT ON FUNCTION dpnoise.existing_role(regrole) IS 'Checks that a role exists (42704 otherwise).';
COMMENT ON VIEW dp_budgets IS 'Every role''s budget: granted, spent and remaining epsilon and delta. Superusers only.';
COMMENT ON VIEW dp_my_budget IS 'The calling role''s own budget row.';
COMMENT ON VIEW dp_my_ledger IS 'The calling role''s own charges.';
-- Support functions: named after the aggregates they serve, from the catalog.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT s.fn, string_agg(DISTINCT a.aggfnoid::regproc::text, ', ') AS aggregates, min(s.role) AS role
        FROM pg_catalog.pg_aggregate a,
             LATERAL (VALUES (a.aggtransfn, 'transition'), (a.aggfinalfn, 'final'), (a.aggcombinefn, 'combine'),
                             (a.aggserialfn, 'serialize'), (a.aggdeserialfn, 'deserialize')) s(fn, role)
        JOIN pg_catalog.pg_depend d ON d.objid = s.fn AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
        GROUP BY s.fn
    LOOP
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', f.fn::regprocedure,
                       format('Support function (%s) of %s; not for direct use (revoked from PUBLIC).', f.role, f.aggregates));
    END LOOP;
END $$;
