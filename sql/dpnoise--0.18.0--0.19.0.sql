-- dpnoise 0.18.0 → 0.19.0: quantiles and variances over several rows per person (src/per_person.rs).
-- The gate's bounding reads one value of each person per group: their own quantile, or one row.
CREATE FUNCTION dp_bound_quantile(key bigint, k integer, value double precision, p double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_quantile' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_quantile(bigint, integer, double precision, double precision) IS
    'As dp_bound_kept, the person''s own p-quantile (nearest rank) of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_row(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_row' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_row(bigint, integer, double precision) IS
    'As dp_bound_kept, one of the person''s non-NULL values in the group, at a rank drawn from the key (NULL if none).';
