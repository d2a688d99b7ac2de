-- The staircase mechanism, dp_avg and dp_accuracy.
-- At epsilon = 1000 the staircase's noise lies within ±sensitivity/1024 (its
-- inner step, γ raised to 2^-10 to bound sampling time) with probability
-- 1 − O(e^-1000): the release path adds noise to the right true answer.
SELECT dp_count(1000.0, 'staircase') = count(*) AS count_exact,
       dp_count(1000.0, 'laplace') = count(*) AS laplace_count_exact,
       abs(dp_sum_staircase(x, 1000.0, 10) - sum(x)) <= 10 / 1024.0 AS sum_close,
       dp_sum_staircase(n, 1000.0, 1000) = sum(n) AS int_sum_exact,
       dp_sum_staircase(n, 1000.0, 1000, 'l1') = sum(n) AS int_sum_l1_exact,
       abs(dp_avg(x, 1000.0, 0, 10) - avg(x)) < 1e-4 AS avg_close
FROM t;
-- Values are clamped to [-sensitivity, sensitivity]; dp_avg's answer to [lower, upper].
SELECT abs(dp_sum_staircase(x, 1000.0, 2) - sum(least(x, 2))) <= 2 / 1024.0 AS clamped,
       dp_avg(x + 100, 1000.0, 0, 10) BETWEEN 9.99 AND 10 AS avg_clamped
FROM t;
-- Empty input still gets a noisy answer.
SELECT dp_sum_staircase(x, 1.0, 10) IS NOT NULL AS released,
       dp_avg(x, 1.0, 0, 10) BETWEEN 0 AND 10 AS avg_in_bounds,
       dp_count(1.0, 'staircase') IS NOT NULL AS count_released
FROM t WHERE false;
-- The price before spending: Soria-Comas & Domingo-Ferrer's Tables 1 and 2 (Δ = 1).
SELECT e AS epsilon,
       round((SELECT std_dev ^ 2 FROM dp_accuracy('laplace', e, 1))::numeric, 2) AS laplace_variance,
       round((SELECT std_dev ^ 2 FROM dp_accuracy('staircase', e, 1, 'l2'))::numeric, 2) AS staircase_variance,
       round((SELECT 2 * ci_half_width FROM dp_accuracy('laplace', e, 1))::numeric, 2) AS laplace_95_interval,
       trunc((SELECT 2 * ci_half_width FROM dp_accuracy('staircase', e, 1, 'ci'))::numeric, 2) AS staircase_95_interval
FROM unnest(ARRAY[0.1, 0.5, 1.0]::float8[]) AS e;
SELECT round(mean_abs_error::numeric, 4) AS mae, round(std_dev::numeric, 4) AS sd, round(ci_half_width::numeric, 4) AS ci
FROM dp_accuracy(mechanism => 'staircase', epsilon => 10, sensitivity => 1, loss => 'l1', confidence => 0.99);
-- Refusals.
SELECT outcome($$SELECT dp_sum_staircase(x, 1.0, 10, 'l3') FROM t$$);
SELECT outcome($$SELECT dp_sum_staircase(x, 1.0, 10, 'gamma=2') FROM t$$);
SELECT outcome($$SELECT dp_sum_staircase(x, 1.0, 10, NULL) FROM t$$);
SELECT outcome($$SELECT dp_sum_staircase(x, 1.0, 0) FROM t$$);
SELECT outcome($$SELECT dp_sum_staircase(n, 1.0, -5) FROM t$$);
SELECT outcome($$SELECT dp_sum_staircase(x, 1.0, 10) OVER () FROM t$$);
SELECT outcome($$SELECT dp_count(1.0, 'gaussian') FROM t$$);
SELECT outcome($$SELECT dp_avg(x, 1.0, 5, 1) FROM t$$);
SELECT outcome($$SELECT dp_avg(x, 1.0, 0, x) FROM t$$);
SELECT outcome($$SELECT dp_staircase(1, 1, 1, 'ci=1.5')$$);
SELECT outcome($$SELECT dp_staircase(1, 1, 1, NULL)$$);
SELECT outcome($$SELECT * FROM dp_accuracy('staircase', 1, 1, confidence => 1)$$);
SELECT outcome($$SELECT * FROM dp_accuracy('gaussian', 1, 1)$$);
SELECT outcome($$SELECT * FROM dp_accuracy('laplace', 0, 1)$$);
-- dp_sum_staircase and dp_avg run under parallel query too.
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT dp_sum_staircase(x, 1.0, 10), dp_avg(x, 1.0, 0, 10), dp_count(1.0, 'staircase') FROM t;
RESET max_parallel_workers_per_gather;
