-- dpnoise 0.4.0 -> 0.5.0: per-person contribution bounding for analysts
-- (tables with several rows per person, joins on the privacy unit and with
-- public tables): max_groups_contributed per protected table, dp_share and
-- dp_uniform, which the gate writes into the queries it bounds.
ALTER TABLE dpnoise.protected ADD COLUMN max_groups_contributed integer NOT NULL DEFAULT 1
    CHECK (max_groups_contributed BETWEEN 1 AND 1000);

DROP FUNCTION dp_protect(regclass, name);
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
REVOKE EXECUTE ON FUNCTION dp_protect(regclass, name, integer) FROM PUBLIC;

DROP VIEW dp_protected_tables;
CREATE VIEW dp_protected_tables AS
SELECT p.relid AS table_name, p.privacy_unit, p.max_groups_contributed,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index x
               JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0]
               WHERE x.indrelid = p.relid AND x.indisunique AND x.indnkeyatts = 1
                 AND x.indpred IS NULL AND x.indexprs IS NULL AND a.attname = p.privacy_unit) AS one_row_per_person
FROM dpnoise.protected p;
COMMENT ON VIEW dp_protected_tables IS
    'Protected tables, their privacy unit, how many groups of a query one person may contribute to, and whether the unit is UNIQUE (one row per person: no per-person combination needed). Superusers only.';

CREATE FUNCTION dp_share(total double precision, parts integer) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_share' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION dp_share(double precision, integer) IS
    'The largest double whose parts-fold multiple is at most total: the epsilon (or delta) each of a person''s groups may spend. The gate writes it; it is STABLE so that a plan keeps the total it charges.';
CREATE FUNCTION dp_uniform() RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_uniform' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dp_uniform() IS
    'A uniform draw in [0, 1) from the backend''s ChaCha20 generator: how the gate picks which of a person''s groups count.';
