-- Thresholded counts (issue 45, item 1; src/selection.rs, dpnoise_core::threshold):
-- where an analyst's GROUP BY shows a dp_count without delta, that count's
-- own noisy value selects the groups: a group is shown when it reaches the
-- threshold tau (tau - 1 with the probability the delta left over buys),
-- and the value shown is that same noisy count. The count spends the whole
-- epsilon; selection adds only dpnoise.selection_delta. Below, tau is
-- dp_query_accuracy's even-odds figure (tau or tau - 1): no count under
-- tau - 1 may show.
DO $$ BEGIN
    CREATE ROLE dp_th_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- One row per person: 1 000 persons at 'big', 10 to 20 at 'c10' .. 'c20',
-- and person 9999 alone at 'one'.
CREATE TABLE th_visits (person_id int PRIMARY KEY, site text);
INSERT INTO th_visits SELECT i, 'big' FROM generate_series(1, 1000) i;
INSERT INTO th_visits SELECT 1000 + 100 * n + j, 'c' || n FROM generate_series(10, 20) n, generate_series(1, n) j;
INSERT INTO th_visits VALUES (9999, 'one');
-- Several rows per person, each in up to two sites.
CREATE TABLE th_rows (person_id int, site text);
INSERT INTO th_rows SELECT i % 2000, CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 6000) i;
GRANT SELECT ON th_visits, th_rows TO dp_th_analyst;
SELECT dp_protect('th_visits', 'person_id');
SELECT dp_protect('th_rows', 'person_id', 2);
SELECT dp_analyst('dp_th_analyst');
SELECT dp_budget_grant('dp_th_analyst', 1e6, 1);
CREATE FUNCTION th_spent() RETURNS TABLE (epsilon numeric, delta numeric) LANGUAGE sql AS
    $$ SELECT epsilon, delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1 $$;
GRANT EXECUTE ON FUNCTION th_spent() TO dp_th_analyst;
-- tau at epsilon 1 (one group per person, selection delta 1e-6): the
-- geometric's P(N >= tau - 1) <= 1e-6, and the separate selection's figures
-- for comparison (epsilon 0.5 of its own).
SELECT selection_even_odds AS tau, selection_always_kept FROM dp_query_accuracy('count', 1.0, ARRAY['th_visits']);
SELECT selection_even_odds, selection_always_kept FROM dp_query_accuracy('count', 0.2, ARRAY['th_visits']);
SELECT selection_even_odds AS tau FROM dp_query_accuracy('count', 1.0, ARRAY['th_visits']) \gset
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END AS force_parallel \gset
\c - dp_th_analyst
\set VERBOSITY terse
-- 1. The count pays epsilon 1 and the selection delta 1e-6 (with the run
-- time's 0.1 and 1e-7): no separate selection epsilon.
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_count(1.0) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
-- 2. Every value shown is at least tau - 1, under a hashed, a sorted and a
-- parallel plan, 20 times each: the selection read the count's own noise.
-- (A separate selection shows groups of 10 to 20 persons with noisy counts
-- below tau: see 4.) 'big' is always shown, and groups of 15 to 20
-- persons often (each with probability at least 1/2 per run); the lone
-- person's group is shown with probability at most 1e-6 per run.
CREATE TEMP TABLE th_seen (plan text, site text, n bigint);
SET enable_hashagg = on; SET enable_sort = off;
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_seen SELECT 'hashed', site, c FROM (SELECT site, dp_count(1.0) AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
SET enable_hashagg = off; SET enable_sort = on;
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_seen SELECT 'sorted', site, c FROM (SELECT site, dp_count(1.0) AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
RESET enable_hashagg; RESET enable_sort;
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SET :force_parallel = on;
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_seen SELECT 'parallel', site, c FROM (SELECT site, dp_count(1.0) AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
RESET parallel_setup_cost; RESET parallel_tuple_cost; RESET min_parallel_table_scan_size;
SET :force_parallel = off;
SELECT plan, bool_and(n >= :tau - 1) AS all_at_least_tau, count(*) FILTER (WHERE site = 'big') AS big_shown,
       count(*) FILTER (WHERE site LIKE 'c%') > 0 AS small_shown
FROM th_seen GROUP BY plan ORDER BY plan;
-- 3. The value form and a named pure mechanism select the same way; a
-- count of a tiny epsilon keeps the separate selection (its threshold
-- would show nothing), paying dpnoise.selection_epsilon 0.5; sums alone
-- too; a count with delta too.
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_count(person_id, 1.0) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_count(1.0, 'staircase') FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_count(1e-9) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_sum(person_id, 1.0, 0, 10) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_count(1.0, 1e-6, 'gaussian') FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
-- Several rows per person, two groups each: epsilon 1 over both groups
-- (each at its half), selection delta 1e-6 over both.
SELECT site, dp_count(1.0) > 0 AS shown FROM th_rows GROUP BY site ORDER BY site;
SELECT * FROM th_spent();
-- 4. An analyst can neither write dp_count_selected nor turn the rule off.
SELECT outcome('SELECT site FROM th_visits GROUP BY site HAVING dp_count_selected(1.0, ''laplace'', 0.5)');
SELECT outcome('SET dpnoise.thresholded_counts = off');
-- Off (set by the DBA), the separate selection (here at epsilon 5, so that
-- it shows the groups of 10 to 20 persons) shows noisy counts below tau:
-- the check of 2 fails without the thresholded count.
\c - postgres
ALTER ROLE dp_th_analyst SET dpnoise.thresholded_counts = off;
\c - dp_th_analyst
SET dpnoise.selection_epsilon = 5;
CREATE TEMP TABLE th_off (n bigint);
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_off SELECT c FROM (SELECT site, dp_count(1.0) AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
SELECT bool_and(n >= :tau - 1) AS all_at_least_tau FROM th_off;
SELECT * FROM th_spent();
\c - postgres
ALTER ROLE dp_th_analyst RESET dpnoise.thresholded_counts;
-- 5. A curator's dp_count_selected without its count is refused before
-- any charge (0A000); beside its count it selects as the gate's does.
SELECT count(*) AS charges FROM dpnoise.ledger \gset
SELECT outcome('SELECT dp_count_selected(1.0, ''laplace'', 1e-6) FROM th_visits');
SELECT count(*) - :charges AS new_charges FROM dpnoise.ledger;
SELECT count(*) > 0 AS shown, bool_and(c >= :tau - 1) AS all_at_least_tau
FROM (SELECT site, dp_count(1.0) AS c FROM th_visits GROUP BY site HAVING dp_count_selected(1.0, 'laplace', 1e-6)) s;
-- 6. Row counts written dp_sum(1.0, epsilon, 0, U) (issue 45): a person
-- adds at least 1 and at most U to each group, so the sum's own noise can
-- select as the count's does, its threshold U above the count's rule on
-- the sum's lattice. The gate does so where, each person counted at one
-- row, that shows as many groups: at U = 1 (dp_query_accuracy's 'rows'
-- gives the figures, as for a count), not at U = 3 on th_rows (two
-- groups a person), which keeps the separate selection.
SELECT selection_even_odds AS rows_tau, selection_always_kept FROM dp_query_accuracy('rows', 1.0, ARRAY['th_visits'], 0, 1);
SELECT selection_even_odds AS rows_tau FROM dp_query_accuracy('rows', 1.0, ARRAY['th_visits'], 0, 1) \gset
SELECT selection_even_odds, selection_always_kept FROM dp_query_accuracy('rows', 1.0, ARRAY['th_rows'], 0, 3);
SELECT selection_even_odds, selection_always_kept FROM dp_query_accuracy('sum', 1.0, ARRAY['th_visits'], 0, 1);
\c - dp_th_analyst
\set VERBOSITY terse
-- Pays epsilon 1 and the selection delta only; every value shown, under a
-- hashed and a sorted plan, is at least rows_tau - 1.
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
CREATE TEMP TABLE th_rows_seen (plan text, site text, n float8);
SET enable_hashagg = on; SET enable_sort = off;
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_rows_seen SELECT 'hashed', site, c FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1) AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
SET enable_hashagg = off; SET enable_sort = on;
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_rows_seen SELECT 'sorted', site, c FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1, 0, 'laplace') AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
RESET enable_hashagg; RESET enable_sort;
SELECT plan, bool_and(n >= :rows_tau - 1) AS all_at_least_tau, count(*) FILTER (WHERE site = 'big') AS big_shown
FROM th_rows_seen GROUP BY plan ORDER BY plan;
-- Several rows per person: at U = 1 thresholded (epsilon 1 and delta 1e-6
-- over both groups, with the run time's), at U = 3 the separate selection
-- (its epsilon 0.5 too); the release must be a column of the level, not
-- inside an expression (dp_sum(...) > 0 keeps the separate selection);
-- a sum of a column, or with delta, keeps the separate selection.
SELECT count(*) AS shown FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1) FROM th_rows GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) AS shown FROM (SELECT site, dp_sum(1.0, 1.0, 0, 3) FROM th_rows GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_sum(person_id, 1.0, 0, 1) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
SELECT count(*) > 0 AS shown FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1, 1e-6) FROM th_visits GROUP BY site) s;
SELECT * FROM th_spent();
SELECT site, dp_sum(1.0, 1.0, 0, 1) > 0 AS shown FROM th_rows GROUP BY site ORDER BY site;
SELECT * FROM th_spent();
-- Off, the separate selection at epsilon 5 shows noisy row counts below
-- rows_tau - 1: the check above fails without the thresholded sum.
\c - postgres
ALTER ROLE dp_th_analyst SET dpnoise.thresholded_counts = off;
\c - dp_th_analyst
SET dpnoise.selection_epsilon = 5;
CREATE TEMP TABLE th_rows_off (n float8);
DO $$ BEGIN FOR i IN 1 .. 20 LOOP
    INSERT INTO th_rows_off SELECT c FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1) AS c FROM th_visits GROUP BY site) s;
END LOOP; END $$;
SELECT bool_and(n >= :rows_tau - 1) AS all_at_least_tau FROM th_rows_off;
\c - postgres
ALTER ROLE dp_th_analyst RESET dpnoise.thresholded_counts;
-- A curator's dp_sum_selected without its sum (or beside a sum of other
-- bounds) is refused before any charge; beside its sum it selects.
SELECT count(*) AS charges FROM dpnoise.ledger \gset
SELECT outcome('SELECT dp_sum_selected(1.0, 0, 1, ''auto'', ''l2'', 1e-6) FROM th_visits');
SELECT outcome('SELECT site, dp_sum(1.0, 1.0, 0, 2) FROM th_visits GROUP BY site HAVING dp_sum_selected(1.0, 0, 1, ''auto'', ''l2'', 1e-6)');
SELECT count(*) - :charges AS new_charges FROM dpnoise.ledger;
SELECT count(*) > 0 AS shown, bool_and(c >= :rows_tau - 1) AS all_at_least_tau
FROM (SELECT site, dp_sum(1.0, 1.0, 0, 1) AS c FROM th_visits GROUP BY site HAVING dp_sum_selected(1.0, 0, 1, 'auto', 'l2', 1e-6)) s;
