-- Every later file assumes the extension and this helper.
CREATE EXTENSION dpnoise;
-- Runs a statement and reports its SQLSTATE and message, or 'ok'.
CREATE FUNCTION outcome(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE TABLE t AS SELECT i, (i % 10)::float8 AS x, i::bigint AS n FROM generate_series(1, 1000) i;
GRANT SELECT ON t TO PUBLIC;
-- Releases are charged: the superuser running the suite gets a budget no
-- test exhausts (budget.sql tests exhaustion with roles of its own).
SELECT dp_budget_grant('postgres', 1e9, 1);
