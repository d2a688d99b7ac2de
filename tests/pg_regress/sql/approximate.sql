-- (epsilon, delta): truncated Laplacian, uniform, Gaussian, and 'auto' (issue 6).
-- At epsilon = 1000 the truncated Laplacian and the Gaussian (sigma ≈ 0.025)
-- add zero to a count except with probability below e^-500; uniform noise
-- at delta = 0.5 is one of -1, 0.
SELECT dp_count(1000.0, 1e-6, 'truncated_laplace') = count(*) AS truncated_exact,
       dp_count(1000.0, 1e-6, 'gaussian') = count(*) AS gaussian_exact,
       dp_count(1000.0, 0.5, 'uniform') - count(*) IN (-1, 0) AS uniform_within_one,
       dp_count(1000.0, 1e-6, 'auto') = count(*) AS auto_exact,
       dp_count(1000.0, 0, 'auto') = count(*) AS auto_pure_exact,
       abs(dp_sum(x, 1000.0, 0, 10) - sum(x)) < 0.5 AS sum_auto_close,
       abs(dp_sum(x, 1000.0, 0, 10, 1e-6) - sum(x)) < 0.5 AS sum_delta_close,
       abs(dp_sum(x, 1000.0, 0, 10, 1e-6, 'gaussian') - sum(x)) < 2.5 AS sum_gaussian_close, -- sigma ≈ 0.25: 10 sigma
       abs(dp_sum(x, 1000.0, 0, 10, 1e-6, 'truncated_laplace', 'l1') - sum(x)) < 0.5 AS sum_truncated_close,
       abs(dp_sum(n, 1000.0, 0, 1000, 1e-6, 'gaussian') - sum(n)) <= 300 AS int_sum_close -- sigma ≈ 25
FROM t;

-- A truncated-Laplacian release is never farther from the truth than
-- A = (Δ/ε)·ln(1 + (e^ε − 1)/(2δ)), and comes close to it (10^4 draws).
SELECT 10 * ln(1 + (exp(1) - 1) / 0.2) AS a \gset
SELECT max(abs(z)) <= :a * (1 + 1e-5) AS within_a, max(abs(z)) > 0.9 * :a AS reaches_a
FROM (SELECT dp_noise(0, 1.0, 10, 0.1, 'truncated_laplace') AS z FROM generate_series(1, 10000)) s;
-- Uniform noise lies in [-Δ/(2δ), Δ/(2δ)) and fills it.
SELECT min(z) >= -50 AND max(z) < 50 AS within_range, min(z) < -45 AND max(z) > 45 AS fills_range
FROM (SELECT dp_noise(0, 1.0, 1, 0.01, 'uniform') AS z FROM generate_series(1, 10000)) s;
-- The Gaussian's spread is the analytic sigma (3.7306 at ε = 1, δ = 1e-5):
-- 10^4 draws give the standard deviation within 5 standard errors (3.5 %).
SELECT round(std_dev::numeric, 4) AS sigma FROM dp_accuracy('gaussian', 1, 1, delta => 1e-5);
SELECT abs(stddev(z) / 3.7306 - 1) < 0.035 AS sd_matches
FROM (SELECT dp_noise(0, epsilon => 1, sensitivity => 1, delta => 1e-5, mechanism => 'gaussian') AS z
      FROM generate_series(1, 10000)) s;

-- 'auto' names its choice; across privacy regimes it changes.
SELECT e AS epsilon, d AS delta, a.mechanism, round(a.mean_abs_error::numeric, 4) AS mae, round(a.std_dev::numeric, 4) AS sd
FROM unnest(ARRAY[0.05, 1, 10]::float8[]) e, unnest(ARRAY[0, 1e-6, 1e-3]::float8[]) d,
     dp_accuracy('auto', e, 1, delta => d) a
ORDER BY d, e;
SELECT mechanism FROM dp_accuracy('auto', 0.1, 1, 'l1', delta => 1e-3);
SELECT mechanism FROM dp_accuracy('auto', 0.1, 1, 'ci', delta => 1e-3);

-- Empty input still gets a noisy answer.
SELECT dp_sum(x, 1.0, 0, 10, 1e-6, 'gaussian') IS NOT NULL AS released,
       dp_count(1.0, 1e-6, 'uniform') IS NOT NULL AS count_released
FROM t WHERE false;

-- The budget is charged epsilon and delta, under the chosen mechanism's name.
SELECT max(id) AS last FROM dpnoise.ledger \gset
SELECT dp_count(0.5, 1e-6, 'gaussian') IS NOT NULL AS c, dp_sum(x, 0.25, 0, 10, 1e-3, 'auto') IS NOT NULL AS s FROM t;
SELECT mechanism, epsilon, delta FROM dpnoise.ledger WHERE id > :last ORDER BY mechanism;

-- Refusals charge nothing.
SELECT max(id) AS last FROM dpnoise.ledger \gset
SELECT outcome($$SELECT dp_count(1.0, 0, 'gaussian') FROM t$$);
SELECT outcome($$SELECT dp_count(1.0, 0, 'truncated_laplace') FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 1e-6, 'laplace') FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 1e-6, 'staircase') FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 1) FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, -1e-6) FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 'NaN') FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, NULL) FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 1e-6, 'gauss') FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 1e-6, 'auto', 'l3') FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, x / 100) FROM t$$);
SELECT outcome($$SELECT dp_sum(x, 1.0, 0, 10, 1e-6) OVER () FROM t$$);
SELECT outcome($$SELECT dp_noise(1, 1.0, 1, 1e-6, NULL)$$);
SELECT outcome($$SELECT dp_noise(1, 1.0, 1, 0, 'uniform')$$);
SELECT outcome($$SELECT * FROM dp_accuracy('gaussian', 1, 1)$$);
-- PostgreSQL has no named notation for aggregates (positional overloads serve).
SELECT outcome($$SELECT dp_count(epsilon => 1.0, delta => 1e-6, mechanism => 'auto') FROM t$$);
SELECT count(*) AS charged_by_refusals FROM dpnoise.ledger WHERE id > :last;

-- Parallel plans: the parameters are found through Gather and the sum is exact.
CREATE TABLE big AS SELECT (i % 997) * 0.001 AS x FROM generate_series(1, 200000) i;
ANALYZE big;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT dp_sum(x, 1.0, 0, 1, 1e-6, 'gaussian') FROM big;
SELECT abs(dp_sum(x, 1000.0, 0, 1, 1e-6, 'gaussian') - sum(x)) < 0.25 AS parallel_close, -- 10 sigma
       dp_count(1000.0, 1e-6, 'auto') = count(*) AS parallel_count_exact
FROM big;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE big;
