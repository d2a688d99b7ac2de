//! The ledger client: a releasing process writes its request into its own
//! shared-memory slot, wakes its database's ledger worker (starting one if
//! none runs) and waits for the answer. The worker charges in a
//! transaction of its own and commits synchronously before it answers.

use super::session;
use super::shared::{
    self, Outcome, Slot, SlotRef, WorkerState, DONE, FREE, MAX_DATABASES, PENDING, TAKEN,
};
use super::{worker, Charge};
use crate::errors::{raise_sqlstate, BUDGET_EXHAUSTED, LEDGER_UNAVAILABLE};
use pgrx::pg_sys;

pub(super) fn unavailable(message: &str) -> ! {
    unavailable_with(message, None)
}

fn unavailable_with(message: &str, hint: Option<&str>) -> ! {
    raise_sqlstate(
        LEDGER_UNAVAILABLE,
        format!("dpnoise: the release could not be charged, so nothing was released: {message}"),
        hint.map(str::to_owned),
    );
}

/// Charges the current role (`GetOuterUserId`: the role SET ROLE chose,
/// not a SECURITY DEFINER function's owner) and returns once the charge is
/// committed. Raises ZB001 when the budget does not cover it and ZB002
/// when the ledger cannot be reached; either way nothing was charged
/// (or, if the worker died after committing, charged and not released).
pub(super) fn charge_ledger(request: &Charge) {
    settle(request, ask(request))
}

/// (ε, δ, ρ, ρ's δ) as the exact decimals a charge carries.
pub(super) fn decimals(request: &Charge) -> [String; 4] {
    match &request.exact {
        Some(exact) => exact.clone(),
        None => [
            request.epsilon,
            request.delta,
            request.rho,
            request.rho_delta,
        ]
        .map(dpnoise_core::rational::decimal),
    }
}

/// The ledger's answer to a request.
pub(super) struct Answer {
    pub(super) outcome: Outcome,
    remaining_epsilon: String,
    remaining_delta: String,
    /// What a zCDP budget has left of ρ (its δ is `remaining_delta`);
    /// empty for an additive budget.
    remaining_rho: String,
    /// The budget on tables that refused it (its remainders above), if one did.
    refused_by: String,
    message: String,
}

/// Asks the ledger to charge `request` and waits for its answer; the
/// session's count follows it (given back unless granted and not free).
pub(super) fn ask(request: &Charge) -> Answer {
    let Some(mailbox) = shared::mailbox() else {
        unavailable_with(
            "dpnoise is not in shared_preload_libraries",
            Some("Add dpnoise to shared_preload_libraries in postgresql.conf and restart the server."),
        );
    };
    // SAFETY: a plain query of the server's state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        // A standby cannot write the ledger, and a release is never made
        // without its charge committed first.
        unavailable_with(
            "this server is a standby, and releases are charged, so they run, on the primary only",
            Some("Run the query on the primary server."),
        );
    }
    let amounts = decimals(request);
    if !amounts
        .iter()
        .all(|a| shared::Text::<{ shared::AMOUNT }>::fits(a))
    {
        // Never charge a cut-off (smaller) amount.
        unavailable("an amount is too long a decimal to charge exactly");
    }
    // SAFETY: MyProc is this backend's PGPROC, set before any query runs.
    let (database, index) = unsafe {
        (
            pg_sys::MyDatabaseId,
            crate::versions::proc_number(pg_sys::MyProc),
        )
    };
    let Some(slot) = mailbox.slot(index) else {
        unavailable("this process has no request slot");
    };
    // A request abandoned in this slot (its requester cancelled while
    // waiting; perhaps another process, in another database) is still owed
    // an answer by its own database's worker; the slot is ours again once
    // it is DONE. Its session counted it; if the ledger refused it (or it
    // was a repeat, free), it is given back now (after the slot is freed:
    // never twice).
    if !matches!(slot.load(), FREE | DONE) {
        let owed_by = slot.database();
        // SAFETY: a syscache lookup by OID inside a transaction (every charge runs in one).
        let dropped = owed_by != database
            && !unsafe {
                pg_sys::SearchSysCacheExists(
                    pg_sys::SysCacheIdentifier::DATABASEOID as i32,
                    owed_by.into(),
                    0.into(),
                    0.into(),
                    0.into(),
                )
            };
        // A dropped database's requests (a session it killed was giving
        // back what it paid ahead as it exited) have no worker and no
        // ledger left: none will ever answer them, so nothing is owed.
        if dropped && slot.take() {
            slot.with(|s| s.outcome = Outcome::Failed);
            slot.store(DONE);
        }
        wait_until_done(slot, owed_by);
    }
    if slot.load() == DONE {
        let abandoned = slot.with(|s| {
            let reservation = session::Reservation {
                index: s.session,
                pid: s.pid,
                started: s.started,
            };
            let given_back =
                s.outcome == Outcome::Refused || (s.outcome == Outcome::Granted && s.free);
            (
                given_back,
                reservation,
                [s.epsilon.get().to_owned(), s.delta.get().to_owned()],
                s.releases,
            )
        });
        slot.store(FREE);
        if let (true, reservation, [epsilon, delta], releases) = abandoned {
            session::refund(&reservation, &epsilon, &delta, releases);
        }
    }
    // The session's caps, before anything is asked of the ledger: the
    // charge is counted in the session now, and given back if refused.
    let reservation = session::reserve(&amounts[0], &amounts[1], request.releases);
    // The slot is this process's own (its PGPROC's) and FREE: ours to fill.
    slot.with(|s| fill(s, request, &amounts, &reservation, database));
    slot.store(PENDING);
    wake_worker(database);
    wait_until_done(slot, database);
    // DONE: the worker has let go of it; ours to read.
    let (outcome, free, remaining_epsilon, remaining_delta, remaining_rho, refused_by, message) =
        slot.with(|s| {
            let text = |t: &shared::Text<64>| t.get().to_owned();
            (
                s.outcome,
                s.free,
                text(&s.remaining_epsilon),
                text(&s.remaining_delta),
                text(&s.remaining_rho),
                s.refused_by.get().to_owned(),
                s.message.get().to_owned(),
            )
        });
    slot.store(FREE);
    // A repeated release costs the session nothing either.
    if outcome == Outcome::Refused || (outcome == Outcome::Granted && free) {
        session::refund(&reservation, &amounts[0], &amounts[1], request.releases);
    }
    // Failed: the worker may have committed before it stopped, so the
    // session keeps counting the charge (never less than the ledger).
    Answer {
        outcome,
        remaining_epsilon,
        remaining_delta,
        remaining_rho,
        refused_by,
        message,
    }
}

/// Posts `request`, charged to `role`, as the backend exits, without
/// waiting for the answer (whoever uses the slot next waits for it).
/// Nothing is posted if the slot is still busy or this is a standby.
pub(super) fn post_on_exit(role: pg_sys::Oid, request: &Charge) {
    let Some(mailbox) = shared::mailbox() else {
        return;
    };
    // SAFETY: an exit callback may be called with LWLocks still held (a FATAL error raised under
    // one): release them, as the exit's own clean-up would, before taking the mailbox's. MyProc,
    // MyDatabaseId and MyLatch are this backend's, still set (before_shmem_exit runs before ProcKill).
    let (database, index) = unsafe {
        pg_sys::LWLockReleaseAll();
        if pg_sys::MyProc.is_null() || pg_sys::RecoveryInProgress() {
            return;
        }
        (
            pg_sys::MyDatabaseId,
            crate::versions::proc_number(pg_sys::MyProc),
        )
    };
    let Some(slot) = mailbox.slot(index) else {
        return;
    };
    if !matches!(slot.load(), FREE | DONE) {
        return;
    }
    // An answer left in the slot needs nothing more: the session is ending.
    slot.store(FREE);
    let amounts = decimals(request);
    let reservation = session::reserve(&amounts[0], &amounts[1], request.releases);
    // The slot is this process's own and FREE: ours to fill.
    slot.with(|s| {
        fill(s, request, &amounts, &reservation, database);
        s.role = role;
        s.statement.set("");
        s.requester = std::ptr::null_mut();
    });
    slot.store(PENDING);
    wake_worker(database);
}

/// What a release goes on with: granted, or the ledger's refusal or
/// failure raised (ZB001, ZB002).
fn settle(request: &Charge, answer: Answer) {
    let Answer {
        outcome,
        remaining_epsilon,
        remaining_delta,
        remaining_rho,
        refused_by,
        message,
    } = answer;
    match outcome {
        Outcome::Granted => {}
        Outcome::Refused => {
            // Which limit ran out: the remainders are the ledger's numerics.
            // A zCDP budget answers its ρ left, and the δ beside it.
            let zcdp = !remaining_rho.is_empty();
            let left = |text: &str| text.trim().parse::<f64>().unwrap_or(f64::INFINITY);
            let times = request.releases.max(1) as f64;
            let (first, asked, asked_delta, left_first) = if zcdp {
                ("rho", request.rho, request.rho_delta, &remaining_rho)
            } else {
                (
                    "epsilon",
                    request.epsilon,
                    request.delta,
                    &remaining_epsilon,
                )
            };
            let short_first = left(left_first) < asked * times;
            let short_delta = left(&remaining_delta) < asked_delta * times;
            let (what, hint) = match (short_first, short_delta) {
                _ if !refused_by.is_empty() => (
                    format!("{refused_by} ran out"),
                    "Nothing was released. A budget on tables limits every statement that reads them (dp_my_table_budgets); \
                     a DBA grants more with dp_budget_grant_tables(role, tables, epsilon, delta, period), or it refreshes \
                     at the end of its period.".to_string(),
                ),
                (false, true) => (
                    "its delta ran out".to_string(),
                    "Nothing was released. Group keys from protected data (and Gaussian or truncated Laplace noise) \
                     spend delta (dpnoise.selection_delta for a GROUP BY): a DBA grants it with \
                     dp_budget_grant(role, epsilon, delta); keys listed from a public table need none.".to_string(),
                ),
                (true, false) => (
                    format!("its {first} ran out"),
                    format!("Nothing was released. Lower the epsilon asked, or a DBA grants more with {}.",
                            if zcdp { "dp_budget_grant_zcdp(role, epsilon, delta)" } else { "dp_budget_grant(role, epsilon, delta)" }),
                ),
                _ => (
                    format!("its {first} and delta ran out"),
                    "Nothing was released. A DBA grants budget with dp_budget_grant(role, epsilon, delta).".to_string(),
                ),
            };
            let each = if request.releases == 1 {
                String::new()
            } else {
                format!(" for each of {} releases", request.releases)
            };
            let decimal = dpnoise_core::rational::decimal;
            let message = if zcdp {
                format!(
                    "dpnoise: privacy budget exhausted ({what}): {} asks rho = {}, delta = {}{each} (epsilon = {} added up); remaining rho = {}, delta = {}",
                    request.mechanism,
                    decimal(request.rho),
                    decimal(request.rho_delta),
                    decimal(request.epsilon),
                    remaining_rho,
                    remaining_delta
                )
            } else {
                format!(
                    "dpnoise: privacy budget exhausted ({what}): {} asks epsilon = {}, delta = {}{each}; remaining epsilon = {}, delta = {}",
                    request.mechanism,
                    decimal(request.epsilon),
                    decimal(request.delta),
                    remaining_epsilon,
                    remaining_delta
                )
            };
            raise_sqlstate(BUDGET_EXHAUSTED, message, Some(hint))
        }
        Outcome::Failed => unavailable(&message),
    }
}

fn fill(
    slot: &mut Slot,
    request: &Charge,
    amounts: &[String; 4],
    session: &session::Reservation,
    database: pg_sys::Oid,
) {
    slot.pid = session.pid;
    slot.started = session.started;
    slot.session = session.index;
    // SAFETY: plain reads of this backend's identity and latch, set before any query runs.
    unsafe {
        slot.database = database;
        slot.role = pg_sys::GetOuterUserId();
        slot.requester = pg_sys::MyLatch;
    }
    slot.taker = 0;
    slot.releases = request.releases;
    let recorded = request.identities.len().min(shared::IDENTITIES);
    slot.identities[..recorded].copy_from_slice(&request.identities[..recorded]);
    slot.identity_count = recorded as u8;
    slot.repeat = request.repeat && recorded == request.identities.len();
    slot.free = false;
    slot.epsilon.set(&amounts[0]);
    slot.delta.set(&amounts[1]);
    slot.rho.set(&amounts[2]);
    slot.rho_delta.set(&amounts[3]);
    slot.mechanism.set(request.mechanism);
    // SAFETY: debug_query_string is this backend's current statement text (or null), valid while it runs.
    let statement = unsafe { pg_sys::debug_query_string };
    let statement = if statement.is_null() {
        ""
    } else {
        // SAFETY: a non-null debug_query_string is a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(statement) }
            .to_str()
            .unwrap_or("")
    };
    slot.statement.set(statement);
    slot.remaining_epsilon.set("");
    slot.remaining_delta.set("");
    slot.remaining_rho.set("");
    slot.refused_by.set("");
    let tables = request.tables.as_ref().map_or_else(String::new, |t| {
        let listed: Vec<String> = t.iter().map(|o| u32::from(*o).to_string()).collect();
        format!("{{{}}}", listed.join(","))
    });
    if !shared::Text::<1024>::fits(&tables) {
        // Too many to list: every budget on tables of the role is charged.
        slot.tables.set("");
    } else {
        slot.tables.set(&tables);
    }
    slot.message.set("");
}

/// Wakes the database's worker, or gives the database an idle pool
/// worker, or starts a dynamic one. With every pool worker busy for other
/// databases and no free slot, the request waits (the requester retries
/// every 200 ms) rather than fail.
fn wake_worker(database: pg_sys::Oid) {
    let mailbox = shared::mailbox().expect("checked by charge");
    let start = mailbox.locked(|h| {
        // SAFETY: a plain clock read.
        let now = unsafe { pg_sys::GetCurrentTimestamp() };
        if let Some(i) = h.workers.iter().position(|w| w.serves(database)) {
            let w = &mut h.workers[i];
            match w.state {
                // SAFETY: a Running entry's latch is its worker's PGPROC latch, in shared memory for the server's life; read under the mailbox lock.
                WorkerState::Running => unsafe { pg_sys::SetLatch(w.latch) },
                // A dynamic worker that has not come up in 10 s never will: replace it.
                _ if i >= shared::POOL && now - w.since > 10_000_000 => {
                    w.since = now;
                    return Some(Some(i));
                }
                _ => {}
            }
            return None;
        }
        if h.assign_idle_pool_worker(database, now) {
            return None;
        }
        let Some(free) =
            (shared::POOL..MAX_DATABASES).find(|&i| h.workers[i].state == WorkerState::Empty)
        else {
            return Some(None);
        };
        let w = &mut h.workers[free];
        w.database = database;
        w.state = WorkerState::Starting;
        w.latch = std::ptr::null_mut();
        w.pid = 0;
        w.since = now;
        Some(Some(free))
    });
    match start {
        None => {}
        Some(None) if worker::pool_registered() => {}
        Some(None) => unavailable(
            "more databases are charging at once than dpnoise has ledger workers for (16)",
        ),
        Some(Some(entry)) => {
            if !worker::launch(entry) {
                mailbox.locked(|h| h.workers[entry].state = WorkerState::Empty);
                if !worker::pool_registered() {
                    unavailable_with(
                        "no background worker slot is free to start the ledger worker, and its pool did not start",
                        Some("Raise max_worker_processes (dpnoise reserves 2 ledger workers at server start)."),
                    );
                }
            }
        }
    }
}

/// Asks this database's ledger worker to compact the write log of tracked
/// tables (`repeat`), waking it if one runs or an idle pool worker can
/// take the database; otherwise the next worker to serve it will. Never
/// raises: the caller is a statement that only reads.
pub fn request_compaction() {
    let Some(mailbox) = shared::mailbox() else {
        return;
    };
    // SAFETY: a plain query of the server's state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        // A standby's log is the primary's, merged there.
        return;
    }
    // SAFETY: a by-value read of this backend's database, set before any query runs.
    let database = unsafe { pg_sys::MyDatabaseId };
    mailbox.locked(|h| {
        if !h.compact.contains(&database) {
            if let Some(free) = h.compact.iter_mut().find(|d| **d == pg_sys::InvalidOid) {
                *free = database;
            }
        }
        if let Some(w) = h.workers.iter().find(|w| w.serves(database)) {
            if w.state == WorkerState::Running {
                // SAFETY: a Running entry's latch is its worker's PGPROC latch, in shared memory for the server's life; read under the mailbox lock.
                unsafe { pg_sys::SetLatch(w.latch) };
            }
            return;
        }
        // SAFETY: a plain clock read.
        h.assign_idle_pool_worker(database, unsafe { pg_sys::GetCurrentTimestamp() });
    });
}

/// Waits on this process's latch until the slot is DONE (or FREE),
/// restarting the worker if it went away while the request was pending.
fn wait_until_done(slot: SlotRef, database: pg_sys::Oid) {
    loop {
        let state = slot.load();
        if state == DONE || state == FREE {
            return;
        }
        // SAFETY: MyLatch is this process's own latch; waiting on it and checking for
        // interrupts is what a backend does between statements' work.
        unsafe {
            let flags = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                flags as i32,
                200,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
            pg_sys::check_for_interrupts!();
        }
        if slot.load() == PENDING {
            // Woken by something else, or the worker exited idle just as
            // we asked: make sure one is running and has been told.
            wake_worker(database);
        }
        debug_assert!(slot.load() != TAKEN || slot.with(|s| s.taker) != 0);
    }
}
