-- dp_prior and dp_refine (src/refine.rs): binary I/O and comments.
ALTER TYPE dp_prior SET (SEND = dp_prior_send, RECEIVE = dp_prior_recv);
COMMENT ON FUNCTION dp_prior_uniform(double precision, double precision) IS 'A prior uniform on [lower, upper], for dp_refine.';
COMMENT ON FUNCTION dp_prior_histogram(double precision[], double precision[]) IS
    'A piecewise uniform prior: weights[i] on [edges[i], edges[i+1]), normalised; for dp_refine.';
COMMENT ON FUNCTION dp_prior_normal(double precision, double precision, double precision, double precision) IS
    'A normal prior (mean, sd) truncated to [lower, upper], for dp_refine.';
COMMENT ON FUNCTION dp_prior_categorical(text[], double precision[]) IS
    'A prior over a finite set of categories with their probabilities (normalised), for dp_refine on text.';
COMMENT ON FUNCTION dp_refine(double precision, dp_prior, double precision, boolean) IS
    'A draw from the prior sharpened around value (knowledge refinement, Soria-Comas & Domingo-Ferrer) at epsilon; NULL value: NULL, nothing charged.';
COMMENT ON FUNCTION dp_refine(text, dp_prior, double precision, boolean) IS
    'A category drawn from a categorical prior sharpened towards value at epsilon; with a numeric prior, a constant value is read as a number.';
COMMENT ON FUNCTION dp_prior_in(cstring) IS 'Input function of dp_prior: its JSON text form, checked like the constructors.';
COMMENT ON FUNCTION dp_prior_out(dp_prior) IS 'Output function of dp_prior: its JSON text form.';
COMMENT ON FUNCTION dp_prior_send(dp_prior) IS 'Binary output function of dp_prior: a version byte, then its JSON text.';
COMMENT ON FUNCTION dp_prior_recv(internal) IS 'Binary input function of dp_prior, checked like the text input.';
COMMENT ON TYPE dp_prior IS 'A prior over a query''s answer, for dp_refine; text form JSON ({"kind":"histogram","edges":[0,120],"weights":[1]}).';
