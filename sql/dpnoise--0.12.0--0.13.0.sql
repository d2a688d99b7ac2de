-- dpnoise 0.12.0 -> 0.13.0: a change to any budget tells every session at
-- commit (dp_budget_changed, a relcache invalidation of dpnoise.budget), so
-- sessions paying ahead (dpnoise.charge_ahead) give back what they hold and
-- ask the ledger again under the budget as it now is.
CREATE FUNCTION "dp_budget_changed"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'dp_budget_changed_wrapper';
REVOKE EXECUTE ON FUNCTION dp_budget_changed() FROM PUBLIC;
COMMENT ON FUNCTION dp_budget_changed() IS 'Tells every session that a budget changed (at commit): sessions paying ahead give back what they hold and ask again; called by dp_budget_grant and friends.';

CREATE OR REPLACE FUNCTION dp_budget_grant(role regrole, epsilon double precision, delta double precision DEFAULT 0)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
    e numeric := dpnoise.amount('epsilon', $2, NULL);
    d numeric := dpnoise.amount('delta', $3, 1);
BEGIN
    INSERT INTO dpnoise.spent AS p (role) VALUES (r) ON CONFLICT DO NOTHING;
    -- A new budget starts at what was already spent: it adds e to what remains.
    INSERT INTO dpnoise.budget AS b (role, epsilon, delta)
    SELECT r, p.epsilon + e, p.delta + d FROM dpnoise.spent p WHERE p.role = r
    ON CONFLICT ON CONSTRAINT budget_pkey DO UPDATE SET epsilon = b.epsilon + e, delta = b.delta + d;
    PERFORM @extschema@.dp_budget_changed();
END $$;

CREATE OR REPLACE FUNCTION dp_budget_revoke(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM dpnoise.budget b WHERE b.role = dpnoise.existing_role($1);
    PERFORM @extschema@.dp_budget_changed();
END $$;

CREATE OR REPLACE FUNCTION dp_budget_set_strict(role regrole, strict boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF $2 IS NULL THEN
        RAISE EXCEPTION 'strict must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dpnoise.budget b SET strict = $2 WHERE b.role = dpnoise.existing_role($1);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'role % has no budget', $1 USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Grant one first with dp_budget_grant.';
    END IF;
    PERFORM @extschema@.dp_budget_changed();
END $$;

CREATE OR REPLACE FUNCTION dp_budget_set_global(epsilon double precision, delta double precision DEFAULT 0) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF $1 IS NULL THEN
        DELETE FROM dpnoise.global_cap;
    ELSE
        INSERT INTO dpnoise.global_cap AS g (epsilon, delta)
        VALUES (dpnoise.amount('epsilon', $1, NULL), dpnoise.amount('delta', $2, 1))
        ON CONFLICT (singleton) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta;
    END IF;
    PERFORM @extschema@.dp_budget_changed();
END $$;
