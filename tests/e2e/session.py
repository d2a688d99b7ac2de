#!/usr/bin/env python3
"""Session caps (dpnoise.max_epsilon_per_session), on a running server.

    session.py PORT

A DBA caps each connection of a role with ALTER ROLE ... SET; checks:
- the cap refuses exactly at the boundary (0.3 admits three releases of
  0.1, in decimal, and refuses the fourth with ZB001 naming the session
  cap), while the role's budget is still positive, and charges nothing;
- the user cannot raise it: SET, RESET, set_config, or a connection option;
- two sessions of one role each have their own cap and share the role's budget;
- an analyst's statement-level charge is capped as a whole;
- 16 concurrent sessions of one role spend at most their cap each;
- dp_session_budget lowers a session's cap and never raises it;
- dp_sessions shows what each session spent, equal to the ledger's sums
  per session (pid and backend start), and a role only its own sessions.
Exits non-zero on a failure.
"""
import sys
import threading
import time

import psycopg

FAILED = []


def check(name, ok, detail=""):
    print(("PASS  " if ok else "FAIL  ") + name + (f": {detail}" if detail else ""))
    if not ok:
        FAILED.append(name)


def connect(port, user="postgres", options=None):
    return psycopg.connect(host="127.0.0.1", port=port, dbname="postgres", user=user, autocommit=True,
                           **({"options": options} if options else {}))


def fresh_role(admin, role, epsilon):
    """A new login role granted `epsilon`."""
    admin.execute(f"DROP ROLE IF EXISTS {role}")
    admin.execute(f"CREATE ROLE {role} LOGIN")
    admin.execute(f"SELECT dp_budget_grant('{role}', {epsilon})")


def attempt(conn, sql):
    try:
        conn.execute(sql).fetchall()
        return None
    except psycopg.Error as e:
        return e


def main(port):
    admin = connect(port)
    admin.execute("CREATE EXTENSION IF NOT EXISTS dpnoise")
    for role in ["cap_user", "cap_analyst"]:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute(f"CREATE ROLE {role} LOGIN")
    admin.execute("SELECT dp_budget_grant('cap_user', 10)")
    admin.execute("ALTER ROLE cap_user SET dpnoise.max_epsilon_per_session = 0.3")
    charges = lambda role: admin.execute(
        "SELECT count(*), coalesce(sum(epsilon), 0) FROM dpnoise.ledger WHERE role = %s::regrole", (role,)).fetchone()

    # The boundary, in decimal: three releases of 0.1, then a refusal.
    user = connect(port, "cap_user")
    before = charges("cap_user")
    results = [attempt(user, "SELECT dp_laplace(1.0, 0.1, 1.0)") for _ in range(4)]
    after = charges("cap_user")
    fourth = results[3]
    check("a cap of 0.3 admits three releases of 0.1", results[:3] == [None] * 3, str(results[:3]))
    check("the fourth is refused (ZB001, the session cap named), charged nothing",
          fourth is not None and fourth.sqlstate == "ZB001" and "session" in str(fourth)
          and after[0] - before[0] == 3 and float(after[1] - before[1]) == 0.3,
          f"{fourth.sqlstate if fourth else None}: {str(fourth).splitlines()[0] if fourth else ''}; ledger {before} -> {after}")
    remaining = admin.execute("SELECT epsilon_remaining FROM dp_budgets WHERE role = 'cap_user'::regrole").fetchone()
    check("the role's budget is still positive", remaining is not None and remaining[0] > 0, str(remaining))

    # The user cannot raise it.
    for sql in ["SET dpnoise.max_epsilon_per_session = 10", "RESET dpnoise.max_epsilon_per_session",
                "SELECT set_config('dpnoise.max_epsilon_per_session', '10', false)"]:
        e = attempt(user, sql)
        check(f"the user cannot raise it: {sql}", e is not None and e.sqlstate == "42501", e.sqlstate if e else "allowed")
    e = attempt(user, "SELECT dp_laplace(1.0, 0.1, 1.0)")
    check("still capped after those attempts", e is not None and e.sqlstate == "ZB001", e.sqlstate if e else "released")
    try:
        connect(port, "cap_user", "-c dpnoise.max_epsilon_per_session=10").close()
        check("a connection option cannot raise it", False, "connected")
    except psycopg.Error as e:
        check("a connection option cannot raise it", e.sqlstate == "42501" or "permission denied" in str(e), str(e).splitlines()[0])

    # A second session: its own cap, the role's budget shared.
    other = connect(port, "cap_user")
    results = [attempt(other, "SELECT dp_laplace(1.0, 0.1, 1.0)") for _ in range(4)]
    check("a second session has its own cap", results[:3] == [None] * 3 and results[3] is not None
          and results[3].sqlstate == "ZB001", str([r.sqlstate if r else None for r in results]))
    check("both charged the role's one budget", float(charges("cap_user")[1] - before[1]) == 0.6, str(charges("cap_user")))

    # An analyst: the statement's whole cost (dp_sum 1.0 and partition
    # selection 0.5: a sum of a column, which its own noise cannot select
    # by) against a cap of 1.2: refused before it runs, then a smaller one
    # is admitted.
    admin.execute("DROP TABLE IF EXISTS cap_people")
    admin.execute("CREATE TABLE cap_people (id int PRIMARY KEY, region text)")
    admin.execute("INSERT INTO cap_people SELECT i, 'r' || (i % 3) FROM generate_series(1, 300) i")
    admin.execute("SELECT dp_protect('cap_people', 'id')")
    admin.execute("SELECT dp_analyst('cap_analyst')")
    admin.execute("SELECT dp_budget_grant('cap_analyst', 10, 0.01)")
    admin.execute("ALTER ROLE cap_analyst SET dpnoise.max_epsilon_per_session = 1.2")
    analyst = connect(port, "cap_analyst")
    before = charges("cap_analyst")
    e = attempt(analyst, "SELECT region, dp_sum(id, 1.0, 0, 1) FROM cap_people GROUP BY region")
    check("an analyst's statement over its cap is refused whole, charged nothing",
          e is not None and e.sqlstate == "ZB001" and charges("cap_analyst") == before, e.sqlstate if e else "released")
    e = attempt(analyst, "SELECT dp_count(1.0) FROM cap_people")
    # Its run time is paid too (dpnoise.timing_epsilon).
    t_eps = float(analyst.execute("SELECT current_setting('dpnoise.timing_epsilon')").fetchone()[0])
    check("one within its cap is admitted", e is None and abs(float(charges("cap_analyst")[1] - before[1]) - 1.0 - t_eps) < 1e-9,
          str(e).splitlines()[0] if e else "")

    # 16 sessions at once, each trying 5 releases of 0.1 under a cap of 0.3;
    # they stay open until dp_sessions is compared with the ledger.
    before = charges("cap_user")
    granted, conns = [], []
    done = threading.Barrier(17)

    def run():
        conn = connect(port, "cap_user")
        conns.append(conn)
        granted.append(sum(attempt(conn, "SELECT dp_laplace(1.0, 0.1, 1.0)") is None for _ in range(5)))
        done.wait()

    threads = [threading.Thread(target=run) for _ in range(16)]
    for t in threads:
        t.start()
    done.wait()
    for t in threads:
        t.join()
    after = charges("cap_user")
    check("16 concurrent sessions spend at most their cap each", granted == [3] * 16
          and after[0] - before[0] == 48 and float(after[1] - before[1]) == 4.8, f"{granted}; ledger {before} -> {after}")
    pids = [c.info.backend_pid for c in conns]
    view = dict(admin.execute("SELECT pid, epsilon_spent FROM dp_sessions WHERE pid = ANY(%s)", (pids,)).fetchall())
    check("dp_sessions shows each of the 16 sessions' spending (0.3)",
          sorted(view) == sorted(pids) and all(float(v) == 0.3 for v in view.values()), str(view))
    for conn in conns:
        conn.close()

    sessions_view(port, admin, charges)
    terminated_mid_statement(port, admin)

    admin.execute("ALTER ROLE cap_user RESET dpnoise.max_epsilon_per_session")
    admin.execute("SELECT dp_unprotect('cap_people')")
    admin.execute("DROP TABLE cap_people")
    # Under the zCDP accountant the caps stay in epsilon added up (it bounds
    # a session's loss under either): a cap of 0.3 admits three releases of
    # 0.1 and refuses the fourth, while the role's rho has room for many.
    admin.execute("DROP ROLE IF EXISTS cap_zuser")
    admin.execute("CREATE ROLE cap_zuser LOGIN")
    admin.execute("SELECT dp_budget_grant_zcdp('cap_zuser', 10, 1e-5)")
    admin.execute("ALTER ROLE cap_zuser SET dpnoise.max_epsilon_per_session = 0.3")
    zuser = connect(port, "cap_zuser")
    results = [attempt(zuser, "SELECT dp_laplace(1.0, 0.1, 1.0)") for _ in range(4)]
    zrho = admin.execute("SELECT count(*), sum(rho) FROM dpnoise.ledger WHERE role = 'cap_zuser'::regrole").fetchone()
    left = admin.execute("SELECT rho_remaining FROM dp_budgets WHERE role = 'cap_zuser'::regrole").fetchone()[0]
    check("zCDP: the session cap in epsilon admits three releases of 0.1 and refuses the fourth",
          results[:3] == [None] * 3 and results[3] is not None and results[3].sqlstate == "ZB001"
          and "session" in str(results[3]) and zrho[0] == 3 and left > 1,
          f"{[r.sqlstate if r else None for r in results]}; ledger {zrho}; rho left {left}")
    zuser.close()
    admin.execute("DROP ROLE cap_zuser")

    print(f"session caps: {'FAILED ' + str(len(FAILED)) if FAILED else 'all passed'}")
    return 1 if FAILED else 0


def sessions_view(port, admin, charges):
    """dp_session_budget, and dp_sessions against the ledger."""
    # Lowered under the DBA's cap of 0.3: 0.2 admits two releases of 0.1.
    user = connect(port, "cap_user")
    e = attempt(user, "SELECT dp_session_budget(0.2)")
    results = [attempt(user, "SELECT dp_laplace(1.0, 0.1, 1.0)") for _ in range(3)]
    check("dp_session_budget(0.2) admits two releases of 0.1, refuses the third naming it",
          e is None and results[:2] == [None, None] and results[2] is not None and results[2].sqlstate == "ZB001"
          and "dp_session_budget" in str(results[2]), str([r.sqlstate if r else None for r in results]))
    for sql, why in [("SELECT dp_session_budget(0.25)", "above its own lower cap"),
                     ("SELECT dp_session_budget(1)", "above the DBA's cap")]:
        e = attempt(user, sql)
        check(f"dp_session_budget cannot raise the cap ({why})", e is not None and e.sqlstate == "42501",
              e.sqlstate if e else "allowed")
    e = attempt(user, "SELECT dp_laplace(1.0, 0.1, 1.0)")
    check("still capped at 0.2 after those attempts", e is not None and e.sqlstate == "ZB001", e.sqlstate if e else "released")
    # A role without a DBA cap: its own cap, once set, is never raised; delta too.
    admin.execute("DROP ROLE IF EXISTS cap_free")
    admin.execute("CREATE ROLE cap_free LOGIN")
    admin.execute("SELECT dp_budget_grant('cap_free', 10, 0.001)")
    free = connect(port, "cap_free")
    free.execute("SELECT dp_session_budget(0.15, 0.00001)")
    a = attempt(free, "SELECT dp_laplace(1.0, 0.1, 1.0)")
    b = attempt(free, "SELECT dp_laplace(1.0, 0.1, 1.0)")
    c = attempt(free, "SELECT dp_session_budget(0.5)")
    d = attempt(free, "SELECT dp_session_budget(NULL, 0.001)")
    check("without a DBA cap: the session's own cap holds (0.15: one release of 0.1), and cannot be raised",
          a is None and b is not None and b.sqlstate == "ZB001" and c is not None and c.sqlstate == "42501"
          and d is not None and d.sqlstate == "42501", str([x.sqlstate if x else None for x in (a, b, c, d)]))
    e = attempt(free, "SELECT dp_session_budget(-1)")
    check("a negative cap is refused (22023)", e is not None and e.sqlstate == "22023", e.sqlstate if e else "allowed")

    # The view against the ledger, per session, for every live session.
    view = admin.execute(
        "SELECT pid, backend_start, epsilon_spent, delta_spent FROM dp_sessions WHERE role IN ('cap_user', 'cap_free') "
        "ORDER BY pid").fetchall()
    ledger = admin.execute(
        "SELECT l.pid, l.session_start, sum(l.epsilon * l.releases), sum(l.delta * l.releases) FROM dpnoise.ledger l "
        "JOIN pg_stat_activity a ON a.pid = l.pid AND a.backend_start = l.session_start "
        "WHERE l.role IN ('cap_user'::regrole, 'cap_free'::regrole) GROUP BY 1, 2 ORDER BY 1").fetchall()
    check("dp_sessions equals the ledger's sums per session (pid, backend start)", len(view) >= 2 and view == ledger,
          f"view {view}; ledger {ledger}")
    caps = dict(admin.execute("SELECT pid, epsilon_cap FROM dp_sessions").fetchall())
    check("dp_sessions shows each session's cap in force",
          float(caps.get(user.info.backend_pid, 0)) == 0.2 and float(caps.get(free.info.backend_pid, 0)) == 0.15, str(caps))
    # pg_read_all_stats lets it see every backend in pg_stat_activity, which
    # dp_sessions joins: dp_sessions still shows it only its own.
    admin.execute("GRANT pg_read_all_stats TO cap_free")
    mine = free.execute("SELECT pid, role::text FROM dp_sessions").fetchall()
    check("a role sees only its own sessions in dp_sessions (even with pg_read_all_stats)",
          mine == [(free.info.backend_pid, "cap_free")], str(mine))
    e = attempt(free, "SELECT * FROM dpnoise.sessions()")
    check("the function behind it is not the user's to call", e is not None and e.sqlstate == "42501",
          e.sqlstate if e else "allowed")
    pid = free.info.backend_pid
    free.close()
    user.close()
    for _ in range(50):
        gone = admin.execute("SELECT count(*) FROM dp_sessions WHERE pid = %s", (pid,)).fetchone() == (0,)
        if gone:
            break
        time.sleep(0.1)
    check("a closed session leaves dp_sessions", gone)
    admin.execute("DROP ROLE cap_free")
    parallel_and_cancelled(port, admin)


def parallel_and_cancelled(port, admin):
    """A parallel worker's charges count against its leader's session; a
    charge whose requester was cancelled is counted; a refused one is not."""
    fresh_role(admin, "cap_par", 10)
    admin.execute("DROP TABLE IF EXISTS cap_rows")
    admin.execute("CREATE TABLE cap_rows AS SELECT i, i % 5 AS g FROM generate_series(1, 20000) i")
    admin.execute("GRANT SELECT ON cap_rows TO cap_par")
    conn = connect(port, "cap_par")
    pid = conn.info.backend_pid
    conn.execute("SELECT dp_session_budget(0.5)")
    conn.execute("SET force_parallel_mode = on")
    conn.execute("SET parallel_setup_cost = 0")
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT g, dp_count(0.4) FROM cap_rows GROUP BY g").fetchall())
    first = attempt(conn, "SELECT g, dp_count(0.4) FROM cap_rows GROUP BY g")
    second = attempt(conn, "SELECT g, dp_count(0.4) FROM cap_rows GROUP BY g")
    check("in a parallel worker (Gather), the session's own cap of 0.5 admits one release of 0.4, not two",
          "Gather" in plan and first is None and second is not None and second.sqlstate == "ZB001",
          f"{[x.sqlstate if x else None for x in (first, second)]}; plan: {plan.splitlines()[0]}")
    rows = admin.execute("SELECT pid, session_start = (SELECT backend_start FROM pg_stat_activity WHERE pid = %s) "
                         "FROM dpnoise.ledger WHERE role = 'cap_par'::regrole", (pid,)).fetchall()
    spent = admin.execute("SELECT epsilon_spent FROM dp_sessions WHERE pid = %s", (pid,)).fetchone()
    check("the worker's charge is the connection's: the ledger row names its pid and start, dp_sessions shows it",
          rows == [(pid, True)] and spent is not None and float(spent[0]) == 0.4, f"ledger {rows}; view {spent}")
    conn.execute("RESET force_parallel_mode")

    # Cancelled while the ledger is held: the worker commits the charge
    # later, and the session counted it already.
    holder = connect(port)
    holder.autocommit = False
    holder.execute("LOCK TABLE dpnoise.charge_lock IN EXCLUSIVE MODE")
    conn.execute("SET statement_timeout = '500ms'")
    e = attempt(conn, "SELECT dp_laplace(1.0, 0.05, 1.0)")
    conn.execute("RESET statement_timeout")
    holder.rollback()
    holder.close()
    for _ in range(50):
        ledger = admin.execute("SELECT coalesce(sum(epsilon * releases), 0) FROM dpnoise.ledger "
                               "WHERE role = 'cap_par'::regrole").fetchone()[0]
        if float(ledger) == 0.45:
            break
        time.sleep(0.1)
    detail = e.diag.message_detail if e is not None else None
    check("the cancel's error carries no Rust backtrace to the client", not detail or "dpnoise::" not in detail,
          (detail or "")[:200])
    spent = admin.execute("SELECT epsilon_spent FROM dp_sessions WHERE pid = %s", (pid,)).fetchone()
    check("a charge whose requester was cancelled is in the ledger and in dp_sessions alike",
          e is not None and e.sqlstate == "57014" and float(ledger) == 0.45 and spent is not None
          and float(spent[0]) == 0.45, f"{e.sqlstate if e else None}; ledger {ledger}; view {spent}")

    # Refused by the ledger (the role's budget), so given back to the session.
    admin.execute("SELECT dp_budget_revoke('cap_par')")
    admin.execute("SELECT dp_budget_grant('cap_par', 0.01)")
    e = attempt(conn, "SELECT dp_laplace(1.0, 0.02, 1.0)")
    spent = admin.execute("SELECT epsilon_spent FROM dp_sessions WHERE pid = %s", (pid,)).fetchone()
    check("a release the role's budget refuses is not counted in the session",
          e is not None and e.sqlstate == "ZB001" and "privacy budget exhausted" in str(e)
          and spent is not None and float(spent[0]) == 0.45, f"{e.sqlstate if e else None}; view {spent}")
    conn.close()
    admin.execute("DROP TABLE cap_rows")
    admin.execute("DROP OWNED BY cap_par")
    admin.execute("DROP ROLE cap_par")


def terminated_mid_statement(port, admin):
    """A session holding a reservation (dpnoise.charge_ahead) ended in the
    middle of a statement gives back, as it exits, what it reserved and did
    not draw: the statement itself was paid as it started."""
    fresh_role(admin, "cap_ahead", 10)
    admin.execute("ALTER ROLE cap_ahead SET dpnoise.charge_ahead = 8")
    conn = connect(port, "cap_ahead")
    pid = conn.info.backend_pid
    # The statement pays 0.01 from a reservation of 0.08 as it starts; the
    # fifth group's row sleeps until the session is terminated.
    # (random(): a fresh release, which a reservation pays; a repeatable one
    # carries its identity to the ledger.)
    query = ("SELECT g, dp_count(0.01), pg_sleep(CASE WHEN g = 5 THEN 60 ELSE 0 END) "
             "FROM generate_series(1, 20) g WHERE random() >= 0 GROUP BY g")
    worker = threading.Thread(target=lambda: attempt(conn, query))
    worker.start()
    sleeping = False
    for _ in range(600):
        if admin.execute("SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() == (True,):
            sleeping = True
            break
        time.sleep(0.05)
    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    worker.join()
    ledger = None
    for _ in range(300):
        ledger = admin.execute("SELECT string_agg(epsilon * releases || '', ' ' ORDER BY id) FROM dpnoise.ledger "
                               "WHERE role = 'cap_ahead'::regrole").fetchone()[0]
        if ledger and "-" in ledger:
            break
        time.sleep(0.1)
    check("a session holding a reservation, terminated mid-statement, gives back what it did not draw as it exits",
          sleeping and ledger == "0.08 -0.07", f"reached the fifth group: {sleeping}; ledger {ledger}")
    admin.execute("DROP OWNED BY cap_ahead")
    admin.execute("DROP ROLE cap_ahead")

if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
