#!/usr/bin/python3
"""End-to-end test of dpnoise's analyst gate, as a BI tool would use it.

Usage: tests/e2e/analyst.py [PORT]   (default 54331; run as root)

Starts a throwaway PostgreSQL server ($PG_BIN's, default Debian's 15; initdb into a temporary directory,
run as the postgres user, dpnoise preloaded, 127.0.0.1 only), as
scripts/lib.sh's start_server does, and removes it at exit. Then, as the
analyst role e2e_analyst through psycopg 3:

1. BI-tool shapes: server-side prepared statements with parameters (custom
   and generic plans), a wrapper subquery with LIMIT, ORDER BY and a count
   over the answers, a CTE; each answer checked for plausibility and each
   statement for exactly one ledger row with the epsilon written in it (plus
   dpnoise.selection_epsilon when grouped); refusals raise ZB003 and charge
   nothing.
2. An empirical privacy-loss audit on neighbouring tables D and D' (D' is D
   without one person who has rows in all three groups), with a negative
   control (the same data without per-person bounding) that must fail it;
   the same for the plain COUNT(*) a BI tool sends through a virtual
   dataset's wrapper, under the tables' policy (its control: the rows
   counted as written, without the rewrite); the same for dp_median over several rows per person (a person's own
   median, one value each), whose control is the median of all rows; and
   one of the released key set (whether a rare group is shown by
   partition selection, and its count), with a negative control (keys
   thresholded with too little noise).
3. Amplification attacks (self-joins on the privacy unit, a public table
   that copies each key 10 times): their error must not beat the noise of
   one person's bounded contribution.

Exits non-zero if any check fails. Needs only the standard library and
psycopg 3 (Debian: apt-get install -y python3-psycopg).
"""
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal

try:
    import psycopg
except ImportError:  # e.g. a pyenv python3 first on PATH: use Debian's, which has the package
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("analyst.py needs psycopg 3: apt-get install -y python3-psycopg")

# scripts/lib.sh exports the PostgreSQL it runs (PG=16 scripts/test.sh ...).
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
ANALYST = "e2e_analyst"
REGIONS = ["north", "south", "east"]
SELECTION_EPSILON = Decimal("0.5")  # dpnoise.selection_epsilon's default
SELECTION_DELTA = Decimal("0.000001")  # dpnoise.selection_delta's default

# The audit (section 2): draws per table, bins, and the margin.
# About 3.5 ms a statement on 2 cores: 2 x 6000 statements take ~45 s. At
# this N, bins of width 1 with >= 30 draws each give ~21 audited bins; in
# simulations the correct law's worst excess stayed below 0.45 and the
# negative control's above 1.9 (expected 0.17 and 2.0).
AUDIT_N = 6000
AUDIT_BIN_WIDTH = 1
AUDIT_MIN_COUNT = 30
AUDIT_Z = 4.0  # the Rust tests use 5 with N = 10^6 and min count 2000
AUDIT_EPSILON = 1.0  # what the statement's dp_count spends in all (0.5 in each of a person's 2 groups)
# The median audit (section 2): draws per table, and the bins it must audit.
# At N = 3000 the correct law gave 8 bins of 0.1 with >= 30 draws on both
# sides (worst excess 0.30); the unbounded control none in common (its
# median moves by 12 ranks). At 5000, 8 again (worst excess 0.44): the law
# sits on about 8 such bins, and 5 is the floor.
MEDIAN_N = 5000
MEDIAN_EPSILON = 1.0
MEDIAN_MIN_BINS = 5
# The key-set audit (section 2, second part): draws per table.
KEY_AUDIT_N = 4000
RARE = 50  # persons in the rare group of k (49 in k_prime)


def count_threshold(epsilon, delta):
    """tau and q of a thresholded count (crates/dpnoise-core/src/threshold.rs):
    tau the least integer with P(N >= tau - 1) <= delta, N the two-sided
    geometric at epsilon (P(N >= m) = b^m / (1 + b), b = e^-epsilon), and
    what delta leaves spent on tau - 1: shown with probability
    q = (delta - P(N >= tau - 1)) / P(N = tau - 2)."""
    b = math.exp(-epsilon)
    tau = math.ceil(math.log(delta * (1 + b)) / math.log(b)) + 1
    q = (delta - b ** (tau - 1) / (1 + b)) / ((1 - b) / (1 + b) * b ** (tau - 2))
    return tau, q


def threshold_keep(epsilon, tau, q, n):
    """P(shown) for a group of n persons: P(n + N >= tau) + q P(n + N = tau - 1)."""
    b = math.exp(-epsilon)
    tail = lambda m: b ** m / (1 + b) if m >= 1 else 1 - b ** (1 - m) / (1 + b)
    pmf = lambda m: (1 - b) / (1 + b) * b ** abs(m)
    return tail(tau - n) + q * pmf(tau - 1 - n)


# The count's epsilon 1 and the selection's delta over a person's 2 groups.
TAU, TAU_Q = count_threshold(1.0 / 2, 1e-6 / 2)
RARE_T = TAU  # persons in the rare group of kt: shown about 70 % of the time (TAU - 1 in kt_prime: about 45 %)
# The attacks (section 3).
ATTACK_RUNS = 400
ATTACK_EPSILON = 1.0
TARGET = 0  # the person the attacks are after

RESULTS = []  # (ok, name, detail)


def check(name, ok, detail=""):
    RESULTS.append((bool(ok), name, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}{': ' + detail if detail else ''}", flush=True)
    return ok


# ---------------------------------------------------------------- the server

def as_postgres(*args, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, **kw)


class Server:
    """A throwaway server, as scripts/lib.sh start_server/stop_server run one."""

    def __init__(self, port):
        self.port = port
        self.dir = None

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="dpnoise-e2e-")
        shutil.chown(self.dir, "postgres", "postgres")
        os.chmod(self.dir, 0o700)
        as_postgres(f"{PG_BIN}/initdb", "-D", self.dir, "--auth=trust", "-U", "postgres",
                    stdout=subprocess.DEVNULL)
        with open(os.path.join(self.dir, "postgresql.conf"), "a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.dir}'\n"
                       "shared_preload_libraries = 'dpnoise'\n")
            # A copy of the library elsewhere (a helper's build), loaded in
            # place of the installed one; the SQL files stay the installed ones.
            libdir = os.environ.get("DPNOISE_E2E_LIBDIR")
            if libdir:
                conf.write(f"dynamic_library_path = '{libdir}:$libdir'\n")
        log = os.path.join(self.dir, "server.log")
        try:
            as_postgres(f"{PG_BIN}/pg_ctl", "-D", self.dir, "-l", log, "-w", "start",
                        stdout=subprocess.DEVNULL)
        except subprocess.CalledProcessError:
            with open(log) as f:
                sys.stderr.write("".join(f.readlines()[-20:]))
            raise

    def stop(self):
        if not self.dir:
            return
        if os.path.exists(os.path.join(self.dir, "postmaster.pid")):
            subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", self.dir,
                            "-w", "stop", "-m", "fast"], stdout=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def connect(self, user):
        return psycopg.connect(host="127.0.0.1", port=self.port, user=user, dbname="postgres",
                               autocommit=True)


# ---------------------------------------------------------------- the data

SETUP = f"""
CREATE EXTENSION dpnoise;
CREATE ROLE {ANALYST} LOGIN;
-- One row per person.
CREATE TABLE members (person_id int PRIMARY KEY, region text, age int, salary float8);
INSERT INTO members SELECT p, (ARRAY['north', 'south', 'east'])[1 + p % 3], 20 + p % 50, 1000 * (p % 97)
FROM generate_series(0, 1199) p;
-- Several rows per person: 3 in one region, and every second person 2 more
-- in a second region (so nobody is in more than 2 groups).
CREATE TABLE trips (person_id int, region text, amount float8);
INSERT INTO trips SELECT p, (ARRAY['north', 'south', 'east'])[1 + p % 3], 10
FROM generate_series(0, 599) p, generate_series(1, 3);
INSERT INTO trips SELECT p, (ARRAY['north', 'south', 'east'])[1 + (p + 1) % 3], 10
FROM generate_series(0, 599, 2) p, generate_series(1, 2);
-- Public, not protected: every key 10 times.
CREATE TABLE keys10 AS SELECT p AS person_id FROM generate_series(0, 599) p, generate_series(1, 10);
GRANT SELECT ON keys10 TO {ANALYST};
-- Neighbouring databases: D' is D without person 0, who has 4 rows in
-- each of the 3 regions; everyone else has 2 rows in one region (300 a region).
CREATE TABLE d (person_id int, region text);
INSERT INTO d SELECT p, (ARRAY['north', 'south', 'east'])[1 + p % 3] FROM generate_series(1, 900) p, generate_series(1, 2);
INSERT INTO d SELECT 0, r FROM unnest(ARRAY['north', 'south', 'east']) r, generate_series(1, 4);
CREATE TABLE d_prime AS SELECT * FROM d WHERE person_id <> 0;
-- The key-set audit: a rare group of 50 persons (49 without person 0,
-- who also has rows in a common one) whose key partition selection keeps
-- about half the time.
CREATE TABLE k (person_id int, region text);
INSERT INTO k SELECT p, 'rare' FROM generate_series(1, 49) p, generate_series(1, 2);
INSERT INTO k SELECT p, 'common' FROM generate_series(100, 399) p, generate_series(1, 2);
INSERT INTO k SELECT 0, r FROM unnest(ARRAY['rare', 'common']) r, generate_series(1, 3);
CREATE TABLE k_prime AS SELECT * FROM k WHERE person_id <> 0;
-- The same for the thresholded count: a rare group of {RARE_T} persons
-- (its threshold tau at epsilon 1 over 2 groups), {RARE_T - 1} without person 0.
CREATE TABLE kt (person_id int, region text);
INSERT INTO kt SELECT p, 'rare' FROM generate_series(1, {RARE_T - 1}) p, generate_series(1, 2);
INSERT INTO kt SELECT p, 'common' FROM generate_series(100, 399) p, generate_series(1, 2);
INSERT INTO kt SELECT 0, r FROM unnest(ARRAY['rare', 'common']) r, generate_series(1, 3);
CREATE TABLE kt_prime AS SELECT * FROM kt WHERE person_id <> 0;
-- The median audit (issue 45, item 2): 200 persons with 3 rows each at
-- nearly distinct values in [0, 60), and person 0 with 24 rows at 59.99,
-- who moves the median of rows by 12 ranks and a median of persons by one.
CREATE TABLE dm (person_id int, x float8);
INSERT INTO dm SELECT p, ((p * 7919 + j * 104729) % 6000) / 100.0 FROM generate_series(1, 200) p, generate_series(1, 3) j;
INSERT INTO dm SELECT 0, 59.99 FROM generate_series(1, 24);
CREATE TABLE dm_prime AS SELECT * FROM dm WHERE person_id <> 0;
SELECT dp_protect('dm', 'person_id', 2), dp_protect('dm_prime', 'person_id', 2);
SELECT dp_protect('members', 'person_id', 2), dp_protect('trips', 'person_id', 2),
       dp_protect('d', 'person_id', 2), dp_protect('d_prime', 'person_id', 2),
       dp_protect('k', 'person_id', 2), dp_protect('k_prime', 'person_id', 2),
       dp_protect('kt', 'person_id', 2), dp_protect('kt_prime', 'person_id', 2);
SELECT dp_analyst('{ANALYST}');
SELECT dp_budget_grant('{ANALYST}', 1e9, 1);
-- The attacks (section 3) test bounding against copies, among them a
-- nested loop over keys10's 6000 rows for each protected row, which the
-- default dpnoise.max_public_fanout (1000) refuses (tests/pg_regress/sql/gate_plan.sql).
ALTER ROLE {ANALYST} SET dpnoise.max_public_fanout = 100000;
-- This suite audits the releases' values and their charges; the run time's
-- own release (dpnoise.timing_epsilon) is tested by timing.sql and
-- bench/timing.py, and at this fan-out would hold each statement for seconds.
ALTER ROLE {ANALYST} SET dpnoise.timing_epsilon = 0;
"""


def truth(su, sql, params=None):
    return su.execute(sql, params).fetchall()


# ---------------------------------------------------------------- helpers

def dec(x):
    """The charge of a float parameter: its shortest decimal (as dpnoise's ledger writes it)."""
    return Decimal(repr(float(x)))


class Ledger:
    def __init__(self, conn):
        self.conn = conn
        self.seen = self.last()

    def last(self):
        return self.conn.execute("SELECT coalesce(max(id), 0) FROM dp_my_ledger").fetchone()[0]

    def new(self):
        rows = self.conn.execute(
            "SELECT id, mechanism, epsilon, delta FROM dp_my_ledger WHERE id > %s ORDER BY id",
            (self.seen,)).fetchall()
        if rows:
            self.seen = rows[-1][0]
        return rows


def charged_once(ledger, epsilon, delta=Decimal(0)):
    """Whether the statement just run made exactly one ledger row of (epsilon, delta)."""
    rows = ledger.new()
    return len(rows) == 1 and rows[0][2] == epsilon and rows[0][3] == delta, rows


def generic_plans(conn, like):
    rows = conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                        "WHERE statement LIKE %s", (like,)).fetchall()
    return (sum(r[0] for r in rows), sum(r[1] for r in rows)) if rows else (0, 0)


def refused(conn, sql, params=None, prepare=None):
    try:
        conn.execute(sql, params, prepare=prepare).fetchall()
    except psycopg.Error as e:
        return e.sqlstate, (e.diag.message_primary or str(e))
    return None, "admitted"


# ---------------------------------------------------------------- 1. BI tools

def bi_tools(su, an):
    ledger = Ledger(an)

    # (a) A prepared count of a one-row-per-person table, parameters for ε and
    # for the WHERE values, 8 runs (custom plans, then generic ones); ε large,
    # so the noise is 0 but for a chance of about e^-500.
    sql = "SELECT dp_count(%s) AS n FROM members WHERE age > %s AND region = %s"
    bad = []
    for i in range(8):
        eps, age, region = (1000.0, 500.0)[i % 2], 25 + 3 * i, REGIONS[i % 3]
        (n,), = an.execute(sql, (eps, age, region), prepare=True).fetchall()
        ok, rows = charged_once(ledger, dec(eps))
        (want,), = truth(su, "SELECT count(*) FROM members WHERE age > %s AND region = %s", (age, region))
        if n != want or not ok:
            bad.append((eps, age, region, n, want, rows))
    g, c = generic_plans(an, "SELECT dp_count($1) AS n FROM members%")
    check("BI prepared count, params for epsilon and WHERE (auto plan mode)", not bad,
          f"8 runs, answers = true counts, one ledger row each with the epsilon given; "
          f"plans generic={g} custom={c}" + (f"; bad: {bad}" if bad else ""))

    # (b) The same shapes with a generic plan forced, grouped over a table with
    # several rows per person: the counts are of persons (300 a region), and
    # each statement pays ε + selection_epsilon. A WHERE that keeps no row
    # gives no group and pays the same.
    an.execute("SET plan_cache_mode = force_generic_plan")
    persons = dict(truth(su, "SELECT region, count(DISTINCT person_id) FROM trips GROUP BY region"))
    rows_per_region = dict(truth(su, "SELECT region, count(*) FROM trips GROUP BY region"))
    sql = "SELECT region, dp_count(%s) AS persons FROM trips WHERE amount >= %s GROUP BY region"
    bad = []
    for i in range(8):
        eps, lower = (1000.0, 999.0)[i % 2], (10.0 if i != 5 else 11.0)
        got = dict(an.execute(sql, (eps, lower), prepare=True).fetchall())
        ok, rows = charged_once(ledger, dec(eps) + SELECTION_EPSILON, SELECTION_DELTA)
        want = persons if lower <= 10 else {}
        if got != want or not ok:
            bad.append((eps, lower, got, want, rows))
    g, c = generic_plans(an, "SELECT region, dp_count($1) AS persons FROM trips%")
    check("BI prepared GROUP BY, forced generic plan, multi-row table", not bad and g >= 8,
          f"8 runs, counts = persons per region {sorted(persons.values())} (rows: "
          f"{sorted(rows_per_region.values())}), empty WHERE gives 0 groups and the same charge, "
          f"each charged epsilon + 0.5; plans generic={g} custom={c}" + (f"; bad: {bad}" if bad else ""))

    # (c) A BI tool's wrapper with LIMIT, two aggregates, generic plan: sums
    # clamped per person and group (truth from the raw rows).
    an.execute("RESET plan_cache_mode")
    clamped = dict(truth(su, "SELECT region, sum(LEAST(s, 25)) FROM (SELECT person_id, region, sum(amount) s "
                             "FROM trips GROUP BY 1, 2) x GROUP BY region"))
    sql = ("SELECT * FROM (SELECT region, dp_count(%s) AS persons, dp_sum(amount, %s, %s, %s) AS total "
           "FROM trips GROUP BY region) AS virtual_table LIMIT 1000")
    bad = []
    for i in range(7):
        e1, e2 = 1000.0, (1000.0, 0.75e3)[i % 2]
        got = an.execute(sql, (e1, e2, 0.0, 25.0), prepare=True).fetchall()
        ok, rows = charged_once(ledger, dec(e1) + dec(e2) + SELECTION_EPSILON, SELECTION_DELTA)
        plausible = (len(got) == 3 and all(p == persons[r] and abs(t - clamped[r]) < 5 for r, p, t in got))
        if not plausible or not ok:
            bad.append((got, rows))
    check("BI wrapper SELECT * FROM (GROUP BY) AS virtual_table LIMIT 1000, two aggregates", not bad,
          f"7 runs, persons and per-person clamped sums {sorted(clamped.values())} match, "
          "charged eps1 + eps2 + 0.5" + (f"; bad: {bad}" if bad else ""))

    # (d) ORDER BY over the answers, and a count over them.
    an.execute("SET plan_cache_mode = force_generic_plan")
    sql = ("SELECT * FROM (SELECT region, dp_count(%s) AS c FROM members WHERE age >= %s GROUP BY region) "
           "AS virtual_table ORDER BY c DESC, region LIMIT 1000")
    bad = []
    for i in range(7):
        age = 20 + i
        got = an.execute(sql, (1000.0, age), prepare=True).fetchall()
        ok, rows = charged_once(ledger, dec(1000.0) + SELECTION_EPSILON, SELECTION_DELTA)
        want = sorted(truth(su, "SELECT region, count(*) FROM members WHERE age >= %s GROUP BY region", (age,)),
                      key=lambda r: (-r[1], r[0]))
        if got != want or not ok:
            bad.append((age, got, want, rows))
    check("BI ORDER BY over the answers", not bad, "7 runs, order and counts as the truth's, one charge each"
          + (f"; bad: {bad}" if bad else ""))
    sql = "SELECT count(*) FROM (SELECT region, dp_count(%s) FROM trips WHERE region <> %s GROUP BY region) AS virtual_table"
    bad = []
    for i in range(7):
        eps = (1000.0, 2.0)[i % 2]
        (n,), = an.execute(sql, (eps, "nowhere"), prepare=True).fetchall()
        ok, rows = charged_once(ledger, dec(eps) + SELECTION_EPSILON, SELECTION_DELTA)
        if n != 3 or not ok:
            bad.append((eps, n, rows))
    g, c = generic_plans(an, "SELECT count(*) FROM (SELECT region, dp_count($1)%")
    check("BI count(*) over the answers", not bad, f"7 runs, 3 groups, one charge of eps + 0.5 each; "
          f"plans generic={g}" + (f"; bad: {bad}" if bad else ""))
    an.execute("RESET plan_cache_mode")

    # (e) A CTE, and an average of persons' averages on the multi-row table.
    (avg_members,), = truth(su, "SELECT avg(salary) FROM members")
    got = an.execute("WITH a AS (SELECT dp_avg(salary, %s, 0, 100000) AS a FROM members) SELECT a FROM a",
                     (1000.0,)).fetchone()[0]
    ok1, r1 = charged_once(ledger, dec(1000.0))
    got2 = an.execute("SELECT dp_avg(amount, %s, 0, 100) AS a FROM trips", (1000.0,), prepare=True).fetchone()[0]
    ok2, r2 = charged_once(ledger, dec(1000.0))
    check("BI CTE and dp_avg", abs(got - avg_members) < 100 and abs(got2 - 10) < 0.5 and ok1 and ok2,
          f"avg salary {got:.1f} (true {avg_members:.1f}), avg of persons' trips {got2:.3f} (true 10)")

    # (f) Refusals: ZB003 through psycopg, nothing charged (also prepared).
    attempts = [
        ("raw rows", "SELECT * FROM members WHERE person_id = %s", (17,), True),
        ("raw rows in a wrapper", "SELECT * FROM (SELECT salary FROM members) AS virtual_table LIMIT 1000", None, True),
        ("sum without a domain", "SELECT sum(salary) FROM members", None, False),
        ("cross join", "SELECT dp_count(1.0) FROM trips a, trips b", None, False),
        ("key list on the protected side", "SELECT t.region, dp_count(%s) FROM keys10 k LEFT JOIN trips t "
         "ON t.person_id = k.person_id GROUP BY t.region", (1.0,), True),
        ("non-leakproof WHERE", "SELECT dp_count(%s) FROM members WHERE ln(salary - %s) > 0", (1.0, 5000.0), True),
        ("EXISTS probe", "SELECT EXISTS (SELECT 1 FROM members WHERE salary > %s)", (90000.0,), True),
        ("FILTER on multi-row", "SELECT region, dp_count(1.0) FILTER (WHERE amount > 3) FROM trips GROUP BY region",
         None, False),
        ("EXPLAIN", "EXPLAIN SELECT dp_count(1.0) FROM members", None, False),
        ("GROUP BY the unit, delta 0", None, None, False),
    ]
    bad = []
    for name, sql, params, prep in attempts:
        if sql is None:
            an.execute("SET dpnoise.selection_delta = 0")
            state, msg = refused(an, "SELECT person_id, dp_count(%s) FROM members GROUP BY person_id", (1.0,), True)
            an.execute("RESET dpnoise.selection_delta")
        else:
            state, msg = refused(an, sql, params, prep)
        charged = ledger.new()
        if state != "ZB003" or charged:
            bad.append((name, state, msg, charged))
    # A bad parameter is refused too (22023), before any charge.
    state, msg = refused(an, "SELECT dp_count(%s) FROM members", (-1.0,), True)
    charged = ledger.new()
    if state != "22023" or charged:
        bad.append(("negative epsilon", state, msg, charged))
    check("refused queries raise ZB003 via psycopg and charge nothing", not bad,
          f"{len(attempts)} shapes ZB003 (+ negative epsilon 22023), 0 ledger rows"
          + (f"; bad: {bad}" if bad else ""))

    # A plain COUNT(*), as a BI tool's default metric: answered under the
    # table's default policy (docs/bi.md) as a Python int, near the truth,
    # charged dpnoise.policy_epsilon once.
    (want,), = truth(su, "SELECT count(*) FROM members")
    got = an.execute("SELECT COUNT(*) AS count FROM members", prepare=True).fetchone()[0]
    charged = ledger.new()
    check("plain COUNT(*) answered as an integer under the default policy",
          isinstance(got, int) and abs(got - want) <= 30 and len(charged) == 1 and charged[0][2] == 1,
          f"{got} (true {want}), charged {charged}")


# ---------------------------------------------------------------- 2. the audit

def privacy_loss_audit(out0, out1, bin_width, min_count, z):
    """A Python port of dpnoise_core::audit::privacy_loss_audit
    (crates/dpnoise-core/src/audit.rs): bins integer outputs by bin_width
    (floor division, as div_euclid), and for each bin with at least
    min_count draws on both sides takes loss = |ln(c0/c1)| and
    excess = loss - z*sqrt(1/c0 + 1/c1). Returns (bins audited, max loss,
    worst excess, worst bin); a mechanism passes when worst excess <= epsilon."""
    h0, h1 = {}, {}
    for x in out0:
        h0[x // bin_width] = h0.get(x // bin_width, 0) + 1
    for x in out1:
        h1[x // bin_width] = h1.get(x // bin_width, 0) + 1
    bins, max_loss, worst, worst_bin = 0, 0.0, -math.inf, None
    for b, c0 in h0.items():
        c1 = h1.get(b, 0)
        if c0 < min_count or c1 < min_count:
            continue
        loss = abs(math.log(c0 / c1))
        excess = loss - z * math.sqrt(1 / c0 + 1 / c1)
        bins += 1
        max_loss = max(max_loss, loss)
        if excess > worst:
            worst, worst_bin = excess, b * bin_width
    return bins, max_loss, worst, worst_bin


def two_sided_geometric(rng, epsilon):
    """P(k) proportional to exp(-epsilon |k|): the difference of two geometric variables."""
    log_q = -epsilon
    a = int(math.log(1.0 - rng.random()) / log_q)
    b = int(math.log(1.0 - rng.random()) / log_q)
    return a - b


def geometric_sd(epsilon):
    q = math.exp(-epsilon)
    return math.sqrt(2 * q) / (1 - q)


def audit(su, an):
    ledger = Ledger(an)
    # The draws are collected in a temporary table (an error here fails the section).
    an.execute("CREATE TEMP TABLE r (tbl text, i int, s bigint, groups int)")
    t0 = time.time()
    for tbl in ("d", "d_prime"):
        an.execute(f"""DO $$ BEGIN FOR i IN 1..{AUDIT_N} LOOP
            INSERT INTO pg_temp.r SELECT '{tbl}', i, coalesce(sum(c), 0), count(*)
            FROM (SELECT region, dp_count({AUDIT_EPSILON!r}) AS c FROM {tbl} GROUP BY region) s;
        END LOOP; END $$""")
    secs = time.time() - t0
    out = {"d": [], "d_prime": []}
    missing = 0
    for tbl, s, groups in an.execute("SELECT tbl, s, groups FROM pg_temp.r ORDER BY tbl, i"):
        out[tbl].append(s)  # a group partition selection dropped counts as 0
        missing += 3 - groups
    charges = ledger.new()
    # The count selects its own groups (a thresholded count): no selection ε.
    per_stmt = Decimal(repr(AUDIT_EPSILON))
    charge_ok = (len(charges) == 2 * AUDIT_N
                 and all(r[2] == per_stmt and r[3] == SELECTION_DELTA for r in charges))
    check("audit statements each charged once", charge_ok,
          f"{len(charges)} ledger rows for {2 * AUDIT_N} statements, each epsilon {per_stmt} delta "
          f"{SELECTION_DELTA} ({secs:.1f} s, {1000 * secs / (2 * AUDIT_N):.2f} ms a statement)")

    bins, max_loss, excess, worst_bin = privacy_loss_audit(out["d"], out["d_prime"], AUDIT_BIN_WIDTH,
                                                           AUDIT_MIN_COUNT, AUDIT_Z)
    check("DP audit of the released sum over 3 regions, D vs D'", bins >= 12 and excess <= AUDIT_EPSILON,
          f"N={AUDIT_N} each, bin width {AUDIT_BIN_WIDTH}, min count {AUDIT_MIN_COUNT}, z={AUDIT_Z}: "
          f"bins audited {bins}, max loss {max_loss:.3f}, max excess {excess:.3f} (at {worst_bin}) "
          f"<= epsilon {AUDIT_EPSILON} (statement charged {per_stmt}, selection delta only); "
          f"groups missing {missing}")

    # The law of the outputs: each region's count is the number of persons
    # (300, and person 0 in 2 of the 3 regions) plus geometric noise at 0.5.
    true0 = sum(r[0] for r in truth(su, "SELECT count(DISTINCT person_id) FROM d GROUP BY region"))
    true1 = sum(r[0] for r in truth(su, "SELECT count(DISTINCT person_id) FROM d_prime GROUP BY region"))
    shift = statistics.fmean(out["d"]) - statistics.fmean(out["d_prime"])
    var_theory = 3 * geometric_sd(AUDIT_EPSILON / 2) ** 2
    var_seen = (statistics.variance(out["d"]) + statistics.variance(out["d_prime"])) / 2
    se_shift = math.sqrt(2 * var_theory / AUDIT_N)
    check("audit outputs follow the bounded law", abs(shift - 2) < 5 * se_shift
          and abs(var_seen / var_theory - 1) < 0.15 and missing == 0,
          f"mean shift D-D' {shift:.3f} (person 0 counts in 2 groups: 2; unbounded rows would be 12; "
          f"distinct person-region pairs D {true0}, D' {true1}), "
          f"variance {var_seen:.2f} vs {var_theory:.2f} (3 x geometric at eps 0.5)")

    # Negative control: the same data without per-person bounding (each row
    # counted, person 0's 12 rows in all 3 groups) with the same noise, 0.5
    # a group: the audit must catch it.
    rows0 = dict(truth(su, "SELECT region, count(*) FROM d GROUP BY region"))
    rows1 = dict(truth(su, "SELECT region, count(*) FROM d_prime GROUP BY region"))
    rng = random.Random(20240614)
    sim = lambda rows: [sum(rows[r] + two_sided_geometric(rng, AUDIT_EPSILON / 2) for r in REGIONS)
                        for _ in range(AUDIT_N)]
    nb, nml, nex, _ = privacy_loss_audit(sim(rows0), sim(rows1), AUDIT_BIN_WIDTH, AUDIT_MIN_COUNT, AUDIT_Z)
    check("negative control (unbounded counts) FAILS the audit", nex > AUDIT_EPSILON,
          f"bins audited {nb}, max loss {nml:.3f}, max excess {nex:.3f} > {AUDIT_EPSILON}: "
          f"{'FAIL as it must' if nex > AUDIT_EPSILON else 'PASSED (audit too weak)'}")


PLAIN_N = 4000
PLAIN_ROWS = 1  # the policy's rows_per_person on d and d_prime


def plain_audit(su, an):
    """The DP audit of the plain form a BI tool sends: COUNT(*) by region
    over a virtual dataset's wrapper, under the tables' policy (statement
    epsilon AUDIT_EPSILON, PLAIN_ROWS rows a person), which the gate takes
    in (gate/inline.rs) and rewrites into a bounded count of rows
    (gate/policy). Its privacy loss must stay within what the ledger
    charged; the same counts without the rewrite (each row counted, with
    the same noise) must fail the audit."""
    for tbl in ("d", "d_prime"):
        su.execute(f"SELECT dp_policy('{tbl}', {AUDIT_EPSILON!r}, {PLAIN_ROWS}), dp_untrack('{tbl}')")
    ledger = Ledger(an)
    an.execute("CREATE TEMP TABLE rp (tbl text, i int, s bigint, groups int)")
    t0 = time.time()
    for tbl in ("d", "d_prime"):
        an.execute(f"""DO $$ BEGIN FOR i IN 1..{PLAIN_N} LOOP
            INSERT INTO pg_temp.rp SELECT '{tbl}', i, coalesce(sum(count), 0), count(*)
            FROM (SELECT region AS region, COUNT(*) AS count FROM (SELECT * FROM {tbl}) AS virtual_table
                  GROUP BY region ORDER BY count DESC LIMIT 10000) s;
        END LOOP; END $$""")
    secs = time.time() - t0
    out = {"d": [], "d_prime": []}
    missing = 0
    for tbl, total, groups in an.execute("SELECT tbl, s, groups FROM pg_temp.rp ORDER BY tbl, i"):
        out[tbl].append(total)
        missing += 3 - groups
    charges = ledger.new()
    charged = {r[2] for r in charges}
    ok = len(charges) == 2 * PLAIN_N and len(charged) == 1
    check("plain audit statements each charged once, alike", ok,
          f"{len(charges)} ledger rows for {2 * PLAIN_N} statements, epsilon {sorted(charged)} "
          f"({secs:.1f} s, {1000 * secs / (2 * PLAIN_N):.2f} ms a statement)")
    bound = float(max(charged)) if charged else 0.0
    bins, max_loss, excess, worst_bin = privacy_loss_audit(out["d"], out["d_prime"], AUDIT_BIN_WIDTH,
                                                           AUDIT_MIN_COUNT, AUDIT_Z)
    check("DP audit of plain COUNT(*) by region through a wrapper, D vs D'", bins >= 12 and excess <= bound,
          f"N={PLAIN_N} each, bin width {AUDIT_BIN_WIDTH}, min count {AUDIT_MIN_COUNT}, z={AUDIT_Z}: "
          f"bins audited {bins}, max loss {max_loss:.3f}, max excess {excess:.3f} (at {worst_bin}) "
          f"<= the statement's charge {bound}; groups missing {missing}")
    # Person 0 adds PLAIN_ROWS rows to each of max_groups_contributed = 2
    # groups: the mean shift is 4 (12 rows unbounded).
    shift = statistics.fmean(out["d"]) - statistics.fmean(out["d_prime"])
    se = math.sqrt((statistics.variance(out["d"]) + statistics.variance(out["d_prime"])) / PLAIN_N)
    check("plain audit outputs are bounded per person", abs(shift - 2 * PLAIN_ROWS) < 5 * se,
          f"mean shift D-D' {shift:.2f} (bounded: {2 * PLAIN_ROWS}; every row: 12), 5 standard errors {5 * se:.2f}")
    # Negative control: the rows counted as written (no rewrite, no
    # bounding) with the rewrite's noise (sensitivity PLAIN_ROWS at epsilon
    # 0.5 a group, as a two-sided geometric): the audit must catch it.
    rows0 = dict(truth(su, "SELECT region, count(*) FROM d GROUP BY region"))
    rows1 = dict(truth(su, "SELECT region, count(*) FROM d_prime GROUP BY region"))
    rng = random.Random(20261207)
    sim = lambda rows: [sum(rows[r] + two_sided_geometric(rng, AUDIT_EPSILON / 2 / PLAIN_ROWS) for r in REGIONS)
                        for _ in range(PLAIN_N)]
    nb, nml, nex, _ = privacy_loss_audit(sim(rows0), sim(rows1), AUDIT_BIN_WIDTH, AUDIT_MIN_COUNT, AUDIT_Z)
    check("negative control (plain COUNT(*) without its rewrite) FAILS the audit", nex > bound,
          f"bins audited {nb}, max loss {nml:.3f}, max excess {nex:.3f} > {bound}: "
          f"{'FAIL as it must' if nex > bound else 'PASSED (audit too weak)'}")


def median_outputs(conn, table, n):
    """n releases of dp_median over `table` (1/10 units, as integers), collected server-side."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS mr (tbl text, i int, m float8)")
    conn.execute(f"""DO $$ BEGIN FOR i IN 1..{n} LOOP
        INSERT INTO pg_temp.mr SELECT '{table}', i, dp_median(x, {MEDIAN_EPSILON!r}, 0, 60) FROM {table};
    END LOOP; END $$""")
    rows = conn.execute("SELECT m FROM pg_temp.mr WHERE tbl = %s ORDER BY i", (table,)).fetchall()
    conn.execute("DELETE FROM pg_temp.mr WHERE tbl = %s", (table,))
    return [math.floor(10 * r[0]) for r in rows]


def median_audit(su, an):
    """The median over several rows per person (each person's own median,
    one value each), audited on D vs D' as the count is; the negative
    control runs the same aggregate as the superuser, whom the gate does
    not bound: every row counts, and the audit must fail (too few bins in
    common, or a loss beyond epsilon)."""
    ledger = Ledger(an)
    t0 = time.time()
    out = {t: median_outputs(an, t, MEDIAN_N) for t in ("dm", "dm_prime")}
    secs = time.time() - t0
    charges = ledger.new()
    per_stmt = Decimal(repr(MEDIAN_EPSILON))
    check("median audit statements each charged once",
          len(charges) == 2 * MEDIAN_N and all(r[2] == per_stmt for r in charges),
          f"{len(charges)} ledger rows for {2 * MEDIAN_N} statements ({secs:.1f} s)")
    bins, max_loss, excess, worst = privacy_loss_audit(out["dm"], out["dm_prime"], 1, AUDIT_MIN_COUNT, AUDIT_Z)
    check("DP audit of dp_median over several rows per person, D vs D'",
          bins >= MEDIAN_MIN_BINS and excess <= MEDIAN_EPSILON,
          f"N={MEDIAN_N} each, bins of 0.1, min count {AUDIT_MIN_COUNT}, z={AUDIT_Z}: bins audited {bins} "
          f"(at least {MEDIAN_MIN_BINS}), max loss {max_loss:.3f}, max excess {excess:.3f} (at {worst}) "
          f"<= epsilon {MEDIAN_EPSILON}")
    su.execute("SELECT dp_budget_grant('postgres', 1e9, 1)")
    raw = {t: median_outputs(su, t, MEDIAN_N) for t in ("dm", "dm_prime")}
    nb, nml, nex, _ = privacy_loss_audit(raw["dm"], raw["dm_prime"], 1, AUDIT_MIN_COUNT, AUDIT_Z)
    fails = nb < MEDIAN_MIN_BINS or nex > MEDIAN_EPSILON
    check("negative control (the median of rows, unbounded) FAILS the audit", fails,
          f"bins audited {nb}, max loss {nml:.3f}, max excess {nex:.3f}: "
          f"{'FAIL as it must' if fails else 'PASSED (audit too weak)'}")


def keep_probabilities(epsilon, delta, n):
    """π(1..n) of the optimal partition selection (Desfontaines et al. 2022,
    Theorem 1), as crates/dpnoise-core/src/selection.rs builds it (without
    its outward rounding, which moves π by a few ulps)."""
    table, p = [], 0.0
    for _ in range(n):
        rest = 1 - p - delta
        p = min(math.exp(epsilon) * p + delta, 1.0 if rest <= 0 else 1 - math.exp(-epsilon) * rest, 1.0)
        table.append(p)
    return table


def key_audit(su, an):
    """The released set of keys under the separate selection (the DBA turns
    the thresholded count off for the analyst): whether the rare group of k
    is shown, and its noisy count when it is."""
    su.execute(f"ALTER ROLE {ANALYST} SET dpnoise.thresholded_counts = off")
    try:
        with psycopg.connect(host="127.0.0.1", port=an.info.port, user=ANALYST, dbname="postgres",
                             autocommit=True) as separate:
            # Each of a person's 2 groups spends half of the selection's (ε, δ).
            pi = keep_probabilities(float(SELECTION_EPSILON) / 2, float(SELECTION_DELTA) / 2, RARE)
            released_keys(separate, ("k", "k_prime"), RARE, {"k": pi[RARE - 1], "k_prime": pi[RARE - 2]},
                          Decimal(repr(AUDIT_EPSILON)) + SELECTION_EPSILON, "optimal partition selection")
    finally:
        su.execute(f"ALTER ROLE {ANALYST} RESET dpnoise.thresholded_counts")


def threshold_key_audit(su, an):
    """The released set of keys when the count selects its own groups: the
    rare group of kt (RARE_T persons) is shown when its noisy count reaches
    tau (tau - 1 with probability q), and the count shown is that noisy
    count; audited as key_audit."""
    even = next(n for n in range(1, 10 * TAU) if threshold_keep(AUDIT_EPSILON / 2, TAU, TAU_Q, n) >= 0.5)
    accuracy = an.execute("SELECT selection_even_odds FROM dp_query_accuracy('count', %s, ARRAY['kt'])",
                          (AUDIT_EPSILON,)).fetchone()[0]
    check("dp_query_accuracy reports the thresholded count's even odds", accuracy == even,
          f"{accuracy} (tau {TAU}, q {TAU_Q:.3f}: {even})")
    keep = lambda n: threshold_keep(AUDIT_EPSILON / 2, TAU, TAU_Q, n)
    released_keys(an, ("kt", "kt_prime"), RARE_T, {"kt": keep(RARE_T), "kt_prime": keep(RARE_T - 1)},
                  Decimal(repr(AUDIT_EPSILON)), "the thresholded count", floor=TAU - 1, min_bins=5)
    # A row count written dp_sum(1.0, ε, 0, 1) selects by its own Laplace
    # noise on the sum's lattice (dp_sum_selected): the same persons per
    # group (each adds 1), its shown values binned by rounding; its keep law
    # is the core's (tested there), so only the audit is checked here.
    released_keys(an, ("kt", "kt_prime"), RARE_T, None, Decimal(repr(AUDIT_EPSILON)),
                  "the thresholded row count", min_bins=5, aggregate=f"dp_sum(1.0, {AUDIT_EPSILON!r}, 0, 1)")
    key_audit_negative_control()


def released_keys(an, tables, rare, expected, per_stmt, rule, floor=None, min_bins=8, aggregate=None):
    """Whether the rare group is shown, and its noisy count when it is, on
    two neighbouring tables (person 0, with rows in both groups, left out);
    audited as one output per statement. `floor`: the least count shown;
    `min_bins`: the bins the audit must see (a thresholded count's shown
    values start at tau and thin out geometrically: about 7 of them hold 30
    draws of each table at N = 4000). `expected`: the rare group's keep
    probability on each table, or None not to check it; `aggregate`: the
    release (dp_count at the audit's ε unless named)."""
    ledger = Ledger(an)
    an.execute("CREATE TEMP TABLE IF NOT EXISTS rk (tbl text, i int, rare bigint, shown int)")
    an.execute("TRUNCATE pg_temp.rk")
    t0 = time.time()
    for tbl in tables:
        an.execute(f"""DO $$ BEGIN FOR i IN 1..{KEY_AUDIT_N} LOOP
            INSERT INTO pg_temp.rk SELECT '{tbl}', i, max(c) FILTER (WHERE region = 'rare'), count(*)
            FROM (SELECT region, {aggregate or f'dp_count({AUDIT_EPSILON!r})'} AS c FROM {tbl} GROUP BY region) s;
        END LOOP; END $$""")
    secs = time.time() - t0
    out = {t: [] for t in tables}
    common_missing = 0
    for tbl, rare_count, shown in an.execute("SELECT tbl, rare, shown FROM pg_temp.rk ORDER BY tbl, i"):
        out[tbl].append(-1000 if rare_count is None else rare_count)  # absent: a bin of its own
        common_missing += (shown - (0 if rare_count is None else 1)) != 1
    charges = ledger.new()
    check(f"key audit statements ({rule}) each charged once",
          len(charges) == 2 * KEY_AUDIT_N and all(r[2] == per_stmt and r[3] == SELECTION_DELTA for r in charges),
          f"{len(charges)} ledger rows for {2 * KEY_AUDIT_N} statements, each epsilon {per_stmt} ({secs:.1f} s)")
    rates = {tbl: sum(x != -1000 for x in out[tbl]) / KEY_AUDIT_N for tbl in out}
    law_ok = expected is None or all(
        abs(rates[t] - expected[t]) < 5 * math.sqrt(expected[t] * (1 - expected[t]) / KEY_AUDIT_N) for t in out)
    a, b = tables
    check(f"the rare key is shown as often as {rule} says", law_ok and common_missing == 0,
          f"shown on {a} {rates[a]:.3f} (expected {expected[a] if expected else 'any':.5}, {rare} persons), "
          f"on {b} {rates[b]:.3f} (expected {expected[b] if expected else 'any':.5}); "
          f"common group missing {common_missing} times")
    if floor is not None:
        low = sum(1 for t in out for x in out[t] if x != -1000 and x < floor)
        check(f"no count below {floor} is shown", low == 0, f"{low} shown below")
    bins, max_loss, excess, worst_bin = privacy_loss_audit(out[a], out[b], 1, AUDIT_MIN_COUNT, AUDIT_Z)
    check(f"DP audit of the released key set and count ({rule}), {a} vs {b}",
          bins >= min_bins and excess <= float(per_stmt),
          f"N={KEY_AUDIT_N} each: bins audited {bins}, max loss {max_loss:.3f}, max excess {excess:.3f} "
          f"(at {worst_bin}; -1000 = not shown) <= charged epsilon {per_stmt}")


def key_audit_negative_control():
    per_stmt = Decimal(repr(AUDIT_EPSILON))
    # Negative control: keys shown by a threshold on a count with too little
    # noise (a person's group count plus geometric noise at ε = 3, kept from
    # the true size of the rare group): the audit must flag it.
    rng = random.Random(20261123)

    def thresholded(persons):
        draws = []
        for _ in range(KEY_AUDIT_N):
            if persons + two_sided_geometric(rng, 3.0) >= RARE:
                draws.append(persons + two_sided_geometric(rng, AUDIT_EPSILON / 2))
            else:
                draws.append(-1000)
        return draws
    nb, nml, nex, _ = privacy_loss_audit(thresholded(RARE), thresholded(RARE - 1), 1, AUDIT_MIN_COUNT, AUDIT_Z)
    check("negative control (keys thresholded with too little noise) FAILS the key audit", nex > float(per_stmt),
          f"bins audited {nb}, max loss {nml:.3f}, max excess {nex:.3f} > {per_stmt}")


# ---------------------------------------------------------------- 3. attacks

def attacks(su, an):
    ledger = Ledger(an)
    sum_sd = an.execute("SELECT std_dev, mechanism FROM dp_accuracy('auto', %s, 100)", (ATTACK_EPSILON,)).fetchone()
    count_sd = geometric_sd(ATTACK_EPSILON)
    # (name, what the analyst sends, its FROM ... WHERE, the aggregate's value column or None for a count)
    # Self-joins of a table with several rows per person are refused (a
    # person's rows would multiply, and with them the run time), charging nothing.
    refusals = [
        ("self-join count", "SELECT dp_count(%s) FROM trips a JOIN trips b ON a.person_id = b.person_id WHERE a.person_id = %s"),
        ("triple self-join count", "SELECT dp_count(%s) FROM trips a JOIN trips b USING (person_id) "
                                   "JOIN trips c USING (person_id) WHERE person_id = %s"),
        ("self-join dp_sum", "SELECT dp_sum(a.amount, %s, 0, 100) FROM trips a JOIN trips b "
                             "ON a.person_id = b.person_id WHERE a.person_id = %s"),
    ]
    for name, sql in refusals:
        state, message = refused(an, sql, (ATTACK_EPSILON, TARGET))
        check(f"attack: {name}", state == "ZB003" and not ledger.new(), f"refused: {state} {message}")
    cases = [
        ("public keys x10 join dp_sum",
         "FROM trips t JOIN keys10 k ON k.person_id = t.person_id WHERE t.person_id = %s", "t.amount"),
        ("generate_series x10 count", "FROM trips, generate_series(1, 10) g WHERE person_id = %s", None),
        ("listed keys x10 dp_sum",
         "FROM (SELECT 1 AS one) l LEFT JOIN (trips t JOIN keys10 k USING (person_id)) ON t.person_id = %s GROUP BY l.one",
         "t.amount"),
    ]
    (raw,), = truth(su, "SELECT sum(amount) FROM trips WHERE person_id = %s", (TARGET,))
    for name, from_where, value in cases:
        if value is None:
            sql = f"SELECT dp_count(%s) {from_where}"
            # One person counts once: their bounded contribution is 1.
            true_value, noise_sd = 1, count_sd
            (unbounded,), = truth(su, f"SELECT count(*) {from_where}", (TARGET,))
        else:
            sql = f"SELECT dp_sum({value}, %s, 0, 100) {from_where}"
            # Bounding sums the person's joined rows, then clamps that one value to [0, 100].
            (true_value,), = truth(su, f"SELECT LEAST(sum({value}), 100) {from_where}", (TARGET,))
            noise_sd = sum_sd[0]
            (unbounded,), = truth(su, f"SELECT sum(LEAST({value}, 100)) {from_where}", (TARGET,))
        answers = [an.execute(sql, (ATTACK_EPSILON, TARGET), prepare=True).fetchone()[0]
                   for _ in range(ATTACK_RUNS)]
        charges = ledger.new()
        charge_ok = (len(charges) == ATTACK_RUNS
                     and all(r[2] == dec(ATTACK_EPSILON) and r[3] == 0 for r in charges))
        errors = [a - true_value for a in answers]
        mean_err = statistics.fmean(errors)
        sd = math.sqrt(statistics.fmean([e * e for e in errors]))  # about the truth, not about the errors' mean
        ratio = sd / noise_sd
        # Copies counted row by row would shift the answers to the unbounded
        # value: the mean error must stay within 5 standard errors of 0 (the
        # errors' own spread, when the gate's bounding noise is the larger).
        centred = abs(mean_err) < 5 * max(sd, noise_sd) / math.sqrt(ATTACK_RUNS)
        extra = "" if value is None else f", the person's own rows sum to {raw}"
        check(f"attack: {name}", ratio >= 0.8 and centred and charge_ok,
              f"{ATTACK_RUNS} runs at eps {ATTACK_EPSILON}: error sd {sd:.3f}, noise sd {noise_sd:.3f}, "
              f"ratio {ratio:.3f} (>= 0.8); mean error {mean_err:+.3f}; bounded truth {true_value}, "
              f"row-by-row copies would give {unbounded}{extra}; {len(charges)} charges of {ATTACK_EPSILON}")


# ---------------------------------------------------------------- main

def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 54331
    if port == 54320:
        sys.exit("port 54320 belongs to another server")
    server = Server(port)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.time()
    try:
        server.start()
        with server.connect("postgres") as su:
            su.execute(SETUP)
            with server.connect(ANALYST) as an:
                check("analyst session", an.execute("SHOW dpnoise.analyst").fetchone()[0] == "on")
                for section in (bi_tools, audit, plain_audit, median_audit, key_audit, threshold_key_audit, attacks):
                    try:
                        section(su, an)
                    except Exception as e:  # a section that breaks is a failed check
                        check(f"{section.__name__} ran", False, f"{type(e).__name__}: {e}")
    except Exception as e:
        check("server and set-up", False, f"{type(e).__name__}: {e}")
    finally:
        server.stop()
    failed = [r for r in RESULTS if not r[0]]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks passed in {time.time() - t0:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
