-- Total forms of built-in functions (src/total.rs): what the analyst gate
-- writes into an analyst's statement instead of the built-in
-- (src/gate/substitute.rs). Each returns for every input, so it is
-- LEAKPROOF: NULL (or IEEE's +-Infinity) where the built-in raises.
-- Functions of timestamp with time zone read the session's time zone: STABLE.

CREATE FUNCTION dp_total_int4pl(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4mi(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4mul(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4div(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4mod(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4mod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8pl(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8mi(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8mul(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8div(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8mod(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8mod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4um(integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4um' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4abs(integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4abs' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8um(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8um' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8abs(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8abs' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_int8(bigint) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_int8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_float8(double precision) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8_float8(double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_float4(real) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8_float4(real) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4_float8(double precision) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8pl(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8mi(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8mul(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8div(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4pl(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4mi(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4mul(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4div(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_add(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_sub(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_sub' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_mul(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_div(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_mod(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_mod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_numeric(numeric) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8_numeric(numeric) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8_numeric(numeric) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_round(numeric, integer) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_round' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_round0(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_round0' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_floor(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_floor' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_ceil(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_ceil' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_width_bucket_float8(double precision, double precision, double precision, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_width_bucket_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_width_bucket_numeric(numeric, numeric, numeric, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_width_bucket_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_lower(text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_lower' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_upper(text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_upper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_textlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_textlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_textnlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_textnlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_texticlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_texticlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_texticnlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_texticnlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_text_substr(text, integer, integer) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_text_substr' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_trunc(text, timestamp without time zone) RETURNS timestamp without time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_trunc' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_trunc(text, timestamp with time zone) RETURNS timestamp with time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_trunc' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_zone(text, timestamp with time zone) RETURNS timestamp without time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_zone' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_zone(text, timestamp without time zone) RETURNS timestamp with time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_zone' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_part(text, timestamp without time zone) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_part' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_part(text, timestamp with time zone) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_part' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_extract_timestamp(text, timestamp without time zone) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_extract_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_extract_timestamptz(text, timestamp with time zone) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_extract_timestamptz' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_extract_date(text, date) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_extract_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_part_date(text, date) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_date_part_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_timestamp(date) RETURNS timestamp without time zone
    AS 'MODULE_PATHNAME', 'dp_total_date_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_timestamptz(date) RETURNS timestamp with time zone
    AS 'MODULE_PATHNAME', 'dp_total_date_timestamptz' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_make_date(integer, integer, integer) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_make_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION dp_total_int4pl(integer, integer) IS
    'Total form of int4pl(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4mi(integer, integer) IS
    'Total form of int4mi(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4mul(integer, integer) IS
    'Total form of int4mul(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4div(integer, integer) IS
    'Total form of int4div(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4mod(integer, integer) IS
    'Total form of int4mod(integer,integer), mod(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8pl(bigint, bigint) IS
    'Total form of int48pl(integer,bigint), int84pl(bigint,integer), int8pl(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8mi(bigint, bigint) IS
    'Total form of int48mi(integer,bigint), int84mi(bigint,integer), int8mi(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8mul(bigint, bigint) IS
    'Total form of int48mul(integer,bigint), int84mul(bigint,integer), int8mul(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8div(bigint, bigint) IS
    'Total form of int48div(integer,bigint), int84div(bigint,integer), int8div(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8mod(bigint, bigint) IS
    'Total form of int8mod(bigint,bigint), mod(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4um(integer) IS
    'Total form of int4um(integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4abs(integer) IS
    'Total form of abs(integer), int4abs(integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8um(bigint) IS
    'Total form of int8um(bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8abs(bigint) IS
    'Total form of abs(bigint), int8abs(bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_int8(bigint) IS
    'Total form of int4(bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_float8(double precision) IS
    'Total form of int4(double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8_float8(double precision) IS
    'Total form of int8(double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_float4(real) IS
    'Total form of int4(real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8_float4(real) IS
    'Total form of int8(real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4_float8(double precision) IS
    'Total form of float4(double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8pl(double precision, double precision) IS
    'Total form of float8pl(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8mi(double precision, double precision) IS
    'Total form of float8mi(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8mul(double precision, double precision) IS
    'Total form of float8mul(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8div(double precision, double precision) IS
    'Total form of float8div(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4pl(real, real) IS
    'Total form of float4pl(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4mi(real, real) IS
    'Total form of float4mi(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4mul(real, real) IS
    'Total form of float4mul(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4div(real, real) IS
    'Total form of float4div(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_add(numeric, numeric) IS
    'Total form of numeric_add(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_sub(numeric, numeric) IS
    'Total form of numeric_sub(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_mul(numeric, numeric) IS
    'Total form of numeric_mul(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_div(numeric, numeric) IS
    'Total form of numeric_div(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_mod(numeric, numeric) IS
    'Total form of mod(numeric,numeric), numeric_mod(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_numeric(numeric) IS
    'Total form of int4(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8_numeric(numeric) IS
    'Total form of int8(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8_numeric(numeric) IS
    'Total form of float8(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_round(numeric, integer) IS
    'Total form of round(numeric,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_round0(numeric) IS
    'Total form of round(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_floor(numeric) IS
    'Total form of floor(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_ceil(numeric) IS
    'Total form of ceil(numeric), ceiling(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_width_bucket_float8(double precision, double precision, double precision, integer) IS
    'Total form of width_bucket(double precision,double precision,double precision,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_width_bucket_numeric(numeric, numeric, numeric, integer) IS
    'Total form of width_bucket(numeric,numeric,numeric,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_lower(text) IS
    'Total form of lower(text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_upper(text) IS
    'Total form of upper(text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_textlike(text, text) IS
    'Total form of "like"(text,text), textlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_textnlike(text, text) IS
    'Total form of notlike(text,text), textnlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_texticlike(text, text) IS
    'Total form of texticlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_texticnlike(text, text) IS
    'Total form of texticnlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_text_substr(text, integer, integer) IS
    'Total form of "substring"(text,integer,integer), substr(text,integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_trunc(text, timestamp without time zone) IS
    'Total form of date_trunc(text,timestamp without time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_trunc(text, timestamp with time zone) IS
    'Total form of date_trunc(text,timestamp with time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_zone(text, timestamp with time zone) IS
    'Total form of timezone(text,timestamp with time zone), timestamptz AT TIME ZONE zone: NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_zone(text, timestamp without time zone) IS
    'Total form of timezone(text,timestamp without time zone), timestamp AT TIME ZONE zone: NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_part(text, timestamp without time zone) IS
    'Total form of date_part(text,timestamp without time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_part(text, timestamp with time zone) IS
    'Total form of date_part(text,timestamp with time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_extract_timestamp(text, timestamp without time zone) IS
    'Total form of "extract"(text,timestamp without time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_extract_timestamptz(text, timestamp with time zone) IS
    'Total form of "extract"(text,timestamp with time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_extract_date(text, date) IS
    'Total form of "extract"(text,date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_part_date(text, date) IS
    'Total form of date_part(text,date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_timestamp(date) IS
    'Total form of "timestamp"(date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_timestamptz(date) IS
    'Total form of timestamptz(date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_make_date(integer, integer, integer) IS
    'Total form of make_date(integer,integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
CREATE FUNCTION dp_total_timestamp_to_char(timestamp without time zone, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_to_char(timestamp with time zone, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_timestamp_to_char(timestamp without time zone, text) IS
    'Total form of to_char(timestamp without time zone,text): NULL for a format over 1 KB or with a TM (localized) field; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_to_char(timestamp with time zone, text) IS
    'Total form of to_char(timestamp with time zone,text): NULL for a format over 1 KB or with a TM (localized) field; the analyst gate writes it in place of the built-in (docs/analysts.md).';
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
CREATE FUNCTION dp_total_numeric_capped(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_capped' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_numeric_capped(numeric) IS
    'The value, or NULL where it spans more than about 64 digits: the analyst gate reads the arguments of per-person sum, avg, min and max of numeric through it (docs/analysts.md).';
CREATE FUNCTION dp_total_capped(anyelement) RETURNS anyelement
    AS 'MODULE_PATHNAME', 'dp_total_capped' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_capped(anyelement) IS
    'A variable-length value as it is, or NULL over 1 KB: the analyst gate passes protected text columns through it where a function reads them (docs/analysts.md).';

-- date ± integer (0.19.0).
CREATE FUNCTION dp_total_date_pli(date, integer) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_date_pli' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_integer_pl_date(integer, date) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_integer_pl_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_mii(date, integer) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_date_mii' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_date_pli(date, integer) IS
    'Total form of date_pli(date,integer): NULL where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_integer_pl_date(integer, date) IS
    'Total form of integer_pl_date(integer,date): NULL where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_mii(date, integer) IS
    'Total form of date_mii(date,integer): NULL where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';

-- date and timestamp ± interval, to_char of intervals (0.24.0; src/total/intervals.rs).
CREATE FUNCTION dp_total_date_pl_interval(date, interval) RETURNS timestamp
    AS 'MODULE_PATHNAME', 'dp_total_date_pl_interval' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_mi_interval(date, interval) RETURNS timestamp
    AS 'MODULE_PATHNAME', 'dp_total_date_mi_interval' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_pl_interval(timestamp, interval) RETURNS timestamp
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_pl_interval' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_mi_interval(timestamp, interval) RETURNS timestamp
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_mi_interval' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_interval_to_char(interval, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_interval_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_date_pl_interval(date, interval) IS
    'Total form of date_pl_interval(date,interval): NULL where the sum could leave the timestamp range; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_mi_interval(date, interval) IS
    'Total form of date_mi_interval(date,interval): NULL where the difference could leave the timestamp range; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_pl_interval(timestamp, interval) IS
    'Total form of timestamp_pl_interval(timestamp,interval): NULL where the sum could leave the timestamp range; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_mi_interval(timestamp, interval) IS
    'Total form of timestamp_mi_interval(timestamp,interval): NULL where the difference could leave the timestamp range; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_interval_to_char(interval, text) IS
    'Total form of to_char(interval,text): NULL unless the format has only HH24, HH12, HH, MI, SS, MS, US, DD, MM, YYYY, YY, FM, digits, spaces and : - . / , ; (at most 1 KB) and the interval at most 2^31 - 1 hours; the analyst gate writes it in place of the built-in (docs/analysts.md).';
