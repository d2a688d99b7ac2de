//! A cap on what one connection spends: `dpnoise.max_epsilon_per_session`
//! and `dpnoise.max_delta_per_session`, superuser-only settings a DBA sets
//! per role or database (`ALTER ROLE ... SET`), so every connection of a
//! shared role (a BI service account, a pool) starts with it and cannot
//! raise it: SET, RESET and connection options of a superuser-only setting
//! are refused to other roles. A user lowers their own session's cap
//! further with `dp_session_budget`, which never raises it.
//!
//! The session's spending is added up exactly, in decimal (as the ledger
//! does): a cap of 0.3 admits three releases of 0.1. It counts what was
//! charged (a ROLLBACK refunds nothing), and a release the cap would pass
//! is refused with ZB001 before anything is charged.
//!
//! Each session publishes its spending, its caps and its role in its
//! PGPROC's entry in shared memory (`shared::Session`), which the
//! `dp_sessions` view reads: after each charge, each change of its cap,
//! and when a statement is planned under another role or cap.

use super::shared;
use crate::errors::{raise_sqlstate, BUDGET_EXHAUSTED};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::prelude::*;
use pgrx::AnyNumeric;
use std::cell::RefCell;

// The dp_sessions view over `sessions`.
pgrx::extension_sql_file!("sessions.sql", name = "sessions_sql", requires = ["budget_sql", dp_session_budget]);

static MAX_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static MAX_DELTA: GucSetting<f64> = GucSetting::<f64>::new(0.0);

const EPSILON: usize = 0;
const DELTA: usize = 1;
const NAMES: [&str; 2] = ["epsilon", "delta"];

thread_local! {
    /// (ε, δ) this session was charged, as exact decimals.
    static SPENT: RefCell<[String; 2]> = RefCell::new(["0".to_owned(), "0".to_owned()]);
    /// The caps this session set itself with dp_session_budget (decimals).
    static OWN_CAP: RefCell<[Option<String>; 2]> = const { RefCell::new([None, None]) };
    /// The role and settings last published, so a statement publishes
    /// again only when one of them changed.
    static PUBLISHED: RefCell<Option<(pg_sys::Oid, [u64; 2])>> = const { RefCell::new(None) };
}

pub fn init() {
    GucRegistry::define_float_guc(
        c"dpnoise.max_epsilon_per_session",
        c"The most epsilon one connection may spend (0: no cap).",
        c"Set by a superuser, per role or database (ALTER ROLE ... SET); a session cannot raise it.",
        &MAX_EPSILON,
        0.0,
        1e9,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.max_delta_per_session",
        c"The most delta one connection may spend (0: no cap).",
        c"Set by a superuser, per role or database (ALTER ROLE ... SET); a session cannot raise it.",
        &MAX_DELTA,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );
}

fn numeric(decimal: &str) -> AnyNumeric {
    AnyNumeric::try_from(decimal).unwrap_or_else(|_| pgrx::error!("dpnoise: {decimal} is not a decimal (internal error)"))
}

/// A session cap in force and what set it.
struct Cap {
    decimal: String,
    set_by: String,
}

/// The caps in force, ε then δ: the lower of the DBA's setting (0: none)
/// and the session's own.
fn caps() -> [Option<Cap>; 2] {
    let settings = [MAX_EPSILON.get(), MAX_DELTA.get()];
    let own = OWN_CAP.with(|c| c.borrow().clone());
    std::array::from_fn(|i| {
        let setting = (settings[i] > 0.0).then(|| Cap {
            decimal: dpnoise_core::rational::decimal(settings[i]),
            set_by: format!("dpnoise.max_{}_per_session", NAMES[i]),
        });
        let own = own[i].clone().map(|decimal| Cap { decimal, set_by: "dp_session_budget".to_owned() });
        match (setting, own) {
            (Some(s), Some(o)) => Some(if numeric(&o.decimal) < numeric(&s.decimal) { o } else { s }),
            (s, o) => s.or(o),
        }
    })
}

/// What the session will have spent after a charge of (ε, δ) each for
/// `releases` releases (decimals), refused with ZB001 if that passes a cap.
/// Nothing is recorded: `spent` does, once the charge is granted.
pub fn check(epsilon: &str, delta: &str, releases: i64) -> [String; 2] {
    let spent = SPENT.with(|s| s.borrow().clone());
    let times = AnyNumeric::from(releases);
    let asked = [epsilon, delta];
    let after: [AnyNumeric; 2] = std::array::from_fn(|i| numeric(&spent[i]) + numeric(asked[i]) * times.clone());
    for (i, cap) in caps().into_iter().enumerate() {
        let Some(cap) = cap else { continue };
        if after[i] > numeric(&cap.decimal) {
            raise_sqlstate(
                BUDGET_EXHAUSTED,
                format!(
                    "dpnoise: this session's cap is reached: the release asks {} = {}{}; this session has spent {} of its cap of {} ({})",
                    NAMES[i],
                    asked[i],
                    if releases == 1 { String::new() } else { format!(" for each of {releases} releases") },
                    spent[i],
                    cap.decimal,
                    cap.set_by,
                ),
                Some("Nothing was released or charged. The cap is per connection; the role's budget may still have more.".to_owned()),
            );
        }
    }
    after.map(|a| a.to_string())
}

/// Records what the session has spent, once a charge is granted.
pub fn spent(after: [String; 2]) {
    SPENT.with(|s| *s.borrow_mut() = after);
    publish();
}

/// Publishes this session's entry again if its role or the DBA's caps
/// changed since it last did (called as each statement is planned).
pub fn touch() {
    // SAFETY: a plain read of this backend's current role.
    let role = unsafe { pg_sys::GetOuterUserId() };
    let now = (role, [MAX_EPSILON.get().to_bits(), MAX_DELTA.get().to_bits()]);
    if PUBLISHED.with(|p| *p.borrow() != Some(now)) {
        publish();
    }
}

/// Decimals as shared memory holds them: in full, or (past its room, for
/// amounts no one writes) in scientific notation, which numeric reads too.
fn fitted<const N: usize>(text: &mut shared::Text<N>, decimal: &str) {
    if decimal.len() <= N {
        text.set(decimal);
    } else {
        text.set(&format!("{:e}", decimal.parse::<f64>().unwrap_or(f64::INFINITY)));
    }
}

/// Writes this session's entry in shared memory.
fn publish() {
    let Some(mailbox) = shared::mailbox() else { return };
    // SAFETY: plain reads of this backend's identity, set before any query runs.
    let (role, pid, started, database, index) = unsafe {
        // Client connections only: not the ledger workers, nor a parallel worker.
        if pg_sys::MyProc.is_null() || pg_sys::MyBackendType != pg_sys::BackendType::B_BACKEND {
            return;
        }
        (pg_sys::GetOuterUserId(), pg_sys::MyProcPid, pg_sys::MyStartTimestamp, pg_sys::MyDatabaseId, (*pg_sys::MyProc).pgprocno)
    };
    let spent = SPENT.with(|s| s.borrow().clone());
    let caps = caps();
    mailbox.publish(index as usize, |entry| {
        entry.pid = pid;
        entry.started = started;
        entry.database = database;
        entry.role = role;
        fitted(&mut entry.spent_epsilon, &spent[EPSILON]);
        fitted(&mut entry.spent_delta, &spent[DELTA]);
        fitted(&mut entry.cap_epsilon, caps[EPSILON].as_ref().map_or("", |c| &c.decimal));
        fitted(&mut entry.cap_delta, caps[DELTA].as_ref().map_or("", |c| &c.decimal));
    });
    PUBLISHED.with(|p| *p.borrow_mut() = Some((role, [MAX_EPSILON.get().to_bits(), MAX_DELTA.get().to_bits()])));
}

/// Lowers this session's cap on epsilon, delta or both (NULL leaves one as
/// it is); never raises it. A cap below what the session already spent
/// ends its releases.
#[pg_extern(volatile, parallel_unsafe)]
fn dp_session_budget(epsilon: default!(Option<f64>, "NULL"), delta: default!(Option<f64>, "NULL")) {
    let asked = [epsilon, delta];
    for (i, value) in asked.iter().enumerate() {
        if let Some(v) = *value {
            let upper = if i == DELTA { 1.0 } else { f64::MAX };
            if !(0.0..=upper).contains(&v) {
                raise_sqlstate(
                    "22023",
                    format!(
                        "dpnoise: {} must be {}, got {v}",
                        NAMES[i],
                        if i == DELTA { "a number in [0, 1]" } else { "a finite number >= 0" }
                    ),
                    None,
                );
            }
        }
    }
    let current = caps();
    let mut own = OWN_CAP.with(|c| c.borrow().clone());
    for i in [EPSILON, DELTA] {
        let Some(v) = asked[i] else { continue };
        let decimal = dpnoise_core::rational::decimal(v);
        if let Some(cap) = &current[i] {
            if numeric(&decimal) > numeric(&cap.decimal) {
                raise_sqlstate(
                    "42501",
                    format!(
                        "dpnoise: a session's cap can only be lowered: {} = {decimal} is above this session's cap of {} ({})",
                        NAMES[i], cap.decimal, cap.set_by
                    ),
                    Some("Nothing was changed.".to_owned()),
                );
            }
        }
        own[i] = Some(decimal);
    }
    OWN_CAP.with(|c| *c.borrow_mut() = own);
    publish();
}

/// Every session of this database that has published an entry and that the
/// caller may see (a superuser: all; another role: the sessions charged to
/// a role whose privileges it has). Exited backends' entries are left to
/// the dp_sessions view, which joins pg_stat_activity on pid and start.
/// Declared by sessions.sql as dpnoise.sessions(), in the budget's schema.
#[pg_extern(volatile, parallel_restricted, sql = false)]
fn dp_session_entries() -> TableIterator<
    'static,
    (
        name!(pid, i32),
        name!(role, pg_sys::Oid),
        name!(backend_start, Option<TimestampWithTimeZone>),
        name!(epsilon_spent, Option<AnyNumeric>),
        name!(delta_spent, Option<AnyNumeric>),
        name!(epsilon_cap, Option<AnyNumeric>),
        name!(delta_cap, Option<AnyNumeric>),
    ),
> {
    let entries = shared::mailbox().map(|m| m.session_entries()).unwrap_or_default();
    // SAFETY: plain reads of this backend's database and role, and a catalog check.
    let (database, me) = unsafe { (pg_sys::MyDatabaseId, pg_sys::GetUserId()) };
    let value = |decimal: &str| (!decimal.is_empty()).then(|| numeric(decimal));
    let rows: Vec<_> = entries
        .into_iter()
        // SAFETY: has_privs_of_role reads the catalog; superusers have every role's privileges.
        .filter(|s| s.database == database && unsafe { pg_sys::has_privs_of_role(me, s.role) })
        .map(|s| {
            (
                s.pid,
                s.role,
                TimestampWithTimeZone::try_from(s.started).ok(),
                value(s.spent_epsilon.get()),
                value(s.spent_delta.get()),
                value(s.cap_epsilon.get()),
                value(s.cap_delta.get()),
            )
        })
        .collect();
    TableIterator::new(rows)
}
