-- The preamble of every docs test (scripts/docs_test.sh): the tables the
-- examples in README.md and docs/*.md query, and a fresh extension, so
-- each markdown file's test starts from the same state whatever ran before.
-- Small and deterministic: the printed outputs in the docs come from here.
SET client_min_messages = warning;
-- A fresh ledger: budgets, charges and ledger ids start over.
SET dpnoise.drop_ledger = on;
DROP EXTENSION IF EXISTS dpnoise CASCADE;
DROP TABLE IF EXISTS staff, visits, regions, people, points;
-- The docs' roles are made again (the script creates those a file does not
-- create itself), so no budget, analyst mark or cap carries over.
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['alice', 'bob', 'bi_service'] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('DROP OWNED BY %I', r);
            EXECUTE format('DROP ROLE %I', r);
        END IF;
    END LOOP;
END $$;
CREATE EXTENSION dpnoise;

-- One row per person: 1000 people in four regions. Nobody in 'west' is 30
-- or older (docs/analysts.md lists it with a count of noise around 0).
CREATE TABLE staff (
    person_id int PRIMARY KEY,
    region    text NOT NULL,
    salary    float8 NOT NULL,
    age       int NOT NULL,
    flag      float8 NOT NULL,
    hours     float8 NOT NULL
);
INSERT INTO staff
SELECT i, (ARRAY['north', 'south', 'east', 'west'])[1 + i % 4],
       30000 + 1000 * (i % 97),
       CASE WHEN i % 4 = 3 THEN 20 + i % 10 ELSE 20 + i % 45 END,
       i % 2, i % 11
FROM generate_series(1, 1000) i;

-- Several rows per person: 3000 visits of 1000 people over twelve months
-- of 2024, each at one of five sites, with an amount.
CREATE TABLE visits (person_id int NOT NULL, month int NOT NULL, visit_date date NOT NULL,
                     site text NOT NULL, amount float8 NOT NULL);
INSERT INTO visits SELECT 1 + i % 1000, 1 + i % 12, make_date(2024, 1 + i % 12, 1 + i % 28),
                          's' || (i % 5), (i * 37) % 400 / 4.0
FROM generate_series(0, 2999) i;

-- Public: the regions, by country.
CREATE TABLE regions (region text PRIMARY KEY, country text NOT NULL);
INSERT INTO regions VALUES ('north', 'NO'), ('south', 'NO'), ('east', 'NO'), ('west', 'NO'), ('skane', 'SE');

-- docs/refine.md's people, and docs/multivariate.md's points: a few rows,
-- as their examples release one answer per row.
CREATE TABLE people (id int PRIMARY KEY, age int NOT NULL, smoker text NOT NULL);
INSERT INTO people VALUES (1, 34, 'no'), (2, 51, 'yes'), (3, 27, 'no'), (4, 62, 'no'), (5, 45, 'yes');
CREATE TABLE points (x float8, y float8);
INSERT INTO points VALUES (1, 20), (3, 40);

-- The superuser running the examples may spend; the roles get budgets in
-- the examples themselves.
SELECT dp_budget_grant('postgres', 1000, 1);
RESET client_min_messages;
