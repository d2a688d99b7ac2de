-- dpnoise 0.18.0 → 0.19.0: quantiles and variances over several rows per person (src/per_person.rs).
-- The gate's bounding reads one value of each person per group: their own quantile, or one row.
CREATE FUNCTION dp_bound_quantile(key bigint, k integer, value double precision, p double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_quantile' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_quantile(bigint, integer, double precision, double precision) IS
    'As dp_bound_kept, the person''s own p-quantile (nearest rank) of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_row(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_row' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_row(bigint, integer, double precision) IS
    'As dp_bound_kept, one of the person''s non-NULL values in the group, at a rank drawn from the key (NULL if none).';

-- A bounded level without GROUP BY keys combines each person's rows by the person (src/person_sum.rs).
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

-- Total forms (src/total/dates.rs): date ± integer, which the gate writes in place of the built-ins
-- (they raise "date out of range" near the ends of the calendar).
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

-- dp_query_split (src/gate/split.sql): one epsilon split among a statement's aggregates.
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

-- finalize.sql's blocks, as a fresh install runs them: revocations, volatility, support comments.
-- Every support function of our aggregates (the extension's own: int8pl is
-- PostgreSQL's) loses EXECUTE for PUBLIC: a role that could build its own
-- aggregate from them (say, the sum transition with the serialize function
-- as final) would read exact answers. And CREATE AGGREGATE records every
-- aggregate as IMMUTABLE: one whose final function draws noise is marked
-- VOLATILE, so the planner never treats two calls as one.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT DISTINCT s.fn::regprocedure
        FROM pg_catalog.pg_aggregate a,
             LATERAL (VALUES (a.aggtransfn), (a.aggfinalfn), (a.aggcombinefn), (a.aggserialfn), (a.aggdeserialfn)) s(fn)
        JOIN pg_catalog.pg_depend d ON d.objid = s.fn AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
    UPDATE pg_catalog.pg_proc p SET provolatile = 'v'
    FROM pg_catalog.pg_aggregate a
    JOIN pg_catalog.pg_proc final ON final.oid = a.aggfinalfn
    JOIN pg_catalog.pg_depend d ON d.objid = a.aggfnoid AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
    WHERE p.oid = a.aggfnoid AND final.provolatile = 'v';
END $$;

-- Support functions: named after the aggregates they serve, from the catalog.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT s.fn, string_agg(DISTINCT a.aggfnoid::regproc::text, ', ') AS aggregates, min(s.role) AS role
        FROM pg_catalog.pg_aggregate a,
             LATERAL (VALUES (a.aggtransfn, 'transition'), (a.aggfinalfn, 'final'), (a.aggcombinefn, 'combine'),
                             (a.aggserialfn, 'serialize'), (a.aggdeserialfn, 'deserialize')) s(fn, role)
        JOIN pg_catalog.pg_depend d ON d.objid = s.fn AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
        GROUP BY s.fn
    LOOP
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', f.fn::regprocedure,
                       format('Support function (%s) of %s; not for direct use (revoked from PUBLIC).', f.role, f.aggregates));
    END LOOP;
END $$;
