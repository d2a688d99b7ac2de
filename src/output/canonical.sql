-- Canonical forms (src/output/canonical.rs): one value per equality class
-- of the type, which the analyst gate writes around a group key whose type's
-- equal values can differ in bytes. Each returns for every input (LEAKPROOF)
-- and reads nothing but its argument (IMMUTABLE). Named dp_total_* so that
-- the gate's catalog finds them with the total forms.

CREATE FUNCTION dp_total_canonical_float8(double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_canonical_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_canonical_float4(real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_canonical_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_canonical_numeric(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_canonical_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_canonical_interval(interval) RETURNS interval
    AS 'MODULE_PATHNAME', 'dp_total_canonical_interval' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_canonical_bpchar(character) RETURNS character
    AS 'MODULE_PATHNAME', 'dp_total_canonical_bpchar' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_canonical_float8(double precision) IS
    'Normal form of a float8 group key: 0 for -0 and 0, one NaN for every NaN (equal values, one shown value).';
COMMENT ON FUNCTION dp_total_canonical_float4(real) IS
    'Normal form of a float4 group key: 0 for -0 and 0, one NaN for every NaN (equal values, one shown value).';
COMMENT ON FUNCTION dp_total_canonical_numeric(numeric) IS
    'Normal form of a numeric group key: without trailing fractional zeros (3.0 and 3.00 show as 3).';
COMMENT ON FUNCTION dp_total_canonical_interval(interval) IS
    'Normal form of an interval group key: its span as months of 30 days, days of 24 hours and time, all of one sign (1 day and 24:00:00 show as 1 day).';
COMMENT ON FUNCTION dp_total_canonical_bpchar(character) IS
    'Normal form of a char(n) group key: without trailing blanks, which its equality ignores.';
