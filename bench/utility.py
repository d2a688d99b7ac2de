"""dpnoise against PipelineDP on the same data at the same (ε, δ) (issue 39):
groups kept and RMSE per query, mechanism and k. Not a test.

    python3 bench/utility.py --port 5432        # a server with dpnoise preloaded
    bash bench/utility.sh                       # builds, installs, starts one

PipelineDP comes from the package index: the bench makes a virtual
environment (--venv, default $TMPDIR/dpnoise-utility-venv), installs
pipeline-dp 0.3.1 there (else the newest that resolves) and runs itself
again under it. If it cannot be installed, the PipelineDP columns are the
noise its documented calibration gives (Laplace b = k·C/ε, the analytic
Gaussian of Balle & Wang for the L2 sensitivity C·√k), not measurements.

Data (seed 39): 20 000 persons with 1 to 8 rows each, each row at one of
200 sites drawn with Zipf weights 1/(i + 1), an amount in [0, 100]
(exponential, mean 30, capped). dpnoise runs as an analyst over the table
protected with dp_protect(visits, 'person_id', 10), with
dpnoise.max_groups_contributed lowered to k. PipelineDP reads the same rows
combined per person and site, as dpnoise's bounding combines them: one row
per person and site (their count, their sum, their average), with
max_partitions_contributed = k and max_contributions_per_partition = 1, so
both bound a person to k sites, chosen uniformly, and clamp each person's
value per site to [0, 100]. The true answers (every person in every site,
no bounding, no noise) are computed as the superuser.

Budget, the same in both: every released statistic spends ε = 1 (and
δ = 1e-5 for the Gaussian), the average's two parts together too; private
partition selection spends (ε_s, δ_s) = (1, 1e-5) per query on top, with
the same optimal rule (PipelineDP's truncated geometric, dpnoise's
dp_partition_selected) at (ε_s/k, δ_s/k) per site. PipelineDP's naive
accountant is given the totals and weights that make these its shares, and
the bench checks the shares it computed.

Counts with private keys at equal totals (--counts alone, or after the
rest): each side spends (ε, δ) = (1, 1e-5) per query in all. dpnoise's
dp_count(1.0) selects its groups by its own noise (a thresholded count:
ε to the count, δ to the threshold), beside its separate selection
(dp_count(0.5) and dp_partition_selected at (0.5, 1e-5)), against
PipelineDP's privacy-id count with its truncated-geometric selection (its
accountant splits ε in halves, δ to the selection) and with its
post-aggregation thresholding (Laplace thresholding: ε to the count, δ to
the threshold). The run time's own release is off for the analyst
(dpnoise.timing_epsilon = 0) and the ledger is checked to hold (1, 1e-5) a
statement. Error is reported against the truth and against the bounded
expectation (each person's chance to count in a site, min(1, k / their
sites), summed: noise and the choice of sites, without bounding's bias),
over the (site, run) pairs both sides kept.

Medians per site over several rows per person (--medians alone, or after
the rest; issue 45 item 2): dpnoise's dp_median(amount, 1, 0, 100) over
the raw rows (each person adds their own median in each of their k sites)
against PipelineDP's PERCENTILE(50) over the same raw rows
(max_contributions_per_partition = 1: one of a person's rows per site,
sampled), both with private selection at (1, 1e-5). RMSE against each
site's median of rows (percentile_cont, as the superuser), over the
(site, run) pairs both kept. Where the environment also holds Tumult
Analytics (tmlt.analytics 0.21, with PySpark and Java: pip install it into
--venv), its median joins, at fewer runs (--tumult-runs, default 10: about
a minute a run): get_groups at (1, 1e-5) over MaxRowsPerID(k) for the
keys, then MaxGroupsPerID(k), MaxRowsPerGroupPerID(1) and median at ε = 1.
"""
import argparse
import math
import multiprocessing
import os
import random
import statistics
import subprocess
import sys

EPS = 1.0
DELTA = 1e-5
SEL_EPS = 1.0
SEL_DELTA = 1e-5
TOTAL_EPS, TOTAL_DELTA = 1.0, 1e-5  # the equal-total count comparison
LOWER, UPPER = 0.0, 100.0
PERSONS = 20_000
SITES = 200
SEED = 39
DB = "dpnoise_utility"
ANALYST = "utility_analyst"

# Two queries: the count and the sum together (one partition selection
# for both, in both tools), and the average. dp_avg is pure ε (it takes no
# δ and no mechanism): its runs are compared with both of PipelineDP's means.
QUERIES = {
    ("count,sum", "laplace"): f"dp_count({EPS}, 'laplace'), dp_sum(amount, {EPS}, {LOWER}, {UPPER}, 0, 'laplace')",
    ("count,sum", "gaussian"): f"dp_count({EPS}, {DELTA}, 'gaussian'), "
                               f"dp_sum(amount, {EPS}, {LOWER}, {UPPER}, {DELTA}, 'gaussian')",
    ("avg", None): f"dp_avg(amount, {EPS}, {LOWER}, {UPPER})",
}
MECHANISMS = ("laplace", "gaussian")
CASES = [(q, m) for q in ("count", "sum", "avg") for m in MECHANISMS]


def ensure_pipeline_dp(venv):
    """Runs the bench under a virtual environment holding pipeline-dp, made
    on first use; returns False if it cannot be installed."""
    try:
        import pipeline_dp  # noqa: F401
        return True
    except ImportError:
        pass
    if os.environ.get("DPNOISE_UTILITY_REEXEC"):
        return False
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    for spec in ("pipeline-dp==0.3.1", "pipeline-dp"):
        if subprocess.run(pip + [spec]).returncode == 0:
            break
    else:
        print("bench: pipeline-dp could not be installed; PipelineDP's columns are its analytic figures",
              file=sys.stderr)
        return False
    os.environ["DPNOISE_UTILITY_REEXEC"] = "1"
    os.execv(python, [python] + sys.argv)


def psql(port, db, script, user="postgres"):
    out = subprocess.run(
        ["psql", "-X", "-qAt", "-F", "|", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port),
         "-U", user, "-d", db],
        input=script, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"psql failed: {out.stderr.strip()}")
    return [line for line in out.stdout.splitlines() if line]


def load(port, runs):
    """The rows once (the superuser's visits_data), and, for the analyst,
    the protected table visits: R copies, one partition each (run = r),
    each copy's persons renumbered so that dpnoise's keyed choice of their
    sites is a fresh draw in each run, as PipelineDP's is."""
    rng = random.Random(SEED)
    weights = [1 / (i + 1) for i in range(SITES)]
    lines = []
    for person in range(1, PERSONS + 1):
        for site in rng.choices(range(SITES), weights, k=rng.randint(1, 8)):
            lines.append(f"{person}\t{site}\t{min(UPPER, round(rng.expovariate(1 / 30), 2))}")
    psql(port, "postgres", f"DROP DATABASE IF EXISTS {DB} WITH (FORCE); CREATE DATABASE {DB};")
    psql(port, DB, f"""
        CREATE EXTENSION dpnoise;
        DO $$ BEGIN CREATE ROLE {ANALYST} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
        CREATE TABLE visits_data (person_id int NOT NULL, site int NOT NULL, amount float8 NOT NULL);
        CREATE TABLE visits (run int NOT NULL, person_id int NOT NULL, site int NOT NULL, amount float8 NOT NULL)
            PARTITION BY LIST (run);""")
    subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", DB,
                    "-v", "ON_ERROR_STOP=1", "-c", "COPY visits_data FROM STDIN"],
                   input="\n".join(lines) + "\n", text=True, check=True)
    psql(port, DB, "".join(f"CREATE TABLE visits_{r} PARTITION OF visits FOR VALUES IN ({r});" for r in range(runs)) + f"""
        INSERT INTO visits SELECT r, r * {10 * PERSONS} + person_id, site, amount
            FROM visits_data, generate_series(0, {runs - 1}) r;
        ANALYZE visits;
        SELECT dp_protect('visits', 'person_id', 10);
        SELECT dp_analyst('{ANALYST}');
        SELECT dp_budget_grant('{ANALYST}', 1e9, 1);
        ALTER ROLE {ANALYST} IN DATABASE {DB} SET dpnoise.timing_epsilon = 0;""")
    return len(lines)


def raw_rows(port):
    """The rows as they are (person, site, amount), for the medians."""
    return [(int(p), int(s_), float(a)) for p, s_, a in
            (line.split("|") for line in psql(port, DB, "SELECT person_id, site, amount FROM visits_data"))]


def dpnoise_medians(port, k, runs):
    """dp_median per site, R runs (run r over copy r), each statement's ledger row checked."""
    script = [f"SET dpnoise.max_groups_contributed = {k};", f"SET dpnoise.selection_epsilon = {SEL_EPS};",
              f"SET dpnoise.selection_delta = {SEL_DELTA};"]
    for r in range(runs):
        script.append(f"\\echo @run {r}")
        script.append(f"SELECT site, dp_median(amount, {EPS}, {LOWER}, {UPPER}) FROM visits WHERE run = {r} GROUP BY site;")
        script.append("\\echo @charge")
        script.append("SELECT epsilon, delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1;")
    answers, key = {}, None
    for line in psql(port, DB, "\n".join(script), user=ANALYST):
        if line.startswith("@"):
            key = line.split()
            if key[0] == "@run":
                answers[int(key[1])] = {}
        elif key[0] == "@charge":
            eps, delta = (float(x) for x in line.split("|"))
            if abs(eps - (EPS + SEL_EPS)) > 1e-9 or abs(delta - SEL_DELTA) > 1e-15:
                raise SystemExit(f"dpnoise's median was charged ({eps}, {delta})")
        else:
            site, value = line.split("|")
            answers[int(key[1])][int(site)] = float(value)
    return answers


RAW = []


def pipeline_dp_median_run(task):
    """PipelineDP's PERCENTILE(50) per site over the raw rows, at ε = 1 for
    the median and (1, 1e-5) for its selection (the accountant's shares checked)."""
    import numpy as np
    import pipeline_dp
    k, r = task
    seed = int.from_bytes(os.urandom(8), "little")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPS + SEL_EPS, total_delta=SEL_DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PERCENTILE(50)], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=k, max_contributions_per_partition=1, min_value=LOWER, max_value=UPPER)
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda row: row[0], partition_extractor=lambda row: row[1],
        value_extractor=lambda row: row[2])
    lazy = engine.aggregate(RAW, params, extractors)
    accountant.compute_budgets()
    result = list(lazy)
    shares = sorted((round(x.mechanism_spec.eps, 12), round(x.mechanism_spec.delta, 18)) for x in accountant._mechanisms)
    if shares != sorted([(EPS, 0.0), (SEL_EPS, SEL_DELTA)]):
        raise RuntimeError(f"PipelineDP's budget shares {shares}")
    return ((k, r), {site: t.percentile_50 for site, t in result})


def tumult_medians(ks, runs):
    """Tumult Analytics' per-site medians, R runs per k; None if it is not installed."""
    try:
        import tmlt.analytics as ta
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.createDataFrame([(p, s_, a) for p, s_, a in RAW], schema=["person_id", "site", "amount"]).cache()
    out = {}
    for k in ks:
        for r in range(runs):
            session = ta.Session.from_dataframe(
                privacy_budget=ta.ApproxDPBudget(EPS + SEL_EPS, SEL_DELTA), source_id="visits", dataframe=frame,
                protected_change=ta.AddRowsWithID("person_id"))
            keys = session.evaluate(ta.QueryBuilder("visits").enforce(ta.MaxRowsPerID(k)).get_groups(["site"]),
                                    ta.ApproxDPBudget(SEL_EPS, SEL_DELTA))
            query = (ta.QueryBuilder("visits").enforce(ta.MaxGroupsPerID("site", k))
                     .enforce(ta.MaxRowsPerGroupPerID("site", 1))
                     .groupby(ta.KeySet.from_dataframe(keys)).median("amount", LOWER, UPPER))
            answer = session.evaluate(query, ta.ApproxDPBudget(EPS, 0)).toPandas()
            out[(k, r)] = {int(row.site): float(row.amount_median) for row in answer.itertuples()}
    spark.stop()
    return out


def medians_section(port, ks, runs, measured, jobs, tumult_runs=10):
    """Prints the per-site median comparison over several rows per person."""
    RAW.extend(raw_rows(port))
    pool = multiprocessing.get_context("fork").Pool(jobs) if measured else None
    pending = pool.map_async(pipeline_dp_median_run, [(k, r) for k in ks for r in range(runs)]) if measured else None
    ours = {k: dpnoise_medians(port, k, runs) for k in ks}
    theirs = dict(pending.get()) if measured else {}
    if pool:
        pool.close()
        pool.join()
    truth = {int(s_): float(m) for s_, m in (line.split("|") for line in psql(
        port, DB, "SELECT site, percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM visits_data GROUP BY site"))}
    tumult = tumult_medians(ks, tumult_runs)
    print(f"\nMedians per site over several rows per person: ε = {EPS} per median, selection ({SEL_EPS}, {SEL_DELTA}) "
          f"on each side, R = {runs} (Tumult: {tumult_runs if tumult else 'not installed'}); RMSE against each "
          "site's median of rows, over the (site, run) pairs both sides kept (dpnoise's first runs against Tumult's)")
    head = f"{'k':>2} {'against':10} | {'kept dpn':>8} {'kept them':>9} | {'RMSE dpn':>9} {'RMSE them':>9} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    fmt = lambda x, w, p: f"{x:{w}.{p}f}" if x is not None else f"{'—':>{w}}"
    for k in ks:
        for name, other, n_runs in (("PipelineDP", theirs, runs), ("Tumult", tumult or {}, tumult_runs)):
            se_o = se_t = 0.0
            n, kept_o, kept_t = 0, [], []
            for r in range(n_runs):
                a, b = ours[k][r], other.get((k, r))
                kept_o.append(len(a))
                if b is None:
                    continue
                kept_t.append(len(b))
                for s_ in a.keys() & b.keys():
                    se_o += (a[s_] - truth[s_]) ** 2
                    se_t += (b[s_] - truth[s_]) ** 2
                    n += 1
            rm_o = math.sqrt(se_o / n) if n else None
            rm_t = math.sqrt(se_t / n) if n else None
            kt = statistics.fmean(kept_t) if kept_t else None
            print(f"{k:2} {name:10} | {fmt(statistics.fmean(kept_o), 8, 1)} {fmt(kt, 9, 1)} | {fmt(rm_o, 9, 2)} "
                  f"{fmt(rm_t, 9, 2)} {fmt(rm_o / rm_t if n else None, 6, 3)}")

def truths(port):
    """Per site, as the superuser: persons, the sum of each person's total
    clamped to [0, 100], the average of each person's average."""
    true = {}
    for line in psql(port, DB, f"""
            SELECT site, count(*), sum(least(greatest(s, {LOWER}), {UPPER})), avg(a)
            FROM (SELECT person_id, site, sum(amount) s, avg(amount) a FROM visits_data GROUP BY 1, 2) p
            GROUP BY site"""):
        site, n, s, a = line.split("|")
        true[int(site)] = {"count": float(n), "sum": float(s), "avg": float(a)}
    rows = [tuple(float(x) if i >= 2 else int(x) for i, x in enumerate(line.split("|")))
            for line in psql(port, DB, "SELECT person_id, site, sum(amount), avg(amount) FROM visits_data GROUP BY 1, 2")]
    return true, rows


def run_dpnoise(port, k, runs):
    """One analyst session per k: R runs of each query, run r over the
    copy r; R runs more over copy 0 (the same choice of sites each time,
    so their spread is the noise alone: 'fixed'); dp_query_accuracy's σ of
    the count and the sum."""
    script = [f"SET dpnoise.max_groups_contributed = {k};",
              f"SET dpnoise.selection_epsilon = {SEL_EPS};",
              f"SET dpnoise.selection_delta = {SEL_DELTA};"]
    for q, m in [("count", "laplace"), ("count", "gaussian"), ("sum", "laplace"), ("sum", "gaussian")]:
        bounds = f", {LOWER}, {UPPER}" if q == "sum" else ""
        delta = DELTA if m == "gaussian" else 0
        script.append(f"\\echo @sigma {q} {m}")
        script.append(f"SELECT std_dev FROM dp_query_accuracy('{q}', {EPS}, '{{visits}}'{bounds}, "
                      f"delta => {delta}, mechanism => '{m}');")
    for (qs, m), aggs in QUERIES.items():
        for r in range(2 * runs):
            script.append(f"\\echo @run {qs} {m} {r}")
            script.append(f"SELECT site, {aggs} FROM visits WHERE run = {r if r < runs else 0} GROUP BY site;")
    # (query, mechanism or None, run) -> {site: answer}
    answers, sigma, key = {}, {}, None
    for line in psql(port, DB, "\n".join(script), user=ANALYST):
        if line.startswith("@"):
            key = line.split()
            if key[0] == "@run":
                m = None if key[2] == "None" else key[2]
                for q in key[1].split(","):
                    answers[(q, m, int(key[3]))] = {}
        elif key[0] == "@sigma":
            sigma[(key[1], key[2])] = float(line)
        else:
            site, *values = line.split("|")
            for q, value in zip(key[1].split(","), values):
                answers[(q, None if key[2] == "None" else key[2], int(key[3]))][int(site)] = float(value)
    return answers, sigma


# PipelineDP's runs, in worker processes forked before any of them drew:
# each reseeds the generators its bounding uses.
ROWS = []


def pipeline_dp_run(task):
    import numpy as np
    import pipeline_dp
    qs, m, k, r = task
    seed = int.from_bytes(os.urandom(8), "little")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    gaussian = m == "gaussian"
    noise = pipeline_dp.NoiseKind.GAUSSIAN if gaussian else pipeline_dp.NoiseKind.LAPLACE
    # The naive accountant splits ε by weight over the mechanisms (the mean
    # has two: its count and its centred sum) and the selection (weight 1),
    # δ over those that use it. The totals and weights below make each
    # statistic's share ε = 1 (δ = 1e-5 for the Gaussian), the mean's two
    # parts ½ each, and the selection's (1, 1e-5); checked below.
    if qs == "avg":
        metrics, weight, names = [pipeline_dp.Metrics.MEAN], 0.5, ["MeanCount", "MeanSum"]
    else:
        metrics, weight, names = [pipeline_dp.Metrics.PRIVACY_ID_COUNT, pipeline_dp.Metrics.SUM], 1, ["PrivacyIdCount", "Sum"]
    statistics_ = len(names) * weight
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=statistics_ * EPS + SEL_EPS,
                                                   total_delta=(statistics_ * DELTA if gaussian else 0) + SEL_DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=metrics, noise_kind=noise, max_partitions_contributed=k, max_contributions_per_partition=1,
        min_value=LOWER, max_value=UPPER, budget_weight=weight)
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda row: row[0], partition_extractor=lambda row: row[1],
        value_extractor=(lambda row: row[3]) if qs == "avg" else (lambda row: row[2]))
    lazy = engine.aggregate(ROWS, params, extractors)
    accountant.compute_budgets()
    result = list(lazy)
    shares = sorted((x.mechanism_spec.name, round(x.mechanism_spec.eps, 12), round(x.mechanism_spec.delta, 18))
                    for x in accountant._mechanisms)
    want = sorted([(n, round(EPS * weight, 12), round(DELTA * weight if gaussian else 0, 18)) for n in names]
                  + [("PartitionSelection", round(SEL_EPS, 12), round(SEL_DELTA, 18))])
    if shares != want:
        raise RuntimeError(f"PipelineDP's budget shares {shares}, expected {want}")
    if qs == "avg":
        return [(("avg", m, k, r), {site: t.mean for site, t in result})]
    return [(("count", m, k, r), {site: t.privacy_id_count for site, t in result}),
            (("sum", m, k, r), {site: t.sum for site, t in result})]


def bounded_expectation(rows, k):
    """Per site: the expected persons counted once each person keeps k of
    their sites, chosen uniformly (min(1, k / sites) each)."""
    sites = {}
    for person, site, *_ in rows:
        sites.setdefault(person, set()).add(site)
    expected = {}
    for chosen in sites.values():
        for site in chosen:
            expected[site] = expected.get(site, 0.0) + min(1.0, k / len(chosen))
    return expected


def dpnoise_counts(port, k, runs):
    """dp_count at the equal total, R runs each: the thresholded count
    (dp_count(1.0)) and the separate selection (dp_count(0.5) plus
    selection at 0.5), each statement's ledger row checked; and each run's
    bounded count (dp_count(1000): no noise, every site shown), the same
    keyed choice of sites the two routes counted."""
    half = TOTAL_EPS / 2
    script = [f"SET dpnoise.max_groups_contributed = {k};", f"SET dpnoise.selection_delta = {TOTAL_DELTA};",
              f"SET dpnoise.selection_epsilon = {half};"]
    for route, eps in (("thresholded", TOTAL_EPS), ("separate", half), ("bounded", 1000.0)):
        for r in range(runs):
            script.append(f"\\echo @run {route} {r}")
            script.append(f"SELECT site, dp_count({eps}) FROM visits WHERE run = {r} GROUP BY site;")
            script.append(f"\\echo @charge {route} {r}")
            script.append("SELECT epsilon, delta FROM dp_my_ledger ORDER BY id DESC LIMIT 1;")
    answers, key = {}, None
    for line in psql(port, DB, "\n".join(script), user=ANALYST):
        if line.startswith("@"):
            key = line.split()
            if key[0] == "@run":
                answers[(key[1], int(key[2]))] = {}
        elif key[0] == "@charge":
            eps, delta = (float(x) for x in line.split("|"))
            if key[1] == "bounded":
                continue
            if abs(eps - TOTAL_EPS) > 1e-9 or abs(delta - TOTAL_DELTA) > 1e-15:
                raise SystemExit(f"dpnoise's {key[1]} count was charged ({eps}, {delta}), "
                                 f"not ({TOTAL_EPS}, {TOTAL_DELTA})")
        else:
            site, value = line.split("|")
            answers[(key[1], int(key[2]))][int(site)] = float(value)
    return answers


def pipeline_dp_count_run(task):
    """PipelineDP's privacy-id count at the equal total: its truncated-geometric
    selection and a separate count, or its post-aggregation thresholding;
    and, from the same seeds (the same choice of sites), at ε = 10^6: the
    run's bounded count."""
    import numpy as np
    import pipeline_dp
    variant, k, r = task
    seed = int.from_bytes(os.urandom(8), "little")
    out = []
    for eps in (TOTAL_EPS, 1e6):
        random.seed(seed)
        np.random.seed(seed % 2**32)
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=TOTAL_DELTA)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        extra = {}
        if variant == "post":
            extra = {"post_aggregation_thresholding": True,
                     "partition_selection_strategy": pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING}
        params = pipeline_dp.AggregateParams(
            metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            max_partitions_contributed=k, max_contributions_per_partition=1, **extra)
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda row: row[0], partition_extractor=lambda row: row[1],
            value_extractor=lambda row: 0)
        lazy = engine.aggregate(ROWS, params, extractors)
        accountant.compute_budgets()
        out.append({site: t.privacy_id_count for site, t in lazy})
    return ((variant, k, r), (out[0], {s: round(v) for s, v in out[1].items()}))


def counts_section(port, ks, runs, measured, jobs):
    """Prints the equal-total comparison of counts with private keys."""
    pool = multiprocessing.get_context("fork").Pool(jobs) if measured else None
    pending = pool.map_async(pipeline_dp_count_run, [(v, k, r) for k in ks for v in ("truncated", "post")
                                                     for r in range(runs)]) if measured else None
    ours = {k: dpnoise_counts(port, k, runs) for k in ks}
    theirs = dict(pending.get()) if measured else {}
    if pool:
        pool.close()
        pool.join()
    truth_all = {}
    for person, site, *_ in ROWS:
        truth_all[site] = truth_all.get(site, 0) + 1
    print(f"\nCounts with private keys at equal totals: (ε, δ) = ({TOTAL_EPS}, {TOTAL_DELTA}) per query on "
          f"each side, R = {runs}. RMSE over the (site, run) pairs both kept: 'expect.' against the bounded "
          "expectation (the issue's protocol: noise and the choice of sites), 'noise' against the count the "
          "run bounded (each side's own choice of sites, released at ε = 1000 for dpnoise, 10^6 for PipelineDP: the noise alone), 'truth' "
          "against all persons")
    head = (f"{'k':>2} {'dpnoise route':24} {'PipelineDP route':30} | {'kept dpn':>8} {'kept PDP':>8} | "
            f"{'expect. dpn':>11} {'expect. PDP':>11} {'ratio':>6} | {'noise dpn':>9} {'noise PDP':>9} "
            f"{'ratio':>6} | {'truth dpn':>9} {'truth PDP':>9}")
    print(head)
    print("-" * len(head))
    names = {"thresholded": "thresholded dp_count(1)", "separate": "dp_count(.5) + select .5",
             "truncated": "count .5 + trunc. geometric .5", "post": "post-aggregation thresholding"}
    verdicts = []
    for k in ks:
        expect = bounded_expectation(ROWS, k)
        for mine, other, target in (("thresholded", "truncated", 0.75), ("thresholded", "post", 1.0),
                                    ("separate", "truncated", None)):
            se = {"o": [0.0, 0.0, 0.0], "t": [0.0, 0.0, 0.0]}
            n, kept_o, kept_t = 0, [], []
            for r in range(runs):
                a, bound_a = ours[k][(mine, r)], ours[k][("bounded", r)]
                b, bound_b = theirs.get((other, k, r), (None, None))
                kept_o.append(len(a))
                if b is None:
                    continue
                kept_t.append(len(b))
                for s_ in a.keys() & b.keys():
                    for side, x, bound in (("o", a[s_], bound_a), ("t", b[s_], bound_b)):
                        se[side][0] += (x - expect[s_]) ** 2
                        se[side][1] += (x - bound.get(s_, 0)) ** 2
                        se[side][2] += (x - truth_all[s_]) ** 2
                    n += 1
            rm = {x: [math.sqrt(v / n) if n else None for v in se[x]] for x in se}
            ko, kt = statistics.fmean(kept_o), (statistics.fmean(kept_t) if kept_t else None)
            ratio = [rm["o"][i] / rm["t"][i] if n else None for i in range(3)]
            fmt = lambda x, w, p: f"{x:{w}.{p}f}" if x is not None else f"{'—':>{w}}"
            print(f"{k:2} {names[mine]:24} {names[other]:30} | {fmt(ko, 8, 1)} {fmt(kt, 8, 1)} | "
                  f"{fmt(rm['o'][0], 11, 2)} {fmt(rm['t'][0], 11, 2)} {fmt(ratio[0], 6, 3)} | "
                  f"{fmt(rm['o'][1], 9, 2)} {fmt(rm['t'][1], 9, 2)} {fmt(ratio[1], 6, 3)} | "
                  f"{fmt(rm['o'][2], 9, 2)} {fmt(rm['t'][2], 9, 2)}")
            if target is not None and n:
                # Groups kept: the same or more, within two standard errors
                # of the difference of the two means over R runs.
                se_kept = math.sqrt((statistics.variance(kept_o) + statistics.variance(kept_t)) / runs)
                for label, i in (("against the bounded expectation", 0), ("noise alone", 1)):
                    ok = ratio[i] <= target and ko >= kt - 2 * se_kept
                    verdicts.append(f"k = {k}, against {names[other]}, {label}: RMSE ratio {ratio[i]:.3f} "
                                    f"(target <= {target}), groups kept {ko:.1f} against {kt:.1f} "
                                    f"(± {se_kept:.2f}): {'PASS' if ok else 'MISS'}")
    print("Targets (thresholded count):")
    for v in verdicts or ["(PipelineDP not measured)"]:
        print("  " + v)


def phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def analytic_gaussian_sigma(eps, delta, l2):
    """σ of the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8):
    the smallest with Φ(Δ/2σ − εσ/Δ) − e^ε·Φ(−Δ/2σ − εσ/Δ) ≤ δ."""
    def d(sigma):
        a, b = l2 / (2 * sigma), eps * sigma / l2
        return phi(a - b) - math.exp(eps) * phi(-a - b)
    lo, hi = 1e-9 * l2, l2
    while d(hi) > delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
    return hi


def analytic_sigma(q, m, k):
    """The noise PipelineDP's calibration gives a count or sum (per site)."""
    c = 1.0 if q == "count" else max(abs(LOWER), abs(UPPER))
    if m == "laplace":
        return math.sqrt(2) * k * c / EPS
    try:  # PipelineDP's own (PyDP's search for the analytic Gaussian's σ)
        from pipeline_dp.dp_computations import compute_sigma
        return compute_sigma(EPS, DELTA, c * math.sqrt(k))
    except ImportError:
        return analytic_gaussian_sigma(EPS, DELTA, c * math.sqrt(k))


def compare(true, ours, theirs, runs, fixed=None):
    """Groups kept per run (mean), RMSE over the (site, run) pairs kept by
    both, the spread of the per-run ratios, and dpnoise's noise alone (the
    spread of the runs over one copy, `fixed`)."""
    kept_o, kept_t, se_o, se_t, ratios, n = [], [], 0.0, 0.0, [], 0
    for r in range(runs):
        a, b = ours[r], theirs[r]
        kept_o.append(len(a))
        if b is None:
            continue
        kept_t.append(len(b))
        both = a.keys() & b.keys()
        eo = sum((a[s] - true[s]) ** 2 for s in both)
        et = sum((b[s] - true[s]) ** 2 for s in both)
        se_o, se_t, n = se_o + eo, se_t + et, n + len(both)
        if et > 0:
            ratios.append(math.sqrt(eo / et))
    rm_o = math.sqrt(se_o / n) if n else math.sqrt(
        statistics.fmean((a[s] - true[s]) ** 2 for r in range(runs) for a in [ours[r]] for s in a))
    rm_t = math.sqrt(se_t / n) if n else None
    spread = statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else None
    always = set.intersection(*(set(a) for a in fixed)) if fixed else set()
    noise = math.sqrt(statistics.fmean(statistics.variance(a[s] for a in fixed) for s in always)) \
        if runs > 1 and always else None
    return statistics.fmean(kept_o), (statistics.fmean(kept_t) if kept_t else None), rm_o, rm_t, spread, noise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=5432)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--ks", default="1,4,10")
    ap.add_argument("--jobs", type=int, default=2, help="processes running PipelineDP")
    ap.add_argument("--venv", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "dpnoise-utility-venv"))
    ap.add_argument("--counts", action="store_true", help="only the equal-total count comparison (k = 1, 4)")
    ap.add_argument("--medians", action="store_true", help="only the per-site medians over several rows per person (k = 1, 4)")
    ap.add_argument("--tumult-runs", type=int, default=10, help="runs of Tumult Analytics' median, where installed")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    measured = ensure_pipeline_dp(args.venv)

    rows = load(args.port, args.runs)
    true, combined = truths(args.port)
    ROWS.extend(combined)
    if args.counts:
        counts_section(args.port, [1, 4], args.runs, measured, args.jobs)
        return
    if args.medians:
        medians_section(args.port, [1, 4], args.runs, measured, args.jobs, args.tumult_runs)
        return
    pool = multiprocessing.get_context("fork").Pool(args.jobs) if measured else None
    pending = pool.map_async(pipeline_dp_run, [(qs, m, k, r) for k in ks for qs in ("count,sum", "avg")
                                               for m in MECHANISMS for r in range(args.runs)]) if measured else None
    ours, sigma = {}, {}
    for k in ks:
        ours[k], sigma[k] = run_dpnoise(args.port, k, args.runs)
    theirs = {}
    if measured:
        for outs in pending.get():
            theirs.update(outs)
        pool.close()
        pool.join()
        import pipeline_dp
        version = getattr(pipeline_dp, "__version__", None)
        if version is None:
            from importlib.metadata import version as v
            version = v("pipeline-dp")
    source = f"PipelineDP {version}, measured" if measured else "PipelineDP's analytic calibration (not installed)"

    print(f"{PERSONS} persons, {rows} rows, {SITES} sites (seed {SEED}); ε = {EPS} per statistic, δ = {DELTA} "
          f"for the Gaussian; selection (ε_s, δ_s) = ({SEL_EPS}, {SEL_DELTA}); R = {args.runs}; against {source}")
    print("RMSE: over the (site, run) pairs kept by both, against the true answers (all persons, no bounding); "
          "sd dpn: dpnoise's spread over R runs on one copy (the same choice of sites: its noise alone); "
          "σ: dpnoise's dp_query_accuracy, and PipelineDP's calibration (Laplace b = k·C/ε, "
          "its analytic Gaussian for C·√k)")
    head = (f"{'query':5} {'noise':8} {'k':>2} | {'kept dpn':>8} {'kept PDP':>8} | {'RMSE dpn':>10} {'RMSE PDP':>10} "
            f"{'ratio':>12} | {'sd dpn':>9} {'σ dpn':>9} {'σ PDP':>9}")
    print(head)
    print("-" * len(head))
    results, unclamped = {}, []
    clamp = lambda answers: answers and {s: min(UPPER, max(LOWER, v)) for s, v in answers.items()}
    for q, m in CASES:
        for k in ks:
            truth = {s: t[q] for s, t in true.items()}
            mine = [ours[k][(q, None if q == "avg" else m, r)] for r in range(args.runs)]
            fixed = [ours[k][(q, None if q == "avg" else m, r)] for r in range(args.runs, 2 * args.runs)]
            other = [theirs.get((q, m, k, r)) for r in range(args.runs)]
            if q == "avg" and measured:
                # dp_avg's answer is clamped to [lower, upper]; PipelineDP's
                # mean is not (a small noisy count can throw it far out): it
                # is compared clamped, which is free post-processing.
                unclamped.append(f"{m} k = {k}: {compare(truth, mine, other, args.runs)[3]:.2f}")
                other = [clamp(a) for a in other]
            kept_o, kept_t, rm_o, rm_t, spread, noise = compare(truth, mine, other, args.runs, fixed)
            s_ours = sigma[k].get((q, m))
            s_theirs = analytic_sigma(q, m, k) if q != "avg" else None
            results[(q, m, k)] = (rm_o, rm_t, s_ours, s_theirs)
            fmt = lambda x, w, p: f"{x:{w}.{p}f}" if x is not None else f"{'—':>{w}}"
            ratio = f"{rm_o / rm_t:5.3f} ±{spread:5.3f}" if rm_t and spread is not None else f"{'—':>12}"
            print(f"{q:5} {m:8} {k:2} | {fmt(kept_o, 8, 1)} {fmt(kept_t, 8, 1)} | {fmt(rm_o, 10, 2)} "
                  f"{fmt(rm_t, 10, 2)} {ratio} | {fmt(noise, 9, 2)} {fmt(s_ours, 9, 2)} {fmt(s_theirs, 9, 2)}")
    print("(dp_avg has no δ: its pure-ε runs stand in both avg rows. ±: the standard error of the per-run ratios.)")
    if unclamped:
        print("PipelineDP's means as it returns them (not clamped to [0, 100]), RMSE: " + "; ".join(unclamped))

    print("\nTargets:")
    for q in ("avg", "count", "sum"):
        if not measured:
            print(f"  {q}: (PipelineDP not measured)")
            continue
        worst = max((results[(q, m, k)][0] / results[(q, m, k)][1], m, k) for m in MECHANISMS for k in ks)
        print(f"  {q}: worst RMSE ratio dpnoise / PipelineDP = {worst[0]:.3f} ({worst[1]}, k = {worst[2]})")
    if 10 in ks:
        s_ours, s_l2 = results[("sum", "gaussian", 10)][2], analytic_gaussian_sigma(EPS, DELTA, UPPER * math.sqrt(10))
        rm = results[("sum", "gaussian", 10)][0]
        print(f"  Gaussian sum at k = 10: dp_query_accuracy σ = {s_ours:.1f}, the L2-calibrated figure "
              f"(analytic Gaussian, Δ2 = 100·√10) {s_l2:.1f}: {100 * (s_ours / s_l2 - 1):+.1f}%; "
              f"measured RMSE {rm:.1f} ({100 * (rm / s_l2 - 1):+.1f}%)")
    counts_section(args.port, [1, 4], args.runs, measured, args.jobs)
    medians_section(args.port, [1, 4], args.runs, measured, args.jobs, args.tumult_runs)


if __name__ == "__main__":
    main()
