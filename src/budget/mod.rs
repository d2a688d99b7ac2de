//! The privacy budget: every release is charged before it is computed.
//!
//! A releasing process writes its request into its own shared-memory slot
//! and wakes its database's ledger worker, starting one if none runs. The
//! worker charges in a transaction of its own, commits it synchronously and
//! only then answers. So the charge is durable before any noise is drawn,
//! and nothing the caller does afterwards (ROLLBACK, an error, a crash)
//! can take it back. docs/budget.md has the whole argument.
//!
//! [`charge`] is the one entry point; final functions and per-row functions
//! reach it through [`pay`], which applies the charging model of the role.

mod ahead;
mod nodes;
mod session;
mod shared;
pub mod worker;

use crate::call_site::Paid;
use crate::errors::{raise_sqlstate, BUDGET_EXHAUSTED, LEDGER_UNAVAILABLE};
use crate::gucs;
use pgrx::pg_sys;
use ahead::list_unused;
pub use ahead::{any_unused, return_unused};
use shared::{Outcome, Slot, SlotRef, WorkerState, DONE, FREE, MAX_DATABASES, PENDING, TAKEN};

// The budget's schema, tables, functions and views.
pgrx::extension_sql_file!("schema.sql", name = "budget_sql", requires = [ahead::dp_budget_changed]);

/// Registers the pool of ledger workers; only from shared_preload_libraries.
pub fn init() {
    ahead::init();
    session::init();
    shared::init();
    worker::register_pool();
}

/// Publishes this session's entry for dp_sessions if its role or caps
/// changed (each statement, as it is planned).
pub fn touch_session() {
    session::touch();
}

/// One charge request: `releases` releases at (ε, δ) each.
pub struct Charge<'a> {
    pub mechanism: &'a str,
    pub epsilon: f64,
    pub delta: f64,
    pub releases: i64,
    /// (ε, δ) as exact decimals, when the f64s above are rounded sums.
    pub exact: Option<[String; 2]>,
    /// The identities of the releases it pays for once and for all
    /// (`repeat`; not a strict role's); the ledger records them (past
    /// `shared::IDENTITIES`, they are charged and not recorded).
    pub identities: &'a [[u8; 32]],
    /// Granted free if every one of `identities` was paid before.
    pub repeat: bool,
}

/// What the ledger answered when it granted a charge.
pub struct Granted {
    /// The role pays for every release (no parallel composition).
    pub strict: bool,
    /// The release was paid for before: nothing was charged.
    pub free: bool,
}

fn unavailable(message: &str) -> ! {
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
pub fn charge(request: &Charge) -> Granted {
    settle(request, ask(request))
}

/// (ε, δ) as the exact decimals a charge carries.
fn decimals(epsilon: f64, delta: f64) -> [String; 2] {
    [dpnoise_core::rational::decimal(epsilon), dpnoise_core::rational::decimal(delta)]
}

/// The ledger's answer to a request.
struct Answer {
    outcome: Outcome,
    strict: bool,
    free: bool,
    remaining_epsilon: String,
    remaining_delta: String,
    message: String,
}

/// Asks the ledger to charge `request` and waits for its answer; the
/// session's count follows it (given back unless granted and not free).
fn ask(request: &Charge) -> Answer {
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
    let amounts = match &request.exact {
        Some([epsilon, delta]) => [epsilon.clone(), delta.clone()],
        None => decimals(request.epsilon, request.delta),
    };
    if !amounts.iter().all(|a| shared::Text::<{ shared::AMOUNT }>::fits(a)) {
        // Never charge a cut-off (smaller) amount.
        unavailable("an amount is too long a decimal to charge exactly");
    }
    // SAFETY: MyProc is this backend's PGPROC, set before any query runs.
    let (database, index) = unsafe { (pg_sys::MyDatabaseId, (*pg_sys::MyProc).pgprocno as usize) };
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
            && !unsafe { pg_sys::SearchSysCacheExists(pg_sys::SysCacheIdentifier::DATABASEOID as i32, owed_by.into(), 0.into(), 0.into(), 0.into()) };
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
            let reservation = session::Reservation { index: s.session, pid: s.pid, started: s.started };
            let given_back = s.outcome == Outcome::Refused || (s.outcome == Outcome::Granted && s.free);
            (given_back, reservation, [s.epsilon.get().to_owned(), s.delta.get().to_owned()], s.releases)
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
    let (outcome, strict, free, remaining_epsilon, remaining_delta, message) = slot.with(|s| {
        let text = |t: &shared::Text<64>| t.get().to_owned();
        (s.outcome, s.strict, s.free, text(&s.remaining_epsilon), text(&s.remaining_delta), s.message.get().to_owned())
    });
    slot.store(FREE);
    // A repeated release costs the session nothing either.
    if outcome == Outcome::Refused || (outcome == Outcome::Granted && free) {
        session::refund(&reservation, &amounts[0], &amounts[1], request.releases);
    }
    // Failed: the worker may have committed before it stopped, so the
    // session keeps counting the charge (never less than the ledger).
    Answer { outcome, strict, free, remaining_epsilon, remaining_delta, message }
}

/// Posts `request`, charged to `role`, as the backend exits, without
/// waiting for the answer (whoever uses the slot next waits for it).
/// Nothing is posted if the slot is still busy or this is a standby.
fn post_on_exit(role: pg_sys::Oid, request: &Charge) {
    let Some(mailbox) = shared::mailbox() else { return };
    // SAFETY: an exit callback may be called with LWLocks still held (a FATAL error raised under
    // one): release them, as the exit's own clean-up would, before taking the mailbox's. MyProc,
    // MyDatabaseId and MyLatch are this backend's, still set (before_shmem_exit runs before ProcKill).
    let (database, index) = unsafe {
        pg_sys::LWLockReleaseAll();
        if pg_sys::MyProc.is_null() || pg_sys::RecoveryInProgress() {
            return;
        }
        (pg_sys::MyDatabaseId, (*pg_sys::MyProc).pgprocno as usize)
    };
    let Some(slot) = mailbox.slot(index) else { return };
    if !matches!(slot.load(), FREE | DONE) {
        return;
    }
    // An answer left in the slot needs nothing more: the session is ending.
    slot.store(FREE);
    let amounts = decimals(request.epsilon, request.delta);
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
fn settle(request: &Charge, answer: Answer) -> Granted {
    let Answer { outcome, strict, free, remaining_epsilon, remaining_delta, message } = answer;
    match outcome {
        Outcome::Granted => Granted { strict, free },
        Outcome::Refused => raise_sqlstate(
            BUDGET_EXHAUSTED,
            format!(
                "dpnoise: privacy budget exhausted: {} asks epsilon = {}, delta = {}{}; remaining epsilon = {}, delta = {}",
                request.mechanism,
                dpnoise_core::rational::decimal(request.epsilon),
                dpnoise_core::rational::decimal(request.delta),
                if request.releases == 1 { String::new() } else { format!(" for each of {} releases", request.releases) },
                remaining_epsilon,
                remaining_delta
            ),
            Some("Nothing was released. A DBA grants budget with dp_budget_grant(role, epsilon, delta).".into()),
        ),
        Outcome::Failed => unavailable(&message),
    }
}

fn fill(slot: &mut Slot, request: &Charge, amounts: &[String; 2], session: &session::Reservation, database: pg_sys::Oid) {
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
    slot.strict = false;
    let recorded = request.identities.len().min(shared::IDENTITIES);
    slot.identities[..recorded].copy_from_slice(&request.identities[..recorded]);
    slot.identity_count = recorded as u8;
    slot.repeat = request.repeat && recorded == request.identities.len();
    slot.free = false;
    slot.epsilon.set(&amounts[0]);
    slot.delta.set(&amounts[1]);
    slot.mechanism.set(request.mechanism);
    // SAFETY: debug_query_string is this backend's current statement text (or null), valid while it runs.
    let statement = unsafe { pg_sys::debug_query_string };
    // SAFETY: a non-null debug_query_string is a NUL-terminated string.
    let statement = if statement.is_null() { "" } else { unsafe { std::ffi::CStr::from_ptr(statement) }.to_str().unwrap_or("") };
    slot.statement.set(statement);
    slot.remaining_epsilon.set("");
    slot.remaining_delta.set("");
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
        let Some(free) = (shared::POOL..MAX_DATABASES).find(|&i| h.workers[i].state == WorkerState::Empty) else {
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
        Some(None) => unavailable("more databases are charging at once than dpnoise has ledger workers for (16)"),
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
    let Some(mailbox) = shared::mailbox() else { return };
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
            pg_sys::WaitLatch(pg_sys::MyLatch, flags as i32, 200, pg_sys::PG_WAIT_EXTENSION);
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

/// Charges one release at a call site under the role's model.
///
/// Default roles: a call site pays once per top-level statement and per
/// grouping set, however many groups or rows it releases (parallel
/// composition over disjoint groups and rows), and again when its
/// aggregate is rescanned (a rescan releases the same individuals again).
/// That is a property of the query, not of the plan: a sorted and a hashed
/// aggregate pay the same. Strict roles: every release pays.
///
/// Call it after every parameter is checked and before any noise is drawn.
///
/// # Safety
/// `fcinfo` is the live call of a dpnoise final or per-row function.
#[inline(always)]
pub unsafe fn pay(fcinfo: pg_sys::FunctionCallInfo, function: &str, mechanism: &str, epsilon: f64, delta: f64) {
    crate::citus::refuse_on_worker();
    if !gucs::enforce_budget() {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { pay_enforced(fcinfo, function, mechanism, epsilon, delta) }
}

/// The current role (the one charged): PostgreSQL's GetOuterUserId,
/// called directly. It returns a variable and raises nothing, so it needs
/// no error guard; pgrx's (a sigsetjmp per call) cost a tenth of a
/// per-row release with the budget enforced.
#[inline]
pub(super) fn outer_user() -> pg_sys::Oid {
    unsafe extern "C" {
        // SAFETY: the prototype of Oid GetOuterUserId(void) in miscadmin.h.
        fn GetOuterUserId() -> pg_sys::Oid;
    }
    // SAFETY: a read of a backend variable set when the session started; no error is raised.
    unsafe { GetOuterUserId() }
}

/// `pay` with the budget enforced.
///
/// # Safety
/// As `pay`.
#[inline(never)]
unsafe fn pay_enforced(fcinfo: pg_sys::FunctionCallInfo, function: &str, mechanism: &str, epsilon: f64, delta: f64) {
    let statement = crate::hooks::statement();
    // SAFETY: fcinfo is the live call of a final or per-row function.
    let set = unsafe { set_key(fcinfo) };
    // The release's identity, if it can be answered again (looked up
    // before the call site is borrowed below).
    // SAFETY: fcinfo is the live call (this function's contract).
    let identified = unsafe { crate::repeat::identity(fcinfo) };
    // SAFETY: fcinfo is the live call (this function's contract); the reference is dropped before it returns.
    let paid = unsafe { crate::call_site::call_site(fcinfo) }.paid();
    let role = outer_user();
    if paid.covers(role, statement, set, epsilon, delta) || paid.take_ahead(role, epsilon, delta) {
        return;
    }
    // Paid for once and for all before this statement started: free, for
    // the rest of this execution, without asking the ledger.
    let free = identified.is_some_and(|i| i.paid);
    // What this role's call sites could not give back as their execution
    // ended, first: it counts against the session's caps until then.
    ahead::settle_owed(role);
    // A strict role pays for every release, ahead (`strict_ask`) once the
    // ledger showed it strict: here, or earlier in this session.
    // SAFETY: fcinfo is the live call of a final or per-row function.
    let ask_strict = unsafe { strict_ask(fcinfo, paid, role, epsilon, delta) };
    let mut releases = ask_strict.wanted;
    // An analyst's statement paid for its call sites before it ran. A
    // release without an identity (the ledger records identities) draws on
    // what the session paid ahead, if it did.
    let session_credit = || if identified.is_none() { ahead::take_credit(role, epsilon, delta) } else { None };
    let granted = if free {
        Granted { strict: false, free: true }
    } else if crate::gate::cost::take(statement, epsilon, delta) {
        Granted { strict: false, free: false }
    } else if let Some(strict) = session_credit() {
        releases = 1;
        Granted { strict, free: false }
    } else {
        crate::gate::cost::unforeseen(statement, epsilon);
        let mechanism = format!("{function} ({mechanism})");
        let identities: Vec<[u8; 32]> = identified.map(|i| i.identity).into_iter().collect();
        // The session pays ahead for its later releases (dpnoise.charge_ahead).
        let for_session = if releases == 1 && identities.is_empty() { ahead::session_ahead(role, epsilon, delta) } else { 1 };
        let mut request = Charge {
            mechanism: &mechanism,
            epsilon,
            delta,
            releases: releases.max(for_session) as i64,
            exact: None,
            identities: &identities,
            repeat: true,
        };
        let careful = if for_session > 1 { 1 } else { ask_strict.careful };
        let changes = ahead::budget_changes();
        let answer = ask(&request);
        let granted = if answer.outcome == Outcome::Refused && (careful as i64) < request.releases {
            // Paid ahead past what is sure to come (a session's ahead, an
            // estimate, doubling): the budget may cover what is.
            (request.releases, releases) = (careful as i64, careful);
            charge(&request)
        } else {
            settle(&request, answer)
        };
        if !granted.free {
            ahead::learn_strict(role, granted.strict, changes);
        }
        if for_session > 1 && request.releases > 1 && !granted.free {
            ahead::keep_credits(role, epsilon, delta, for_session - 1, granted.strict);
            releases = 1;
        } else if releases > 1 && !granted.strict && !granted.free {
            // Paid ahead for a role no longer strict (a budget change
            // raced this statement): one release is all it owes.
            give_back(&mechanism, epsilon, delta, releases - 1);
            releases = 1;
        }
        granted
    };
    if granted.strict && !granted.free {
        let site_mechanism = || format!("{function} ({mechanism})");
        if let Some(left) = paid.record_strict(role, epsilon, delta, releases) {
            // Another role's (switched to mid-statement) or other amounts'.
            ahead::owe(left, site_mechanism());
        }
        if releases > 1 {
            // SAFETY: fcinfo is the live call; paid lives in the call site, in fn_mcxt.
            unsafe { list_unused(fcinfo, paid, site_mechanism()) };
        }
        return;
    }
    paid.record(role, statement, set, epsilon, delta);
    if !paid.watching() {
        // SAFETY: fcinfo is the live call; paid lives in the call site, in fn_mcxt, as long as the query.
        unsafe { watch_rescans(fcinfo, paid) };
    }
}

/// How many releases a strict role's charge asks for at a call site:
/// `wanted`, or `careful` if the ledger refuses that.
struct StrictAsk {
    wanted: u64,
    careful: u64,
}

/// What a charge of `role` asks for at this call site. A role the ledger
/// showed strict (here, or earlier in the session) pays ahead: at its first
/// releases here, for every group a hashed aggregate's table holds (they
/// are sure to come), or the planner's estimate of a sorted aggregate's
/// groups (a curator's session only: an analyst's asks must not follow the
/// statistics); after that, doubling: each charge for as many releases as
/// were paid here so far. N releases cost one or two commits, or about
/// log2(N) past an estimate. Only where the query's end gives back what
/// was not released (`return_unused`), and as far as the session's caps
/// have room; refused, a hashed aggregate asks for no more than its table
/// holds unpaid, and anything else for the one release.
///
/// # Safety
/// `fcinfo` is the live call whose call site holds `paid`.
unsafe fn strict_ask(fcinfo: pg_sys::FunctionCallInfo, paid: &Paid, role: pg_sys::Oid, epsilon: f64, delta: f64) -> StrictAsk {
    let Some(paid_here) = paid.strict_paid(role).or_else(|| ahead::known_strict(role).then_some(0)) else {
        return StrictAsk { wanted: 1, careful: 1 };
    };
    // SAFETY: the caller's contract.
    let hashed = unsafe { hashed_groups(fcinfo) };
    let careful = if hashed > 0 { hashed.saturating_sub(paid_here).clamp(1, paid_here.max(1)) } else { 1 };
    // Not a PL/pgSQL expression's evaluation, which no ExecutorEnd ends.
    // SAFETY: the caller's contract.
    if !unsafe { crate::hooks::ended_by_executor(fcinfo) } {
        return StrictAsk { wanted: careful, careful };
    }
    let wanted = if paid_here <= 1 {
        // SAFETY: the caller's contract.
        let coming = if hashed > 0 { hashed } else { unsafe { estimated_groups(fcinfo) } };
        coming.saturating_sub(paid_here).max(1)
    } else {
        paid_here
    };
    let amounts = decimals(epsilon, delta);
    let room = |n: u64| n <= 1 || session::has_room(&amounts[0], &amounts[1], n as i64);
    let wanted = if room(wanted) { wanted } else if room(careful) { careful } else { 1 };
    StrictAsk { wanted, careful: careful.min(wanted) }
}

/// The planner's estimate of the groups the sorted aggregate running this
/// call releases, in a curator's session; 1 otherwise.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn estimated_groups(fcinfo: pg_sys::FunctionCallInfo) -> u64 {
    if crate::gate::gated() {
        return 1;
    }
    // SAFETY: the Agg node running this final function has its Agg plan, live for the execution.
    unsafe {
        let Some(agg) = agg_state(fcinfo) else { return 1 };
        let plan = (*agg).ss.ps.plan as *const pg_sys::Agg;
        (*plan).numGroups.clamp(1, 1 << 30) as u64
    }
}

/// Gives back `releases` at (ε, δ) the current role paid ahead at a call
/// site of `mechanism` and will not make.
fn give_back(mechanism: &str, epsilon: f64, delta: f64, releases: u64) {
    let mechanism = format!("{mechanism}, given back");
    ask(&returned(&mechanism, epsilon, delta, releases));
}

/// The charge that gives back `releases` at (ε, δ), named `mechanism`.
fn returned(mechanism: &str, epsilon: f64, delta: f64, releases: u64) -> Charge<'_> {
    Charge { mechanism, epsilon, delta, releases: -(releases as i64), exact: None, identities: &[], repeat: false }
}

/// The grouping set an aggregate's final function is releasing: its phase
/// and number among sorted sets, or its number among hashed ones. 0 for
/// per-row functions and plain aggregates.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn set_key(fcinfo: pg_sys::FunctionCallInfo) -> u32 {
    // SAFETY: fcinfo's context, when an AggState, is the live node running this final function.
    unsafe {
        let Some(agg) = agg_state(fcinfo) else { return 0 };
        let set = (*agg).current_set.max(0) as u32 & 0xffff;
        if !(*agg).hashcontext.is_null() && (*agg).curaggcontext == (*agg).hashcontext {
            1 << 31 | set
        } else {
            ((*agg).current_phase.max(0) as u32 & 0x7fff) << 16 | set
        }
    }
}

/// How many groups the hash table this final function is releasing from
/// holds (all of them, unless the aggregate spilled to disk: then those of
/// the batch in memory); 0 if it is not releasing from a hash table.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn hashed_groups(fcinfo: pg_sys::FunctionCallInfo) -> u64 {
    // SAFETY: fcinfo's context, when an AggState, is the live node running this final
    // function; while it finalizes from its hash tables, perhash[current_set] is the
    // table being read (nodeAgg.c), whose simplehash counts its members.
    unsafe {
        let Some(agg) = agg_state(fcinfo) else { return 0 };
        let hashing = !(*agg).hashcontext.is_null() && (*agg).curaggcontext == (*agg).hashcontext;
        let set = (*agg).current_set;
        if !hashing || (*agg).perhash.is_null() || set < 0 || set >= (*agg).num_hashes {
            return 0;
        }
        let table = (*(*agg).perhash.add(set as usize)).hashtable;
        if table.is_null() || (*table).hashtab.is_null() {
            return 0;
        }
        u64::from((*(*table).hashtab).members)
    }
}

/// The Agg node running this call, if an aggregate runs it.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn agg_state(fcinfo: pg_sys::FunctionCallInfo) -> Option<*mut pg_sys::AggState> {
    // SAFETY: a live fcinfo; the context's tag is checked before the cast.
    unsafe {
        let context = (*fcinfo).context;
        (!context.is_null() && (*(context as *const pg_sys::Node)).type_ == pg_sys::NodeTag::T_AggState)
            .then_some(context as *mut pg_sys::AggState)
    }
}

/// Forget the coverage when the call site's plan node is rescanned: a
/// rescan releases the same individuals again.
///
/// An aggregate's node is its Agg. A per-row function's is the node whose
/// target list or quals hold its call, found once in the running query's
/// plan (a function in a correlated subquery is rescanned with it); a call
/// evaluated outside any plan (a PL/pgSQL expression) has none, and pays
/// once per statement.
///
/// A rescan shuts down the expression context of every node it restarts,
/// but a sorted aggregate also shuts down its own between groups, so that
/// one cannot tell a rescan from the next group. A rescan of a sorted or
/// plain aggregate always restarts its input node, and nothing else does:
/// the callback goes on the input's context (one is made for an input
/// without its own, such as a Sort). A hashed aggregate resets its own
/// context between groups without shutting it down, and may rescan its hash
/// table without restarting its input: there the callback goes on its own.
///
/// # Safety
/// `fcinfo` is a live call; `paid` is its call site's, which outlives the
/// query's expression contexts (both are freed when the execution ends).
unsafe fn watch_rescans(fcinfo: pg_sys::FunctionCallInfo, paid: &mut Paid) {
    // SAFETY: the nodes are the running query's live PlanStates; the callback's Paid lives in the call site's memory, as long as the query.
    unsafe {
        let node = match agg_state(fcinfo) {
            Some(agg) => &raw mut (*agg).ss.ps,
            None => {
                let expr = (*(*fcinfo).flinfo).fn_expr;
                let Some(node) = crate::hooks::running_plan().and_then(|root| node_evaluating(root, expr)) else {
                    return;
                };
                node
            }
        };
        let input = (*node).lefttree;
        let hashed = (*node).type_ == pg_sys::NodeTag::T_AggState
            && (*(node as *mut pg_sys::AggState)).aggstrategy == pg_sys::AggStrategy::AGG_HASHED;
        let watched = if (*node).type_ != pg_sys::NodeTag::T_AggState || hashed || input.is_null() { node } else { input };
        if (*watched).ps_ExprContext.is_null() {
            pg_sys::ExecAssignExprContext((*node).state, watched);
        }
        let econtext = (*watched).ps_ExprContext;
        if econtext.is_null() {
            return;
        }
        pg_sys::RegisterExprContextCallback(econtext, Some(rescanned), pg_sys::Datum::from(paid as *mut Paid));
        paid.set_watching(true);
    }
}

/// The node of the plan under `root` whose target list or quals hold `expr`.
///
/// # Safety
/// `root` is null or a live PlanState tree; `expr` is null or a live node.
unsafe fn node_evaluating(root: *mut pg_sys::PlanState, expr: *mut pg_sys::Node) -> Option<*mut pg_sys::PlanState> {
    // SAFETY: root and its children are live PlanStates of the innermost running query.
    unsafe {
        if root.is_null() || expr.is_null() {
            return None;
        }
        let plan = (*root).plan;
        let holds = |list: *mut pg_sys::List| !list.is_null() && nodes::contains_pointer(list.cast(), expr);
        if !plan.is_null() && (holds((*plan).targetlist) || holds((*plan).qual)) {
            return Some(root);
        }
        nodes::children(root).into_iter().find_map(|child| node_evaluating(child, expr))
    }
}
/// # Safety
/// Called by PostgreSQL as an expression-context shutdown callback, with the `Paid` registered in `watch_rescans`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn rescanned(arg: pg_sys::Datum) {
    let paid = arg.cast_mut_ptr::<Paid>();
    // SAFETY: PostgreSQL passes the live Paid registered in watch_rescans, before that memory is freed.
    unsafe { (*paid).forget() };
}
