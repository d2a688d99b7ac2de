-- dpnoise 0.2.0 -> 0.3.0. The SQL surface is unchanged but for one figure:
-- dp_sum_multi's declared state size (SSPACE) is its state's real size,
-- 480 bytes (0.2.0 said 540). The planner sizes hash aggregation by it.
UPDATE pg_catalog.pg_aggregate SET aggtransspace = 480
WHERE aggfnoid = 'dp_sum_multi(double precision[], double precision, double precision[])'::pg_catalog.regprocedure;
