-- dp_partition_selected: private partition selection (src/selection.rs).

CREATE FUNCTION dp_count_step(bigint, double precision, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_partition_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_partition_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_partition_selected(epsilon double precision, delta double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_partition_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_partition_selected(double precision, double precision) IS
    'Whether this group may be shown, at (epsilon, delta): true with the optimal probability for its number of rows (one per person). Use in HAVING when group keys come from private data.';

-- dp_count_selected: the level's own dp_count, thresholded (src/selection.rs).
CREATE FUNCTION dp_count_step(bigint, double precision, text, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_count_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_count_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_count_selected(epsilon double precision, mechanism text, delta double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count_selected(double precision, text, double precision) IS
    'Whether this group may be shown: true when the dp_count(epsilon, mechanism) released beside it in the same level reached the threshold set from epsilon, delta and the groups a person may add to. The analyst gate writes it in HAVING; it pays delta only.';

-- dp_sum_selected: the level's own float8 dp_sum (a row count written dp_sum(1.0, ...)), thresholded (src/selection.rs).
CREATE FUNCTION dp_count_step(bigint, double precision, double precision, double precision, text, text, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_sum_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_sum_selected(epsilon double precision, lower double precision, upper double precision, mechanism text, loss text, delta double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_sum_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_selected(double precision, double precision, double precision, text, text, double precision) IS
    'Whether this group may be shown: true when the dp_sum(value, epsilon, lower, upper) of that mechanism and loss released beside it in the same level reached the threshold set from epsilon, the bounds, delta and the groups a person may add to. The analyst gate writes it in HAVING; it pays delta only.';
