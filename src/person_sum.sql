-- A person's exact sum and average (src/person_sum.rs): the analyst gate's
-- grouped bounding plan combines each person's rows with them (GROUP BY the
-- privacy unit), on levels without GROUP BY keys. Not releases: the dpnoise
-- aggregate above them releases. Every SSPACE here is size_of::<PersonSum>(),
-- checked when the crate compiles.
CREATE FUNCTION dp_person_sum_step(internal, double precision) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_person_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_person_sum_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_person_sum_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_person_avg_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_person_avg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE dp_person_sum(value double precision) (
    SFUNC = dp_person_sum_step, STYPE = internal, SSPACE = 40,
    FINALFUNC = dp_person_sum_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_person_avg(value double precision) (
    SFUNC = dp_person_sum_step, STYPE = internal, SSPACE = 40,
    FINALFUNC = dp_person_avg_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_person_sum(double precision) IS
    'The exact sum of the non-NULL values, rounded once (the same in any order of the rows); written by the analyst gate to combine a person''s rows. Not a release.';
COMMENT ON AGGREGATE dp_person_avg(double precision) IS
    'The exact sum of the non-NULL values, rounded once, over their count; written by the analyst gate to combine a person''s rows. Not a release.';
