-- The comment of dp_aggregate_accuracy (src/moments.rs), once pgrx made it.
COMMENT ON FUNCTION dp_aggregate_accuracy(text, double precision, double precision, double precision, bigint, double precision, double precision) IS
    'The epsilon split and the error of dp_avg, dp_var (value units, worst case, for a group of persons) and the quantiles (ranks), before spending anything.';
