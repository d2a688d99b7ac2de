#!/usr/bin/python3
"""The timing residual: how much run time one protected row can add to an
analyst's statement, with and without dpnoise.max_public_fanout.

Usage: bench/timing.py [PORT] [RUNS]   (default 54337, 300; run as root)

Starts a throwaway server (tests/e2e/analyst.py's), protects a table of
2000 persons, and as an analyst times `SELECT dp_count(1e-9) FROM staff
CROSS JOIN <public rows> WHERE person_id = 17 AND <condition>` with the
condition true (person 17 passes: their row meets every public row) and
false (no row passes), alternated, for public sides of 1 row, 1000 rows
(the default bound) and 300 000 rows (the bound raised for this bench).
Prints the mean and median time of each, and the difference: the signal
an attacker would time.

Then the repeats section (alone: bench/timing.py --repeats [PORT] [SCORE_RUNS],
default 54337 and 2000): in a database of its own, over tables tracked with
dp_track, an analyst asks each of two probes about person 17 with the
condition true and false, once fresh (charged), then repeats them, served
from the release store:

- cross join: SELECT dp_count(1e-9) FROM staff s CROSS JOIN
  generate_series(1, 550) g WHERE s.person_id = 17 AND s.salary > C;
- long key: person 17's t is 5 MB, SELECT s.t, g, dp_count(1e-9) FROM
  longt s, generate_series(1, 200) g WHERE s.person_id = 17 AND
  s.salary > C GROUP BY s.t, g (a condition on t itself is refused, ZB003:
  the forms tried are printed).

The true and false repeats alternate (in random order within each round);
an attacker's classifier, the best single threshold on the time in either
direction, is fitted on FIT_RUNS (300) of each and scored on SCORE_RUNS
further ones of each. Prints per probe the medians, the threshold, the
accuracy with three standard errors (PASS at most 55 %), whether every
repeat was free (the analyst's ledger did not grow) and identical to the
first answer, and what a repeat costs an honest analyst against a fresh
release. For comparison, the same classifier on untracked copies, where
each run executes (and is charged): the timing a repeat had before the store.

Then the fresh section (alone: bench/timing.py --fresh [PORT] [SCORE_RUNS],
default 54337 and 2000): the run time of a fresh statement is a release
of its own (src/output/timing.rs). In a database of its own, over tables
that are not tracked (every run is fresh and charged), one analyst at the
default settings (held) and one with dpnoise.timing_epsilon = 0 set by the
superuser (not held) ask:

- the cross-join probe above, condition true and false;
- the long-key probe above, which the plan check refuses (ZB003, nothing
  charged: checked), and the largest form of it with fewer public rows
  that it admits (found by bisection on the series' length).

The true and false runs alternate in random order within each round; the
held runs go through FRESH_THREADS connections at once (the delay is a
sleep: they overlap), each taking rounds from a shared counter, the
first FIT_RUNS rounds to fit the attacker's threshold and the next
SCORE_RUNS to score it; the not-held runs go through one connection.
Prints dpnoise.timing_epsilon (SHOW), the bound on a single run's
classification, e^eps/(1 + e^eps) + timing_delta, the measured accuracy
with three standard errors (PASS when the accuracy is at most the bound
plus three standard errors), the not-held attacker's accuracy, the
latency an honest analyst pays (median held against not held), and the
charge of each statement (its ledger row; every run checked charged).
"""
import gc
import math
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from analyst import Server, psycopg  # noqa: E402

SETUP = """
CREATE EXTENSION dpnoise;
CREATE ROLE timing_analyst LOGIN;
CREATE TABLE staff (person_id int PRIMARY KEY, salary float8);
INSERT INTO staff SELECT i, 1000 * i FROM generate_series(1, 200000) i;
-- Public, a key each row holds once: a hash join looks it up by key.
CREATE TABLE labels (person_id int, label text);
INSERT INTO labels SELECT i, 'l' || i FROM generate_series(1, 50000) i;
GRANT SELECT ON labels TO timing_analyst;
ANALYZE staff, labels;
SELECT dp_protect('staff', 'person_id');
SELECT dp_analyst('timing_analyst');
SELECT dp_budget_grant('timing_analyst', 1e9, 1);
ALTER ROLE timing_analyst SET dpnoise.max_public_fanout = 1000000;
"""


def alternate(an, true_sql, false_sql, rounds):
    """Runs the two statements alternately (after a warm-up): their times in ms."""
    times = ([], [])
    for i in range(rounds + 3):
        for sql, into in zip((true_sql, false_sql), times):
            t = time.perf_counter()
            an.execute(sql).fetchall()
            if i >= 3:
                into.append((time.perf_counter() - t) * 1000)
    return times


def line(label, times, per):
    t_true, t_false = times
    diff = statistics.fmean(t_true) - statistics.fmean(t_false)
    print(f"{label:>12} | {statistics.fmean(t_true):>10.3f} / {statistics.median(t_true):>10.3f} | "
          f"{statistics.fmean(t_false):>10.3f} / {statistics.median(t_false):>10.3f} | "
          f"{diff:>15.3f} ms | {per(diff)}")


# ---------------------------------------------------------------- repeats

REPEATS_DB = "timing_repeats"
REPEATER = "timing_repeater"  # no settings of its own: dpnoise.max_public_fanout at its default, 1000
FIT_RUNS = 300  # per truth value, to fit the attacker's threshold
SCORE_RUNS = 2000  # per truth value, to score it
WARM_UP = 3  # rounds, timed neither for the fit nor the score (checked all the same)
MAX_ACCURACY = 0.55

REPEATS_SETUP = f"""
CREATE EXTENSION dpnoise;
CREATE TABLE staff (person_id int PRIMARY KEY, salary float8);
INSERT INTO staff SELECT i, 1000 * i FROM generate_series(1, 200000) i;
-- Everyone's t is short but person 17's: 5 MB of hex digits (incompressible
-- enough to be stored out of line as they are).
CREATE TABLE longt (person_id int PRIMARY KEY, salary float8, t text);
INSERT INTO longt SELECT i, 1000 * i, 'short ' || i FROM generate_series(1, 2000) i;
UPDATE longt SET t = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 163840) i) WHERE person_id = 17;
-- The same, not tracked: every run executes, as a repeat did before the release store.
CREATE TABLE staff_untracked (LIKE staff INCLUDING ALL);
INSERT INTO staff_untracked SELECT * FROM staff;
CREATE TABLE longt_untracked (LIKE longt INCLUDING ALL);
INSERT INTO longt_untracked SELECT * FROM longt;
ANALYZE staff, longt, staff_untracked, longt_untracked;
SELECT dp_protect('staff', 'person_id'), dp_protect('longt', 'person_id'),
       dp_protect('staff_untracked', 'person_id'), dp_protect('longt_untracked', 'person_id');
SELECT dp_track('staff'), dp_track('longt');
SELECT dp_analyst('{REPEATER}');
SELECT dp_budget_grant('{REPEATER}', 1e9, 1);
"""

# Person 17's salary is 17 000: the condition is true with C = 10000, false
# with C = 90000 (constants of one length: statements of one length).
TRUE_C, FALSE_C = 10000, 90000
# (name, statement over {tbl} with condition constant {c}, tracked table, untracked copy,
#  fresh runs per truth value for the latency, untracked runs per truth value (fit, score))
PROBES = [
    ("cross join",
     "SELECT dp_count({eps}) FROM {tbl} s CROSS JOIN generate_series(1, 550) g "
     "WHERE s.person_id = 17 AND s.salary > {c}",
     "staff", "staff_untracked", 30, (300, 300)),
    ("long key",
     "SELECT s.t, g, dp_count({eps}) FROM {tbl} s, generate_series(1, 200) g "
     "WHERE s.person_id = 17 AND s.salary > {c} GROUP BY s.t, g",
     "longt", "longt_untracked", 5, (10, 20)),
]
# Forms of the long-key probe with a condition on the long value itself.
LONG_KEY_TRIED = [
    "SELECT s.t, g, dp_count(1e-9) FROM longt s, generate_series(1, 200) g "
    "WHERE s.person_id = 17 AND length(s.t) > 1000000 GROUP BY s.t, g",
    "SELECT s.t, g, dp_count(1e-9) FROM longt s, generate_series(1, 200) g "
    "WHERE s.person_id = 17 AND s.t LIKE 'c4ca%' GROUP BY s.t, g",
    "SELECT g, dp_count(1e-9) FROM generate_series(1, 200) g LEFT JOIN longt s "
    "ON s.person_id = 17 AND length(s.t) > 1000000 GROUP BY g",
    "SELECT s.t, g, dp_count(1e-9) FROM longt s, generate_series(1, 1000) g "
    "WHERE s.person_id = 17 AND s.salary > 10000 GROUP BY s.t, g",
    "SELECT s.t, g, dp_count(1e-9) FROM longt s, generate_series(1, 200) g "
    "WHERE s.person_id = 17 AND s.t IS NOT NULL GROUP BY s.t, g",
]


def spent(an):
    """The analyst's ledger: epsilon spent (exact) and the number of rows."""
    return an.execute("SELECT coalesce(sum(epsilon * releases), 0), count(*) FROM dp_my_ledger").fetchone()


def timed(an, sql):
    t = time.perf_counter()
    rows = an.execute(sql).fetchall()
    return (time.perf_counter() - t) * 1000, rows


def alternated(an, sqls, rounds, answers=None):
    """Runs the statements of sqls ({truth: sql}) once a round each, in a
    random order within the round: their times in ms, by truth value, and
    the runs whose answer differed from answers[truth] (when given)."""
    times = {k: [] for k in sqls}
    differing = []
    order = list(sqls)
    rng = random.Random(rounds)
    gc.disable()
    try:
        for _ in range(rounds):
            rng.shuffle(order)
            for k in order:
                ms, rows = timed(an, sqls[k])
                times[k].append(ms)
                if answers is not None and rows != answers[k]:
                    differing.append((k, rows, answers[k]))
    finally:
        gc.enable()
    return times, differing


def fit_threshold(t_true, t_false):
    """The best single threshold on the time, in either direction:
    (threshold, 'true when above' or not, accuracy on these runs)."""
    runs = sorted([(x, True) for x in t_true] + [(x, False) for x in t_false])
    n_true, n_false = len(t_true), len(t_false)
    # Guessing "true" above the cut: right for the true runs above it and the false ones at or below it.
    best = (runs[0][0] - 1, True, n_true / (n_true + n_false))
    above_true, below_false = n_true, 0
    for i, (x, is_true) in enumerate(runs):
        if is_true:
            above_true -= 1
        else:
            below_false += 1
        if i + 1 < len(runs) and runs[i + 1][0] == x:
            continue  # cut only between distinct times
        cut = x if i + 1 == len(runs) else (x + runs[i + 1][0]) / 2
        acc = (above_true + below_false) / (n_true + n_false)
        for above, a in ((True, acc), (False, 1 - acc)):
            if a > best[2]:
                best = (cut, above, a)
    return best


def score(threshold, above, t_true, t_false):
    right = sum((x > threshold) == above for x in t_true) + sum((x > threshold) != above for x in t_false)
    n = len(t_true) + len(t_false)
    acc = right / n
    return acc, 3 * math.sqrt(max(acc * (1 - acc), 1e-12) / n)


def attack(label, fit, scored, indent="  "):
    """Fits the attacker's threshold on fit, scores it on scored; prints it.
    Returns the accuracy and three standard errors of it."""
    threshold, above, fit_acc = fit_threshold(fit[True], fit[False])
    acc, se3 = score(threshold, above, scored[True], scored[False])
    print(f"{indent}{label}: median true {statistics.median(scored[True]):.3f} ms, "
          f"false {statistics.median(scored[False]):.3f} ms (difference "
          f"{statistics.median(scored[True]) - statistics.median(scored[False]):+.3f}); "
          f"threshold {threshold:.3f} ms ('true' {'above' if above else 'at or below'}), "
          f"fit accuracy {100 * fit_acc:.1f} % on {len(fit[True])} + {len(fit[False])}; "
          f"scored {100 * acc:.1f} % +- {100 * se3:.1f} (3 s.e.) on {len(scored[True])} + {len(scored[False])}")
    return acc, se3


def repeats(server, score_runs):
    """The repeats section (see the module's docstring). Returns whether every check passed."""
    t0 = time.time()
    with server.connect("postgres") as su:
        su.execute(f"DROP DATABASE IF EXISTS {REPEATS_DB}")
        su.execute(f"CREATE DATABASE {REPEATS_DB}")
        if not su.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (REPEATER,)).fetchone():
            su.execute(f"CREATE ROLE {REPEATER} LOGIN")
    with psycopg.connect(host="127.0.0.1", port=server.port, user="postgres", dbname=REPEATS_DB,
                         autocommit=True) as su:
        su.execute(REPEATS_SETUP)
        (lib,), = su.execute("SELECT setting FROM pg_settings WHERE name = 'dynamic_library_path'").fetchall()
    an = psycopg.connect(host="127.0.0.1", port=server.port, user=REPEATER, dbname=REPEATS_DB, autocommit=True)
    failures = []
    print(f"Repeats served from the release store (database {REPEATS_DB}, dynamic_library_path {lib}; "
          f"{FIT_RUNS} runs per truth value to fit, {score_runs} to score; person 17's condition true: "
          f"salary > {TRUE_C}, false: salary > {FALSE_C})")
    try:
        an.execute("SELECT 1").fetchall()
        print("  forms of the long-key probe refused or admitted by the gate:")
        for sql in LONG_KEY_TRIED:
            before = spent(an)
            try:
                an.execute(sql).fetchall()
                what = "admitted"
            except psycopg.Error as e:
                what = f"refused {e.sqlstate}: {(e.diag.message_primary or str(e))[:140]}"
            print(f"    {sql}\n      {what}; charged {spent(an)[0] - before[0]}")
        latency = []
        for name, template, tracked, untracked, fresh_runs, (old_fit, old_score) in PROBES:
            sqls = {True: template.format(eps="1e-9", tbl=tracked, c=TRUE_C),
                    False: template.format(eps="1e-9", tbl=tracked, c=FALSE_C)}
            print(f"  {name}: {sqls[True]} (true) / ... > {FALSE_C} (false)")
            # 1. Each statement once, fresh: charged.
            answers, first_ms = {}, {}
            for truth in (True, False):
                before = spent(an)
                first_ms[truth], answers[truth] = timed(an, sqls[truth])
                after = spent(an)
                ok = after[0] > before[0]
                failures += [] if ok else [f"{name} ({truth}): the first run was not charged"]
                print(f"    first run, condition {str(truth).lower()}: {first_ms[truth]:.1f} ms, "
                      f"{len(answers[truth])} row(s), charged {after[0] - before[0]} "
                      f"({after[1] - before[1]} ledger row(s)){'' if ok else ' NOT CHARGED'}")
            paid = spent(an)
            # 2. Repeats, alternated: a warm-up, the fit, the score.
            _, diff_w = alternated(an, sqls, WARM_UP, answers)
            fit, diff_f = alternated(an, sqls, FIT_RUNS, answers)
            scored, diff_s = alternated(an, sqls, score_runs, answers)
            now = spent(an)
            n_repeats = 2 * (WARM_UP + FIT_RUNS + score_runs)
            differing = diff_w + diff_f + diff_s
            free = now[0] == paid[0]
            print(f"    {n_repeats} repeats: {'all free' if free else 'NOT FREE'} (epsilon spent "
                  f"{paid[0]} -> {now[0]}, ledger rows {paid[1]} -> {now[1]}); "
                  f"{'all identical to the first answers' if not differing else f'{len(differing)} DIFFERING'}")
            if not free:
                failures.append(f"{name}: repeats charged {now[0] - paid[0]}")
            if differing:
                failures.append(f"{name}: {len(differing)} repeats answered differently, e.g. {differing[0]}")
            # 3. The attacker's classifier.
            acc, _ = attack("repeats", fit, scored, indent="    ")
            verdict = acc <= MAX_ACCURACY
            print(f"    {'PASS' if verdict else 'FAIL'}: accuracy {100 * acc:.1f} % "
                  f"{'<=' if verdict else '>'} {100 * MAX_ACCURACY:.0f} %")
            if not verdict:
                failures.append(f"{name}: an attacker times repeats with accuracy {100 * acc:.1f} %")
            # 4. An honest analyst: fresh releases (new identities: another epsilon each) against repeats.
            fresh = {True: [], False: []}
            for k in range(fresh_runs):
                for truth in (True, False):
                    sql = template.format(eps=f"{2 + k}e-9", tbl=tracked, c=TRUE_C if truth else FALSE_C)
                    fresh[truth].append(timed(an, sql)[0])
            rep = scored[True] + scored[False]
            latency.append((name, statistics.median(rep), statistics.median(fresh[True]),
                            statistics.median(fresh[False]), fresh_runs))
            # For comparison: untracked copies, every run executed and charged (a repeat's timing before the store).
            old = {truth: template.format(eps="1e-9", tbl=untracked, c=TRUE_C if truth else FALSE_C)
                   for truth in (True, False)}
            alternated(an, old, 1)
            old_fit_t, _ = alternated(an, old, old_fit)
            old_score_t, _ = alternated(an, old, old_score)
            attack("before the store (untracked copy, each run executed)", old_fit_t, old_score_t, indent="    ")
        print("  latency an honest analyst pays (median ms):")
        for name, rep, fresh_true, fresh_false, n in latency:
            print(f"    {name}: repeat {rep:.3f}; fresh release {fresh_true:.3f} (condition true), "
                  f"{fresh_false:.3f} (false), over {n} fresh releases each")
    finally:
        an.close()
    print(f"  repeats section: {'all checks passed' if not failures else 'FAILED: ' + '; '.join(failures)} "
          f"({time.time() - t0:.0f} s)")
    return not failures


# ---------------------------------------------------------------- fresh

FRESH_DB = "timing_fresh"
FRESH_HELD = "timing_fresh_held"  # no settings of its own: the run time held at the defaults
FRESH_OFF = "timing_fresh_off"  # dpnoise.timing_epsilon = 0, set by the superuser: not held
FRESH_SCORE_RUNS = 2000  # per truth value, to score the attacker's threshold (FIT_RUNS to fit it)
FRESH_THREADS = 16  # held runs at once: a held run is ~0.25 s, mostly asleep

# Untracked tables (no dp_track): no release store, every run executes and is charged.
FRESH_SETUP = f"""
CREATE EXTENSION dpnoise;
CREATE TABLE staff (person_id int PRIMARY KEY, salary float8);
INSERT INTO staff SELECT i, 1000 * i FROM generate_series(1, 200000) i;
CREATE TABLE longt (person_id int PRIMARY KEY, salary float8, t text);
INSERT INTO longt SELECT i, 1000 * i, 'short ' || i FROM generate_series(1, 2000) i;
UPDATE longt SET t = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 163840) i) WHERE person_id = 17;
ANALYZE staff, longt;
SELECT dp_protect('staff', 'person_id'), dp_protect('longt', 'person_id');
SELECT dp_analyst('{FRESH_HELD}'), dp_analyst('{FRESH_OFF}');
SELECT dp_budget_grant('{FRESH_HELD}', 1e9, 1), dp_budget_grant('{FRESH_OFF}', 1e9, 1);
ALTER ROLE {FRESH_OFF} SET dpnoise.timing_epsilon = 0;
"""
CROSS_SQL = ("SELECT dp_count(1e-9) FROM staff s CROSS JOIN generate_series(1, 550) g "
             "WHERE s.person_id = 17 AND s.salary > {c}")
LONG_SQL = ("SELECT s.t, g, dp_count(1e-9) FROM longt s, generate_series(1, {n}) g "
            "WHERE s.person_id = 17 AND s.salary > {c} GROUP BY s.t, g")


def fresh_connect(server, user):
    return psycopg.connect(host="127.0.0.1", port=server.port, user=user, dbname=FRESH_DB, autocommit=True)


def held_rounds(server, user, sqls, rounds, threads):
    """Runs `rounds` rounds of sqls ({truth: sql}), each round once each in a
    random order on one connection, through `threads` connections of user
    at once taking rounds from a shared counter (after one untimed round
    each). Returns the times in ms by truth value, in round order, and the
    number of statements run."""
    times = {k: [None] * rounds for k in sqls}
    rng = random.Random(rounds)
    orders = [rng.sample(list(sqls), len(sqls)) for _ in range(rounds)]
    counter, lock, errors = iter(range(rounds)), threading.Lock(), []
    conns = [fresh_connect(server, user) for _ in range(threads)]

    def worker(an):
        try:
            for sql in sqls.values():
                an.execute(sql).fetchall()
            while True:
                with lock:
                    r = next(counter, None)
                if r is None:
                    return
                for k in orders[r]:
                    times[k][r] = timed(an, sqls[k])[0]
        except Exception as e:  # reported by the caller
            errors.append(e)

    workers = [threading.Thread(target=worker, args=(an,)) for an in conns]
    gc.disable()
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        gc.enable()
        for an in conns:
            an.close()
    if errors:
        raise errors[0]
    return times, threads * len(sqls) + rounds * len(sqls)


def charges(su, role):
    """The role's ledger rows: {mechanism: count}."""
    return dict(su.execute("SELECT mechanism, count(*) FROM dpnoise.ledger WHERE role = %s::regrole "
                           "GROUP BY mechanism", (role,)).fetchall())


def grew(before, after):
    return {m: n - before.get(m, 0) for m, n in after.items() if n != before.get(m, 0)}


def charged_each(charged, runs, held):
    """Whether `runs` ledger rows were added, all with the run time (held) or all without."""
    return sum(charged.values()) == runs and all(m.endswith(", run time)") == held for m in charged)


def fresh(server, score_runs, threads=FRESH_THREADS):
    """The fresh section (see the module's docstring). Returns whether every check passed."""
    t0 = time.time()
    with server.connect("postgres") as su:
        su.execute(f"DROP DATABASE IF EXISTS {FRESH_DB}")
        su.execute(f"CREATE DATABASE {FRESH_DB}")
        for role in (FRESH_HELD, FRESH_OFF):
            if not su.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                su.execute(f"CREATE ROLE {role} LOGIN")
    su = fresh_connect(server, "postgres")
    su.execute(FRESH_SETUP)
    (lib,), = su.execute("SELECT setting FROM pg_settings WHERE name = 'dynamic_library_path'").fetchall()
    held, off = fresh_connect(server, FRESH_HELD), fresh_connect(server, FRESH_OFF)
    failures = []
    try:
        show = {x: held.execute(f"SHOW dpnoise.timing_{x}").fetchone()[0]
                for x in ("epsilon", "delta", "row_microseconds")}
        eps_t, delta_t = float(show["epsilon"]), float(show["delta"])
        off_eps = off.execute("SHOW dpnoise.timing_epsilon").fetchone()[0]
        bound = math.exp(eps_t) / (1 + math.exp(eps_t)) + delta_t
        # A, the delay's centre, is about ln((e^eps - 1) / (2 delta)) / eps times the statement's bound B.
        a_per_b = math.log(math.expm1(eps_t) / (2 * delta_t)) / eps_t
        print(f"Fresh statements, the run time a release (database {FRESH_DB}, untracked tables, "
              f"dynamic_library_path {lib}): as {FRESH_HELD}, dpnoise.timing_epsilon = {show['epsilon']} (SHOW), "
              f"timing_delta = {show['delta']}, timing_row_microseconds = {show['row_microseconds']}; "
              f"as {FRESH_OFF}, timing_epsilon = {off_eps} (not held). A single run classified by its time "
              f"is right at most e^eps/(1 + e^eps) + delta = {100 * bound:.3f} %. {FIT_RUNS} rounds to fit, "
              f"{score_runs} to score; held runs through {threads} connections at once")

        # The long-key probe: refused before any charge, for either truth value.
        print("  long-key probe (person 17's t is 5 MB; capped, NULL over 1 KB, and weighed by the plan check):")
        refusals = {}
        for truth in (True, False):
            sql = LONG_SQL.format(n=200, c=TRUE_C if truth else FALSE_C)
            before = charges(su, FRESH_HELD)
            try:
                held.execute(sql).fetchall()
                refusals[truth] = "admitted"
            except psycopg.Error as e:
                refusals[truth] = f"refused {e.sqlstate}: {e.diag.message_primary or e}"
            charged = grew(before, charges(su, FRESH_HELD))
            print(f"    {sql}\n      {refusals[truth]}; charged: {charged or 'nothing'}")
            if not refusals[truth].startswith("refused ZB003") or charged:
                failures.append(f"long-key probe ({truth}): {refusals[truth][:60]}, charged {charged}")
        if refusals[True] != refusals[False]:
            failures.append("the long-key probe's two truth values answered differently")
        # The longest series the plan check admits with the long key.
        lo, hi = 0, 200  # lo admitted (0: none yet), hi refused
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                held.execute(LONG_SQL.format(n=mid, c=FALSE_C)).fetchall()
                lo = mid
            except psycopg.Error as e:
                if e.sqlstate != "ZB003":
                    raise
                hi = mid
        print(f"    the longest form admitted: generate_series(1, {lo}) ({hi} refused, ZB003); timed below")

        probes = [("cross join", CROSS_SQL.format(c="{c}"))]
        if lo:
            probes.append((f"long key, {lo} public rows", LONG_SQL.format(n=lo, c="{c}")))
        latency = []
        for name, template in probes:
            sqls = {True: template.format(c=TRUE_C), False: template.format(c=FALSE_C)}
            print(f"  {name}: {sqls[True]} (true) / ... > {FALSE_C} (false)")
            # Held: the runs overlap across connections (each delay is a sleep).
            t1 = time.time()
            before = charges(su, FRESH_HELD)
            h_fit, n_fit = held_rounds(server, FRESH_HELD, sqls, FIT_RUNS, threads)
            h_score, n_score = held_rounds(server, FRESH_HELD, sqls, score_runs, threads)
            charged = grew(before, charges(su, FRESH_HELD))
            ok = charged_each(charged, n_fit + n_score, True)
            print(f"    held: {n_fit + n_score} runs in {time.time() - t1:.0f} s, ledger rows added {charged}"
                  f"{'' if ok else ' (expected one each, with the run time)'}")
            if not ok:
                failures.append(f"{name}: held runs charged {charged}, expected {n_fit + n_score} with the run time")
            acc, se3 = attack("held", h_fit, h_score, indent="    ")
            verdict = acc <= bound + se3
            print(f"    {'PASS' if verdict else 'FAIL'}: held accuracy {100 * acc:.2f} % "
                  f"{'<=' if verdict else '>'} bound {100 * bound:.2f} % + 3 s.e. {100 * se3:.2f} = "
                  f"{100 * (bound + se3):.2f} % ({'within' if acc <= bound else 'ABOVE'} the bound itself)")
            if not verdict:
                failures.append(f"{name}: held accuracy {100 * acc:.2f} % > {100 * (bound + se3):.2f} %")
            # Not held: one connection, alternated, as fast as it goes.
            before = charges(su, FRESH_OFF)
            alternated(off, sqls, WARM_UP)
            o_fit, _ = alternated(off, sqls, FIT_RUNS)
            o_score, _ = alternated(off, sqls, score_runs)
            charged = grew(before, charges(su, FRESH_OFF))
            n_off = 2 * (WARM_UP + FIT_RUNS + score_runs)
            if not charged_each(charged, n_off, False):
                failures.append(f"{name}: not-held runs charged {charged}, expected {n_off} without the run time")
            attack("not held (timing_epsilon = 0)", o_fit, o_score, indent="    ")
            h_all, o_all = h_score[True] + h_score[False], o_score[True] + o_score[False]
            mechanism, e, d = su.execute("SELECT mechanism, epsilon, delta FROM dpnoise.ledger WHERE role = %s::regrole "
                                         "ORDER BY id DESC LIMIT 1", (FRESH_HELD,)).fetchone()
            mechanism_off, e_off, d_off = su.execute(
                "SELECT mechanism, epsilon, delta FROM dpnoise.ledger WHERE role = %s::regrole "
                "ORDER BY id DESC LIMIT 1", (FRESH_OFF,)).fetchone()
            latency.append((name, h_all, o_all, (mechanism, e, d), (mechanism_off, e_off, d_off)))
        print("  latency an honest analyst pays at the defaults (scored runs, both truth values), and the charge:")
        for name, h_all, o_all, (m, e, d), (m_off, e_off, d_off) in latency:
            added = statistics.median(h_all) - statistics.median(o_all)
            print(f"    {name}: held median {statistics.median(h_all):.1f} ms (90th pct "
                  f"{statistics.quantiles(h_all, n=10)[-1]:.1f}, range {min(h_all):.1f} .. {max(h_all):.1f}); "
                  f"not held {statistics.median(o_all):.2f} ms (90th pct {statistics.quantiles(o_all, n=10)[-1]:.2f}); "
                  f"added {added:.1f} ms, so B is about {added / a_per_b * 1000:.0f} us (A = {a_per_b:.1f} B)")
            print(f"      charged per statement: held {m!r} epsilon {e} delta {d}; not held {m_off!r} epsilon {e_off} delta {d_off}")
    finally:
        held.close()
        off.close()
        su.close()
    print(f"  fresh section: {'all checks passed' if not failures else 'FAILED: ' + '; '.join(failures)} "
          f"({time.time() - t0:.0f} s)")
    return not failures


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--repeats", "--fresh"):
        section, default = (repeats, SCORE_RUNS) if sys.argv[1] == "--repeats" else (fresh, FRESH_SCORE_RUNS)
        port = int(sys.argv[2]) if len(sys.argv) > 2 else 54337
        score = int(sys.argv[3]) if len(sys.argv) > 3 else default
        server = Server(port)
        try:
            server.start()
            ok = section(server, score)
        finally:
            server.stop()
        sys.exit(0 if ok else 1)
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 54337
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    server = Server(port)
    try:
        server.start()
        with server.connect("postgres") as su:
            su.execute(SETUP)
        with server.connect("timing_analyst") as an:
            print(f"{'public rows':>12} | {'true: mean / median ms':>24} | {'false: mean / median ms':>24} | "
                  f"{'difference (mean)':>18} | per public row")
            for n in (1, 1000, 300000):
                sql = (f"SELECT dp_count(1e-9) FROM staff CROSS JOIN generate_series(1, {n}) "
                       "WHERE person_id = 17 AND salary {} 10000")
                rounds = runs if n < 300000 else max(runs // 10, 20)
                line(str(n), alternate(an, sql.format(">"), sql.format("<"), rounds), lambda d: f"{d / n * 1e6:.0f} ns")
            # A hash join whose build side is a public table of 50 000 rows:
            # PostgreSQL would skip building it when no protected row passes;
            # the gate has it built first. The condition keeps one row or none
            # (a CASE, whose selectivity the planner guesses at one half, so it
            # hashes the smaller, public side).
            an.execute("SET enable_nestloop = off")
            an.execute("SET enable_mergejoin = off")
            sql = ("SELECT dp_count(1e-9) FROM staff s JOIN labels l ON l.person_id = s.person_id "
                   "WHERE CASE WHEN s.salary = {} THEN true ELSE false END")
            times = alternate(an, sql.format("50000000"), sql.format("50000000.5"), max(runs // 5, 20))
            line("hash 50 000", times, lambda d: "(one row against none)")
        print()
        ok = repeats(server, SCORE_RUNS)
        print()
        ok = fresh(server, FRESH_SCORE_RUNS) and ok
    finally:
        server.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
