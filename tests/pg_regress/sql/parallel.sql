-- The aggregates run under parallel query, and the exact sum does not
-- depend on how workers split the rows.
CREATE TABLE big AS SELECT (i % 997) * 0.001 AS x, i::bigint AS n FROM generate_series(1, 200000) i;
ANALYZE big;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT dp_count(1.0), dp_sum_laplace(x, 1.0, 0, 1), dp_sum_laplace(n, 1.0, 0, 10) FROM big;
SET dpnoise.seed = '11';
CREATE TABLE parallel_answers AS
SELECT dp_count(1.0) AS c, dp_sum_laplace(x, 1.0, 0, 1) AS s, dp_sum_laplace(n, 1.0, 0, 1000000) AS si FROM big;
-- Empty input under a parallel plan: the parameters are found through Gather.
SELECT dp_sum_laplace(x, 1.0, 0, 1) IS NOT NULL AS released FROM big WHERE x < 0;
SET max_parallel_workers_per_gather = 0;
SET dpnoise.seed = '11';
CREATE TABLE serial_answers AS
SELECT dp_count(1.0) AS c, dp_sum_laplace(x, 1.0, 0, 1) AS s, dp_sum_laplace(n, 1.0, 0, 1000000) AS si FROM big;
-- Same seed, same noise: equal answers mean bit-identical exact sums.
SELECT p.c = s.c AS same_count, p.s = s.s AS same_sum, p.si = s.si AS same_int_sum
FROM parallel_answers p, serial_answers s;
RESET dpnoise.seed;
DROP TABLE big, parallel_answers, serial_answers;
-- Partitionwise aggregation: partial aggregates under Append, and whole
-- groups finalized per partition, possibly in parallel workers.
CREATE TABLE pt (g int, x float8) PARTITION BY RANGE (g);
CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (50);
CREATE TABLE pt2 PARTITION OF pt FOR VALUES FROM (50) TO (100);
INSERT INTO pt SELECT i % 100, (i % 7)::float8 FROM generate_series(1, 100000) i;
ANALYZE pt;
SET enable_partitionwise_aggregate = on;
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT dp_sum_staircase(x, 1.0, 10) FROM pt;
SELECT abs(dp_sum_staircase(x, 1000.0, 10) - sum(x)) <= 10 / 1024.0 AS sum_close FROM pt;
SELECT dp_sum_staircase(x, 1.0, 10) IS NOT NULL AS empty_released FROM pt WHERE x < 0;
SELECT count(*) AS groups, bool_and(c = 1000) AS exact_at_eps_1000
FROM (SELECT g, dp_count(1000.0) AS c FROM pt GROUP BY g) s;
RESET enable_partitionwise_aggregate;
RESET max_parallel_workers_per_gather;
DROP TABLE pt;
