-- Zero-concentrated DP accounting (issue 46, item 1; src/budget/accountant.rs,
-- dpnoise_core::zcdp). A budget keeps one accountant: 'additive' (the
-- default, every budget before 0.20.0) adds up (epsilon, delta); 'zcdp' adds
-- up rho, and apart the delta of releases with no finite rho. Each charge
-- records both costs.
CREATE ROLE z_curator;
CREATE ROLE a_curator;
GRANT SELECT ON t TO z_curator, a_curator;
-- The conversions: (1, 1e-5) holds rho = 0.0284 when half of delta goes to
-- the conversion, more than Bun & Steinke's rho + 2 sqrt(rho ln(1/delta))
-- allows (0.0209 at the whole delta); and back.
SELECT round(dp_zcdp_rho(1, 5e-6)::numeric, 6) AS rho, round(dp_zcdp_rho(1, 1e-5)::numeric, 6) AS rho_whole_delta,
       dp_zcdp_epsilon(dp_zcdp_rho(1, 5e-6), 5e-6) <= 1 AS within, round(dp_zcdp_epsilon(0.5, 1e-6)::numeric, 4) AS epsilon;
SELECT outcome('SELECT dp_zcdp_rho(-1, 1e-5)'), outcome('SELECT dp_zcdp_epsilon(0.1, 0)');
-- A zCDP budget of (1, 1e-5): half of delta for releases, half for the conversion.
SELECT dp_budget_grant_zcdp('z_curator', 1, 1e-5);
SELECT dp_budget_grant('a_curator', 1, 1e-5);
SELECT role_name, accountant, epsilon_granted, delta_granted, round(rho_granted, 8) AS rho_granted,
       release_delta_granted, release_delta_remaining
FROM dp_budgets WHERE role_name IN ('z_curator', 'a_curator') ORDER BY 1;
-- The same Gaussian count at (0.1, 1e-6), released until refused: ten
-- times under the additive accountant (its epsilon), 74 times under zCDP
-- (each costs its rho, 1/(2 sigma^2) = 0.00038, and no delta).
CREATE FUNCTION releases_until_refused(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE k int := 0;
BEGIN
    FOR i IN 1 .. n LOOP
        BEGIN
            PERFORM dp_count(0.1, 1e-6, 'gaussian') FROM t;
            k := k + 1;
        EXCEPTION WHEN SQLSTATE 'ZB001' THEN
            RETURN k;
        END;
    END LOOP;
    RETURN k;
END $$;
SET ROLE a_curator;
SELECT releases_until_refused(400) AS additive_releases;
SELECT * FROM dp_budget_remaining();
RESET ROLE;
SET ROLE z_curator;
SELECT releases_until_refused(400) AS zcdp_releases;
SELECT epsilon = 0 AS epsilon_zero, delta, rho < 0.00038 AS rho_left_below_one_release, accountant FROM dp_budget_remaining();
-- Each charge records both: (0.1, 1e-6) added up, its rho with no delta.
SELECT epsilon, delta, round(rho, 8) AS rho, rho_delta, mechanism FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
\set VERBOSITY terse
-- Refused: the rho ran out, and the message says so.
SELECT dp_count(0.1, 1e-6, 'gaussian') FROM t;
\set VERBOSITY default
RESET ROLE;
-- A pure release costs epsilon^2/2 and its delta none; a release with
-- delta and no finite rho (the truncated Laplacian) its epsilon^2/2 and
-- its delta, apart.
SELECT dp_budget_grant_zcdp('z_curator', 1, 1e-5);
SET ROLE z_curator;
SELECT dp_count(0.1) IS NOT NULL FROM t;
SELECT epsilon, delta, round(rho, 12) AS rho, rho_delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
SELECT dp_sum(x, 0.2, 0, 1, 1e-6, 'truncated_laplace') IS NOT NULL FROM t;
SELECT epsilon, delta, round(rho, 12) AS rho, rho_delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
-- Its delta runs out apart: release_delta is 5e-6 a grant, spent 1e-6.
SELECT count(*) FILTER (WHERE o = 'ok') AS released, min(o) FILTER (WHERE o <> 'ok') AS refused
FROM (SELECT outcome('SELECT dp_sum(x, 0.01, 0, 1, 1e-6, ''truncated_laplace'') FROM t') AS o
      FROM generate_series(1, 12)) r;
RESET ROLE;
-- The accountant is the budget's: an additive grant to a zCDP budget (or
-- the reverse) is refused (22023); revoking and granting changes it, from
-- what remains.
SELECT outcome('SELECT dp_budget_grant(''z_curator'', 1)');
SELECT outcome('SELECT dp_budget_grant_zcdp(''a_curator'', 1, 1e-5)');
SELECT outcome('SELECT dp_budget_grant_zcdp(''a_curator'', 1, 1e-5, 1e-5)');
SELECT dp_budget_revoke('a_curator');
SELECT dp_budget_grant_zcdp('a_curator', 1, 1e-5);
SELECT role_name, accountant, rho_remaining > 0.028 AS rho_left FROM dp_budgets WHERE role_name = 'a_curator';
-- An analyst's GROUP BY on keys from protected data: the sum, partition
-- selection (epsilon 0.5, delta 1e-6 by default: separate for a sum of a
-- column) and the run time, each at epsilon^2/2 (0.5 + 0.125 + 0.005),
-- their deltas apart; the statement is one ledger row. A pure release of
-- epsilon 1 costs rho 0.5, which alone converts to epsilon 5.3 at delta
-- 1e-5: zCDP pays off for many small or Gaussian releases, not for a few
-- large pure ones (a budget of (2, 1e-4) holds rho 0.128 and refuses it).
CREATE TABLE z_people (person_id int PRIMARY KEY, region text, x float8);
INSERT INTO z_people SELECT i, 'r' || (i % 3), (i % 7) / 7.0 FROM generate_series(1, 600) i;
SELECT dp_protect('z_people', 'person_id');
CREATE ROLE z_analyst LOGIN;
SELECT dp_analyst('z_analyst');
SELECT dp_budget_grant_zcdp('z_analyst', 2, 1e-4);
\c - z_analyst
SELECT outcome('SELECT region, dp_sum(x, 1.0, 0, 1) FROM z_people GROUP BY region');
\c - postgres
SELECT dp_budget_grant_zcdp('z_analyst', 10, 1e-4);
\c - z_analyst
-- dp_query_cost says before what the statement will be charged, part by
-- part, under both accountants; the ledger then holds the same total.
SELECT part, epsilon_added_up, delta_added_up, round(rho::numeric, 12) AS rho, rho_delta
FROM dp_query_cost('sum', 1.0, ARRAY['z_people'], 0, 1);
SELECT count(*) AS groups FROM (SELECT region, dp_sum(x, 1.0, 0, 1) FROM z_people GROUP BY region) s;
SELECT epsilon, delta, round(rho, 12) AS rho, rho_delta FROM dp_my_ledger;
-- A count selects its groups by its own noise: selection costs its delta
-- only; and a Gaussian sum costs its exact rho and no delta.
SELECT part, epsilon_added_up, delta_added_up, round(rho::numeric, 12) AS rho, rho_delta
FROM dp_query_cost('count', 1.0, ARRAY['z_people']);
SELECT count(*) AS groups FROM (SELECT region, dp_count(1.0) FROM z_people GROUP BY region) s;
SELECT round(rho, 12) AS rho, rho_delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
SELECT round(rho::numeric, 12) AS rho, rho_delta FROM dp_query_cost('sum', 1.0, ARRAY['z_people'], 0, 1, false, 1e-6, 'gaussian')
WHERE part = 'total';
SELECT dp_sum(x, 1.0, 0, 1, 1e-6, 'gaussian') IS NOT NULL FROM z_people;
SELECT round(rho, 12) AS rho, rho_delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
\c - postgres
-- Sessions paying ahead (dpnoise.charge_ahead) reserve four times a
-- charge's amounts, its rho and delta too, and draw on them.
SELECT dp_budget_grant_zcdp('z_curator', 1, 1e-5);
SET dpnoise.charge_ahead = 4;
SET ROLE z_curator;
SELECT count(*) AS charges FROM dp_my_ledger \gset
SELECT dp_count(0.1, 1e-6, 'gaussian') IS NOT NULL FROM t;
SELECT dp_count(0.1, 1e-6, 'gaussian') IS NOT NULL FROM t;
SELECT dp_count(0.1, 1e-6, 'gaussian') IS NOT NULL FROM t;
SELECT count(*) - :charges AS new_rows FROM dp_my_ledger;
SELECT mechanism, epsilon, round(rho / 0.00037934136650584076, 6) AS rho_in_releases, rho_delta
FROM dp_my_ledger ORDER BY id DESC LIMIT 1;
RESET ROLE;
RESET dpnoise.charge_ahead;
-- The issue's workload: under a zCDP budget of (1, 1e-5), 100 Gaussian
-- dp_sum releases of bounds [0, 1], each asking a hundredth of the rho
-- (dp_zcdp_gaussian_epsilon gives the epsilon at delta 1e-6 that costs at
-- most that), are admitted, exactly 100, and the 101st is refused.
CREATE ROLE z_hundred;
GRANT SELECT ON t TO z_hundred;
SELECT dp_budget_grant_zcdp('z_hundred', 1, 1e-5);
SET ROLE z_hundred;
SELECT trunc(rho::numeric / 100, 12) AS share FROM dp_budget_remaining() \gset
SELECT dp_zcdp_gaussian_epsilon(:share, 1e-6, 0, 1) AS share_epsilon \gset
SELECT count(*) FILTER (WHERE o = 'ok') AS admitted, min(n) FILTER (WHERE o <> 'ok') AS first_refused,
       min(o) FILTER (WHERE o <> 'ok') ~ 'its rho ran out' AS by_rho
FROM (SELECT n, outcome(format('SELECT dp_sum(x / 10, %s, 0, 1, 1e-6, ''gaussian'') FROM t', :share_epsilon)) AS o
      FROM generate_series(1, 101) n) r;
RESET ROLE;
-- Its sigma, as dp_accuracy reports it: 1/sqrt(2 * share) = 41.96, below
-- the issue's 49.0 (Bun & Steinke's conversion at the whole delta): the
-- conversion of Canonne, Kamath & Steinke gives more rho, even with half
-- of delta kept for releases. The same workload added up (each release at
-- (0.01, 1e-7)) has sigma 362.
SELECT round(std_dev::numeric, 2) AS sigma FROM dp_accuracy('gaussian', :share_epsilon, 1, delta => 1e-6);
SELECT round(std_dev::numeric, 0) AS sigma_additive FROM dp_accuracy('gaussian', 0.01, 1, delta => 1e-7);
-- Measured over 4 000 fresh releases of an empty sum (pure noise): the
-- sample standard deviation within 5 % of that sigma (its standard error
-- is 1.1 %: 5 % is 4.5 of them); the same sample is 29 % away from the
-- sigma of a release charged half its rho (sigma * sqrt(2): the control).
CREATE TEMP TABLE z_noise (v float8);
SELECT set_config('z.eps', :'share_epsilon', false) IS NOT NULL AS set;
DO $$ DECLARE e float8 := current_setting('z.eps')::float8;
BEGIN FOR i IN 1 .. 4000 LOOP
    INSERT INTO z_noise SELECT dp_sum(x, e, 0, 1, 1e-6, 'gaussian') FROM t WHERE false;
END LOOP; END $$;
SELECT count(*) AS releases,
       abs(stddev_samp(v) / s.std_dev - 1) < 0.05 AS within_5_percent,
       abs(stddev_samp(v) / (s.std_dev * sqrt(2)) - 1) < 0.05 AS control_within_5_percent
FROM z_noise, dp_accuracy('gaussian', :share_epsilon, 1, delta => 1e-6) s GROUP BY s.std_dev;
