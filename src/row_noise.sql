-- Per-row noise: dp_laplace, dp_staircase, dp_noise, and dp_accuracy's comment (src/row_noise.rs).

CREATE FUNCTION dp_laplace(value double precision, epsilon double precision, sensitivity double precision)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_laplace' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_laplace(double precision, double precision, double precision) IS
    'value plus exact lattice Laplace noise of scale sensitivity/epsilon.';

CREATE FUNCTION dp_staircase(value double precision, epsilon double precision, sensitivity double precision)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_staircase' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION dp_staircase(value double precision, epsilon double precision, sensitivity double precision, loss text)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_staircase' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_staircase(double precision, double precision, double precision) IS
    'value plus exact lattice staircase noise, gamma for minimum variance (l2).';
COMMENT ON FUNCTION dp_staircase(double precision, double precision, double precision, text) IS
    'value plus exact lattice staircase noise, gamma chosen by loss: l1, l2, ci, ci=<c>, gamma=<g>.';

CREATE FUNCTION dp_noise(value double precision, epsilon double precision, sensitivity double precision,
                         delta double precision DEFAULT 0, mechanism text DEFAULT 'auto', loss text DEFAULT 'l2')
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_noise' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_noise(double precision, double precision, double precision, double precision, text, text) IS
    'value plus exact lattice noise of any mechanism at (epsilon, delta); auto picks the least expected loss.';

COMMENT ON FUNCTION dp_accuracy(text, double precision, double precision, text, double precision, double precision) IS
    'Exact error of a mechanism before spending: mean |error|, standard deviation, half-width of the confidence interval. Spends nothing.';
