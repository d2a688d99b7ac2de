-- The split of one ε among a statement's aggregates (issue 45, item 3):
-- from public quantities only (the aggregates, their bounds, the tables'
-- k, an assumed number of persons), never the data. Each aggregate's error
-- at ε = 1, scaled to its own size (a count's and a quantile's rank error
-- over n, a sum's over n·B, an average's over B, a variance's over B², B
-- the larger bound), is its w; the error at ε_i is about w/ε_i², and the
-- split that minimises Σ w_i/ε_i² under Σ ε_i = ε gives ε_i ∝ w_i^(1/3).
-- n cancels for large n (each scaled error falls as 1/n); `persons` only
-- sets where the figures are taken. Not SECURITY DEFINER, and without its
-- own search_path: the tables are named as the caller's dp_query_accuracy
-- reads them.
CREATE FUNCTION dp_query_split(epsilon double precision, aggregates text[], tables text[],
                               lowers double precision[] DEFAULT NULL, uppers double precision[] DEFAULT NULL,
                               persons bigint DEFAULT 1000, grouped boolean DEFAULT false)
RETURNS TABLE (aggregate text, epsilon_share numeric, std_dev double precision, units text, weight double precision)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED AS $$
DECLARE
    n integer := coalesce(cardinality(aggregates), 0);
    w double precision[] := '{}';
    u text[] := '{}';
    c double precision;
    total double precision := 0;
    e numeric;
    lo double precision;
    hi double precision;
    b double precision;
    sd double precision;
    unit text;
BEGIN
    IF epsilon IS NULL OR NOT epsilon > 0 OR epsilon = 'Infinity'::float8 THEN
        RAISE EXCEPTION 'dp_query_split: epsilon must be a finite number > 0, got %', coalesce(epsilon::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION 'dp_query_split: aggregates must name at least one aggregate'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF persons IS NULL OR persons < 1 THEN
        RAISE EXCEPTION 'dp_query_split: persons must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. n LOOP
        lo := lowers[i];
        hi := uppers[i];
        b := greatest(abs(lo), abs(hi));
        IF aggregates[i] IS NULL OR aggregates[i] NOT IN ('count', 'sum', 'avg', 'var', 'stddev', 'quantile', 'median', 'min', 'max') THEN
            RAISE EXCEPTION 'dp_query_split: aggregate must be count, sum, avg, var, stddev, quantile, median, min or max, not %',
                coalesce(aggregates[i], 'NULL') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF aggregates[i] <> 'count' AND (lo IS NULL OR hi IS NULL) THEN
            RAISE EXCEPTION 'dp_query_split: % needs its bounds (lowers[%] and uppers[%])', aggregates[i], i, i
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT s.sd, s.unit INTO sd, unit FROM @extschema@.dp_split_error(aggregates[i], 1.0, tables, lo, hi, persons, grouped) s;
        c := CASE WHEN aggregates[i] IN ('count', 'quantile', 'median', 'min', 'max') THEN sd / persons
                  WHEN aggregates[i] = 'sum' THEN sd / (persons * b)
                  WHEN aggregates[i] = 'avg' THEN sd / b
                  ELSE sd / (b * b) END;
        IF NOT c > 0 OR c = 'Infinity'::float8 THEN
            RAISE EXCEPTION 'dp_query_split: % has no error to weigh (bounds %, %)', aggregates[i], lo, hi
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        w := w || (c * c);
        u := u || unit;
        total := total + cbrt(c * c);
    END LOOP;
    FOR i IN 1 .. n LOOP
        -- Rounded down to 12 significant digits: the shares, as written, add up to at most epsilon.
        e := epsilon::numeric * cbrt(w[i])::numeric / total::numeric;
        e := trim_scale(trunc(e, 11 - floor(log(e))::integer));
        SELECT s.sd INTO sd FROM @extschema@.dp_split_error(aggregates[i], e::float8, tables, lowers[i], uppers[i], persons, grouped) s;
        aggregate := aggregates[i];
        epsilon_share := e;
        std_dev := sd;
        units := u[i];
        weight := w[i];
        RETURN NEXT;
    END LOOP;
END $$;
COMMENT ON FUNCTION dp_query_split(double precision, text[], text[], double precision[], double precision[], bigint, boolean) IS
    'How to split epsilon among a statement''s aggregates (count, sum, avg, var, stddev, quantile, median, min, max) to minimise their summed squared errors, each scaled to its size, from their bounds and the tables'' settings only; each share with its standard deviation for a group of `persons`. Draws nothing, spends nothing.';

-- One aggregate's standard deviation at epsilon (dp_query_accuracy for
-- counts and sums, dp_aggregate_accuracy for the rest), and its units.
CREATE FUNCTION dp_split_error(aggregate text, epsilon double precision, tables text[], lower double precision,
                               upper double precision, persons bigint, grouped boolean,
                               OUT sd double precision, OUT unit text)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED AS $$
BEGIN
    CASE aggregate
    WHEN 'count', 'sum' THEN
        SELECT a.std_dev, 'value' INTO sd, unit
        FROM @extschema@.dp_query_accuracy(aggregate, epsilon, tables, lower, upper, grouped) a;
    WHEN 'avg' THEN
        SELECT a.std_dev, a.units INTO sd, unit FROM @extschema@.dp_aggregate_accuracy('avg', epsilon, lower, upper, persons) a;
    WHEN 'var', 'stddev' THEN
        SELECT a.std_dev, a.units INTO sd, unit FROM @extschema@.dp_aggregate_accuracy('var', epsilon, lower, upper, persons) a;
    WHEN 'quantile', 'median', 'min', 'max' THEN
        SELECT a.std_dev, a.units INTO sd, unit
        FROM @extschema@.dp_aggregate_accuracy('quantile', epsilon, lower, upper, persons,
                                                CASE aggregate WHEN 'min' THEN 0.01 WHEN 'max' THEN 0.99 ELSE 0.5 END) a;
    ELSE
        RAISE EXCEPTION 'dp_query_split: aggregate must be count, sum, avg, var, stddev, quantile, median, min or max, not %', aggregate
            USING ERRCODE = 'invalid_parameter_value';
    END CASE;
END $$;
COMMENT ON FUNCTION dp_split_error(text, double precision, text[], double precision, double precision, bigint, boolean) IS
    'dp_query_split''s helper: one aggregate''s standard deviation at epsilon for a group of `persons`, and its units.';
