-- Two backends draw different noise.
CREATE TABLE draws(backend int, v float8);
INSERT INTO draws SELECT 1, dp_laplace(0, 1, 1) FROM generate_series(1, 5);
\c
INSERT INTO draws SELECT 2, dp_laplace(0, 1, 1) FROM generate_series(1, 5);
SELECT count(DISTINCT v) AS distinct_draws FROM draws;
-- A superuser may fix the seed; each SET restarts the stream.
SET dpnoise.seed = '2026';
SELECT dp_count(1.0) AS c, dp_sum_laplace(x, 1.0, 0, 10) AS s, dp_sum_laplace(n, 1.0, 0, 1000) AS si FROM t;
SELECT dp_laplace(x, 1.0, 1.0) FROM t WHERE i <= 3 ORDER BY i;
SET dpnoise.seed = '2026';
SELECT dp_count(1.0) AS c, dp_sum_laplace(x, 1.0, 0, 10) AS s, dp_sum_laplace(n, 1.0, 0, 1000) AS si FROM t;
SELECT outcome($$SET dpnoise.seed = 'abc'$$);
RESET dpnoise.seed;
-- Nobody else can: not set it, not even see it.
CREATE ROLE dp_analyst;
SET ROLE dp_analyst;
SELECT outcome($$SET dpnoise.seed = '1'$$);
-- (its SQLSTATE: the message differs between PostgreSQL versions)
SELECT split_part(outcome('SHOW dpnoise.seed'), ':', 1) AS show_seed;
RESET ROLE;
DROP ROLE dp_analyst;
DROP TABLE draws;
