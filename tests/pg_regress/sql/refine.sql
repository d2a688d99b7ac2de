-- Knowledge refinement: priors as a type, dp_refine on numbers and categories.
SELECT dp_prior_uniform(0, 120);
SELECT dp_prior_histogram(ARRAY[0, 18, 65, 120], ARRAY[1, 5, 2]);
SELECT dp_prior_categorical(ARRAY['0', '1'], ARRAY[0.99, 0.01]);
SELECT dp_prior_normal(40, 15, 0, 120);
-- Priors read back from text, and are checked again.
SELECT '{"kind":"histogram","edges":[0,1],"weights":[1]}'::dp_prior;
SELECT outcome($$SELECT '{"kind":"nope"}'::dp_prior$$);
SELECT outcome($$SELECT '{"kind":"histogram","edges":[1,0],"weights":[1]}'::dp_prior$$);
-- Refusals (22023).
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[0, 1], ARRAY[1, 2])$$);
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[0, 2, 1], ARRAY[1, 2])$$);
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[0, 1, 2], ARRAY[-1, 2])$$);
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[0, 1, 2], ARRAY[0, 0])$$);
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[]::float8[], ARRAY[]::float8[])$$);
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[0, 'Infinity'::float8], ARRAY[1])$$);
SELECT outcome($$SELECT dp_prior_histogram(ARRAY[0, 1, NULL], ARRAY[1, 2])$$);
SELECT outcome($$SELECT dp_prior_uniform(1, 1)$$);
SELECT outcome($$SELECT dp_prior_normal(0, 0, -1, 1)$$);
SELECT outcome($$SELECT dp_prior_normal(0, 1, 1, -1)$$);
SELECT outcome($$SELECT dp_prior_categorical(ARRAY['a'], ARRAY[0.5, 0.5])$$);
SELECT outcome($$SELECT dp_prior_categorical(ARRAY['a', 'a'], ARRAY[0.5, 0.5])$$);
SELECT outcome($$SELECT dp_refine('c', dp_prior_categorical(ARRAY['a', 'b'], ARRAY[0.5, 0.5]), 1.0)$$);
SELECT outcome($$SELECT dp_refine(0.5, dp_prior_categorical(ARRAY['a', 'b'], ARRAY[0.5, 0.5]), 1.0)$$);
SELECT outcome($$SELECT dp_refine('a', dp_prior_uniform(0, 1), 1.0)$$);
SELECT outcome($$SELECT dp_refine(0.5, dp_prior_uniform(0, 1), 0)$$);
SELECT outcome($$SELECT dp_refine(0.5, NULL, 1.0)$$);
SELECT outcome($$SELECT dp_refine('NaN'::float8, dp_prior_uniform(0, 1), 1.0)$$);
-- A NULL value releases nothing; a value outside the prior's range is clamped to it.
SELECT dp_refine(NULL::float8, dp_prior_uniform(0, 1), 1.0) IS NULL AS null_in_null_out,
       dp_refine(1e9, dp_prior_uniform(0, 1), 1.0) BETWEEN 0 AND 1 AS clamped;
-- Any exact statistic can be refined.
SELECT dp_refine(avg(x), dp_prior_uniform(0, 10), 1.0) BETWEEN 0 AND 10 AS refined_avg FROM t;
-- The paper's Example 2 (ε = 1, P(1) = 0.01, individual query), from 200 000
-- draws each: P(out = 1 | true 0) = 0.003679, P(out = 1 | true 1) = 0.027183,
-- within 5 standard errors.
SET dpnoise.seed = '4';
WITH prior AS (SELECT dp_prior_categorical(ARRAY['0', '1'], ARRAY[0.99, 0.01]) AS p),
draws AS (
    SELECT truth, avg((dp_refine(truth, p, 1.0, individual => true) = '1')::int::float8) AS rate
    FROM prior, (VALUES ('0'), ('1')) v(truth), generate_series(1, 200000)
    GROUP BY truth
)
SELECT truth, abs(rate - CASE truth WHEN '0' THEN 0.003679 ELSE 0.027183 END)
              < 5 * sqrt(CASE truth WHEN '0' THEN 0.003679 * 0.996321 ELSE 0.027183 * 0.972817 END / 200000) AS matches_paper
FROM draws ORDER BY truth;
RESET dpnoise.seed;
