#!/usr/bin/env python3
"""The Superset part of bench/superset/dashboard.sh (run in Superset's venv).

Through Superset's REST API: registers the analyst's database, a physical
dataset on visits, four charts with Superset's default metrics and a
dashboard with a native filter on region. Loads the dashboard in headless
Chromium, then reloads it, with a screenshot of each; prints what each
load was charged in dpnoise.ledger and the analyst's statement errors from
the PostgreSQL log.
"""
import argparse
import json
import re
import sys
import time

import psycopg2
import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROLE = "bi_analyst"
TIME_RANGE = "2024-01-01T00:00:00 : 2024-07-01T00:00:00"


def say(*a):
    print(*a, flush=True)


# ------------------------------------------------------------- PostgreSQL
class Ledger:
    def __init__(self, dsn):
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True

    def q(self, sql, args=None):
        with self.conn.cursor() as c:
            c.execute(sql, args)
            return c.fetchall() if c.description else None

    def last_id(self):
        return self.q("SELECT coalesce(max(id), 0) FROM dpnoise.ledger")[0][0]

    def since(self, after, upto=None):
        """bi_analyst's ledger rows with after < id <= upto."""
        return self.q(
            "SELECT id, epsilon, releases, epsilon * releases, "
            "left(regexp_replace(coalesce(statement, ''), '\\s+', ' ', 'g'), 150) "
            "FROM dpnoise.ledger WHERE role = %s::regrole AND id > %s AND id <= %s ORDER BY id",
            (ROLE, after, upto if upto is not None else 2**62))

    def budget(self):
        return self.q("SELECT * FROM dp_budgets WHERE role = %s::regrole", (ROLE,))


class PgLog:
    """bi_analyst's entries of the server log (log_line_prefix '%m [%p] %u@%d ')."""

    ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[\d+\] (\S*)@(\S*) (\w+):\s+(.*)$")

    def __init__(self, path):
        self.path = path

    def pos(self):
        with open(self.path, "rb") as f:
            f.seek(0, 2)
            return f.tell()

    def entries(self, start=0, end=None):
        with open(self.path, "rb") as f:
            f.seek(start)
            text = f.read(None if end is None else end - start).decode("utf-8", "replace")
        out, cur = [], None
        for line in text.splitlines():
            m = self.ENTRY.match(line)
            if m:
                cur = [m.group(1), m.group(3), m.group(4)]
                out.append(cur)
            elif cur is not None:
                cur[2] += " " + line.strip()
        return [(lvl, msg) for user, lvl, msg in out if user == ROLE]

    def statements(self, start, end=None):
        return [m[len("statement: "):] for lvl, m in self.entries(start, end)
                if lvl == "LOG" and m.startswith("statement: ")]

    def errors(self, start=0, end=None):
        """(level, message, the statement it names) for errors and fatals."""
        res, ents = [], self.entries(start, end)
        for i, (lvl, msg) in enumerate(ents):
            if lvl in ("ERROR", "FATAL", "PANIC"):
                stmt = ""
                for lvl2, msg2 in ents[i + 1:i + 4]:
                    if lvl2 == "STATEMENT":
                        stmt = msg2
                        break
                res.append((lvl, msg, stmt))
        return res


# --------------------------------------------------------------- Superset
class Superset:
    def __init__(self, base):
        self.base = base
        self.s = requests.Session()

    def login(self):
        r = self.s.post(f"{self.base}/api/v1/security/login", json={
            "username": "admin", "password": "admin", "provider": "db", "refresh": True})
        r.raise_for_status()
        self.s.headers["Authorization"] = "Bearer " + r.json()["access_token"]
        r = self.s.get(f"{self.base}/api/v1/security/csrf_token/")
        r.raise_for_status()
        self.s.headers["X-CSRFToken"] = r.json()["result"]
        self.s.headers["Referer"] = self.base

    def api(self, method, path, ok=(200, 201), **kw):
        r = self.s.request(method, f"{self.base}{path}", timeout=300, **kw)
        try:
            body = r.json()
        except ValueError:
            body = r.text
        if r.status_code not in ok:
            raise RuntimeError(f"{method} {path} -> {r.status_code}: {json.dumps(body)[:1500]}")
        return body


def simple_metric(agg, col, coltype="NUMERIC(10, 2)"):
    return {"expressionType": "SIMPLE", "aggregate": agg, "sqlExpression": None,
            "column": {"column_name": col, "type": coltype},
            "label": f"{agg}({col})", "hasCustomLabel": False,
            "optionName": f"metric_{agg.lower()}_{col}"}


def chart_params(ds_id):
    """The four charts' form data, as Explore saves it, default metrics only."""
    ds = f"{ds_id}__table"
    common = {"datasource": ds, "adhoc_filters": [], "extra_form_data": {},
              "color_scheme": "supersetColors", "dashboards": []}
    bar = dict(common, viz_type="echarts_timeseries_bar", x_axis="site", metrics=["count"],
               groupby=[], row_limit=10000, order_desc=True, orientation="vertical",
               x_axis_sort_asc=True, show_legend=False, truncate_metric=True,
               comparison_type="values", rich_tooltip=True, y_axis_format="SMART_NUMBER",
               show_value=True)
    line = dict(common, viz_type="echarts_timeseries_line", x_axis="ts",
                time_grain_sqla="P1M", metrics=["count"], groupby=[], row_limit=10000,
                order_desc=True, show_legend=False, truncate_metric=True, markerEnabled=True,
                rich_tooltip=True, y_axis_format="SMART_NUMBER", x_axis_time_format="smart_date",
                adhoc_filters=[{"expressionType": "SIMPLE", "clause": "WHERE", "subject": "ts",
                                "operator": "TEMPORAL_RANGE", "comparator": TIME_RANGE,
                                "filterOptionName": "filter_ts_range", "isExtra": False,
                                "isNew": False, "sqlExpression": None}])
    big = dict(common, viz_type="big_number_total", metric="count",
               header_font_size=0.4, subheader_font_size=0.15, y_axis_format="SMART_NUMBER",
               subheader="visits (COUNT(*))")
    table = dict(common, viz_type="table", query_mode="aggregate", groupby=["region"],
                 metrics=[simple_metric("SUM", "amount"), simple_metric("AVG", "amount")],
                 all_columns=[], percent_metrics=[], order_desc=True, row_limit=1000,
                 server_page_length=10, table_timestamp_format="smart_date",
                 show_cell_bars=True, color_pn=True, allow_rearrange_columns=False)
    return [("Visits by site (COUNT(*))", bar),
            ("Visits per month, Jan-Jun 2024 (COUNT(*))", line),
            ("All visits (COUNT(*))", big),
            ("Spend by region (SUM, AVG of amount)", table)]


def layout(charts, title):
    """position_json: two rows of two charts."""
    pos = {"DASHBOARD_VERSION_KEY": "v2",
           "ROOT_ID": {"type": "ROOT", "id": "ROOT_ID", "children": ["GRID_ID"]},
           "GRID_ID": {"type": "GRID", "id": "GRID_ID", "children": [], "parents": ["ROOT_ID"]},
           "HEADER_ID": {"type": "HEADER", "id": "HEADER_ID", "meta": {"text": title}}}
    for r in range(0, len(charts), 2):
        row = f"ROW-{r // 2 + 1}"
        pos["GRID_ID"]["children"].append(row)
        pos[row] = {"type": "ROW", "id": row, "children": [],
                    "parents": ["ROOT_ID", "GRID_ID"],
                    "meta": {"background": "BACKGROUND_TRANSPARENT"}}
        for cid, name in charts[r:r + 2]:
            key = f"CHART-{cid}"
            pos[row]["children"].append(key)
            pos[key] = {"type": "CHART", "id": key, "children": [],
                        "parents": ["ROOT_ID", "GRID_ID", row],
                        "meta": {"chartId": cid, "width": 6, "height": 50, "sliceName": name}}
    return pos


def region_filter(ds_id, chart_ids):
    return {"id": "NATIVE_FILTER-region", "name": "Region", "filterType": "filter_select",
            "type": "NATIVE_FILTER", "description": "",
            "targets": [{"datasetId": ds_id, "column": {"name": "region"}}],
            "defaultDataMask": {"extraFormData": {}, "filterState": {}, "ownState": {}},
            "controlValues": {"enableEmptyFilter": False, "defaultToFirstItem": False,
                              "multiSelect": True, "searchAllOptions": False,
                              "inverseSelection": False},
            "cascadeParentIds": [], "scope": {"rootPath": ["ROOT_ID"], "excluded": []},
            "chartsInScope": chart_ids, "tabsInScope": []}


def build(ss, analyst_uri):
    db = ss.api("POST", "/api/v1/database/", json={
        "database_name": "dpnoise demo (bi_analyst)", "sqlalchemy_uri": analyst_uri,
        "expose_in_sqllab": True, "allow_dml": False, "allow_run_async": False})
    db_id = db["id"]
    say(f"  database {db_id}: {analyst_uri}")
    ds = ss.api("POST", "/api/v1/dataset/", json={
        "database": db_id, "schema": "public", "table_name": "visits"})
    ds_id = ds["id"]
    info = ss.api("GET", f"/api/v1/dataset/{ds_id}")["result"]
    say(f"  dataset {ds_id}: public.visits, columns "
        f"{[(c['column_name'], c.get('type'), c.get('is_dttm')) for c in info['columns']]}, "
        f"metrics {[(m['metric_name'], m['expression']) for m in info['metrics']]}")
    if not any(c["column_name"] == "ts" and c.get("is_dttm") for c in info["columns"]):
        say("  WARNING: ts not marked temporal")

    title = "dpnoise: visits (bi_analyst)"
    dash = ss.api("POST", "/api/v1/dashboard/", json={
        "dashboard_title": title, "slug": "dpnoise-visits", "published": True})
    dash_id = dash["id"]
    charts = []
    for name, params in chart_params(ds_id):
        params = dict(params, dashboards=[dash_id])
        c = ss.api("POST", "/api/v1/chart/", json={
            "slice_name": name, "viz_type": params["viz_type"],
            "datasource_id": ds_id, "datasource_type": "table",
            "params": json.dumps(params), "dashboards": [dash_id]})
        charts.append((c["id"], name))
        say(f"  chart {c['id']}: {params['viz_type']}: {name}")
    chart_ids = [c for c, _ in charts]
    meta = {"native_filter_configuration": [region_filter(ds_id, chart_ids)],
            "chart_configuration": {}, "global_chart_configuration": {
                "scope": {"rootPath": ["ROOT_ID"], "excluded": []}, "chartsInScope": chart_ids},
            "cross_filters_enabled": False, "color_scheme": "", "refresh_frequency": 0,
            "timed_refresh_immune_slices": [], "expanded_slices": {}, "label_colors": {},
            "shared_label_colors": [], "color_scheme_domain": []}
    pos = layout(charts, title)
    try:
        ss.api("PUT", f"/api/v1/dashboard/{dash_id}", json={
            "position_json": json.dumps(pos), "json_metadata": json.dumps(meta)})
        got = json.loads(ss.api("GET", f"/api/v1/dashboard/{dash_id}")["result"]["json_metadata"])
        nf = got.get("native_filter_configuration") or []
        say(f"  dashboard {dash_id}: 4 charts, native filters {[f['name'] for f in nf]}")
    except RuntimeError as e:
        say(f"  native filter refused ({e}); dashboard without it")
        meta.pop("native_filter_configuration")
        ss.api("PUT", f"/api/v1/dashboard/{dash_id}", json={
            "position_json": json.dumps(pos), "json_metadata": json.dumps(meta)})
    return dash_id, chart_ids


# ---------------------------------------------------------------- browser
def browser():
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1600,1250", "--hide-scrollbars"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def browser_login(drv, base):
    """Logs the browser in as admin; the login page is drawn by React, so a
    form filled before it settles can be lost: up to three tries."""
    for _ in range(3):
        drv.get(f"{base}/login/")
        t0 = time.time()
        while time.time() - t0 < 60:
            users = drv.find_elements(By.CSS_SELECTOR, "input#username, input[name='username']")
            pwds = drv.find_elements(By.CSS_SELECTOR, "input#password, input[name='password'], input[type='password']")
            if users and pwds:
                time.sleep(1)
                users[0].clear()
                users[0].send_keys("admin")
                pwds[0].clear()
                pwds[0].send_keys("admin")
                btn = drv.find_elements(By.CSS_SELECTOR, "button[type='submit'], input[type='submit']")
                (btn[0].click() if btn else pwds[0].submit())
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("no login form at /login/")
        t0 = time.time()
        while time.time() - t0 < 30:
            if "/login" not in drv.current_url:
                return
            time.sleep(0.5)
    raise RuntimeError(f"login did not leave {drv.current_url}")


RENDER_STATE = """
const holders = [...document.querySelectorAll('.dashboard-component-chart-holder')];
const loading = document.querySelectorAll('.loading, [data-test="loading-indicator"], .ant-skeleton').length;
return {holders: holders.length, loading: loading,
        drawn: holders.filter(h => h.querySelector('canvas, svg, table, .header-line, .big-number-total')).length,
        texts: holders.map(h => h.innerText.replace(/\\s+/g, ' ').slice(0, 300))};
"""


def load(drv, url, shot, reload=False, want=4, timeout=180):
    t0 = time.time()
    if reload:
        drv.refresh()  # the browser's reload button
    else:
        drv.get(url)
    state, stable = None, 0
    while time.time() - t0 < timeout:
        time.sleep(1)
        state = drv.execute_script(RENDER_STATE)
        done = state["holders"] >= want and state["drawn"] >= want and state["loading"] == 0
        stable = stable + 1 if done else 0
        if stable >= 3:
            break
    else:
        say(f"  WARNING: dashboard not rendered within {timeout}s: {state}")
    time.sleep(2)  # animations
    drv.save_screenshot(shot)
    say(f"  rendered in {time.time() - t0:.1f}s; screenshot {shot}")
    for t in state["texts"] if state else []:
        say(f"    chart: {t[:200]}")
    return state


# ------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--superset", required=True)
    ap.add_argument("--pg", required=True)
    ap.add_argument("--analyst-uri", required=True)
    ap.add_argument("--pg-log", required=True)
    ap.add_argument("--superset-log", required=True)
    ap.add_argument("--img", required=True)
    a = ap.parse_args()

    led, pglog = Ledger(a.pg), PgLog(a.pg_log)
    import importlib.metadata as md
    say(f"apache-superset {md.version('apache-superset')}, "
        f"dpnoise {led.q('SELECT extversion FROM pg_extension WHERE extname = %s', ('dpnoise',))[0][0]}, "
        f"{led.q('SELECT version()')[0][0].split(' on ')[0]}")

    ss = Superset(a.superset)
    ss.login()
    say("\n== REST API: database, dataset, charts, dashboard")
    id0, p0 = led.last_id(), pglog.pos()
    dash_id, chart_ids = build(ss, a.analyst_uri)
    time.sleep(1)
    id1, p1 = led.last_id(), pglog.pos()

    drv = browser()
    phases = []
    try:
        browser_login(drv, a.superset)
        url = f"{a.superset}/superset/dashboard/{dash_id}/"
        say(f"\n== first load of {url}")
        load(drv, url, f"{a.img}/superset-dashboard.png")
        time.sleep(2)
        id2, p2 = led.last_id(), pglog.pos()
        say("\n== reload")
        load(drv, url, f"{a.img}/superset-dashboard-reload.png", reload=True)
        time.sleep(2)
        id3, p3 = led.last_id(), pglog.pos()
    finally:
        severe = [e.get("message", "") for e in drv.get_log("browser")
                  if e.get("level") == "SEVERE"]
        # Superset's telemetry pixel (scarf.sh) cannot resolve offline: not an error of ours
        pixel = [m for m in severe if "scarf.sh" in m]
        if pixel:
            say(f"  browser console: {len(pixel)} failed loads of Superset's telemetry pixel (offline)")
        for m in severe:
            if m not in pixel:
                say(f"  browser console: {m[:300]}")
        drv.quit()
    phases = [("set-up via the API", id0, id1, p0, p1),
              ("first load", id1, id2, p1, p2),
              ("reload", id2, id3, p2, p3)]

    say("\n== dpnoise.ledger, bi_analyst (epsilon x releases per row)")
    summary = []
    for name, a0, a1, q0, q1 in phases:
        rows = led.since(a0, a1)
        eps = sum(r[3] for r in rows)
        stmts = pglog.statements(q0, q1)
        reads = [s for s in stmts if "visits" in s and "pg_" not in s]
        summary.append((name, eps, len(rows), len(stmts), len(reads)))
        say(f"-- {name}: epsilon {eps}, {len(rows)} ledger rows; "
            f"{len(stmts)} statements from bi_analyst, {len(reads)} of them on visits")
        for r in rows:
            say(f"   id {r[0]}: eps {r[1]} x {r[2]}: {r[4]}")
        for s in reads:
            say(f"   sent: {s[:230]}")

    say("\n== summary")
    say(f"{'phase':20} {'epsilon':>9} {'ledger rows':>12} {'statements':>11} {'on visits':>10}")
    for name, eps, n, ns, nr in summary:
        say(f"{name:20} {float(eps):9.3f} {n:12d} {ns:11d} {nr:10d}")
    b = led.budget()
    say(f"dp_budgets for bi_analyst: {b}")

    say("\n== the exact values, as the superuser (not released to bi_analyst)")
    say("   COUNT(*) of all rows, and of at most 5 rows a person (what the policy counts): " + str(led.q(
        "SELECT sum(n), sum(least(n, 5)) FROM (SELECT person_id, count(*) AS n "
        "FROM visits GROUP BY 1) p")[0]))
    say("   by site: " + ", ".join(f"{s} {n}" for s, n in led.q(
        "SELECT site, count(*) FROM visits GROUP BY 1 ORDER BY 1")))
    say("   by month, Jan-Jun: " + ", ".join(f"{m} {n}" for m, n in led.q(
        "SELECT to_char(date_trunc('month', ts), 'Mon'), count(*) FROM visits "
        "WHERE ts < '2024-07-01' GROUP BY date_trunc('month', ts) ORDER BY date_trunc('month', ts)")))
    say("   by region: SUM(amount), AVG(amount); the sum of min(a person's sum of amounts "
        "clamped to [0, 100], 500), of 5 rows a person, the mean of those 5 rows")
    for r in led.q(
            "WITH p AS (SELECT person_id, region, sum(least(amount, 100)) AS s_all, "
            "  count(*) AS n, (array_agg(least(amount, 100)))[1:5] AS first5 FROM visits GROUP BY 1, 2) "
            "SELECT v.region, v.s, round(v.a, 2), p.capped, p.five, round(p.five / p.n5, 2) FROM "
            "(SELECT region, sum(amount) AS s, avg(amount) AS a FROM visits GROUP BY 1) v JOIN "
            "(SELECT region, sum(least(s_all, 500)) AS capped, "
            "  sum((SELECT sum(x) FROM unnest(first5) x)) AS five, sum(least(n, 5)) AS n5 "
            " FROM p GROUP BY 1) p USING (region) ORDER BY 1"):
        say(f"     {r[0]:7} {r[1]} {r[2]} | {r[3]} | {r[4]} {r[5]}")

    errs = pglog.errors()
    say(f"\n== statement errors of bi_analyst in the PostgreSQL log: {len(errs)}")
    for lvl, msg, stmt in errs:
        say(f"   {lvl}: {msg[:300]}")
        if stmt:
            say(f"      statement: {stmt[:300]}")
    with open(a.superset_log, encoding="utf-8", errors="replace") as f:
        tb = [l.rstrip() for l in f if "Traceback" in l or " ERROR" in l or "Error:" in l]
    if tb:
        say(f"\n== Superset log: {len(tb)} error lines; the first:")
        for l in tb[:8]:
            say(f"   {l[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
