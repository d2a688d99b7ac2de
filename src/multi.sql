-- Multivariate noise: dp_sum_multi, and the comments of the functions src/multi.rs defines.
-- Support functions are deterministic (IMMUTABLE) except the final
-- functions, which draw noise (VOLATILE). EXECUTE on every support function
-- is revoked from PUBLIC at the end of the script (src/finalize.sql).
-- SSPACE is size_of::<MultiState>(), checked when the crate compiles.

CREATE FUNCTION dp_sum_multi_step(internal, double precision[], double precision, double precision[])
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_multi_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_final(internal) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'dp_sum_multi_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_multi_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'dp_sum_multi_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_multi_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE AGGREGATE dp_sum_multi("values" double precision[], epsilon double precision, bounds double precision[]) (
    SFUNC = dp_sum_multi_step, STYPE = internal, SSPACE = 480,
    COMBINEFUNC = dp_sum_multi_combine, SERIALFUNC = dp_sum_multi_serialize,
    DESERIALFUNC = dp_sum_multi_deserialize, FINALFUNC = dp_sum_multi_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_multi(double precision[], double precision, double precision[]) IS
    'Component-wise sums of vectors clamped to [-bound_j, bound_j], released together with box noise (Soria-Comas & Domingo-Ferrer): one charge of epsilon.';

COMMENT ON FUNCTION dp_accuracy_multi(double precision, double precision[], double precision[]) IS
    'Exact figures of box noise before spending: per-component variances, inner half-widths, volumes holding 90/95/99 %. Spends nothing.';
COMMENT ON FUNCTION dp_noise_box(double precision[], double precision, double precision[], double precision[]) IS
    'values plus box noise (Soria-Comas & Domingo-Ferrer, Theorem 13) for per-component sensitivities: one charge of epsilon.';
COMMENT ON FUNCTION dp_noise_l1_staircase(double precision[], double precision, double precision) IS
    'Two values plus Geng''s two-dimensional staircase noise for an L1 sensitivity: one charge of epsilon.';
