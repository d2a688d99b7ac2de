//! Releases paid ahead, and given back when they are not made.
//!
//! A strict role's call site pays ahead, doubling (`pay_enforced`); what it
//! did not release is given back when the execution of its query ends: a
//! call site that paid ahead is listed here with its query's memory
//! context, and the ExecutorEnd hook returns the unused part of every site
//! listed with that context, one ledger row each (releases < 0, named for
//! the call). The list never outlives a site: a reset of the site's memory
//! context (the query ended, by an error too) takes it off first.
//!
//! A session whose `dpnoise.charge_ahead` is N > 1 pays for N releases at a
//! time, of one role at one (ε, δ), and draws its later releases at those
//! amounts from what it paid (its credits), without asking the ledger: one
//! round trip and one commit per N statements. Credits of another role or
//! amount are given back before new ones are paid for (another role's are
//! kept: over-charging), and what is left is given back as the session
//! ends (posted to the ledger worker as the backend exits, not waited for).
//! A crash keeps them: over-charging, which is safe. A change to any
//! budget (a grant, a revoke, a role made strict, the global cap) makes
//! every session's credits stale at its next statement: they are given
//! back and the ledger is asked again, under the budget as it now is.

use super::{ask, decimals, give_back, post_on_exit, session, Charge};
use crate::call_site::Paid;
use crate::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};

struct Listed {
    context: pg_sys::MemoryContext,
    paid: *mut Paid,
    mechanism: String,
}

thread_local! {
    static LISTED: RefCell<Vec<Listed>> = const { RefCell::new(Vec::new()) };
}

/// Lists the call site whose payment state is `paid` (once).
///
/// # Safety
/// `fcinfo` is the live call whose call site holds `paid`, in `fn_mcxt`.
pub(super) unsafe fn list_unused(fcinfo: pg_sys::FunctionCallInfo, paid: &mut Paid, mechanism: String) {
    if !paid.list() {
        return;
    }
    // SAFETY: the caller's contract: fn_mcxt holds the call site (and so `paid`) and lives until
    // it is reset, when the callback, allocated in it and so alive until then, unlists the site.
    unsafe {
        let context = (*(*fcinfo).flinfo).fn_mcxt;
        let callback =
            pg_sys::MemoryContextAllocZero(context, std::mem::size_of::<pg_sys::MemoryContextCallback>()) as *mut pg_sys::MemoryContextCallback;
        (*callback).func = Some(unlist);
        (*callback).arg = (paid as *mut Paid).cast();
        pg_sys::MemoryContextRegisterResetCallback(context, callback);
        LISTED.with(|l| l.borrow_mut().push(Listed { context, paid, mechanism }));
    }
}

/// # Safety
/// Called by PostgreSQL as a memory context reset callback, `arg` the listed `Paid`; it only
/// compares pointers (no borrow of the list is held while a context can be reset).
unsafe extern "C-unwind" fn unlist(arg: *mut std::ffi::c_void) {
    LISTED.with(|l| l.borrow_mut().retain(|s| s.paid.cast() != arg));
}

/// Whether any call site is listed: ExecutorEnd, which runs for every
/// query, calls `return_unused` only then.
pub fn any_unused() -> bool {
    LISTED.with(|l| !l.borrow().is_empty())
}

/// Gives back what the call sites of the execution whose memory context is
/// `query_context` paid ahead and did not release. The role still in
/// charge is given it (a site of another, switched mid-statement, keeps
/// its over-charge: safe). A refusal (the budget was revoked meanwhile)
/// leaves it charged.
///
/// # Safety
/// From ExecutorEnd, before the executor frees `query_context`; inside a transaction.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn return_unused(query_context: pg_sys::MemoryContext) {
    let mine: Vec<Listed> = LISTED.with(|l| {
        let mut all = l.borrow_mut();
        let (mine, rest) = std::mem::take(&mut *all).into_iter().partition(|s| s.context == query_context);
        *all = rest;
        mine
    });
    for site in mine {
        // SAFETY: the site was listed with this context, which is not reset yet (the caller's
        // contract), so its call site, and `paid` in it, is live; no other reference is held.
        let Some((role, (epsilon, delta), unused)) = (unsafe { (*site.paid).take_unused() }) else { continue };
        // SAFETY: a plain read of the current role.
        if role != unsafe { pg_sys::GetOuterUserId() } {
            continue;
        }
        give_back(&site.mechanism, epsilon, delta, unused);
    }
}

/// The mechanism named on a session's credits given back.
const CREDITS_BACK: &str = "paid ahead by the session, given back";

/// Releases a session paid ahead, of `role` at (ε, δ) each; `strict`: what
/// the ledger said of the role when they were paid.
#[derive(Clone, Copy)]
struct Credits {
    role: pg_sys::Oid,
    epsilon: f64,
    delta: f64,
    left: u64,
    strict: bool,
    /// dpnoise.budget, whose invalidation (`dp_budget_changed`) makes them stale.
    budget_table: pg_sys::Oid,
    stale: bool,
}

/// The roles the ledger's answers showed strict in this session (a few:
/// the first are forgotten past `KNOWN_ROLES`), with dpnoise.budget's OID.
/// A strict role known here pays ahead from its first release at a call
/// site (`pay_enforced`); a budget change forgets them all.
const KNOWN_ROLES: usize = 8;

thread_local! {
    static CREDITS: Cell<Option<Credits>> = const { Cell::new(None) };
    static EXIT_REGISTERED: Cell<bool> = const { Cell::new(false) };
    static STRICT: RefCell<(pg_sys::Oid, Vec<pg_sys::Oid>)> = const { RefCell::new((pg_sys::InvalidOid, Vec::new())) };
}

/// Whether the ledger's last answer for `role` said it is strict, and no
/// budget changed since.
pub(super) fn known_strict(role: pg_sys::Oid) -> bool {
    STRICT.with(|s| s.borrow().1.contains(&role))
}

/// Remembers what the ledger just answered of `role`.
pub(super) fn learn_strict(role: pg_sys::Oid, strict: bool) {
    if known_strict(role) == strict {
        return;
    }
    if !strict {
        STRICT.with(|s| s.borrow_mut().1.retain(|r| *r != role));
        return;
    }
    // Looked up before the list is borrowed: a catalog lookup may run the
    // invalidation callback, which borrows it.
    // SAFETY: called as a release is charged, inside its transaction.
    let table = unsafe { budget_table() };
    STRICT.with(|s| {
        let mut s = s.borrow_mut();
        if s.1.len() >= KNOWN_ROLES {
            s.1.remove(0);
        }
        s.0 = table;
        s.1.push(role);
    });
}

/// Registers the relcache callback that makes credits stale; once per process, from _PG_init.
pub(super) fn init() {
    // SAFETY: from _PG_init, on the process's only thread, once; the callback has the relcache
    // callback's signature and lives in this library, which is never unloaded.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(budget_invalidated), pg_sys::Datum::from(0usize)) };
}

/// # Safety
/// Called by PostgreSQL's invalidation processing as a relcache callback; it reads no catalog.
unsafe extern "C-unwind" fn budget_invalidated(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    // InvalidOid: every entry (a cache reset), this one among them.
    let hit = |table: pg_sys::Oid| relid == pg_sys::InvalidOid || relid == table;
    CREDITS.with(|c| {
        if let Some(mut credits) = c.get().filter(|credits| hit(credits.budget_table)) {
            credits.stale = true;
            c.set(Some(credits));
        }
    });
    STRICT.with(|s| {
        let mut s = s.borrow_mut();
        if hit(s.0) {
            s.1.clear();
        }
    });
}

/// Tells every session, at commit, that a budget changed: sessions paying
/// ahead give back their credits and ask the ledger again. Called by
/// dp_budget_grant, dp_budget_revoke, dp_budget_set_strict and dp_budget_set_global.
#[pg_extern(volatile, parallel_unsafe)]
fn dp_budget_changed() {
    // SAFETY: a catalog lookup by name inside the caller's transaction, then a queued
    // invalidation of that one relcache entry, sent to every backend at commit.
    unsafe {
        let table = budget_table();
        if table != pg_sys::InvalidOid {
            pg_sys::CacheInvalidateRelcacheByRelid(table);
        }
    }
}

/// dpnoise.budget's OID (InvalidOid if there is none).
///
/// # Safety
/// Inside a transaction.
unsafe fn budget_table() -> pg_sys::Oid {
    // SAFETY: syscache lookups by name inside a transaction (the caller's contract); missing_ok.
    unsafe {
        let schema = pg_sys::get_namespace_oid(c"dpnoise".as_ptr(), true);
        if schema == pg_sys::InvalidOid {
            return pg_sys::InvalidOid;
        }
        pg_sys::get_relname_relid(c"budget".as_ptr(), schema)
    }
}

/// Takes one release the session paid ahead for `role` at (ε, δ), if one
/// is left: whether the role was strict when it was paid.
pub(super) fn take_credit(role: pg_sys::Oid, epsilon: f64, delta: f64) -> Option<bool> {
    let mut credits = CREDITS.with(Cell::get)?;
    if credits.stale || credits.left == 0 || credits.role != role || credits.epsilon != epsilon || credits.delta != delta {
        return None;
    }
    credits.left -= 1;
    CREDITS.with(|c| c.set(Some(credits)));
    Some(credits.strict)
}

/// How many releases a charge of `role` at (ε, δ) asks for: N
/// (`dpnoise.charge_ahead`) when the session pays ahead and its caps have
/// room for them, else 1. Credits left of another (ε, δ) are given back first.
pub(super) fn session_ahead(role: pg_sys::Oid, epsilon: f64, delta: f64) -> u64 {
    let ahead = gucs::charge_ahead();
    // SAFETY: a by-value read of ParallelWorkerNumber, -1 outside a parallel worker.
    if ahead <= 1 || unsafe { pg_sys::ParallelWorkerNumber } >= 0 {
        return 1;
    }
    give_back_credits(role);
    let amounts = decimals(epsilon, delta);
    if session::has_room(&amounts[0], &amounts[1], ahead as i64) { ahead } else { 1 }
}

/// Keeps `left` releases of `role` at (ε, δ) the session just paid ahead.
pub(super) fn keep_credits(role: pg_sys::Oid, epsilon: f64, delta: f64, left: u64, strict: bool) {
    if !EXIT_REGISTERED.with(|r| r.replace(true)) {
        // SAFETY: once per process, from a backend running a query; the callback has the
        // pg_on_exit_callback signature and lives in this library, loaded until the process exits.
        unsafe { pg_sys::before_shmem_exit(Some(give_back_on_exit), pg_sys::Datum::from(0usize)) };
    }
    // SAFETY: called while a release is charged, inside its transaction.
    let budget_table = unsafe { budget_table() };
    CREDITS.with(|c| c.set(Some(Credits { role, epsilon, delta, left, strict, budget_table, stale: false })));
}

/// Gives back the session's credits, waiting for the ledger, if they are
/// `role`'s (the role that pays now); another role's are dropped, charged.
fn give_back_credits(role: pg_sys::Oid) {
    let Some(credits) = CREDITS.with(|c| c.take()) else { return };
    if credits.left == 0 || credits.role != role {
        return;
    }
    ask(&credits.returned());
}

impl Credits {
    /// The charge that gives them back.
    fn returned(&self) -> Charge<'static> {
        Charge {
            mechanism: CREDITS_BACK,
            epsilon: self.epsilon,
            delta: self.delta,
            releases: -(self.left as i64),
            exact: None,
            identities: &[],
            repeat: false,
        }
    }
}

/// # Safety
/// Only for PostgreSQL's exit machinery (registered with before_shmem_exit): shared memory is
/// still attached; `_arg` is never read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn give_back_on_exit(_code: i32, _arg: pg_sys::Datum) {
    let Some(credits) = CREDITS.with(|c| c.take()) else { return };
    if credits.left > 0 {
        post_on_exit(credits.role, &credits.returned());
    }
}
