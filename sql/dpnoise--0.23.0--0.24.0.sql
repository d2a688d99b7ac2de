-- dpnoise 0.23.0 → 0.24.0: total forms of date and timestamp ± interval and of to_char for intervals (src/total/intervals.rs), as in total.sql.
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
