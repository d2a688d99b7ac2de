#!/usr/bin/env python3
"""Measure the privacy budget (epsilon) Apache Superset spends over dpnoise.

Runs a BI user's flow through Superset's REST API twice:
  phase "tracked"   : staff is dp_track'ed (repeats answered identically, free)
  phase "untracked" : after dp_untrack('staff') (every release fresh, charged)
After each step it records bi_user's epsilon spent (dpnoise.ledger), the SQL
Superset sent (PostgreSQL log, log_statement=all) and the values returned.

Usage: /tmp/superset-flow/venv/bin/python /tmp/superset-flow/flow.py
Needs: PostgreSQL on 127.0.0.1:54390 (db bi, dpnoise, staff, bi_user with a
budget) and Superset on 127.0.0.1:8099 (admin/admin).
"""
import json
import random
import string
import sys
import time

import psycopg2
import requests

SUPERSET = "http://127.0.0.1:8099"
PG_DSN = "host=127.0.0.1 port=54390 user=postgres dbname=bi"
PG_LOG = "/tmp/superset-flow/pg/server.log"
BI_URI = "postgresql+psycopg2://bi_user@127.0.0.1:54390/bi"
DATASET_SQL = ("SELECT region, dp_count(1.0) AS n, dp_sum(salary, 1.0, 0, 200000) AS s "
               "FROM staff GROUP BY region")
RUN = time.strftime("%H%M%S")

out_lines = []


def out(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    out_lines.append(s)


# ---------------------------------------------------------------- PostgreSQL
pg = psycopg2.connect(PG_DSN)
pg.autocommit = True


def q(sql, args=None):
    with pg.cursor() as c:
        c.execute(sql, args)
        return c.fetchall() if c.description else None


def spent():
    return q("SELECT coalesce(sum(epsilon*releases),0) FROM dpnoise.ledger "
             "WHERE role='bi_user'::regrole")[0][0]


def max_ledger_id():
    return q("SELECT coalesce(max(id),0) FROM dpnoise.ledger")[0][0]


def ledger_since(lid):
    return q("SELECT id, epsilon, releases, identity IS NOT NULL, "
             "left(regexp_replace(statement, '\\s+', ' ', 'g'), 400) "
             "FROM dpnoise.ledger WHERE id > %s AND role='bi_user'::regrole ORDER BY id", (lid,))


def log_pos():
    with open(PG_LOG, "rb") as f:
        f.seek(0, 2)
        return f.tell()


def log_since(pos):
    """bi_user's log entries (statements, errors) written since pos."""
    with open(PG_LOG, "rb") as f:
        f.seek(pos)
        text = f.read().decode("utf-8", "replace")
    entries, cur = [], None
    for line in text.splitlines():
        if line[:4].isdigit() and " [" in line[:40]:
            cur = [line]
            entries.append(cur)
        elif cur is not None:
            cur.append(line)
    res = []
    for e in entries:
        s = "\n".join(e)
        if " bi_user@bi " not in s.split("LOG:")[0].split("ERROR:")[0].split("DETAIL:")[0]:
            continue
        # drop the timestamp/pid prefix, keep "LOG:  statement: ..." / "ERROR: ..."
        body = s.split(" bi_user@bi ", 1)[1]
        res.append(" ".join(body.split()))
    return res


# ------------------------------------------------------------------ Superset
S = requests.Session()


def login():
    r = S.post(f"{SUPERSET}/api/v1/security/login",
               json={"username": "admin", "password": "admin", "provider": "db", "refresh": True})
    r.raise_for_status()
    S.headers["Authorization"] = "Bearer " + r.json()["access_token"]
    r = S.get(f"{SUPERSET}/api/v1/security/csrf_token/")
    if r.ok:
        S.headers["X-CSRFToken"] = r.json()["result"]
        S.headers["Referer"] = SUPERSET


def api(method, path, **kw):
    r = S.request(method, f"{SUPERSET}{path}", timeout=120, **kw)
    try:
        body = r.json()
    except ValueError:
        body = r.text
    return r.status_code, body


# --------------------------------------------------------------- recording
table = []   # (phase, step, epsilon delta, charges)


def step(phase, name, fn):
    """Run fn(), then record epsilon spent, ledger rows, SQL sent, errors."""
    e0, lid, pos = spent(), max_ledger_id(), log_pos()
    try:
        ret = fn()
        err = None
    except Exception as ex:  # keep going; record the failure
        ret, err = None, f"{type(ex).__name__}: {ex}"
    time.sleep(0.3)  # let the log be flushed
    e1 = spent()
    rows = ledger_since(lid)
    sqls = log_since(pos)
    out(f"\n=== [{phase}] {name}")
    out(f"    epsilon spent by bi_user: {e0} -> {e1}  (this step: {e1 - e0})")
    if err:
        out(f"    PYTHON ERROR: {err}")
    out(f"    ledger rows charged this step: {len(rows)}")
    for r in rows:
        out(f"      ledger id={r[0]} eps={r[1]} releases={r[2]} identity={'yes' if r[3] else 'no'} stmt={r[4]}")
    # connection set-up statements psycopg2/SQLAlchemy send on every connect
    boiler = ("LOG: statement: BEGIN", "LOG: statement: ROLLBACK",
              "LOG: statement: SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid WHERE typname = 'hstore';",
              "LOG: statement: select pg_catalog.version()", "LOG: statement: select current_schema()",
              "LOG: statement: show transaction isolation level",
              "LOG: statement: show standard_conforming_strings")
    nb = sum(1 for s in sqls if s in boiler)
    conns = sum(1 for s in sqls if s == "LOG: statement: select pg_catalog.version()")
    out(f"    PostgreSQL log, bi_user: {len(sqls)} entries; {conns} new connections "
        f"({nb} set-up statements: BEGIN/hstore lookup/version()/current_schema()/show .../ROLLBACK); the rest, in order:")
    for s in sqls:
        if s not in boiler:
            out(f"      {s[:700]}")
    table.append((phase, name, e1 - e0, len(rows)))
    return ret


def rows_key(data):
    """Data rows sorted by region, for comparing answers."""
    return sorted(json.dumps(r, sort_keys=True) for r in data)


# ---------------------------------------------------------------- the flow
def adhoc(agg, col):
    return {"expressionType": "SIMPLE", "column": {"column_name": col},
            "aggregate": agg, "label": f"{agg}({col})"}


def flow(phase):
    tag = f"{phase}_{RUN}"
    ids = {}
    answers = {}

    def add_db():
        code, body = api("POST", "/api/v1/database/", json={
            "database_name": f"dpnoise_bi_{tag}", "sqlalchemy_uri": BI_URI,
            "expose_in_sqllab": True, "allow_dml": False, "allow_run_async": False})
        out(f"    POST /api/v1/database/ -> {code} {json.dumps(body)[:300]}")
        if code >= 300:
            raise RuntimeError(f"database create failed: {code} {body}")
        ids["db"] = body["id"]

    def add_dataset():
        code, body = api("POST", "/api/v1/dataset/", json={
            "database": ids["db"], "schema": "public", "table_name": f"staff_dp_{tag}",
            "sql": DATASET_SQL})
        out(f"    POST /api/v1/dataset/ -> {code} {json.dumps(body)[:400]}")
        if code >= 300:
            raise RuntimeError(f"dataset create failed: {code} {body}")
        ids["ds"] = body["id"]

    def refresh():
        code, body = api("PUT", f"/api/v1/dataset/{ids['ds']}/refresh")
        out(f"    PUT /api/v1/dataset/{ids['ds']}/refresh -> {code} {json.dumps(body)[:300]}")
        code, body = api("GET", f"/api/v1/dataset/{ids['ds']}")
        cols = [(c["column_name"], c.get("type")) for c in body["result"]["columns"]]
        out(f"    dataset columns now: {cols}")

    step(phase, "a. add database connection", add_db)
    step(phase, "b. create virtual dataset", add_dataset)
    step(phase, "c. refresh columns", refresh)

    ds = {"id": ids["ds"], "type": "table"}
    metrics = [adhoc("MAX", "n"), adhoc("SUM", "s")]

    # table chart (aggregate mode), as Explore builds it
    table_fd = {"datasource": f"{ids['ds']}__table", "viz_type": "table", "query_mode": "aggregate",
                "groupby": ["region"], "metrics": metrics, "all_columns": [], "percent_metrics": [],
                "adhoc_filters": [], "order_desc": True, "row_limit": 1000, "server_page_length": 10,
                "server_pagination": False, "table_timestamp_format": "smart_date",
                "show_cell_bars": True, "color_pn": True}
    table_qc = {"datasource": ds, "force": False, "form_data": table_fd, "result_format": "json",
                "result_type": "full",
                "queries": [{"filters": [], "extras": {"having": "", "where": ""},
                             "applied_time_extras": {}, "columns": ["region"], "metrics": metrics,
                             "orderby": [[metrics[0], False]], "annotation_layers": [],
                             "row_limit": 1000, "series_limit": 0, "order_desc": True,
                             "url_params": {}, "custom_params": {}, "custom_form_data": {},
                             "post_processing": []}]}
    # bar chart (ECharts "Bar Chart", categorical x axis = region)
    bar_fd = {"datasource": f"{ids['ds']}__table", "viz_type": "echarts_timeseries_bar",
              "x_axis": "region", "metrics": metrics, "groupby": [], "adhoc_filters": [],
              "order_desc": True, "row_limit": 10000, "truncate_metric": True,
              "show_legend": True, "x_axis_sort_asc": True, "orientation": "vertical"}
    bar_qc = {"datasource": ds, "force": False, "form_data": bar_fd, "result_format": "json",
              "result_type": "full",
              "queries": [{"filters": [], "extras": {"having": "", "where": ""},
                           "applied_time_extras": {},
                           "columns": [{"columnType": "BASE_AXIS", "sqlExpression": "region",
                                        "label": "region", "expressionType": "SQL"}],
                           "metrics": metrics, "orderby": [[metrics[0], False]],
                           "annotation_layers": [], "row_limit": 10000, "series_columns": [],
                           "series_limit": 0, "order_desc": True, "url_params": {},
                           "custom_params": {}, "custom_form_data": {}, "time_offsets": [],
                           "post_processing": [
                               {"operation": "pivot", "options": {
                                   "index": ["region"], "columns": [],
                                   "aggregates": {"MAX(n)": {"operator": "mean"},
                                                  "SUM(s)": {"operator": "mean"}},
                                   "drop_missing_columns": False}},
                               {"operation": "flatten"}]}]}

    for kind, fd, qc in (("table", table_fd, table_qc), ("bar", bar_fd, bar_qc)):
        def create_chart(kind=kind, fd=fd, qc=qc):
            code, body = api("POST", "/api/v1/chart/", json={
                "slice_name": f"{kind} {tag}", "viz_type": fd["viz_type"],
                "datasource_id": ids["ds"], "datasource_type": "table",
                "params": json.dumps(fd), "query_context": json.dumps(qc),
                "query_context_generation": True})
            out(f"    POST /api/v1/chart/ -> {code} {json.dumps(body)[:200]}")
            if code >= 300:
                raise RuntimeError(f"chart create failed: {code} {body}")
            ids[kind] = body["id"]

        step(phase, f"d. create {kind} chart", create_chart)
        for i in (1, 2):
            def fetch(kind=kind, fd=fd, qc=qc, i=i):
                body_qc = json.loads(json.dumps(qc))
                body_qc["form_data"]["slice_id"] = ids[kind]
                code, body = api("POST", "/api/v1/chart/data", json=body_qc)
                if code >= 300:
                    out(f"    POST /api/v1/chart/data -> {code} {json.dumps(body)[:800]}")
                    raise RuntimeError(f"chart data failed: {code}")
                res = body["result"][0]
                out(f"    POST /api/v1/chart/data -> {code}; rows: {res.get('data')}")
                if res.get("error"):
                    out(f"    chart error: {res['error']}")
                answers[f"{kind}#{i}"] = res.get("data")

            step(phase, f"d. fetch {kind} chart data #{i}", fetch)

    for i in (1, 2):
        def sqllab(i=i):
            cid = "".join(random.choices(string.ascii_letters, k=10))
            code, body = api("POST", "/api/v1/sqllab/execute/", json={
                "database_id": ids["db"], "sql": DATASET_SQL, "runAsync": False,
                "schema": "public", "tab": f"dp {tag}", "client_id": cid,
                "queryLimit": 1000, "select_as_cta": False, "ctas_method": "TABLE",
                "templateParams": "{}", "tmp_table_name": ""})
            if code >= 300:
                out(f"    POST /api/v1/sqllab/execute/ -> {code} {json.dumps(body)[:800]}")
                raise RuntimeError(f"sqllab failed: {code}")
            out(f"    POST /api/v1/sqllab/execute/ -> {code} status={body.get('status')}; "
                f"rows: {body.get('data')}; executedSql: {body.get('query', {}).get('executedSql')}")
            answers[f"sqllab#{i}"] = body.get("data")

        step(phase, f"e. SQL Lab execute #{i}", sqllab)

    # identical answers?
    out(f"\n--- [{phase}] repeated answers")
    for kind in ("table", "bar", "sqllab"):
        a, b = answers.get(f"{kind}#1"), answers.get(f"{kind}#2")
        if a is None or b is None:
            out(f"    {kind}: missing answer(s)")
            continue
        out(f"    {kind}: #1 == #2 ? {rows_key(a) == rows_key(b)}")

    def per_region(data, ncol, scol):
        return {r["region"]: (r[ncol], r[scol]) for r in data or []}

    views = {}
    for k in ("table#1", "bar#1"):
        if answers.get(k):
            views[k] = per_region(answers[k], "MAX(n)", "SUM(s)")
    if answers.get("sqllab#1"):
        views["sqllab#1"] = per_region(answers["sqllab#1"], "n", "s")
    for k, v in views.items():
        out(f"    {k}: {v}")
    vals = list(views.values())
    out(f"    table, bar and SQL Lab give the same (n, s) per region ? "
        f"{all(v == vals[0] for v in vals) if vals else 'n/a'}")
    return ids


def main():
    login()
    import importlib.metadata as md
    out(f"run {RUN}; apache-superset {md.version('apache-superset')}")
    out("PostgreSQL:", q("SELECT version()")[0][0])
    out("dpnoise:", q("SELECT extversion FROM pg_extension WHERE extname='dpnoise'")[0][0])
    # log every statement, with user@db, on this (our own) server
    q("ALTER SYSTEM SET log_statement='all'")
    q("ALTER SYSTEM SET log_line_prefix='%m [%p] %u@%d '")
    q("SELECT pg_reload_conf()")
    time.sleep(0.5)

    # phase 1: tracked. A no-op write first gives staff a new version, so a
    # re-run of this script starts from unpaid releases, as the first run did.
    if not q("SELECT 1 FROM dp_tracked_tables WHERE rel = 'staff'::regclass AND tracking"):
        q("SELECT dp_track('staff')")
    q("UPDATE staff SET salary = salary WHERE id = 1")
    out("tracked tables:", q("SELECT * FROM dp_tracked_tables"))
    flow("tracked")

    # phase 2: untracked
    q("SELECT dp_untrack('staff')")
    out("\n\ntracked tables after dp_untrack:", q("SELECT * FROM dp_tracked_tables"))
    flow("untracked")

    # summary
    out("\n\n==================== epsilon spent by bi_user per step ====================")
    steps = []
    for ph, name, d, n in table:
        if name not in steps:
            steps.append(name)
    get = {(ph, name): (d, n) for ph, name, d, n in table}
    out(f"{'step':38} | {'tracked eps (charges)':>22} | {'untracked eps (charges)':>24}")
    out("-" * 92)
    for name in steps:
        t = get.get(("tracked", name), ("-", "-"))
        u = get.get(("untracked", name), ("-", "-"))
        out(f"{name:38} | {str(t[0]) + ' (' + str(t[1]) + ')':>22} | {str(u[0]) + ' (' + str(u[1]) + ')':>24}")
    for ph in ("tracked", "untracked"):
        tot = sum(d for p, _, d, _ in table if p == ph)
        setup = sum(d for p, nm, d, _ in table if p == ph and nm[0] in "abc")
        tab = sum(d for p, nm, d, _ in table if p == ph and "table chart" in nm)
        bar = sum(d for p, nm, d, _ in table if p == ph and "bar chart" in nm)
        sl = sum(d for p, nm, d, _ in table if p == ph and nm.startswith("e."))
        out(f"{ph}: total {tot}; dataset setup (a-c) {setup}; table chart {tab}; "
            f"bar chart {bar}; SQL Lab {sl}")
    out("bi_user total spent now:", spent())
    with open("/tmp/superset-flow/result.txt", "w") as f:
        f.write("\n".join(out_lines) + "\n")



if __name__ == "__main__":
    main()
