-- An analyst uses the aggregates but cannot reach exact states through the
-- support functions, nor build an aggregate of their own from them.
CREATE ROLE dp_reader;
GRANT CREATE ON SCHEMA public TO dp_reader;
SELECT dp_budget_grant('dp_reader', 100);
SET ROLE dp_reader;
SELECT dp_count(1.0) IS NOT NULL AS can_count FROM t;
SELECT outcome('SELECT dp_count_final(42)');
SELECT outcome($$CREATE AGGREGATE leak(float8) (SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0')$$);
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM dp_reader;
DROP ROLE dp_reader;
-- Every function that draws noise is VOLATILE.
SELECT p.oid::regprocedure AS function, p.provolatile
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'dpnoise'
WHERE p.proname NOT LIKE '%\_step' AND p.proname NOT LIKE '%combine' AND p.proname NOT LIKE '%serialize'
ORDER BY p.oid::regprocedure::text COLLATE "C";
