-- Filter values from public lists (issue 48): a BI tool's filter-value
-- query over a categorical column with a list of values (dp_domain with
-- an array) is answered from the list, free, whatever the rows
-- (src/gate/policy/values.rs, docs/bi.md).
DO $$ BEGIN
    CREATE ROLE dp_values_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- 3000 visits of 1000 persons at sites s0 and s1; s2 is a site without
-- visits yet; the rows also hold a site 'secret' the list leaves out.
CREATE TABLE fv_visits (person_id int, site text, region varchar(8), visits int);
INSERT INTO fv_visits SELECT i % 1000, 's' || i % 2, CASE WHEN i % 3 = 0 THEN 'north' ELSE 'south' END, i % 7
FROM generate_series(1, 3000) i;
INSERT INTO fv_visits VALUES (7, 'secret', 'north', 1);
GRANT SELECT ON fv_visits TO dp_values_analyst;
SELECT dp_protect('fv_visits', 'person_id', 2);
SELECT dp_analyst('dp_values_analyst');
SELECT dp_budget_grant('dp_values_analyst', 1000, 1e-3);

-- The DBA's mistakes: each a documented SQLSTATE, nothing written.
SELECT outcome($$SELECT dp_domain('fv_visits', 'nothing', ARRAY['a'])$$);
SELECT outcome($$SELECT dp_domain('fv_visits', 'visits', ARRAY['1', 'two'])$$);
SELECT outcome($$SELECT dp_domain('fv_visits', 'site', ARRAY[]::text[])$$);
SELECT outcome($$SELECT dp_domain('fv_visits', 'site', ARRAY['a', NULL])$$);
SELECT outcome($$SELECT dp_domain('fv_visits', 'region', ARRAY[['north'], ['south']])$$);
SELECT outcome($$SELECT dp_domain('pg_class', 'relname', ARRAY['a'])$$);
SELECT count(*) AS lists FROM dpnoise.value_lists;
-- The lists: given as text, each value of the column's type (duplicates
-- dropped); a list read from a public table is one query away.
SELECT dp_domain('fv_visits', 'site', ARRAY['s2', 's0', 's1', 's0']);
SELECT dp_domain('fv_visits', 'region', (SELECT array_agg(r) FROM (VALUES ('north'), ('south'), ('east')) v(r)));
SELECT dp_domain('fv_visits', 'visits', ARRAY['0', '1', '2', '3', '4', '5', '6']);
SELECT table_name, column_name, vals FROM dp_policies WHERE table_name = 'fv_visits'::regclass ORDER BY 2;
-- Values equal in the column's type are kept once, in their least text
-- form ('3.0' and '3.00' are one price): a DISTINCT over the list has no
-- equal values to choose between, whatever its plan.
CREATE TABLE fv_prices (person_id int PRIMARY KEY, price numeric);
INSERT INTO fv_prices SELECT i, CASE WHEN i <= 100 THEN 3.00 WHEN i <= 200 THEN 4.0 ELSE 0 END FROM generate_series(1, 300) i;
GRANT SELECT ON fv_prices TO dp_values_analyst;
SELECT dp_protect('fv_prices', 'person_id'), dp_domain('fv_prices', 'price', ARRAY['3.00', '4', '3.0', '-0', '0']);
SELECT vals FROM dp_policies WHERE table_name = 'fv_prices'::regclass;

\c - dp_values_analyst
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
-- Superset's filter box, as it sends it, and SELECT DISTINCT: the list,
-- in the order asked, s2 without visits included, 'secret' not shown.
SELECT site AS site FROM public.fv_visits GROUP BY site ORDER BY site ASC LIMIT 1000;
SELECT DISTINCT region FROM fv_visits ORDER BY 1 DESC;
SELECT DISTINCT visits + 1 AS next FROM fv_visits ORDER BY next LIMIT 3;
-- Through a wrapper, as a virtual dataset sends it.
SELECT site FROM (SELECT * FROM fv_visits) AS virtual_table GROUP BY site ORDER BY site;
-- Free: nothing released, nothing charged.
SELECT count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
-- Not from the list: a WHERE (which rows have the value), two columns
-- (which pairs occur), a count beside it; each read from the rows and
-- refused or released as before.
SELECT outcome($$SELECT DISTINCT site FROM fv_visits WHERE region = 'north'$$);
SELECT outcome($$SELECT site, region FROM fv_visits GROUP BY site, region$$);
SELECT outcome($$SELECT site FROM fv_visits$$);
SELECT count(*) AS charged FROM dp_my_ledger WHERE id > :seen;

-- Group keys from the lists: a GROUP BY of listed columns (or of a
-- one-argument function of one, as lower(site)) shows every listed key (s2
-- without visits, east without rows in these sites too; 'secret' never),
-- each with its noisy answer, and needs no partition selection: no
-- selection δ (1e-7 is the run time's).
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT site, count(*) > 1000 AS many FROM fv_visits GROUP BY site ORDER BY site;
SELECT site, region, count(*) > 200 AS some FROM fv_visits GROUP BY site, region ORDER BY 1, 2;
SELECT epsilon, delta FROM dp_my_ledger WHERE id > :seen ORDER BY id;
-- A key's value is shown in its normal form, from the rows or the list
-- alike: 3.00 in the rows is the list's 3.
SELECT price, count(*) > 50 AS many FROM fv_prices GROUP BY price ORDER BY price;
SELECT lower(site) AS site, count(*) > 1000 AS many FROM fv_visits GROUP BY 1 ORDER BY 1;
-- A key that is not a function of the lists (a CASE, a column without
-- one) is read from the rows as before: partition selection, charged 1.6
-- and its δ.
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT CASE WHEN site = 's0' THEN 'a' ELSE 'b' END AS half, count(*) > 1000 AS many FROM fv_visits GROUP BY 1 ORDER BY 1;
SELECT epsilon, delta FROM dp_my_ledger WHERE id > :seen ORDER BY id;

\c - postgres
-- A list removed: the filter query reads the rows again (partition
-- selection, charged).
SELECT dp_domain('fv_visits', 'site', NULL);
SELECT count(*) AS lists FROM dpnoise.value_lists WHERE relid = 'fv_visits'::regclass;
-- On a tracked table a listed GROUP BY asked again is answered again,
-- free (the test that a group's key is listed is part of its identity).
SELECT dp_track('fv_visits');
\c - dp_values_analyst
SELECT coalesce(max(id), 0) AS seen FROM dp_my_ledger \gset
SELECT string_agg(region || '=' || n, ',' ORDER BY region) AS first FROM (SELECT region, count(*) AS n FROM fv_visits GROUP BY region) g \gset
SELECT string_agg(region || '=' || n, ',' ORDER BY region) AS second FROM (SELECT region, count(*) AS n FROM fv_visits GROUP BY region) g \gset
SELECT :'first' = :'second' AS same, count(*) AS charges FROM dp_my_ledger WHERE id > :seen;
