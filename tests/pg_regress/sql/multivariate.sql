-- Multivariate noise (issue 7): box noise, the 2-D L1 staircase, dp_sum_multi.
-- Soria-Comas & Domingo-Ferrer's Example 2: S_f = [-1,1]×[-10,10],
-- S_0 = [-0.1,0.1]×[-1,1], ε = 1. Variances 4.0338 and 403.38; Table 4's
-- region sizes 611.2, 916.6, 1790.2 (the paper rounds β).
SELECT round(variances[1]::numeric, 4) AS var1, round(variances[2]::numeric, 2) AS var2,
       round(volume_90::numeric, 1) AS v90, round(volume_95::numeric, 1) AS v95, round(volume_99::numeric, 1) AS v99
FROM dp_accuracy_multi(1, ARRAY[1, 10], ARRAY[0.1, 1]);
-- The default z (one fraction τ of s for every component, minimising the
-- sum of relative variances) does better still.
SELECT round("inner"[1]::numeric, 4) AS z1, round(variances[1]::numeric, 4) AS var1, round(volume_95::numeric, 1) AS v95
FROM dp_accuracy_multi(1, ARRAY[1, 10]);
-- Against independent Laplace of scale 11 (variance 242, 95 % area 5446).
SELECT variances[1] < 242 / 50.0 AS var1_smaller, volume_95 < 5446 / 5.0 AS region_smaller
FROM dp_accuracy_multi(1, ARRAY[1, 10], ARRAY[0.1, 1]);

-- Draws: 10^4 box noises have the exact variance of the first component
-- within 5 standard errors (one is 1.9 % here: 2·10^5 draws measured it).
SELECT abs(var_pop(n[1]) / 4.0338 - 1) < 0.095 AS var1_matches
FROM (SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, 10], ARRAY[0.1, 1]) AS n FROM generate_series(1, 10000)) s;
-- At ε = 1000 the noise stays within S_0 (here within s/1024, the floor on
-- z): values come back within 0.001 and 0.01.
SELECT bool_and(abs(n[1] - 5) <= 0.001 AND abs(n[2] - 50) <= 0.01) AS within_inner
FROM (SELECT dp_noise_box(ARRAY[5, 50], 1000, ARRAY[1, 10]) AS n FROM generate_series(1, 1000)) s;
-- The L1 staircase: two values, noise of L1 norm about 1/ε.
SELECT array_length(dp_noise_l1_staircase(ARRAY[1, 2], 1, 1), 1) AS components;
SELECT abs(avg(abs(n[1] - 1) + abs(n[2] - 2))) BETWEEN 0.5 AND 3 AS l1_plausible
FROM (SELECT dp_noise_l1_staircase(ARRAY[1, 2], 1, 1) AS n FROM generate_series(1, 2000)) s;

-- dp_sum_multi: component sums clamped to [-b_j, b_j], one box noise, one charge.
CREATE TABLE vec AS SELECT ARRAY[(i % 2)::float8, (i % 10)::float8] AS a, i % 3 AS k FROM generate_series(1, 3000) i;
SELECT k, abs(s[1] - t1) < 0.01 AS close1, abs(s[2] - t2) < 0.1 AS close2
FROM (SELECT k, dp_sum_multi(a, 1000.0, ARRAY[1, 10]) AS s, sum(a[1]) AS t1, sum(a[2]) AS t2 FROM vec GROUP BY k) g
ORDER BY k;
SELECT abs(s[2] - t) < 0.1 AS clamped
FROM (SELECT dp_sum_multi(a, 1000.0, ARRAY[1, 5]) AS s, sum(least(a[2], 5)) AS t FROM vec) g;
SELECT array_length(dp_sum_multi(a, 1.0, ARRAY[1, 10]), 1) AS released_on_empty FROM vec WHERE false;
SELECT max(id) AS last FROM dpnoise.ledger \gset
SELECT k, dp_sum_multi(a, 0.5, ARRAY[1, 10]) IS NOT NULL FROM vec GROUP BY k ORDER BY k;
SELECT mechanism, epsilon, count(*) FROM dpnoise.ledger WHERE id > :last GROUP BY 1, 2;
-- Parallel plans: partial states combine exactly.
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
CREATE TABLE bigvec AS SELECT ARRAY[(i % 2)::float8, (i % 10)::float8] AS a FROM generate_series(1, 200000) i;
ANALYZE bigvec;
EXPLAIN (COSTS OFF) SELECT dp_sum_multi(a, 1000.0, ARRAY[1, 10]) FROM bigvec;
SELECT abs(s[1] - 100000) < 0.01 AND abs(s[2] - 900000) < 0.1 AS parallel_close
FROM (SELECT dp_sum_multi(a, 1000.0, ARRAY[1, 10]) AS s FROM bigvec) g;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE bigvec;

-- Refusals of parameters, charging nothing.
SELECT max(id) AS last FROM dpnoise.ledger \gset
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, 10], ARRAY[2, 1])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, 10], ARRAY[0.5])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, NULL])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, -10])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, 0])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[]::float8[], 1, ARRAY[]::float8[])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 0, ARRAY[1, 10])$$);
SELECT outcome($$SELECT dp_noise_l1_staircase(ARRAY[1, 2], 1, 0)$$);
SELECT outcome($$SELECT dp_sum_multi(a, 1.0, ARRAY[1, -10]) FROM vec$$);
SELECT outcome($$SELECT dp_sum_multi(a, 1.0, ARRAY[1, 10]) OVER () FROM vec$$);
SELECT outcome($$SELECT dp_sum_multi(a, 1.0, ARRAY[a[1] + 1, 10]) FROM vec$$);
SELECT outcome($$SELECT * FROM dp_accuracy_multi(1, ARRAY[1, 10], ARRAY[0.1, 11])$$);
SELECT count(*) AS charged_by_refusals FROM dpnoise.ledger WHERE id > :last;
-- Values that cannot be released (a length other than the sensitivities',
-- NULL, NaN) are found as the data is read, after each statement paid its
-- planned charge: charged, so that no charge depends on the data. A NULL
-- or NaN element written as a constant is the analyst's text, refused
-- before the charge: 3 of these 5 are charged.
SELECT max(id) AS last FROM dpnoise.ledger \gset
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 0], 1, ARRAY[1, 10, 3])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, NULL], 1, ARRAY[1, 10])$$);
SELECT outcome($$SELECT dp_noise_box(ARRAY[0, 'NaN']::float8[], 1, ARRAY[1, 10])$$);
SELECT outcome($$SELECT dp_noise_l1_staircase(ARRAY[1, 2, 3], 1, 1)$$);
SELECT outcome($$SELECT dp_sum_multi(a, 1.0, ARRAY[1, 10, 3]) FROM vec$$);
SELECT count(*) AS charged_by_value_refusals FROM dpnoise.ledger WHERE id > :last;
DROP TABLE vec;
