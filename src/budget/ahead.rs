//! Releases paid ahead, and given back when they are not made.
//!
//! A strict role's call site pays ahead (`strict_ask`); what it did not
//! release is given back when the execution of its query ends: a call site
//! that paid ahead is listed here with its query's memory context, and the
//! ExecutorEnd hook returns the unused part of every site listed with that
//! context, a ledger row per function and amounts (releases < 0, named for
//! the call). The
//! list never outlives a site: a reset of the site's memory context takes
//! it off first. A site still listed then (its execution ended in an error,
//! or in a transaction's abort), or one of a role no longer in charge, is
//! owed back: given back at the role's next charge in this session, or as
//! the session ends.
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

use super::{ask, decimals, give_back, outer_user, post_on_exit, returned, session, Charge};
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
    on_exit_give_back();
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

/// What a call site paid ahead and did not release, owed back to `role`.
struct Owed {
    role: pg_sys::Oid,
    mechanism: String,
    epsilon: f64,
    delta: f64,
    unused: u64,
}

thread_local! {
    static OWED: RefCell<Vec<Owed>> = const { RefCell::new(Vec::new()) };
}

/// # Safety
/// Called by PostgreSQL as a memory context reset callback, `arg` the listed `Paid`, before the
/// context frees anything (so `arg` is live); it calls nothing of PostgreSQL's and no borrow of
/// the lists is held while a context can be reset.
unsafe extern "C-unwind" fn unlist(arg: *mut std::ffi::c_void) {
    let site = LISTED.with(|l| {
        let mut l = l.borrow_mut();
        l.iter().position(|s| s.paid.cast() == arg).map(|i| l.swap_remove(i))
    });
    // Still listed: no ExecutorEnd gave it back (an error ended the execution).
    if let Some(site) = site {
        // SAFETY: `arg` is the site's live `Paid` (the function's contract).
        unsafe { owe_site(site) };
    }
}

/// Keeps what `site` paid ahead and did not release, to give back later.
///
/// # Safety
/// `site.paid` is live and no other reference to it is held.
unsafe fn owe_site(site: Listed) {
    // SAFETY: the caller's contract.
    if let Some(unused) = unsafe { (*site.paid).take_unused() } {
        owe(unused, site.mechanism);
    }
}

/// Keeps `unused` releases `role` paid ahead at (ε, δ) at a call site of
/// `mechanism`, to give back later: at the role's next charge, or as the
/// session ends. What one role owes at one (ε, δ) for one function is one
/// entry.
pub(super) fn owe((role, (epsilon, delta), unused): (pg_sys::Oid, (f64, f64), u64), mechanism: String) {
    OWED.with(|o| {
        let mut all = o.borrow_mut();
        match all.iter_mut().find(|d| d.role == role && (d.epsilon, d.delta) == (epsilon, delta) && d.mechanism == mechanism) {
            Some(d) => d.unused += unused,
            None => all.push(Owed { role, mechanism, epsilon, delta, unused }),
        }
    });
}

/// Gives back what `role` owes (`owe`), one entry at a time: an error
/// leaves the rest owed.
pub(super) fn settle_owed(role: pg_sys::Oid) {
    loop {
        let next = OWED.with(|o| {
            let mut all = o.borrow_mut();
            all.iter().position(|d| d.role == role).map(|i| all.swap_remove(i))
        });
        let Some(d) = next else { return };
        give_back(&d.mechanism, d.epsilon, d.delta, d.unused);
    }
}

/// Whether any call site is listed: ExecutorEnd, which runs for every
/// query, calls `return_unused` only then.
pub fn any_unused() -> bool {
    LISTED.with(|l| !l.borrow().is_empty())
}

/// Gives back what the call sites of the execution whose memory context is
/// `query_context` paid ahead and did not release: now if their role is
/// still in charge, else when it next pays (`settle_owed`). A refusal (the
/// budget was revoked meanwhile) leaves it charged.
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
        unsafe { owe_site(site) };
    }
    // Given back now, to the role in charge; another role's (switched away
    // mid-statement) at its next charge. Not outside a live transaction
    // (defensive: an abort marks the portals it closes failed, which skips
    // their ExecutorEnd; a ledger round trip there could not be cancelled,
    // interrupts being held off).
    // SAFETY: a plain read of the transaction's state.
    if unsafe { pg_sys::IsTransactionState() } {
        settle_owed(outer_user());
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
    /// Counts the budget changes this session has heard of.
    static CHANGES: Cell<u64> = const { Cell::new(0) };
}

/// How many budget changes this session has heard of: read before a
/// charge, so that `learn_strict` ignores an answer a change overtook.
pub(super) fn budget_changes() -> u64 {
    CHANGES.with(Cell::get)
}

/// Whether the ledger's last answer for `role` said it is strict, and no
/// budget changed since.
pub(super) fn known_strict(role: pg_sys::Oid) -> bool {
    STRICT.with(|s| s.borrow().1.contains(&role))
}

/// Remembers what the ledger answered of `role`, asked when this session
/// had heard of `changes` budget changes (`budget_changes`).
pub(super) fn learn_strict(role: pg_sys::Oid, strict: bool, changes: u64) {
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
    if budget_changes() != changes {
        return;
    }
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
    // The table's OID may not be known yet: any relcache invalidation counts.
    CHANGES.with(|c| c.set(c.get() + 1));
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
    on_exit_give_back();
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
        returned(CREDITS_BACK, self.epsilon, self.delta, self.left)
    }
}

/// # Safety
/// Only for PostgreSQL's exit machinery (registered with before_shmem_exit): shared memory is
/// still attached; `_arg` is never read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn give_back_on_exit(_code: i32, _arg: pg_sys::Datum) {
    // A session ended mid-statement (pg_terminate_backend, a lost client):
    // its call sites, still live, owe what they paid ahead.
    for site in LISTED.with(|l| std::mem::take(&mut *l.borrow_mut())) {
        // SAFETY: a listed site's context is not reset yet (it unlists it first), so its `paid` is
        // live; no other reference is held.
        unsafe { owe_site(site) };
    }
    // One request can be posted (the process has one slot): the session's
    // credits, else what one role owes at one (ε, δ) for one function; the
    // rest stays charged.
    if let Some(credits) = CREDITS.with(|c| c.take()).filter(|c| c.left > 0) {
        post_on_exit(credits.role, &credits.returned());
        return;
    }
    if let Some(d) = OWED.with(|o| std::mem::take(&mut *o.borrow_mut())).into_iter().next() {
        let mechanism = format!("{}, given back", d.mechanism);
        post_on_exit(d.role, &returned(&mechanism, d.epsilon, d.delta, d.unused));
    }
}

/// Registers `give_back_on_exit`, once per process.
fn on_exit_give_back() {
    if !EXIT_REGISTERED.with(|r| r.replace(true)) {
        // SAFETY: once per process, from a backend running a query; the callback has the
        // pg_on_exit_callback signature and lives in this library, loaded until the process exits.
        unsafe { pg_sys::before_shmem_exit(Some(give_back_on_exit), pg_sys::Datum::from(0usize)) };
    }
}
