-- Every refusal has a fixed SQLSTATE and names the argument and its range.
SELECT outcome('SELECT dp_count(0.0) FROM t');
SELECT outcome('SELECT dp_count(-1.0) FROM t');
SELECT outcome($$SELECT dp_count('NaN') FROM t$$);
SELECT outcome($$SELECT dp_count('Infinity') FROM t$$);
SELECT outcome('SELECT dp_count(1e-12) FROM t');
SELECT outcome('SELECT dp_count(NULL::float8) FROM t');
SELECT outcome('SELECT dp_count(x, NULL::float8) FROM t');
SELECT outcome('SELECT dp_count(x) FROM t');
SELECT outcome('SELECT dp_count(random()) FROM t');
SELECT outcome('SELECT dp_count(1.0) OVER () FROM t');
SELECT outcome('SELECT dp_sum_laplace(x, 1.0, 10, 0) FROM t');
SELECT outcome('SELECT dp_sum_laplace(x, 1.0, 0, 0) FROM t');
SELECT outcome($$SELECT dp_sum_laplace(x, 1.0, '-Infinity', 0) FROM t$$);
SELECT outcome('SELECT dp_sum_laplace(x, 1.0, NULL, 10) FROM t');
SELECT outcome('SELECT dp_sum_laplace(x, 1.0, 0, x) FROM t');
SELECT outcome($$SELECT dp_sum_laplace(x + 'NaN', 1.0, 0, 10) FROM t$$);
SELECT outcome('SELECT dp_sum_laplace(x, 1.0, 0, 10) OVER (ORDER BY i) FROM t');
SELECT outcome('SELECT dp_sum_laplace(n, 0, 0, 10) FROM t');
SELECT outcome('SELECT dp_sum_laplace(9223372036854775807, 1.0, 0, 9223372036854775807) FROM generate_series(1, 100)');
SELECT outcome('SELECT dp_laplace(1, 0, 1)');
SELECT outcome('SELECT dp_laplace(1, 1, 0)');
SELECT outcome($$SELECT dp_laplace(1, 1, 'NaN')$$);
SELECT outcome($$SELECT dp_laplace('Infinity', 1, 1)$$);
SELECT outcome('SELECT dp_laplace(1, NULL, 1)');
SELECT outcome('SELECT dp_laplace(1e300, 1, 1)');
-- A NULL value is not released: the answer is NULL, not noise.
SELECT dp_laplace(NULL, 1, 1) IS NULL AS null_in_null_out;
-- Empty input still gets a noisy answer.
SELECT dp_count(1.0) IS NOT NULL AS count_released,
       dp_sum_laplace(x, 1.0, 0, 10) IS NOT NULL AS sum_released,
       dp_sum_laplace(n, 1.0, 0, 10) IS NOT NULL AS int_sum_released
FROM t WHERE false;
-- Bounds from a prepared statement's parameters are fine.
PREPARE q(float8, float8) AS SELECT dp_sum_laplace(x, $1, 0, $2) IS NOT NULL AS released FROM t WHERE false;
EXECUTE q(0.5, 10);
-- Refused before the charge (the ledger does not move): data written as a
-- constant that the function refuses, a dpnoise aggregate as a window
-- function beside a plain one.
SELECT count(*) AS charges FROM dpnoise.ledger \gset
SELECT outcome($$SELECT dp_laplace('-Infinity'::float8, 1.0, 1.0)$$);
SELECT outcome('SELECT dp_sum_multi(ARRAY[NULL::float8, 1], 1.0, ARRAY[10, 10])');
SELECT outcome('SELECT dp_count(1.0), dp_count(1.0) OVER () FROM t');
SELECT count(*) - :charges AS new_charges FROM dpnoise.ledger;
-- An ORDER BY inside a dpnoise aggregate sorts its rows; its arguments are
-- still its own (the sort key is not read as one).
SELECT dp_count(0.1 ORDER BY 1) IS NOT NULL AS released FROM generate_series(1, 3);
-- An estimate's parameters are fixed too, in FROM as in a select list: an
-- ε drawn as the statement runs (a release) is refused before anything is
-- charged (the fuzzer found it refused only after dp_laplace's charge).
SELECT count(*) AS charges FROM dpnoise.ledger \gset
SELECT outcome($$SELECT * FROM dp_query_accuracy('count', dp_laplace(1.0, 1.0, 1.0), '{t}', 0, 100)$$);
SELECT outcome($$SELECT * FROM (VALUES (dp_laplace(1.0, random(), 1.0))) v$$);
SELECT count(*) - :charges AS new_charges FROM dpnoise.ledger;
