-- Whether a repeat is free, and what it shows, never follows the plan
-- (src/repeat/record.rs, order.rs, atoms.rs): a sorted aggregation under a
-- LIMIT runs to its end and keeps its answer; a stored answer served under
-- a sorted plan comes in that plan's order; count(*), cast to bigint in
-- the Agg node under one plan and above the final Sort under another,
-- keeps one answer for both. As an analyst, under forced plans.
DO $$ BEGIN
    CREATE ROLE dp_rp_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 3000 persons of ages 20 to 59 in three regions; an index on age gives
-- a sorted plan its order (an index scan, backward for DESC).
CREATE TABLE rp_staff (person_id int PRIMARY KEY, age int, region text);
INSERT INTO rp_staff SELECT i, 20 + i % 40, (ARRAY['north', 'south', 'east'])[1 + i % 3]
FROM generate_series(1, 3000) i;
CREATE INDEX ON rp_staff (age);
ANALYZE rp_staff;
GRANT SELECT ON rp_staff TO dp_rp_analyst;
SELECT dp_protect('rp_staff', 'person_id'), dp_policy('rp_staff', 1.0);
SELECT dp_domain('rp_staff', 'region', ARRAY['east', 'north', 'south', 'west']);
SELECT dp_analyst('dp_rp_analyst');
SELECT dp_budget_grant('dp_rp_analyst', 1e6, 1);
\c - dp_rp_analyst
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- Hashed first (a Sort above the Agg reads all its groups), then sorted
-- (the index read backward, the LIMIT stopping after one group): the
-- oldest age both times, one answer, charged once.
SET enable_hashagg = on;
SELECT age, count(*) AS n FROM rp_staff GROUP BY age ORDER BY age DESC LIMIT 1 \gset h_
SET enable_hashagg = off; SET enable_sort = off;
SELECT age, count(*) AS n FROM rp_staff GROUP BY age ORDER BY age DESC LIMIT 1 \gset s_
SELECT :h_age AS hashed, :s_age AS sorted, :h_n = :s_n AS same,
       (SELECT count(*) FROM dp_my_ledger WHERE id > :seen) AS charges;
-- Sorted first (stopped after two groups), then sorted again, then hashed:
-- the youngest ages each time, one answer, charged once.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT age, count(*) AS n FROM rp_staff WHERE region <> 'east' GROUP BY age ORDER BY age LIMIT 1 \gset a_
SELECT age, count(*) AS n FROM rp_staff WHERE region <> 'east' GROUP BY age ORDER BY age LIMIT 1 \gset b_
RESET enable_hashagg; RESET enable_sort;
SELECT age, count(*) AS n FROM rp_staff WHERE region <> 'east' GROUP BY age ORDER BY age LIMIT 1 \gset c_
SELECT :a_age AS first, :b_age AS again, :c_age AS hashed, :a_n = :b_n AND :b_n = :c_n AS same,
       (SELECT count(*) FROM dp_my_ledger WHERE id > :seen) AS charges;
-- Listed keys, in descending order: under a hashed plan the cast of the
-- count is computed above the Sort, under a sorted one in the Agg node.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT region, count(*) AS n FROM rp_staff GROUP BY region ORDER BY region DESC LIMIT 1 \gset lh_
SET enable_hashagg = off;
SELECT region, count(*) AS n FROM rp_staff GROUP BY region ORDER BY region DESC LIMIT 1 \gset ls_
RESET enable_hashagg;
SELECT :'lh_region' AS hashed, :'ls_region' AS sorted, :lh_n = :ls_n AS same,
       (SELECT count(*) FROM dp_my_ledger WHERE id > :seen) AS charges;
-- An expression over the release in the select list (a fresh release:
-- another WHERE), hashed then sorted: one answer, charged once.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT region, count(*) * 2 + 1 AS n, 'x' AS tag FROM rp_staff WHERE age > 30 GROUP BY region ORDER BY region LIMIT 1 \gset h_
SET enable_hashagg = off;
SELECT region, count(*) * 2 + 1 AS n, 'x' AS tag FROM rp_staff WHERE age > 30 GROUP BY region ORDER BY region LIMIT 1 \gset s_
RESET enable_hashagg;
SELECT :'h_region' AS hashed, :'s_region' AS sorted, :h_n = :s_n AS same, :'s_tag' AS tag,
       (SELECT count(*) FROM dp_my_ledger WHERE id > :seen) AS charges;
-- The release of the listed keys above, asked with an expression over
-- it: the same atoms, answered from the store, free.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SET enable_hashagg = off;
SELECT region, count(*) - 1 AS n FROM rp_staff GROUP BY region ORDER BY region DESC LIMIT 1 \gset e_
RESET enable_hashagg;
SELECT :'e_region' AS region, :e_n = :ls_n - 1 AS same,
       (SELECT count(*) FROM dp_my_ledger WHERE id > :seen) AS charges;
-- A condition of an outer level on a group key is not pushed into the
-- level of the releases (an attack found the filtered answer kept, then
-- served to the unfiltered statement): north alone, then every listed
-- region, each charged once.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT region FROM (SELECT region, count(*) AS n FROM rp_staff WHERE age > 40 GROUP BY region) v
WHERE region = 'north';
SELECT region FROM (SELECT region, count(*) AS n FROM rp_staff WHERE age > 40 GROUP BY region) v;
SELECT region FROM (SELECT region, count(*) AS n FROM rp_staff WHERE age > 40 GROUP BY region) v
WHERE region = 'south';
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
-- A release the plan never runs (the inner side of a hash join whose
-- outer side is empty) runs at the end of the statement, which paid for
-- it: its repeat is free as under a nested loop (an attack found it
-- charged again under the hash join alone).
\c - postgres
CREATE TABLE rp_regions (region text);
INSERT INTO rp_regions VALUES ('north'), ('south'), ('east');
GRANT SELECT ON rp_regions TO dp_rp_analyst;
\c - dp_rp_analyst
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SET enable_nestloop = off; SET enable_mergejoin = off;
SELECT v.region FROM rp_regions r JOIN (SELECT region, count(*) AS n FROM rp_staff WHERE age < 30 GROUP BY region) v
ON r.region = v.region WHERE r.region || 'x' = 'nowherex';
SELECT v.region FROM rp_regions r JOIN (SELECT region, count(*) AS n FROM rp_staff WHERE age < 30 GROUP BY region) v
ON r.region = v.region WHERE r.region || 'x' = 'nowherex';
RESET enable_nestloop; RESET enable_mergejoin;
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
-- The list goes (value_lists counts the database's lists).
\c - postgres
SELECT dp_domain('rp_staff', 'region', NULL);
-- A cursor opened before a savepoint keeps its recorded answer when the
-- savepoint is rolled back to: the rest of its rows come after the
-- rollback (a recorder goes with its execution's memory, not with any
-- abort; the rollback once cleared it, and the cursor ended early).
BEGIN;
DECLARE rp_held CURSOR FOR SELECT age, dp_count(1.0) IS NOT NULL AS answered FROM rp_staff GROUP BY age;
MOVE 5 FROM rp_held;
SAVEPOINT before_error;
SELECT 1 / 0;
ROLLBACK TO SAVEPOINT before_error;
DO $$
DECLARE c refcursor := 'rp_held'; n int := 0; a int; b bool;
BEGIN
    LOOP
        FETCH c INTO a, b;
        EXIT WHEN NOT FOUND;
        n := n + 1;
    END LOOP;
    RAISE NOTICE 'rows after the rollback: % (of 40 ages, 5 read before)', n;
END $$;
COMMIT;
