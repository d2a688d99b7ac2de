//! A strict role's releases paid ahead (doubling, `pay_enforced`) and not
//! made are given back when the execution of their query ends: a call site
//! that paid ahead is listed here with its query's memory context, and the
//! ExecutorEnd hook returns the unused part of every site listed with that
//! context, one ledger row each (releases < 0, named for the call). The
//! list never outlives a site: a reset of the site's memory context (the
//! query ended, by an error too) takes it off first.

use super::{ask, Charge};
use crate::call_site::Paid;
use pgrx::pg_sys;
use std::cell::RefCell;

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
        let mechanism = format!("{}, given back", site.mechanism);
        ask(&Charge { mechanism: &mechanism, epsilon, delta, releases: -(unused as i64), exact: None, identities: &[], repeat: false });
    }
}
