-- dpnoise 0.17.0 → 0.18.0: thresholded counts (src/selection.rs). Where an analyst's level
-- shows a pure-epsilon dp_count, the gate selects its groups by that count's own noise.
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
