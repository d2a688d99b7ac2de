#!/usr/bin/python3
"""Thirty questions an analyst of a visits table asks (issue 36), in dpnoise's
SQL and then in plain SQL under the tables' privacy policies (issue 48).

Usage: tests/e2e/questions.py [PORT]   (default 54332; run as root)

Starts a throwaway server as tests/e2e/analyst.py does, with a visits table
(several rows per person, protected, each person in at most 3 groups), a
persons table (one row per person, protected) and a public sites table.
Then, as an analyst, each question either
- answers within its noise: every value shown is compared with the true
  answer the superuser computes, within a tolerance from
  dp_aggregate_accuracy (averages) or a generous multiple of the noise
  scale (counts, sums: 12 x k x bound / epsilon; spread and medians: a
  share of the range), and charges the ledger; or
- is refused with ZB003 before any charge (the ledger does not move).
Prints which questions are refused and why; fails if any answer is out of
its tolerance, any refusal is not ZB003 or charged, or any of the 30 is
refused (the share of two totals, a nested loop over two releases, is held
and answered since the plan check admits rescans of uncorrelated releases). Then each question's true-answer SQL (plain count, sum,
avg, stddev, percentile_cont, max, count(DISTINCT person_id)) is asked as the
analyst under the tables' policies: answered within the same tolerance,
or refused with ZB003 before any charge; at least 29 answered (a person's
values are bounded by the policy; a subquery grouped by the person and a
site stays refused, with a hint whose form, run as written, answers it).

The data keep each person's visits in one site, one amount bucket and at
most 2 months, so bounding to k = 3 groups drops nobody and the true
answers are the plain SQL ones. Under bounding dp_avg is the mean of each
person's average: so is its true answer here.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyst import Ledger, Server, check, psycopg, RESULTS  # noqa: E402

ANALYST = "e2e_questions"
K = 3  # max_groups_contributed of visits
EPS = 1.0

SETUP = f"""
CREATE EXTENSION dpnoise;
CREATE ROLE {ANALYST} LOGIN;
CREATE TABLE sites (site text PRIMARY KEY, region text);
INSERT INTO sites SELECT 's' || i, (ARRAY['north', 'south', 'east', 'west'])[1 + i % 4] FROM generate_series(0, 19) i;
CREATE TABLE persons (person_id int PRIMARY KEY, age int, home text);
INSERT INTO persons SELECT p, 18 + (p * 37) % 62, (ARRAY['north', 'south', 'east', 'west'])[1 + (p * 7) % 4]
FROM generate_series(0, 2999) p;
-- Person p: 1 to 6 visits, a week apart, at one site, amounts in one band of 25.
CREATE TABLE visits (person_id int, site text, visit_date date, amount float8);
INSERT INTO visits
SELECT p, 's' || ((p * 13) % 20), date '2024-01-01' + (p * 11) % 320 + 7 * j,
       25 * ((p * 5) % 6) + ((p * 17 + j * 7) % 25)
FROM generate_series(0, 2999) p, LATERAL generate_series(0, (p * 31) % 6) j;
GRANT SELECT ON sites TO {ANALYST};
SELECT dp_protect('visits', 'person_id', {K}), dp_protect('persons', 'person_id');
SELECT dp_analyst('{ANALYST}');
SELECT dp_budget_grant('{ANALYST}', 1e9, 1);
"""

POLICY = """
SELECT dp_policy('visits', 1.0, 6), dp_policy('persons', 1.0);
SELECT dp_domain('visits', 'amount', 0, 150), dp_domain('persons', 'age', 18, 80);
"""

# Each question: (title, analyst SQL, true-answer SQL, tolerance).
# Rows are (key..., value) or (value,); tolerance is a number, or
# ("avg", lower, upper, epsilon share, persons SQL) for dp_aggregate_accuracy.
SUM6 = 12 * K * 6 / EPS  # dp_sum(1, ε, 0, 6) over visits, per group
COUNTK = 12 * K / EPS  # dp_count over visits, per group
COUNT1 = 12 / EPS  # dp_count over one row per person
PER_PERSON = "(SELECT person_id, count(*) AS n, sum(amount) AS spent, min(visit_date) AS first FROM visits GROUP BY person_id) p"

QUESTIONS = [
    ("persons who visited", "SELECT dp_count(1.0) FROM visits",
     "SELECT count(DISTINCT person_id) FROM visits", COUNTK / K),
    ("visits per site", "SELECT site, dp_sum(1, 1.0, 0, 6) FROM visits GROUP BY site",
     "SELECT site, count(*) FROM visits GROUP BY site", SUM6),
    ("persons per site", "SELECT site, dp_count(1.0) FROM visits GROUP BY site",
     "SELECT site, count(DISTINCT person_id) FROM visits GROUP BY site", COUNTK),
    ("total spend", "SELECT dp_sum(amount, 1.0, 0, 900) FROM visits",
     "SELECT sum(amount) FROM visits", 12 * 900 / EPS),
    ("spend per site", "SELECT site, dp_sum(amount, 1.0, 0, 900) FROM visits GROUP BY site",
     "SELECT site, sum(amount) FROM visits GROUP BY site", 12 * K * 900 / EPS),
    ("mean visit amount (per person)", "SELECT dp_avg(amount, 1.0, 0, 150) FROM visits",
     "SELECT avg(a) FROM (SELECT avg(amount) a FROM visits GROUP BY person_id) s",
     ("avg", 0, 150, EPS, "SELECT count(DISTINCT person_id) FROM visits")),
    ("visits per month", "SELECT date_trunc('month', visit_date) AS m, dp_sum(1, 1.0, 0, 6) FROM visits GROUP BY 1",
     "SELECT date_trunc('month', visit_date), count(*) FROM visits GROUP BY 1", SUM6),
    ("persons per month", "SELECT date_trunc('month', visit_date) AS m, dp_count(1.0) FROM visits GROUP BY 1",
     "SELECT date_trunc('month', visit_date), count(DISTINCT person_id) FROM visits GROUP BY 1", COUNTK),
    ("persons per region (join with sites)",
     "SELECT s.region, dp_count(1.0) FROM visits v JOIN sites s ON s.site = v.site GROUP BY s.region",
     "SELECT s.region, count(DISTINCT person_id) FROM visits v JOIN sites s ON s.site = v.site GROUP BY s.region", COUNTK),
    ("spend per region", "SELECT s.region, dp_sum(v.amount, 1.0, 0, 900) FROM visits v JOIN sites s USING (site) GROUP BY 1",
     "SELECT s.region, sum(v.amount) FROM visits v JOIN sites s USING (site) GROUP BY 1", 12 * K * 900 / EPS),
    ("amount histogram (width_bucket)", "SELECT width_bucket(amount, 0, 150, 6) AS b, dp_sum(1, 1.0, 0, 6) FROM visits GROUP BY 1",
     "SELECT width_bucket(amount, 0, 150, 6), count(*) FROM visits GROUP BY 1", SUM6),
    ("amount histogram (floor)", "SELECT floor(amount / 25) * 25 AS b, dp_count(1.0) FROM visits GROUP BY 1",
     "SELECT floor(amount / 25) * 25, count(DISTINCT person_id) FROM visits GROUP BY 1", COUNTK),
    ("top-10 sites by visits", "SELECT site, dp_sum(1, 1.0, 0, 6) AS n FROM visits GROUP BY site ORDER BY n DESC LIMIT 10",
     "SELECT site, count(*) FROM visits GROUP BY site", SUM6),
    ("share of visits at s1",
     "SELECT a.n / t.n FROM (SELECT dp_sum(1, 1.0, 0, 6) AS n FROM visits WHERE site = 's1') a, "
     "(SELECT dp_sum(1, 1.0, 0, 6) AS n FROM visits) t",
     "SELECT (count(*) FILTER (WHERE site = 's1'))::float8 / count(*) FROM visits", 0.02),
    ("visits on weekends", "SELECT dp_sum(1, 1.0, 0, 6) FROM visits WHERE extract(isodow FROM visit_date) >= 6",
     "SELECT count(*) FROM visits WHERE extract(isodow FROM visit_date) >= 6", SUM6 / K),
    ("sites starting with s1", "SELECT dp_count(1.0) FROM visits WHERE site LIKE 's1%'",
     "SELECT count(DISTINCT person_id) FROM visits WHERE site LIKE 's1%'", COUNTK / K),
    ("mean age", "SELECT dp_avg(age, 1.0, 18, 80) FROM persons", "SELECT avg(age) FROM persons",
     ("avg", 18, 80, EPS, "SELECT count(*) FROM persons")),
    ("spread of age", "SELECT dp_stddev(age, 1.0, 18, 80) FROM persons", "SELECT stddev_pop(age) FROM persons", 0.1 * 62),
    ("median age", "SELECT dp_median(age, 1.0, 18, 80) FROM persons",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY age) FROM persons", 0.1 * 62),
    ("persons per home region", "SELECT home, dp_count(1.0) FROM persons GROUP BY home",
     "SELECT home, count(*) FROM persons GROUP BY home", COUNT1),
    ("visits by persons aged 30 to 39",
     "SELECT dp_sum(1, 1.0, 0, 6) FROM visits v JOIN persons p ON p.person_id = v.person_id WHERE p.age BETWEEN 30 AND 39",
     "SELECT count(*) FROM visits v JOIN persons p ON p.person_id = v.person_id WHERE p.age BETWEEN 30 AND 39", SUM6 / K),
    ("spend per age decade",
     "SELECT floor(p.age / 10) * 10 AS decade, dp_sum(v.amount, 1.0, 0, 900) FROM visits v JOIN persons p USING (person_id) GROUP BY 1",
     "SELECT floor(p.age / 10) * 10, sum(v.amount) FROM visits v JOIN persons p USING (person_id) GROUP BY 1", 12 * K * 900 / EPS),
    ("mean site visits per person", "SELECT site, dp_avg(amount, 1.0, 0, 150) FROM visits GROUP BY site",
     "SELECT site, avg(a) FROM (SELECT site, avg(amount) a FROM visits GROUP BY person_id, site) s GROUP BY site",
     ("avg", 0, 150, EPS / K, "SELECT count(DISTINCT person_id) FROM visits WHERE site = %s")),
    ("visits per person (per-person subquery)", f"SELECT dp_avg(n, 1.0, 0, 10) FROM {PER_PERSON}",
     f"SELECT avg(n) FROM {PER_PERSON}", ("avg", 0, 10, EPS, "SELECT count(DISTINCT person_id) FROM visits")),
    ("share of persons with more than 3 visits",
     f"SELECT dp_sum(CASE WHEN n > 3 THEN 1 ELSE 0 END, 1.0, 0, 1) / dp_count(1.0) FROM {PER_PERSON}",
     f"SELECT avg(CASE WHEN n > 3 THEN 1.0 ELSE 0 END) FROM {PER_PERSON}", 0.03),
    ("spend per person", f"SELECT dp_avg(spent, 1.0, 0, 900) FROM {PER_PERSON}",
     f"SELECT avg(spent) FROM {PER_PERSON}", ("avg", 0, 900, EPS, "SELECT count(DISTINCT person_id) FROM visits")),
    ("persons whose first visit was in March",
     f"SELECT dp_count(1.0) FROM {PER_PERSON} WHERE extract(month FROM first) = 3",
     f"SELECT count(*) FROM {PER_PERSON} WHERE extract(month FROM first) = 3", COUNT1),
    ("persons by number of visits", f"SELECT n, dp_count(1.0) FROM {PER_PERSON} GROUP BY n",
     f"SELECT n, count(*) FROM {PER_PERSON} GROUP BY n", COUNT1),
    ("median spend per person", f"SELECT dp_median(spent, 1.0, 0, 900) FROM {PER_PERSON}",
     f"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY spent) FROM {PER_PERSON}", 0.1 * 900),
    ("largest visit amount", "SELECT dp_max(amount, 1.0, 0, 150) FROM visits",
     "SELECT max(amount) FROM visits", 0.1 * 150),
]


def tolerance(su, spec, key):
    if not isinstance(spec, tuple):
        return spec
    _, lower, upper, epsilon, persons_sql = spec
    n = su.execute(persons_sql, (key,) if "%s" in persons_sql else None).fetchone()[0]
    half = su.execute("SELECT ci_half_width FROM dp_aggregate_accuracy('avg', %s, %s, %s, %s)",
                      (epsilon, lower, upper, n)).fetchone()[0]
    return 3 * half


def ask(su, an, ledger, title, sql, truth_sql, spec, repeats=False):
    before = ledger.last()
    try:
        rows = an.execute(sql).fetchall()
    except psycopg.Error as e:
        message = e.diag.message_primary or str(e)
        moved = ledger.last() != before
        ok = e.sqlstate == "ZB003" and not moved
        check(f"refused: {title}", ok, f"{e.sqlstate} {message}{' (CHARGED)' if moved else ''}")
        return "refused", message, e.diag.message_hint or ""
    truth = {tuple(r[:-1]): float(r[-1]) for r in su.execute(truth_sql).fetchall()}
    worst, bad = 0.0, []
    for row in rows:
        key, value = tuple(row[:-1]), float(row[-1])
        if key not in truth:
            bad.append(f"{key} shown but not in the data")
            continue
        tol = tolerance(su, spec, key[0] if key else None)
        worst = max(worst, abs(value - truth[key]) / tol)
        if abs(value - truth[key]) > tol:
            bad.append(f"{key}: {value:.4g} vs {truth[key]:.4g} (tolerance {tol:.3g})")
    # Plain SQL over tracked tables: a question asked before is a free repeat.
    charged = ledger.last() != before or repeats
    check(f"answered: {title}", rows and not bad and charged,
          f"{len(rows)} rows, worst error {worst:.2f} of its tolerance" + ("; " + "; ".join(bad[:3]) if bad else "")
          + ("" if charged else "; NOT CHARGED"))
    return "answered", None, None


def hinted_form(hint):
    """The statement a refusal's hint ends with ("...: SELECT ..."), if any."""
    form = hint.rsplit(": ", 1)[-1].strip() if hint else ""
    return form if form.upper().startswith("SELECT ") else None


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 54332
    server = Server(port)
    t0 = time.time()
    outcomes, plain = [], []
    try:
        server.start()
        with server.connect("postgres") as su:
            su.execute(SETUP)
            with server.connect(ANALYST) as an:
                ledger = Ledger(an)
                for i, (title, sql, truth_sql, spec) in enumerate(QUESTIONS, 1):
                    try:
                        outcomes.append((i, title) + ask(su, an, ledger, title, sql, truth_sql, spec))
                    except Exception as e:  # a question that breaks is a failed check
                        check(f"question {i} ran", False, f"{type(e).__name__}: {e}")
                # The same questions in plain SQL, as a BI tool writes them (the
                # true answer's SQL, asked as the analyst) under the tables'
                # policies (docs/bi.md): epsilon 1.0 a statement, at most 6 of a
                # person's visits, the amounts' and ages' domains.
                su.execute(POLICY)
                for i, (title, _, truth_sql, spec) in enumerate(QUESTIONS, 1):
                    try:
                        outcome = ask(su, an, ledger, f"plain {title}", truth_sql, truth_sql, spec, True)
                        plain.append((i, title) + outcome)
                        # Issue 49: a refusal's hint gives the form that
                        # answers the question, applied as stated.
                        if outcome[0] == "refused":
                            form = hinted_form(outcome[2])
                            check(f"plain {title}: the hint gives a form", form is not None, outcome[2])
                            if form:
                                print(f"   the hint's form: {form}")
                                answered = ask(su, an, ledger, f"plain {title}, in the hint's form", form,
                                               truth_sql, spec, True)
                                check(f"plain {title}: the hint's form answers it", answered[0] == "answered")
                    except Exception as e:
                        check(f"plain question {i} ran", False, f"{type(e).__name__}: {e}")
    except Exception as e:
        check("server and set-up", False, f"{type(e).__name__}: {e}")
    finally:
        server.stop()
    answered = [o for o in outcomes if o[2] == "answered"]
    for i, title, _, why, _ in (o for o in outcomes if o[2] == "refused"):
        print(f"refused {i:2d}. {title}: {why}")
    check(f"{len(QUESTIONS)} questions", len(QUESTIONS) == 30)
    check("all 30 answered", len(answered) == 30, f"{len(answered)} answered")
    plain_answered = [o for o in plain if o[2] == "answered"]
    for i, title, _, why, _ in (o for o in plain if o[2] == "refused"):
        print(f"refused in plain SQL {i:2d}. {title}: {why}")
    check("at least 29 of 30 answered in plain SQL", len(plain_answered) >= 29, f"{len(plain_answered)} answered")
    failed = [r for r in RESULTS if not r[0]]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks passed in {time.time() - t0:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
