-- Canonical group keys (issue 44, class 1): a key that derives from
-- protected rows is shown as a function of its equality class, never as
-- the representative row the plan met first (src/gate/keys.rs,
-- src/output/canonical.rs, docs/analysts.md "Canonical values").
-- Each probe groups person 17's row with about 3 000 others under a key
-- whose two equal forms differ in bytes, one for each truth value of
-- "person 17's salary > 70000", under a plan that meets her row first
-- (an index scan from person 17, hashed grouping), and again sorted.
-- The output must be the same for both truth values.
DO $$ BEGIN
    CREATE ROLE dp_canon_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE canon_staff (person_id int PRIMARY KEY, salary float8, tags int[]);
INSERT INTO canon_staff SELECT i, 30000 + (i * 7919) % 40000, ARRAY[i % 2] FROM generate_series(1, 3000) i;
GRANT SELECT ON canon_staff TO dp_canon_analyst;
SELECT dp_protect('canon_staff', 'person_id');
SELECT dp_analyst('dp_canon_analyst');
SELECT dp_budget_grant('dp_canon_analyst', 1e6, 1);
-- The probes, run as the analyst, each showing its keys as text.
CREATE FUNCTION canon_probes() RETURNS TABLE (probe text, keys text) LANGUAGE plpgsql AS $$
DECLARE
    probes text[][] := ARRAY[
        ['float8 -0 or 0', $q$CASE WHEN salary > 70000 THEN '-0'::float8 ELSE '0'::float8 END$q$],
        ['float8 sign times 0', $q$(CASE WHEN salary > 70000 THEN -1 ELSE 1 END)::float8 * 0$q$],
        ['numeric 3.000 or 3.0', $q$CASE WHEN salary > 70000 THEN 3.000 ELSE 3.0 END$q$],
        ['numeric round to 5 or 0 places', $q$round(0 * salary::numeric, CASE WHEN salary > 70000 THEN 5 ELSE 0 END)$q$],
        ['interval 24 hours or 1 day', $q$CASE WHEN salary > 70000 THEN interval '24 hours' ELSE interval '1 day' END$q$],
        ['interval 1 mon or 30 days', $q$CASE WHEN salary > 70000 THEN interval '1 mon' ELSE interval '30 days' END$q$],
        ['bpchar a-blank or a (bytes)', $q$CASE WHEN salary > 70000 THEN 'a '::bpchar ELSE 'a'::bpchar END$q$]];
    plans text[] := ARRAY['index scan from 17, hashed', 'sorted'];
    i int;
    plan text;
    shown text;
BEGIN
    FOREACH plan IN ARRAY plans LOOP
        IF plan = 'sorted' THEN
            SET LOCAL enable_seqscan = on; SET LOCAL enable_hashagg = off; SET LOCAL enable_sort = on;
        ELSE
            SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off;
            SET LOCAL enable_hashagg = on;
        END IF;
        FOR i IN 1 .. array_length(probes, 1) LOOP
            EXECUTE format('SELECT string_agg(%s, '','') FROM (SELECT %s AS k, dp_count(1e-9) AS c FROM canon_staff WHERE person_id >= 17 GROUP BY 1) s',
                           CASE WHEN probes[i][1] LIKE 'bpchar%' THEN 'octet_length(k)::text' ELSE 'k::text' END, probes[i][2])
                INTO shown;
            probe := plan || ': ' || probes[i][1];
            keys := shown;
            RETURN NEXT;
        END LOOP;
        -- A key from a per-person subquery (its max keeps one of -0 and 0).
        EXECUTE $q$SELECT string_agg(s::text, ',') FROM (SELECT s, dp_count(1e-9) FROM (SELECT person_id,
                   max(CASE WHEN salary > 70000 THEN '-0'::float8 ELSE '0'::float8 END) s FROM canon_staff
                   WHERE person_id >= 17 GROUP BY person_id) p GROUP BY s) q$q$ INTO shown;
        probe := plan || ': per-person max, -0 or 0';
        keys := shown;
        RETURN NEXT;
    END LOOP;
END $$;
GRANT EXECUTE ON FUNCTION canon_probes() TO dp_canon_analyst;
-- Truth value 1: person 17's salary is over 70000.
UPDATE canon_staff SET salary = 80000 WHERE person_id = 17;
\c - dp_canon_analyst
\set VERBOSITY terse
SELECT * FROM canon_probes();
\c - postgres
-- Truth value 2: it is not. The same keys must show.
UPDATE canon_staff SET salary = 40000 WHERE person_id = 17;
\c - dp_canon_analyst
\set VERBOSITY terse
SELECT * FROM canon_probes();

-- Keys of a type whose equal values can differ in bytes and that dpnoise
-- does not normalise are refused (ZB003) before any charge: decided by
-- the type's btree equalimage support, so a type nobody listed is refused.
CREATE TEMP TABLE seen AS SELECT count(*) AS n FROM dp_my_ledger;
SELECT outcome($$SELECT tags, dp_count(1.0) FROM canon_staff GROUP BY 1$$);
SELECT outcome($$SELECT ROW(person_id % 2, 1) AS k, dp_count(1.0) FROM canon_staff GROUP BY 1$$);
SELECT count(*) = (SELECT n FROM seen) AS nothing_charged FROM dp_my_ledger;
-- Keys of types whose equal values are the same bytes are shown as they are.
SELECT person_id % 2 AS k, dp_count(1000) > 1000 AS many FROM canon_staff GROUP BY 1 ORDER BY 1;
\c - postgres
-- The other files list the protected tables: leave none behind.
SELECT dp_unprotect('canon_staff');
DROP TABLE canon_staff;
DROP FUNCTION canon_probes();
