//! Executor state the stages share: which top-level statement runs, and
//! which queries are being run. hooks.rs writes it; the budget and the
//! charge read it. It imports nothing of dpnoise's.
//!
//! A call site's state can outlive one statement (PL/pgSQL keeps a simple
//! expression's state for the whole transaction, so do triggers), and a
//! call site is covered once per statement: coverage is keyed by
//! [`statement`].

use pgrx::pg_sys;

/// How deep inside executor runs and utility commands this backend is.
static mut DEPTH: u32 = 0;
/// Bumped when a top-level statement starts.
static mut STATEMENT: u64 = 1;
/// The queries being run, innermost last (ExecutorRun and ExecutorFinish).
static mut RUNNING: Vec<*mut pg_sys::QueryDesc> = Vec::new();
/// DEPTH and RUNNING's length when each open subtransaction began, to
/// restore on its abort.
static mut SUBTRANSACTION_DEPTHS: Vec<(pg_sys::SubTransactionId, u32, usize)> = Vec::new();

/// The plan of the innermost query being run, if any: where a per-row
/// function evaluated now finds the node that evaluates it.
pub fn running_plan() -> Option<*mut pg_sys::PlanState> {
    // SAFETY: RUNNING is read on the backend's only thread while no other reference to it is live
    // (the hooks' borrows end before they call on). Its last entry is the QueryDesc of the innermost
    // ExecutorRun or ExecutorFinish still running: pushed on entry, popped on return, and dropped
    // by the (sub)transaction abort callbacks when an error skips the pop. So it is live, and its
    // `planstate` (null: None) was set by ExecutorStart.
    unsafe {
        let query = *(*(&raw const RUNNING)).last()?;
        let plan = (*query).planstate;
        (!plan.is_null()).then_some(plan)
    }
}

/// Enters an executor run.
///
/// # Safety
/// `query` is the live QueryDesc that ExecutorRun or ExecutorFinish was given,
/// kept live until the matching `leave_run`; on the backend's only thread,
/// with no reference to RUNNING held.
pub unsafe fn enter_run(query: *mut pg_sys::QueryDesc) {
    // SAFETY: DEPTH and RUNNING are this backend's own statics, used only on its only thread; DEPTH
    // is updated by value, and the &mut to RUNNING lasts for the push alone, with no other reference
    // to it live (the caller's contract).
    unsafe {
        DEPTH += 1;
        (*(&raw mut RUNNING)).push(query);
    }
}

/// Leaves an executor run.
///
/// # Safety
/// Pairs with an `enter_run` of the same executor level; on the backend's
/// only thread, with no reference to RUNNING held.
pub unsafe fn leave_run() {
    // SAFETY: DEPTH and RUNNING are this backend's own statics, used only on its only thread; DEPTH
    // is updated by value, and the &mut to RUNNING lasts for the pop alone, with no other reference
    // to it live (the caller's contract).
    unsafe {
        DEPTH = DEPTH.saturating_sub(1);
        (*(&raw mut RUNNING)).pop();
    }
}

/// Enters a utility command (its statements are not top-level).
pub fn enter_utility() {
    // SAFETY: a by-value update of this backend's static, on its only thread.
    unsafe { DEPTH += 1 };
}

/// Leaves a utility command.
pub fn leave_utility() {
    // SAFETY: a by-value update of this backend's static, on its only thread.
    unsafe { DEPTH = DEPTH.saturating_sub(1) };
}

/// The identity of the running top-level statement (never 0).
pub fn statement() -> u64 {
    // SAFETY: a by-value read (no reference) of this backend's static, on its only thread, where
    // the hooks that write it are not running concurrently.
    unsafe { STATEMENT }
}

/// A new statement starts if nothing runs.
pub fn begin_statement_if_top_level() {
    // SAFETY: DEPTH is read and STATEMENT incremented by value, no reference taken, on the backend's
    // only thread.
    unsafe {
        if DEPTH == 0 {
            STATEMENT += 1;
        }
    }
}

/// A transaction that ends by an error ends every run in it.
pub fn aborted() {
    // SAFETY: on the backend's only thread, from a transaction callback, never while another borrow
    // of these statics is live; the &mut borrows last for one clear each, which drops the aborted
    // runs' QueryDesc pointers without reading them.
    unsafe {
        DEPTH = 0;
        (*(&raw mut RUNNING)).clear();
        (*(&raw mut SUBTRANSACTION_DEPTHS)).clear();
    }
}

/// Follows a subtransaction's start and end: one rolled back (a PL/pgSQL
/// EXCEPTION block) abandons the runs the error unwound, back to the depth
/// it began at. True if it was rolled back.
pub fn subtransaction(event: pg_sys::SubXactEvent::Type, id: pg_sys::SubTransactionId) -> bool {
    // SAFETY: from a subtransaction callback on the backend's only thread, never while another
    // borrow of these statics is live. The &mut borrows of SUBTRANSACTION_DEPTHS and RUNNING, two
    // distinct statics, are the only ones for this body, which calls nothing that could reach them;
    // DEPTH is written by value. Truncating RUNNING drops pointers without reading them.
    unsafe {
        let depths = &mut *(&raw mut SUBTRANSACTION_DEPTHS);
        let running = &mut *(&raw mut RUNNING);
        match event {
            pg_sys::SubXactEvent::SUBXACT_EVENT_START_SUB => {
                depths.push((id, DEPTH, running.len()))
            }
            pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB
            | pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
                if let Some(at) = depths.iter().rposition(|(s, _, _)| *s == id) {
                    let aborted = event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB;
                    if aborted {
                        DEPTH = depths[at].1;
                        running.truncate(depths[at].2);
                    }
                    depths.truncate(at);
                    return aborted;
                }
            }
            _ => {}
        }
        false
    }
}
