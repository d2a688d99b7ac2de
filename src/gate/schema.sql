-- The analyst gate (src/gate/mod.rs, docs/analysts.md): protected tables,
-- analyst roles, and functions the DBA allows on protected columns.

-- Tables holding private data, each with its privacy unit (the column
-- naming the person). Written by dp_protect and dp_unprotect only.
CREATE TABLE dpnoise.protected (
    relid        regclass PRIMARY KEY,
    privacy_unit name NOT NULL,
    max_groups_contributed integer NOT NULL DEFAULT 1
        CHECK (max_groups_contributed BETWEEN 1 AND 1000)
);
-- Functions the DBA declares safe on protected columns for analysts,
-- beyond LEAKPROOF ones (which cannot fail or show their arguments).
CREATE TABLE dpnoise.allowed_functions (
    fn regprocedure PRIMARY KEY
);
SELECT pg_catalog.pg_extension_config_dump('dpnoise.protected', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.allowed_functions', '');

CREATE FUNCTION dp_protect(tbl regclass, privacy_unit name, max_groups_contributed integer DEFAULT 1) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF tbl IS NULL OR privacy_unit IS NULL OR max_groups_contributed IS NULL THEN
        RAISE EXCEPTION 'table, privacy_unit and max_groups_contributed must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_groups_contributed NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'max_groups_contributed must be between 1 and 1000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = tbl AND a.attname = privacy_unit AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'table % has no column %', tbl, privacy_unit USING ERRCODE = 'undefined_column';
    END IF;
    INSERT INTO dpnoise.protected AS p (relid, privacy_unit, max_groups_contributed)
    VALUES (tbl, privacy_unit, max_groups_contributed)
    ON CONFLICT (relid) DO UPDATE SET privacy_unit = excluded.privacy_unit,
                                      max_groups_contributed = excluded.max_groups_contributed;
    PERFORM @extschema@.dp_gate_changed();
END $$;
COMMENT ON FUNCTION dp_protect(regclass, name, integer) IS
    'Marks a table as private data whose rows belong to the person named by privacy_unit: analysts get only differentially private aggregates of it, each person in at most max_groups_contributed groups of a query.';

CREATE FUNCTION dp_unprotect(tbl regclass) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM dpnoise.protected p WHERE p.relid = $1;
    SELECT @extschema@.dp_gate_changed();
$$;
COMMENT ON FUNCTION dp_unprotect(regclass) IS 'Removes a table''s protection: analysts then read it as their privileges allow.';

-- An analyst is a role whose sessions in this database have
-- dpnoise.analyst = on, a setting only superusers can change.
CREATE FUNCTION dp_analyst(role regrole, analyst boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
BEGIN
    IF analyst IS NULL THEN
        RAISE EXCEPTION 'analyst must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE oid = r) THEN
        RAISE EXCEPTION 'a superuser cannot be an analyst: it can change any setting'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF analyst THEN
        EXECUTE pg_catalog.format('ALTER ROLE %I IN DATABASE %I SET dpnoise.analyst = on',
                                  r::text, pg_catalog.current_database());
    ELSE
        EXECUTE pg_catalog.format('ALTER ROLE %I IN DATABASE %I RESET dpnoise.analyst',
                                  r::text, pg_catalog.current_database());
    END IF;
END $$;
COMMENT ON FUNCTION dp_analyst(regrole, boolean) IS
    'Makes a role an analyst in this database (false: no longer): from its next connection it gets only differentially private aggregates of protected tables.';

CREATE FUNCTION dp_allow_function(fn regprocedure, allowed boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF fn IS NULL OR allowed IS NULL THEN
        RAISE EXCEPTION 'fn and allowed must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF allowed THEN
        INSERT INTO dpnoise.allowed_functions VALUES (fn) ON CONFLICT DO NOTHING;
    ELSE
        DELETE FROM dpnoise.allowed_functions a WHERE a.fn = $1;
    END IF;
    PERFORM @extschema@.dp_gate_changed();
END $$;
COMMENT ON FUNCTION dp_allow_function(regprocedure, boolean) IS
    'Allows (false: no longer) a function that is not LEAKPROOF on protected columns in analysts'' queries: the DBA vouches that it cannot fail or show a value.';

REVOKE EXECUTE ON FUNCTION dp_gate_changed(), dp_protect(regclass, name, integer), dp_unprotect(regclass),
    dp_analyst(regrole, boolean), dp_allow_function(regprocedure, boolean) FROM PUBLIC;

-- What the DBA sees.
CREATE VIEW dp_protected_tables AS
SELECT p.relid AS table_name, p.privacy_unit, p.max_groups_contributed,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index x
               JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0]
               WHERE x.indrelid = p.relid AND x.indisunique AND x.indnkeyatts = 1
                 AND x.indpred IS NULL AND x.indexprs IS NULL AND a.attname = p.privacy_unit) AS one_row_per_person
FROM dpnoise.protected p;
COMMENT ON VIEW dp_protected_tables IS
    'Protected tables, their privacy unit, how many groups of a query one person may contribute to, and whether the unit is UNIQUE (one row per person: no per-person combination needed). Superusers only.';
COMMENT ON TABLE dpnoise.protected IS 'Protected tables and their privacy units; written by dp_protect and dp_unprotect.';
COMMENT ON FUNCTION dp_gate_changed() IS 'Tells every session that the protected tables or the allow list changed (at commit); called by dp_protect and friends.';
COMMENT ON TABLE dpnoise.allowed_functions IS 'Functions allowed on protected columns beyond LEAKPROOF ones; written by dp_allow_function.';

-- Per-person contribution bounding (src/gate/bounding.rs): what the gate
-- writes into an analyst's query over tables with several rows per person.
CREATE FUNCTION dp_share(total double precision, parts integer) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_share' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION dp_share(double precision, integer) IS
    'The largest double whose parts-fold multiple is at most total: the epsilon (or delta) each of a person''s groups may spend. The gate writes it; it is STABLE so that a plan keeps the total it charges.';
CREATE FUNCTION dp_uniform() RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_uniform' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dp_uniform() IS
    'A uniform draw in [0, 1) from the backend''s ChaCha20 generator: how the gate picks which of a person''s groups count.';
COMMENT ON FUNCTION dp_query_accuracy(text, double precision, text[], double precision, double precision, boolean, double precision, double precision, text) IS
    'The error of one aggregate (count, sum with its bounds, or rows: the row count dp_sum(1.0, epsilon, lower, upper)) in a query over these tables, with the contribution bounds the gate applies this session, and the persons a group needs for partition selection to show it; with delta > 0, of the (epsilon, delta) release (a Gaussian over a person''s k groups is calibrated to the L2 sensitivity across them). Spends and draws nothing.';
COMMENT ON FUNCTION dp_query_cost(text, double precision, text[], double precision, double precision, boolean, double precision, text) IS
    'What one aggregate of a query over these tables will be charged, before anything is spent: (epsilon, delta) added up, and rho with the delta beside it under zCDP, for the aggregate, the partition selection its GROUP BY needs, the run time, and in total. Spends and draws nothing.';
