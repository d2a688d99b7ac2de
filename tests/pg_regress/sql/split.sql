-- The split of one epsilon among a statement's aggregates (issue 45,
-- item 3): dp_query_split, from the aggregates, their bounds and the
-- tables' settings only.
DO $$ BEGIN
    CREATE ROLE dp_split_analyst LOGIN;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE split_visits (person_id int, amount float8);
SELECT dp_protect('split_visits', 'person_id', 3);
SELECT dp_analyst('dp_split_analyst');
\c - dp_split_analyst
\set VERBOSITY terse
-- An analyst asks before spending: nothing is charged.
SELECT aggregate, epsilon_share, round(std_dev::numeric, 3) AS std_dev, units
FROM dp_query_split(1.0, ARRAY['count', 'sum', 'avg', 'median'], ARRAY['split_visits'],
                    ARRAY[NULL, 0, 0, 0]::float8[], ARRAY[NULL, 100, 100, 100]::float8[]);
-- The shares, as written, add up to at most epsilon; the split has less
-- scaled error than the even one (the sum of w / epsilon^2 it minimises).
WITH s AS (SELECT * FROM dp_query_split(0.7, ARRAY['count', 'sum', 'avg', 'var', 'max'], ARRAY['split_visits'],
                                        ARRAY[NULL, -5, 0, 0, 0]::float8[], ARRAY[NULL, 50, 10, 10, 1000]::float8[]))
SELECT sum(epsilon_share) <= 0.7 AS within, sum(epsilon_share) > 0.7 - 1e-9 AS all_of_it,
       sum(weight / epsilon_share::float8 ^ 2) < sum(weight / (0.7 / 5) ^ 2) AS better_than_even
FROM s;
-- A sum's share does not depend on its bounds (its error scales with
-- them); two counts split evenly.
SELECT aggregate, epsilon_share FROM dp_query_split(1.0, ARRAY['sum', 'sum'], ARRAY['split_visits'],
                                                    ARRAY[0, 0]::float8[], ARRAY[1, 1000]::float8[]);
SELECT aggregate, epsilon_share FROM dp_query_split(0.3, ARRAY['count', 'count', 'count'], ARRAY['split_visits']);
SELECT count(*) AS charges FROM dp_my_ledger;
-- Refused (22023).
SELECT outcome($$SELECT * FROM dp_query_split(0, ARRAY['count'], ARRAY['split_visits'])$$);
SELECT outcome($$SELECT * FROM dp_query_split(1, ARRAY['sum'], ARRAY['split_visits'])$$);
SELECT outcome($$SELECT * FROM dp_query_split(1, ARRAY['mode'], ARRAY['split_visits'])$$);
SELECT outcome($$SELECT * FROM dp_query_split(1, '{}', ARRAY['split_visits'])$$);
\c - postgres
SELECT dp_analyst('dp_split_analyst', false);
SELECT dp_unprotect('split_visits');
DROP TABLE split_visits;
DROP ROLE dp_split_analyst;
