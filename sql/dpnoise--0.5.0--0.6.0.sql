-- dpnoise 0.5.0 -> 0.6.0: dp_query_accuracy, the error of an analyst's
-- aggregate with the contribution bounds the gate applies.
CREATE FUNCTION dp_query_accuracy(
    aggregate text, epsilon double precision, tables text[],
    lower double precision DEFAULT NULL, upper double precision DEFAULT NULL,
    grouped boolean DEFAULT true, confidence double precision DEFAULT 0.95)
RETURNS TABLE (max_groups_contributed integer, epsilon_per_group double precision, mechanism text,
               mean_abs_error double precision, std_dev double precision, ci_half_width double precision,
               selection_even_odds bigint, selection_always_kept bigint)
STABLE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', 'dp_query_accuracy_wrapper';
COMMENT ON FUNCTION dp_query_accuracy(text, double precision, text[], double precision, double precision, boolean, double precision) IS
    'The error of one aggregate (count, or sum with its bounds) in a query over these tables, with the contribution bounds the gate applies this session, and the persons a group needs for partition selection to show it. Spends and draws nothing.';
