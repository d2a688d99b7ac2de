-- Demo data for bench/superset/dashboard.sh: run as the superuser in
-- superset_demo, after CREATE EXTENSION dpnoise.
\set ON_ERROR_STOP on

-- A public table: the regions, with a display name. Not protected.
CREATE TABLE regions (region text PRIMARY KEY, name text NOT NULL);
INSERT INTO regions VALUES
    ('north', 'North'), ('south', 'South'), ('east', 'East'),
    ('west', 'West'), ('centre', 'Centre');

-- Several rows per person: 20 000 persons, 1 to 8 visits each (about 90 000
-- rows), over 2024. A person lives in one region; each visit is to one of
-- six sites, and spends an amount of 0 to about 140 (some above the domain).
SELECT setseed(0.42);
CREATE TABLE visits (
    person_id int NOT NULL,
    ts        timestamptz NOT NULL,
    site      text NOT NULL,
    region    text NOT NULL,
    amount    numeric(10,2) NOT NULL
);
WITH persons AS (
    SELECT p AS person_id,
           (ARRAY['north','south','east','west','centre'])[1 + floor(random() * 5)::int] AS region,
           1 + floor(random() * 8)::int AS n
    FROM generate_series(1, 20000) AS p
)
INSERT INTO visits
SELECT person_id,
       timestamptz '2024-01-01 00:00:00+00'
         + random() * (timestamptz '2025-01-01 00:00:00+00' - timestamptz '2024-01-01 00:00:00+00'),
       (ARRAY['shop','blog','docs','forum','help','status'])[1 + floor(power(random(), 1.6) * 6)::int],
       region,
       round((random() * 60 + random() * 50 + random() * 30)::numeric, 2)
FROM persons, generate_series(1, persons.n) AS v;
ANALYZE visits;

-- The privacy policy: visits belongs to person_id, each person in at most
-- 3 groups of a query; a statement of plain aggregates spends 2.0 and
-- counts at most 5 of a person's rows; the public bounds of amount and
-- the public list of regions.
SELECT dp_protect('visits', 'person_id', 3);
SELECT dp_policy('visits', 2.0, 5);
SELECT dp_domain('visits', 'amount', 0, 100);
SELECT dp_domain('visits', 'region', ARRAY['north', 'south', 'east', 'west', 'centre']);

-- The analyst Superset connects as.
CREATE ROLE bi_analyst LOGIN;
GRANT USAGE ON SCHEMA public TO bi_analyst;
GRANT SELECT ON visits, regions TO bi_analyst;
SELECT dp_analyst('bi_analyst');
SELECT dp_budget_grant('bi_analyst', 100, 1e-3);

SELECT count(*) AS rows, count(DISTINCT person_id) AS persons,
       min(ts)::date AS first, max(ts)::date AS last
FROM visits;
SELECT table_name, statement_epsilon, rows_per_person, column_name, lower, upper, vals
FROM dp_policies ORDER BY 1, 4;
