-- dpnoise 0.22.0 → 0.23.0: total forms of to_char for numbers (src/total/formats.rs).
-- Total forms of to_char for numbers (src/total/formats.rs), as in total.sql.
CREATE FUNCTION dp_total_int4_to_char(integer, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_int4_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_int4_to_char(integer, text) IS
    'Total form of to_char(integer,text): NULL unless the format has only 9, 0, comma, G, one . or D, L, FM and spaces (at most 1 KB), which format every value; the analyst gate writes it in place of the built-in (docs/analysts.md).';
CREATE FUNCTION dp_total_int8_to_char(bigint, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_int8_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_int8_to_char(bigint, text) IS
    'Total form of to_char(bigint,text): NULL unless the format has only 9, 0, comma, G, one . or D, L, FM and spaces (at most 1 KB), which format every value; the analyst gate writes it in place of the built-in (docs/analysts.md).';
CREATE FUNCTION dp_total_float4_to_char(real, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_float4_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_float4_to_char(real, text) IS
    'Total form of to_char(real,text): NULL unless the format has only 9, 0, comma, G, one . or D, L, FM and spaces (at most 1 KB), which format every value; the analyst gate writes it in place of the built-in (docs/analysts.md).';
CREATE FUNCTION dp_total_float8_to_char(double precision, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_float8_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_float8_to_char(double precision, text) IS
    'Total form of to_char(double precision,text): NULL unless the format has only 9, 0, comma, G, one . or D, L, FM and spaces (at most 1 KB), which format every value; the analyst gate writes it in place of the built-in (docs/analysts.md).';
CREATE FUNCTION dp_total_numeric_to_char(numeric, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_numeric_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_numeric_to_char(numeric, text) IS
    'Total form of to_char(numeric,text): NULL unless the format has only 9, 0, comma, G, one . or D, L, FM and spaces (at most 1 KB), which format every value; the analyst gate writes it in place of the built-in (docs/analysts.md).';
