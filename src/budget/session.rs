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
//! What a connection spent, and the cap it set itself, live in its PGPROC's
//! entry in shared memory (`shared::Session`), the one record of them: its
//! parallel workers reserve against the same entry under the same lock
//! (their own process state starts empty), and `dp_sessions` reads it. A
//! charge is counted there before the ledger is asked and given back only
//! if the ledger refuses it, so a charge the ledger commits is never
//! missing from the session, even when its requester is cancelled. The
//! connection also publishes its current role and the cap in force when a
//! statement is planned under another role or DBA cap.

use super::shared;
use crate::errors::{raise_sqlstate, BUDGET_EXHAUSTED};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::AnyNumeric;
use std::cell::RefCell;

// The dp_sessions view over `sessions`.
pgrx::extension_sql_file!(
    "sessions.sql",
    name = "sessions_sql",
    requires = ["budget_sql", dp_session_budget]
);

const EPSILON: usize = 0;
const DELTA: usize = 1;
const NAMES: [&str; 2] = ["epsilon", "delta"];

thread_local! {
    /// The role and settings last published, so a statement publishes
    /// again only when one of them changed.
    static PUBLISHED: RefCell<Option<(pg_sys::Oid, [u64; 2])>> = const { RefCell::new(None) };
}

/// An exact decimal as numeric (also the reservation's arithmetic).
pub(super) fn numeric(decimal: &str) -> AnyNumeric {
    AnyNumeric::try_from(decimal)
        .unwrap_or_else(|_| pgrx::error!("dpnoise: {decimal} is not a decimal (internal error)"))
}

/// A session cap in force and what set it.
struct Cap {
    decimal: String,
    set_by: String,
}

/// The caps in force, ε then δ: the lower of the DBA's setting (0: none)
/// and the session's own (`own`, decimals; empty: none).
fn caps(own: [&str; 2]) -> [Option<Cap>; 2] {
    let settings = [
        crate::gucs::max_epsilon_per_session(),
        crate::gucs::max_delta_per_session(),
    ];
    std::array::from_fn(|i| {
        let setting = (settings[i] > 0.0).then(|| Cap {
            decimal: dpnoise_core::rational::decimal(settings[i]),
            set_by: format!("dpnoise.max_{}_per_session", NAMES[i]),
        });
        let own = (!own[i].is_empty()).then(|| Cap {
            decimal: own[i].to_owned(),
            set_by: "dp_session_budget".to_owned(),
        });
        match (setting, own) {
            (Some(s), Some(o)) => Some(if numeric(&o.decimal) < numeric(&s.decimal) {
                o
            } else {
                s
            }),
            (s, o) => s.or(o),
        }
    })
}

/// The connection whose entry this process's charges count against: its
/// own, or in a parallel worker its leader's (whose session it is).
struct Connection {
    index: usize,
    pid: i32,
    /// Whether this process is the connection itself (not a parallel worker).
    own: bool,
}

fn connection() -> Option<Connection> {
    // SAFETY: MyProc is this process's PGPROC (or null outside one); a
    // parallel worker's lock group leader is its leader's PGPROC, which
    // outlives the worker; pid and pgprocno are set before either runs queries.
    unsafe {
        if pg_sys::MyProc.is_null() {
            return None;
        }
        let leader = (*pg_sys::MyProc).lockGroupLeader;
        if !leader.is_null() && leader != pg_sys::MyProc {
            return Some(Connection {
                index: crate::versions::proc_number(leader),
                pid: (*leader).pid,
                own: false,
            });
        }
        Some(Connection {
            index: crate::versions::proc_number(pg_sys::MyProc),
            pid: pg_sys::MyProcPid,
            own: true,
        })
    }
}

/// Makes `entry` this connection's if it is another's (a process that had
/// this PGPROC before): nothing spent, no cap of its own. True if the
/// entry is the connection's; a parallel worker never claims its leader's.
fn claim(entry: &mut shared::Session, connection: &Connection) -> bool {
    // SAFETY: plain reads of this backend's identity, set before any query runs.
    let (started, database, login) = unsafe {
        (
            pg_sys::MyStartTimestamp,
            pg_sys::MyDatabaseId,
            pg_sys::GetSessionUserId(),
        )
    };
    if entry.pid == connection.pid && (!connection.own || entry.started == started) {
        return true;
    }
    if !connection.own {
        return false;
    }
    entry.pid = connection.pid;
    entry.started = started;
    entry.database = database;
    entry.login = login;
    entry.role = login;
    for text in [&mut entry.spent_epsilon, &mut entry.spent_delta] {
        text.set("0");
    }
    for text in [
        &mut entry.own_epsilon,
        &mut entry.own_delta,
        &mut entry.cap_epsilon,
        &mut entry.cap_delta,
    ] {
        text.set("");
    }
    true
}

/// What a charge reserved of its session: given back if the ledger refuses it.
pub struct Reservation {
    pub index: u32,
    pub pid: i32,
    pub started: pg_sys::TimestampTz,
}

/// What a charge of (ε, δ) each (decimals) for `releases` releases costs.
fn cost(amounts: [&str; 2], releases: i64) -> [AnyNumeric; 2] {
    let times = AnyNumeric::from(releases);
    amounts.map(|a| numeric(a) * times.clone())
}

/// Sets what the entry's connection has spent to `spent` (ε, δ), rounded
/// up where it does not fit.
fn set_spent(entry: &mut shared::Session, spent: [AnyNumeric; 2]) {
    fitted(&mut entry.spent_epsilon, &spent[EPSILON].to_string(), true);
    fitted(&mut entry.spent_delta, &spent[DELTA].to_string(), true);
}

fn no_session() -> ! {
    raise_sqlstate(
        crate::errors::LEDGER_UNAVAILABLE,
        "dpnoise: the release could not be charged, so nothing was released: this process has no session entry".to_owned(),
        Some("Run the query in a client connection with dpnoise in shared_preload_libraries.".to_owned()),
    );
}

/// Counts a charge of (ε, δ) each for `releases` releases (decimals)
/// against the connection's caps and, if they admit it, adds it to what
/// the connection has spent, before the ledger is asked: a charge the
/// ledger then commits is never missing from the session (even if its
/// requester is cancelled while waiting). A charge past a cap is refused
/// with ZB001 and nothing is counted or charged. The connection's parallel
/// workers count against the same entry, under the same lock.
pub fn reserve(epsilon: &str, delta: &str, releases: i64) -> Reservation {
    let mailbox = shared::mailbox().unwrap_or_else(|| no_session());
    let connection = connection().unwrap_or_else(|| no_session());
    let asked = [epsilon, delta];
    let cost = cost(asked, releases);
    let outcome = mailbox.session(connection.index, |entry| {
        if !claim(entry, &connection) {
            return None;
        }
        let spent = [
            entry.spent_epsilon.get().to_owned(),
            entry.spent_delta.get().to_owned(),
        ];
        let after: [AnyNumeric; 2] = std::array::from_fn(|i| numeric(&spent[i]) + cost[i].clone());
        // Giving back (releases below 0) is never capped: a cap lowered
        // below what was spent must not keep it.
        if let (true, Some((i, cap))) = (releases > 0, passed_cap(entry, &after)) {
            return Some(Err((i, spent[i].clone(), cap)));
        }
        set_spent(entry, after);
        Some(Ok(Reservation {
            index: connection.index as u32,
            pid: entry.pid,
            started: entry.started,
        }))
    });
    match outcome.flatten() {
        None => no_session(),
        Some(Ok(reservation)) => reservation,
        Some(Err((i, spent, cap))) => raise_sqlstate(
            BUDGET_EXHAUSTED,
            format!(
                "dpnoise: this session's cap is reached: the release asks {} = {}{}; this session has spent {spent} of its cap of {} ({})",
                NAMES[i],
                asked[i],
                if releases == 1 { String::new() } else { format!(" for each of {releases} releases") },
                cap.decimal,
                cap.set_by,
            ),
            Some("Nothing was released or charged. The cap is per connection; the role's budget may still have more.".to_owned()),
        ),
    }
}

/// The first of the connection's caps that `after` (ε, δ spent) would pass.
fn passed_cap(entry: &shared::Session, after: &[AnyNumeric; 2]) -> Option<(usize, Cap)> {
    caps([entry.own_epsilon.get(), entry.own_delta.get()])
        .into_iter()
        .enumerate()
        .find_map(|(i, cap)| {
            cap.filter(|cap| after[i] > numeric(&cap.decimal))
                .map(|cap| (i, cap))
        })
}

/// Whether the connection's caps leave room for `releases` more releases
/// of (ε, δ) each (decimals): a charge ahead asks first, and asks for one
/// release alone if not.
pub fn has_room(epsilon: &str, delta: &str, releases: i64) -> bool {
    let (Some(mailbox), Some(connection)) = (shared::mailbox(), connection()) else {
        return false;
    };
    let cost = cost([epsilon, delta], releases);
    mailbox
        .session(connection.index, |entry| {
            if !claim(entry, &connection) {
                return false;
            }
            let spent = [entry.spent_epsilon.get(), entry.spent_delta.get()];
            let after: [AnyNumeric; 2] =
                std::array::from_fn(|i| numeric(spent[i]) + cost[i].clone());
            passed_cap(entry, &after).is_none()
        })
        .unwrap_or(false)
}

/// Gives back what `reserve` counted for a charge the ledger refused
/// (decimals, as reserved), if the session is still the same connection.
pub fn refund(session: &Reservation, epsilon: &str, delta: &str, releases: i64) {
    let Some(mailbox) = shared::mailbox() else {
        return;
    };
    let cost = cost([epsilon, delta], releases);
    mailbox.session(session.index as usize, |entry| {
        if entry.pid == session.pid && entry.started == session.started {
            let spent = [entry.spent_epsilon.get(), entry.spent_delta.get()];
            set_spent(
                entry,
                std::array::from_fn(|i| numeric(spent[i]) - cost[i].clone()),
            );
        }
    });
}

/// Publishes this session's role and caps if they changed since it last
/// did (called as each statement is planned).
pub fn touch() {
    // SAFETY: a plain read of this backend's current role.
    let role = unsafe { pg_sys::GetOuterUserId() };
    let now = (
        role,
        [
            crate::gucs::max_epsilon_per_session().to_bits(),
            crate::gucs::max_delta_per_session().to_bits(),
        ],
    );
    if PUBLISHED.with(|p| *p.borrow() != Some(now)) {
        publish();
    }
}

/// A decimal (≥ 0) as shared memory holds it: whole, or, past its room
/// (for amounts no one writes, like 1 + 1e-300), cut after the last
/// fractional digit that fits and, when `up`, rounded up there: what a
/// session spent is never counted as less, and a cap never as more.
fn fitted<const N: usize>(text: &mut shared::Text<N>, decimal: &str, up: bool) {
    if decimal.len() <= N {
        text.set(decimal);
        return;
    }
    if !decimal.find('.').is_some_and(|point| point + 1 < N) {
        // No fractional digit would be kept: the integer part alone is too long.
        pgrx::error!("dpnoise: an amount does not fit in the session's entry: {decimal}");
    }
    let mut digits: Vec<u8> = decimal.as_bytes()[..N].to_vec();
    if up {
        // Add one at the last kept digit, carrying past the point.
        let mut carry = true;
        for d in digits.iter_mut().rev().filter(|d| d.is_ascii_digit()) {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                carry = false;
                break;
            }
        }
        if carry {
            digits.insert(0, b'1');
            digits.pop();
        }
    }
    text.set(std::str::from_utf8(&digits).expect("ASCII digits"));
}

/// Writes this session's role and caps in force to its entry.
fn publish() {
    let (Some(mailbox), Some(connection)) = (shared::mailbox(), connection()) else {
        return;
    };
    // The connection itself only: not a parallel worker, nor the ledger worker.
    if !connection.own || super::worker::is_ledger_worker() {
        return;
    }
    // SAFETY: a plain read of this backend's current role.
    let role = unsafe { pg_sys::GetOuterUserId() };
    mailbox.session(connection.index, |entry| {
        claim(entry, &connection);
        entry.role = role;
        let caps = caps([entry.own_epsilon.get(), entry.own_delta.get()]);
        fitted(
            &mut entry.cap_epsilon,
            caps[EPSILON].as_ref().map_or("", |c| &c.decimal),
            false,
        );
        fitted(
            &mut entry.cap_delta,
            caps[DELTA].as_ref().map_or("", |c| &c.decimal),
            false,
        );
    });
    PUBLISHED.with(|p| {
        *p.borrow_mut() = Some((
            role,
            [
                crate::gucs::max_epsilon_per_session().to_bits(),
                crate::gucs::max_delta_per_session().to_bits(),
            ],
        ))
    });
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
                        if i == DELTA {
                            "a number in [0, 1]"
                        } else {
                            "a finite number >= 0"
                        }
                    ),
                    None,
                );
            }
        }
    }
    let mailbox = shared::mailbox().unwrap_or_else(|| no_session());
    let connection = connection().unwrap_or_else(|| no_session());
    let outcome = mailbox.session(connection.index, |entry| {
        claim(entry, &connection);
        let current = caps([entry.own_epsilon.get(), entry.own_delta.get()]);
        let mut own = [
            entry.own_epsilon.get().to_owned(),
            entry.own_delta.get().to_owned(),
        ];
        for i in [EPSILON, DELTA] {
            let Some(v) = asked[i] else { continue };
            let decimal = dpnoise_core::rational::decimal(v);
            if let Some(cap) = &current[i] {
                if numeric(&decimal) > numeric(&cap.decimal) {
                    return Err((i, decimal, cap.decimal.clone(), cap.set_by.clone()));
                }
            }
            own[i] = decimal;
        }
        fitted(&mut entry.own_epsilon, &own[EPSILON], false);
        fitted(&mut entry.own_delta, &own[DELTA], false);
        Ok(())
    });
    if outcome.is_none() {
        no_session();
    }
    if let Some(Err((i, decimal, cap, set_by))) = outcome {
        raise_sqlstate(
            "42501",
            format!("dpnoise: a session's cap can only be lowered: {} = {decimal} is above this session's cap of {cap} ({set_by})", NAMES[i]),
            Some("Nothing was changed.".to_owned()),
        );
    }
    publish();
}

/// Every session of this database that has published an entry and that the
/// caller may see (a superuser: all; another role: the connections logged
/// in as a role whose privileges it has: what a connection spent is its
/// own, whatever roles it charged). Exited backends' entries are left to
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
    let entries = shared::mailbox()
        .map(|m| m.session_entries())
        .unwrap_or_default();
    // SAFETY: plain reads of this backend's database and role, and a catalog check.
    let (database, me) = unsafe { (pg_sys::MyDatabaseId, pg_sys::GetUserId()) };
    let value = |decimal: &str| (!decimal.is_empty()).then(|| numeric(decimal));
    let rows: Vec<_> = entries
        .into_iter()
        // SAFETY: has_privs_of_role reads the catalog; superusers have every role's privileges.
        .filter(|s| s.database == database && unsafe { pg_sys::has_privs_of_role(me, s.login) })
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
