-- Per-person bounding in one pass (src/per_person.rs): the analyst gate
-- writes these into a query over a table with several rows per person.
-- dp_bound_key hashes a person and a group under a seed (deterministic,
-- never fails: LEAKPROOF); the window functions read a person's rows
-- sorted by it and give each kept group's combined value on its first row.

CREATE FUNCTION dp_bound_key(seed bigint, VARIADIC parts "any") RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_key' LANGUAGE C IMMUTABLE LEAKPROOF PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_key(bigint, "any") IS
    'The key that orders a person''s groups for contribution bounding: SipHash under the seed of each part''s hash (written by the analyst gate).';
CREATE FUNCTION dp_bound_kept(key bigint, k integer) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_kept' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_kept(bigint, integer) IS
    'Window function over a person''s rows ordered by dp_bound_key: 1 on the first row of each of the first k groups, else NULL.';
CREATE FUNCTION dp_bound_present(key bigint, k integer, value "any") RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_present' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_present(bigint, integer, "any") IS
    'As dp_bound_kept, 1 only if the person has a non-NULL value in the group.';
CREATE FUNCTION dp_bound_sum(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_sum_float8' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_sum(bigint, integer, double precision) IS
    'As dp_bound_kept, the person''s exact sum of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_sum(key bigint, k integer, value bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_sum_int8' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_sum(bigint, integer, bigint) IS
    'As dp_bound_kept, the person''s sum of the group''s non-NULL values, saturated to bigint (NULL if none).';
CREATE FUNCTION dp_bound_avg(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_avg_float8' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_avg(bigint, integer, double precision) IS
    'As dp_bound_kept, the person''s average of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_quantile(key bigint, k integer, value double precision, p double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_quantile' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_quantile(bigint, integer, double precision, double precision) IS
    'As dp_bound_kept, the person''s own p-quantile (nearest rank) of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_row(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_row' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_row(bigint, integer, double precision) IS
    'As dp_bound_kept, one of the person''s non-NULL values in the group, at a rank drawn from the key (NULL if none).';
