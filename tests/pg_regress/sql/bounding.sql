-- Per-person contribution bounding (issue 14): analysts' aggregates over
-- tables with several rows per person, and over joins. Each person counts
-- once per group, their sum is clamped as one value, and they add to at
-- most max_groups_contributed groups, whatever the joins copied.
DO $$ BEGIN
    CREATE ROLE dp_bound_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 500 persons, each with 4 rows in each of 3 regions.
CREATE TABLE trips (person_id int, region text, amount float8, n bigint);
INSERT INTO trips SELECT i % 500, (ARRAY['north', 'south', 'east'])[1 + i % 3], 10 * (i % 100), i % 7
FROM generate_series(1, 6000) i;
-- One row per person.
CREATE TABLE members (person_id int PRIMARY KEY, age int);
INSERT INTO members SELECT i, 20 + i % 50 FROM generate_series(0, 499) i;
-- Public, not protected: north is listed twice, so a join copies its rows.
CREATE TABLE region_names (region text, label text);
INSERT INTO region_names VALUES ('north', 'N'), ('north', 'N again'), ('south', 'S'), ('east', 'E');
GRANT SELECT ON region_names TO dp_bound_analyst;
-- Extreme values: a person's float8 sum or average overflows PostgreSQL's
-- own sum and avg, an error whose occurrence would tell about the data.
CREATE TABLE extremes (person_id int, v float8);
INSERT INTO extremes VALUES (1, 1e308), (1, 1e308), (2, 1e200), (2, 1e200), (3, 'NaN'),
    (4, 'Infinity'), (4, '-Infinity'), (5, NULL), (6, 4), (6, 4);
SELECT dp_protect('trips', 'person_id', 2), dp_protect('members', 'person_id');
SELECT dp_protect('extremes', 'person_id');
SELECT outcome('SELECT dp_protect(''trips'', ''person_id'', 0)');
SELECT * FROM dp_protected_tables WHERE table_name IN ('trips'::regclass, 'members'::regclass) ORDER BY 1;
-- What the answers below are compared with.
CREATE TABLE truth AS SELECT sum(amount) AS amount FROM trips;
CREATE TABLE per_person AS SELECT sum(amount) AS amount, sum(n) AS n FROM trips GROUP BY person_id;
CREATE TABLE per_person_joined AS SELECT sum(t.amount) AS amount FROM trips t JOIN region_names r USING (region) GROUP BY person_id;
GRANT SELECT ON truth, per_person, per_person_joined TO dp_bound_analyst;
SELECT dp_analyst('dp_bound_analyst');
SELECT dp_budget_grant('dp_bound_analyst', 1e7, 1);
\c - dp_bound_analyst
\set VERBOSITY terse

-- At epsilon 1000 (500 a group when a person's 2 groups share it) a
-- count's noise is almost surely 0 (with probability tanh(250)): the
-- answers show what bounding kept.
-- A person counts once, however many rows they have.
SELECT dp_count(1000.0) AS persons FROM trips;
-- In at most 2 of their 3 regions, chosen at random: 1000 person-groups.
SELECT sum(c) AS person_groups, min(c) > 250 AND max(c) < 420 AS split_at_random
FROM (SELECT region, dp_count(1000.0) AS c FROM trips GROUP BY region) s;
-- The session may lower the tables' setting, never raise it.
SET dpnoise.max_groups_contributed = 1;
SELECT sum(c) AS person_groups FROM (SELECT region, dp_count(1000.0) AS c FROM trips GROUP BY region) s;
SET dpnoise.max_groups_contributed = 3;
SELECT sum(c) AS person_groups FROM (SELECT region, dp_count(1000.0) AS c FROM trips GROUP BY region) s;
RESET dpnoise.max_groups_contributed;
-- A DBA's cap for the role (ALTER ROLE ... SET, superusers only) lowers
-- it too: the analyst can neither lift the cap nor raise k past it.
\c - postgres
ALTER ROLE dp_bound_analyst SET dpnoise.role_max_groups_contributed = 1;
\c - dp_bound_analyst
\set VERBOSITY terse
SELECT sum(c) AS person_groups FROM (SELECT region, dp_count(1000.0) AS c FROM trips GROUP BY region) s;
SELECT outcome('SET dpnoise.role_max_groups_contributed = 3');
SELECT outcome('RESET dpnoise.role_max_groups_contributed');
SET dpnoise.max_groups_contributed = 3;
SELECT sum(c) AS person_groups FROM (SELECT region, dp_count(1000.0) AS c FROM trips GROUP BY region) s;
SELECT max_groups_contributed FROM dp_query_accuracy('count', 1.0, '{trips}');
\c - postgres
ALTER ROLE dp_bound_analyst RESET dpnoise.role_max_groups_contributed;
\c - dp_bound_analyst
\set VERBOSITY terse
-- dp_query_accuracy: the error before spending, with the bounds in force.
-- trips: each person in 2 groups, so each group's count spends 0.5.
SELECT max_groups_contributed, epsilon_per_group, mechanism, selection_even_odds, selection_always_kept
FROM dp_query_accuracy('count', 1.0, '{trips}');
SELECT max_groups_contributed, epsilon_per_group FROM dp_query_accuracy('count', 1.0, '{members}');
SELECT max_groups_contributed, epsilon_per_group FROM dp_query_accuracy('sum', 1.0, '{trips}', 0, 1000, grouped => false);
SELECT max_groups_contributed, epsilon_per_group FROM dp_query_accuracy('count', 1.0, '{trips,members,region_names}');
SELECT outcome('SELECT * FROM dp_query_accuracy(''avg'', 1.0, ''{trips}'')');
SELECT outcome('SELECT * FROM dp_query_accuracy(''sum'', 1.0, ''{trips}'')');
SELECT outcome('SELECT * FROM dp_query_accuracy(''count'', 1.0, ''{region_names}'')');
SELECT outcome('SELECT * FROM dp_query_accuracy(''count'', 0, ''{trips}'')');
-- What it predicts is what the noise is: 400 totals over the 3 regions
-- (1000 person-groups, 3 noises) have the predicted standard deviation
-- (a sum of 3 Laplace-like noises has kurtosis 4: the standard error of
-- the sample's sd is sqrt(3 / n) / 2 of it; 5 of those allowed).
CREATE TEMP TABLE draws (total float8);
DO $$ BEGIN FOR i IN 1..400 LOOP
    INSERT INTO draws SELECT sum(c) FROM (SELECT region, dp_count(1.0) AS c FROM trips GROUP BY region) s;
END LOOP; END $$;
SELECT count(*) AS draws,
       abs(sqrt(avg((total - 1000) ^ 2) / 3) / (SELECT std_dev FROM dp_query_accuracy('count', 1.0, '{trips}')) - 1)
           < 5 * sqrt(3.0 / count(*)) / 2 AS sd_as_predicted
FROM draws;
-- The Gaussian over a person's k = 2 groups is calibrated to the L2
-- sensitivity bound·√2 at the whole (ε, δ) (issue 39): a sum's σ is √2
-- times the one-group figure (members: one row per person), where
-- splitting (ε, δ) in two would give about 1.9 times it.
SELECT round((g.std_dev / one.std_dev)::numeric, 6) AS sigma_ratio_sqrt2, g.mechanism, round(sqrt(2)::numeric, 6) AS sqrt2
FROM dp_query_accuracy('sum', 1.0, '{trips}', 0, 1000, delta => 1e-5, mechanism => 'gaussian') g,
     dp_query_accuracy('sum', 1.0, '{members}', 0, 1000, grouped => false, delta => 1e-5, mechanism => 'gaussian') one;
-- 'auto' at (1, 1e-5) over 2 groups: the least noisy of Laplace at ε/2 and the joint Gaussian.
SELECT mechanism FROM dp_query_accuracy('count', 1.0, '{trips}', delta => 1e-5);
-- Its draws have the predicted σ (a sum of 3 Gaussians: the standard error
-- of the sample's sd is sqrt(1 / (2n)) of it; 5 of those allowed).
CREATE TEMP TABLE gaussian_draws (total float8);
DO $$ BEGIN FOR i IN 1..400 LOOP
    INSERT INTO gaussian_draws SELECT sum(c) FROM (SELECT region, dp_count(1.0, 1e-5, 'gaussian') AS c FROM trips GROUP BY region) s;
END LOOP; END $$;
SELECT count(*) AS draws,
       abs(sqrt(avg((total - 1000) ^ 2) / 3)
           / (SELECT std_dev FROM dp_query_accuracy('count', 1.0, '{trips}', delta => 1e-5, mechanism => 'gaussian')) - 1)
           < 5 * sqrt(1.0 / (2 * count(*))) AS sd_as_predicted
FROM gaussian_draws;
-- A person's sum is clamped as one value: each person's 12 rows sum to
-- up to 11 880, clamped to 1000 (476 600 in all), not the rows' 2 970 000.
SELECT abs(s - (SELECT sum(LEAST(amount, 1000)) FROM per_person)) < 50 AS clamped_per_person
FROM (SELECT dp_sum(amount, 1000.0, 0, 1000) AS s FROM trips) x;
-- Below the bound, the sum is the rows' (noise of scale 20000/1000).
SELECT abs(s - t.amount) < 400 AS whole_sum FROM (SELECT dp_sum(amount, 1000.0, 0, 20000) AS s FROM trips) x, truth t;
-- bigint sums: each person's 12 values of n sum to 33 to 39, clamped to 35.
SELECT abs(s - (SELECT sum(LEAST(n, 35)) FROM per_person)) < 10 AS integer_sum
FROM (SELECT dp_sum_laplace(n, 1000.0, 0, 35) AS s FROM trips) x;
-- Averages are of each person's average; counts of values count persons.
SELECT abs(dp_avg(amount, 1000.0, 0, 1000) - 495) < 10 AS average, dp_count(amount, 1000.0) AS persons_with_values
FROM trips;

-- No overflow error: persons 1 and 2 sum past float8's range (then 10,
-- the bound), 3 and 4 are NaN and 5 NULL (nothing), 6 sums to 8.
SELECT abs(s - 28) < 1 AS sum_without_overflow, round(a::numeric, 1) AS average_of_averages
FROM (SELECT dp_sum(v, 1000.0, 0, 10) AS s, dp_avg(v, 1000.0, 0, 10) AS a FROM extremes) x;

-- 2. No amplification: joins that copy a person's rows add nothing. A
-- table of several rows per person joined with itself (or another such
-- table) is refused: a person's n rows would become n^2, so one person
-- could make the statement run as long as they liked (plan_check.sql).
SELECT outcome('SELECT dp_count(1000.0) AS self_join FROM trips a JOIN trips b ON a.person_id = b.person_id');
SELECT outcome('SELECT dp_count(1000.0) FROM trips a JOIN trips b USING (person_id) JOIN trips c USING (person_id)');
SELECT dp_count(1000.0) AS copied_by_public_table FROM trips t JOIN region_names r ON r.region = t.region;
SELECT dp_count(1000.0) AS copied_by_generate_series FROM trips, generate_series(1, 10);
SELECT dp_count(1000.0) AS copied_by_values FROM trips t JOIN (VALUES ('north'), ('north')) v(r) ON v.r = t.region;
SELECT abs(s - (SELECT sum(LEAST(amount, 1000)) FROM per_person_joined)) < 50 AS copies_clamped
FROM (SELECT dp_sum(t.amount, 1000.0, 0, 1000) AS s FROM trips t JOIN region_names r ON r.region = t.region) x;
-- Joined with another protected table on the unit, and grouped by a
-- public column: each person has 4 labels, and counts in one (members'
-- max_groups_contributed, 1: the smallest of the joined tables' holds).
SELECT sum(c) AS person_groups FROM (
    SELECT r.label, dp_count(1000.0) AS c FROM trips t JOIN region_names r ON r.region = t.region
    JOIN members m ON m.person_id = t.person_id WHERE m.age >= 20 GROUP BY r.label) s;
SELECT dp_count(1000.0) AS members_over_40 FROM members m JOIN trips t USING (person_id) WHERE m.age > 40;

-- What stays refused (ZB003, nothing charged).
CREATE TEMP TABLE charges AS SELECT max(id) AS seen FROM dp_my_ledger;
SELECT outcome('SELECT dp_count(1.0) FROM trips t JOIN members m ON m.age = t.person_id');
SELECT outcome('SELECT dp_count(1.0) FROM trips a, trips b');
SELECT outcome('SELECT dp_count(1.0) FROM trips t LEFT JOIN region_names r USING (region)');
SELECT outcome('SELECT dp_count(1.0) FROM (SELECT * FROM trips UNION ALL SELECT * FROM trips) s');
SELECT outcome('SELECT region, dp_count(1.0) FILTER (WHERE amount > 3) FROM trips GROUP BY region');
SELECT outcome('SELECT m.age, dp_count(1.0) FROM trips t JOIN members m USING (person_id) GROUP BY m.person_id');
SELECT outcome('SELECT dp_count(1.0) FROM trips TABLESAMPLE SYSTEM (50)');
SELECT outcome('SELECT dp_count(1.0) FROM trips WHERE ln(amount - n) > 1');
SELECT count(*) AS charged_for_refusals FROM dp_my_ledger WHERE id > (SELECT seen FROM charges);

-- The statement is charged what its parameters say in all; each of a
-- person's groups spends a share. A generic plan keeps the shares.
SET plan_cache_mode = force_generic_plan;
PREPARE by_region(float8) AS SELECT sum(c) AS person_groups FROM (SELECT region, dp_count($1) AS c FROM trips GROUP BY region) s;
EXECUTE by_region(1000.0);
RESET plan_cache_mode;
SELECT mechanism, epsilon, delta, releases FROM dp_my_ledger ORDER BY id DESC LIMIT 1;

-- 5. The cost does not depend on the data: neighbouring tables (one person
-- with rows in several groups, and an empty table) are charged alike.
\c - postgres
CREATE TABLE trips_neighbour AS SELECT * FROM trips WHERE person_id <> 7;
CREATE TABLE trips_empty (LIKE trips);
SELECT dp_protect('trips_neighbour', 'person_id', 2), dp_protect('trips_empty', 'person_id', 2);
\c - dp_bound_analyst
\set VERBOSITY terse
CREATE TEMP TABLE charges AS SELECT max(id) AS seen FROM dp_my_ledger;
SELECT count(*) > 0 AS some FROM (SELECT region, dp_count(1.0), dp_sum(amount, 1.0, 0, 1000) FROM trips WHERE amount > 500 GROUP BY region) s;
SELECT count(*) > 0 AS some FROM (SELECT region, dp_count(1.0), dp_sum(amount, 1.0, 0, 1000) FROM trips_neighbour WHERE amount > 500 GROUP BY region) s;
SELECT count(*) AS none FROM (SELECT region, dp_count(1.0), dp_sum(amount, 1.0, 0, 1000) FROM trips_empty WHERE amount > 500 GROUP BY region) s;
SELECT mechanism, epsilon, delta, releases FROM dp_my_ledger WHERE id > (SELECT seen FROM charges) ORDER BY id;

-- Listed keys: the public side of an outer join lists the group keys, and
-- every listed key is shown, those without rows too (west, nowhere), with
-- its noisy answer. The keys shown say nothing of the data: no partition
-- selection, so delta may be 0.
\c - postgres
CREATE TABLE listed_regions (region text);
INSERT INTO listed_regions VALUES ('north'), ('south'), ('west'), ('north');
CREATE VIEW trip_regions AS SELECT region FROM trips;
GRANT SELECT ON listed_regions, trip_regions TO dp_bound_analyst;
\c - dp_bound_analyst
\set VERBOSITY terse
SET dpnoise.selection_delta = 0;
CREATE TEMP TABLE charges AS SELECT max(id) AS seen FROM dp_my_ledger;
SELECT l.region, dp_count(1000.0) AS persons
FROM listed_regions l LEFT JOIN trips t ON t.region = l.region GROUP BY l.region ORDER BY 1;
-- USING, RIGHT JOIN, a condition on the list in WHERE, on the rows in ON.
SELECT region, dp_count(1000.0) AS persons, abs(dp_sum(amount, 1000.0, 0, 1000)) < 100 AS sum_near_zero
FROM trips t RIGHT JOIN listed_regions l USING (region) WHERE region <> 'south' GROUP BY region ORDER BY 1;
SELECT l.region, dp_count(1000.0) AS persons
FROM listed_regions l LEFT JOIN trips t ON t.region = l.region AND t.amount >= 500 GROUP BY l.region ORDER BY 1;
-- A VALUES list, a function of constants, a subquery of public tables.
SELECT v.r, dp_count(1000.0) AS persons FROM (VALUES ('north'), ('nowhere')) v(r) LEFT JOIN trips t ON t.region = v.r
GROUP BY v.r ORDER BY 1;
SELECT count(*) AS listed, sum(c) AS persons
FROM (SELECT g, dp_count(1000.0) AS c FROM generate_series(490, 509) g LEFT JOIN members m ON m.person_id = g GROUP BY g) s;
SELECT r.region, dp_count(1000.0) AS persons
FROM (SELECT DISTINCT region FROM listed_regions UNION ALL SELECT 'zz') r LEFT JOIN trips t ON t.region = r.region
GROUP BY r.region ORDER BY 1;
-- On an empty neighbour the same keys, each near 0.
SELECT l.region, dp_count(1000.0) AS persons
FROM listed_regions l LEFT JOIN trips_empty t ON t.region = l.region GROUP BY l.region ORDER BY 1;
-- Charged its aggregates alone, with delta 0.
SELECT mechanism, epsilon, delta, releases FROM dp_my_ledger WHERE id > (SELECT seen FROM charges) ORDER BY id;
-- Refused: keys or WHERE from the protected side (the keys shown would
-- then depend on the rows), other outer joins, lists read from protected
-- rows (directly, through a view, in a scalar subquery, LATERAL).
TRUNCATE charges;
INSERT INTO charges SELECT max(id) FROM dp_my_ledger;
SELECT outcome('SELECT l.region, dp_count(1.0) FROM listed_regions l LEFT JOIN trips t ON t.region = l.region WHERE t.amount > 5 GROUP BY l.region');
SELECT outcome('SELECT t.region, dp_count(1.0) FROM listed_regions l LEFT JOIN trips t ON t.region = l.region GROUP BY t.region');
SELECT outcome('SELECT l.region, t.n, dp_count(1.0) FROM listed_regions l LEFT JOIN trips t ON t.region = l.region GROUP BY l.region, t.n');
SELECT outcome('SELECT l.region, dp_count(1.0) FROM trips t LEFT JOIN listed_regions l ON t.region = l.region GROUP BY l.region');
SELECT outcome('SELECT l.region, dp_count(1.0) FROM listed_regions l FULL JOIN trips t ON t.region = l.region GROUP BY l.region');
SELECT outcome('SELECT r.region, dp_count(1.0) FROM (SELECT region FROM trips) r LEFT JOIN trips t ON t.region = r.region GROUP BY r.region');
SELECT outcome('SELECT r.region, dp_count(1.0) FROM trip_regions r LEFT JOIN trips t ON t.region = r.region GROUP BY r.region');
SELECT outcome('SELECT r.x, dp_count(1.0) FROM (SELECT (SELECT min(person_id) FROM trips) x) r LEFT JOIN trips t ON t.person_id = r.x GROUP BY r.x');
SELECT outcome('SELECT v.x, dp_count(1.0) FROM trips t, LATERAL (VALUES (t.amount)) v(x) GROUP BY v.x');
SELECT outcome('SELECT l.region, dp_count(1.0) FROM listed_regions l LEFT JOIN trips t ON t.region = l.region AND 1 / (t.amount - 10) > 0 GROUP BY l.region');
-- A Gaussian over a person's k groups is calibrated to sqrt(k) times the
-- bounds: whose k-group plan cannot be made is refused before the charge.
SELECT outcome('SELECT l.region, dp_sum(t.amount, 1.0, 0, 3e307, 1e-5, ''gaussian'') FROM listed_regions l LEFT JOIN trips t ON t.region = l.region GROUP BY l.region');
SELECT count(*) AS charged_for_refusals FROM dp_my_ledger WHERE id > (SELECT seen FROM charges);
RESET dpnoise.selection_delta;

-- Repeated releases (issue 38): a person's groups are chosen by a keyed
-- hash of their own rows and their values summed exactly, so a bounded
-- release of a tracked table asked again is the same answer, and free.
\c - postgres
SELECT dp_track('trips');
\c - dp_bound_analyst
SELECT max(id) AS seen FROM dp_my_ledger \gset
SELECT string_agg(format('%s %s %s', region, c, s), ', ' ORDER BY region) AS first
FROM (SELECT region, dp_count(1.0) AS c, dp_sum(amount, 1.0, 0, 1000) AS s FROM trips GROUP BY region) x \gset
SELECT string_agg(format('%s %s %s', region, c, s), ', ' ORDER BY region) AS again
FROM (SELECT region, dp_count(1.0) AS c, dp_sum(amount, 1.0, 0, 1000) AS s FROM trips GROUP BY region) x \gset
SELECT :'first' = :'again' AS same_answer, count(*) AS charged FROM dp_my_ledger WHERE id > :seen;
-- Another k is another release.
SET dpnoise.max_groups_contributed = 1;
SELECT string_agg(format('%s %s %s', region, c, s), ', ' ORDER BY region) AS other_k
FROM (SELECT region, dp_count(1.0) AS c, dp_sum(amount, 1.0, 0, 1000) AS s FROM trips GROUP BY region) x \gset
RESET dpnoise.max_groups_contributed;
SELECT :'first' <> :'other_k' AS fresh, count(*) AS charged FROM dp_my_ledger WHERE id > :seen;
-- A write makes it fresh.
\c - postgres
INSERT INTO trips VALUES (1, 'north', 10, 1);
\c - dp_bound_analyst
SELECT max(id) AS seen FROM dp_my_ledger \gset
SELECT string_agg(format('%s %s %s', region, c, s), ', ' ORDER BY region) AS written
FROM (SELECT region, dp_count(1.0) AS c, dp_sum(amount, 1.0, 0, 1000) AS s FROM trips GROUP BY region) x \gset
SELECT :'first' <> :'written' AS fresh, count(*) AS charged FROM dp_my_ledger WHERE id > :seen;
-- A window of the bounding's functions that is not the gate's (a
-- curator's, over rows it does not order by their choice key) is fresh.
\c - postgres
SELECT dp_budget_grant('postgres', 1e6, 1);
CREATE TEMP TABLE seen_curator AS SELECT max(id) AS seen FROM dpnoise.ledger;
SELECT count(*) > 0 AS answered FROM (SELECT dp_count(1.0) FROM (SELECT region, dp_bound_kept(dp_bound_key(1, person_id), 1)
  OVER (PARTITION BY person_id ORDER BY amount) AS r FROM trips) t WHERE r IS NOT NULL GROUP BY region) x;
SELECT count(*) > 0 AS answered FROM (SELECT dp_count(1.0) FROM (SELECT region, dp_bound_kept(dp_bound_key(1, person_id), 1)
  OVER (PARTITION BY person_id ORDER BY amount) AS r FROM trips) t WHERE r IS NOT NULL GROUP BY region) x;
SELECT count(*) AS charged_twice FROM dpnoise.ledger WHERE id > (SELECT seen FROM seen_curator);
SELECT dp_untrack('trips');
\c - dp_bound_analyst
\c - postgres
SELECT dp_analyst('dp_bound_analyst', false);
SELECT dp_unprotect('extremes'), dp_unprotect('trips'), dp_unprotect('members'), dp_unprotect('trips_neighbour'), dp_unprotect('trips_empty');
