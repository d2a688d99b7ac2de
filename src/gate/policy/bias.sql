-- What bounding drops (0.22.0, docs/bi.md): over several rows per person a
-- plain count counts at most rows_per_person of a person's rows in a
-- group, and a person adds to at most max_groups_contributed groups, so
-- the answers are low by the rows beyond. The noise interval does not
-- show it; this estimate of the share of rows kept does, for the DBA
-- choosing R and k, with its own charge (two sums at epsilon / 2 each, to
-- the caller's budget): for each person, their rows in each group up to R,
-- times the share of their groups the bounding keeps (k of m, chosen at
-- random), over their rows (at most max_rows a person).
CREATE FUNCTION dp_bounding_loss(tbl regclass, epsilon double precision, rows_per_person integer DEFAULT NULL,
                                 group_column name DEFAULT NULL, max_groups integer DEFAULT NULL,
                                 max_rows integer DEFAULT 100)
RETURNS TABLE (rows_kept double precision, rows_total double precision, share_dropped double precision)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    unit name;
    r integer;
    k integer;
    grouping text;
BEGIN
    SELECT p.privacy_unit, coalesce($3, p.rows_per_person, current_setting('dpnoise.policy_rows_per_person')::integer),
           coalesce($5, p.max_groups_contributed)
      INTO unit, r, k FROM dpnoise.protected p WHERE p.relid = $1;
    IF unit IS NULL THEN
        RAISE EXCEPTION 'table % is not protected: call dp_protect first', tbl USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF epsilon IS NULL OR NOT (epsilon > 0 AND epsilon <= 100) THEN
        RAISE EXCEPTION 'epsilon must be above 0 and at most 100' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF r NOT BETWEEN 1 AND 1000000 OR k NOT BETWEEN 1 AND 1000 OR max_rows IS NULL OR max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'rows_per_person must be 1 to 1000000, max_groups 1 to 1000, max_rows 1 to 1000000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF group_column IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = $1 AND a.attname = $4 AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'table % has no column %', tbl, group_column USING ERRCODE = 'undefined_column';
    END IF;
    grouping := CASE WHEN group_column IS NULL THEN 'NULL::integer' ELSE quote_ident(group_column) END;
    RETURN QUERY EXECUTE format(
        'SELECT b.kept, b.total, 1 - b.kept / nullif(b.total, 0) FROM (
           SELECT @extschema@.dp_sum(p.kept, $1 / 2, 0, %2$s) AS kept, @extschema@.dp_sum(p.total, $1 / 2, 0, %3$s) AS total
           FROM (SELECT g.u, sum(least(g.n, %4$s))::float8 * least(1.0, %5$s::float8 / count(*)) AS kept,
                        least(sum(g.n), %3$s)::float8 AS total
                 FROM (SELECT t.%6$I AS u, %7$s AS c, count(*) AS n FROM %1$s t GROUP BY 1, 2) g GROUP BY g.u) p) b',
        tbl, (r::bigint * k), max_rows, r, k, unit, grouping)
    USING epsilon;
END $$;
COMMENT ON FUNCTION dp_bounding_loss(regclass, double precision, integer, name, integer, integer) IS
    'Estimates, with its own charge (epsilon, to the caller), the rows a plain count over several rows per person keeps when each person adds at most rows_per_person rows to a group and is in at most max_groups groups of group_column (defaults: the table''s policy and protection), against all rows (at most max_rows a person): the bias the noise interval does not show.';
REVOKE EXECUTE ON FUNCTION dp_bounding_loss(regclass, double precision, integer, name, integer, integer) FROM PUBLIC;
