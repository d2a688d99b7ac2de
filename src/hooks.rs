//! Executor, planner and utility hooks: what the charging model needs to
//! know about statements, and what it must stop.
//!
//! - Which top-level statement is running. A call site's state can outlive
//!   one statement (PL/pgSQL keeps a simple expression's state for the whole
//!   transaction, so do triggers), and the default model charges a call site
//!   once per statement: coverage is keyed by [`statement`].
//! - A SCROLL cursor re-evaluates its target list when it moves backwards
//!   over a plan that can scan backwards: fetched again, a released row would
//!   get fresh noise. Such plans are materialised, so a row fetched again is
//!   the same row.
//! - `DROP EXTENSION dpnoise` deletes every budget and the whole ledger: it is
//!   refused while the ledger holds charges, unless a superuser has set
//!   `dpnoise.drop_ledger`.

use crate::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_char;

// The hooks call on into PostgreSQL directly, not through pgrx's guarded
// bindings: an error raised below them must reach PostgreSQL's handler as
// it was raised (its SQLSTATE, detail and hint), not be caught and raised
// again by Rust. So the hooks below hold nothing that needs dropping, and
// what a longjmp skips (a depth decrement) is repaired by the transaction
// callbacks.
unsafe extern "C-unwind" {
    #[link_name = "standard_ExecutorStart"]
    fn raw_standard_executor_start(query: *mut pg_sys::QueryDesc, eflags: i32);
    #[link_name = "standard_ExecutorRun"]
    fn raw_standard_executor_run(query: *mut pg_sys::QueryDesc, direction: pg_sys::ScanDirection::Type, count: u64, once: bool);
    #[link_name = "standard_ExecutorFinish"]
    fn raw_standard_executor_finish(query: *mut pg_sys::QueryDesc);
    #[link_name = "standard_ProcessUtility"]
    fn raw_standard_process_utility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
    #[link_name = "standard_planner"]
    fn raw_standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const c_char,
        cursor_options: i32,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

/// How deep inside executor runs and utility commands this backend is.
static mut DEPTH: u32 = 0;
/// Set while a cursor declared with neither SCROLL nor NO SCROLL is being
/// opened: PostgreSQL lets it scroll when its plan can run backwards, which
/// would evaluate its expressions again; the planner materialises it.
static mut IMPLICIT_SCROLL: bool = false;
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
    // SAFETY: the statics are touched only on the backend's one thread.
    unsafe {
        let query = *(*(&raw const RUNNING)).last()?;
        let plan = (*query).planstate;
        (!plan.is_null()).then_some(plan)
    }
}

/// # Safety
/// `query` is the QueryDesc ExecutorRun was given; on the backend's one thread.
unsafe fn enter_run(query: *mut pg_sys::QueryDesc) {
    // SAFETY: the statics are touched only on the backend's one thread.
    unsafe {
        DEPTH += 1;
        (*(&raw mut RUNNING)).push(query);
    }
}

/// # Safety
/// Pairs with an `enter_run` of the same executor level; on the backend's one thread.
unsafe fn leave_run() {
    // SAFETY: the statics are touched only on the backend's one thread.
    unsafe {
        DEPTH = DEPTH.saturating_sub(1);
        (*(&raw mut RUNNING)).pop();
    }
}

/// The identity of the running top-level statement (never 0).
pub fn statement() -> u64 {
    // SAFETY: read on the backend's one thread.
    unsafe { STATEMENT }
}

/// # Safety
/// On the backend's one thread, from an executor hook.
unsafe fn begin_statement_if_top_level() {
    // SAFETY: the hooks are installed once, in _PG_init, before any query runs; prev hooks are kept to be chained.
    unsafe {
        if DEPTH == 0 {
            STATEMENT += 1;
        }
    }
}

static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_RUN: pg_sys::ExecutorRun_hook_type = None;
static mut PREV_EXECUTOR_FINISH: pg_sys::ExecutorFinish_hook_type = None;
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

pub fn init() {
    // SAFETY: PostgreSQL calls transaction callbacks on the backend's thread; the statics are ours.
    unsafe {
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_EXECUTOR_RUN = pg_sys::ExecutorRun_hook;
        pg_sys::ExecutorRun_hook = Some(executor_run);
        PREV_EXECUTOR_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(executor_finish);
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
        pg_sys::RegisterXactCallback(Some(transaction_ended), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subtransaction_event), std::ptr::null_mut());
    }
}

/// A transaction that ends (above all by an error) ends every run in it.
///
/// # Safety
/// Called by PostgreSQL as a transaction callback.
#[pg_guard]
unsafe extern "C-unwind" fn transaction_ended(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    if matches!(event, pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT) {
        // SAFETY: PostgreSQL calls subtransaction callbacks on the backend's thread; the statics are ours.
        unsafe {
            DEPTH = 0;
            IMPLICIT_SCROLL = false;
            (*(&raw mut RUNNING)).clear();
            (*(&raw mut SUBTRANSACTION_DEPTHS)).clear();
        }
    }
}

/// A subtransaction rolled back (a PL/pgSQL EXCEPTION block) abandons the
/// runs that the error unwound: back to the depth it began at.
///
/// # Safety
/// Called by PostgreSQL as a subtransaction callback.
#[pg_guard]
unsafe extern "C-unwind" fn subtransaction_event(
    event: pg_sys::SubXactEvent::Type,
    id: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    // SAFETY: called by PostgreSQL with a live QueryDesc; nothing here needs dropping if the call below raises an error.
    unsafe {
        let depths = &mut *(&raw mut SUBTRANSACTION_DEPTHS);
        let running = &mut *(&raw mut RUNNING);
        match event {
            pg_sys::SubXactEvent::SUBXACT_EVENT_START_SUB => depths.push((id, DEPTH, running.len())),
            pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB | pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
                if let Some(at) = depths.iter().rposition(|(s, _, _)| *s == id) {
                    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
                        DEPTH = depths[at].1;
                        running.truncate(depths[at].2);
                    }
                    depths.truncate(at);
                }
            }
            _ => {}
        }
    }
}

/// # Safety
/// Called by PostgreSQL as its ExecutorStart hook.
unsafe extern "C-unwind" fn executor_start(query: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: as executor_start; leave_run is skipped by an error, and the transaction callbacks repair it.
    unsafe {
        begin_statement_if_top_level();
        check_parameters(query);
        match PREV_EXECUTOR_START {
            Some(prev) => prev(query, eflags),
            None => raw_standard_executor_start(query, eflags),
        }
    }
}

/// # Safety
/// Called by PostgreSQL as its ExecutorRun hook.
unsafe extern "C-unwind" fn executor_run(
    query: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
    execute_once: bool,
) {
    // SAFETY: as executor_run.
    unsafe {
        enter_run(query);
        match PREV_EXECUTOR_RUN {
            Some(prev) => prev(query, direction, count, execute_once),
            None => raw_standard_executor_run(query, direction, count, execute_once),
        }
        leave_run();
    }
}

/// # Safety
/// Called by PostgreSQL as its ExecutorFinish hook.
unsafe extern "C-unwind" fn executor_finish(query: *mut pg_sys::QueryDesc) {
    // SAFETY: called by PostgreSQL with a live PlannedStmt; the DropStmt cast follows its node tag.
    unsafe {
        enter_run(query);
        match PREV_EXECUTOR_FINISH {
            Some(prev) => prev(query),
            None => raw_standard_executor_finish(query),
        }
        leave_run();
    }
}

/// # Safety
/// Called by PostgreSQL as its ProcessUtility hook.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: called by PostgreSQL with a live Query; the planner's result is a live PlannedStmt.
    unsafe {
        let statement = (*pstmt).utilityStmt;
        let tag = if statement.is_null() { pg_sys::NodeTag::T_Invalid } else { (*statement).type_ };
        // FETCH and MOVE continue a cursor's statement; anything else is one.
        if tag != pg_sys::NodeTag::T_FetchStmt {
            begin_statement_if_top_level();
        }
        if tag == pg_sys::NodeTag::T_DropStmt {
            guard_ledger(statement as *mut pg_sys::DropStmt);
        }
        let scroll_flags = (pg_sys::CURSOR_OPT_SCROLL | pg_sys::CURSOR_OPT_NO_SCROLL) as i32;
        IMPLICIT_SCROLL = tag == pg_sys::NodeTag::T_DeclareCursorStmt
            && (*(statement as *mut pg_sys::DeclareCursorStmt)).options & scroll_flags == 0;
        DEPTH += 1;
        match PREV_PROCESS_UTILITY {
            Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            None => raw_standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
        }
        IMPLICIT_SCROLL = false;
        DEPTH = DEPTH.saturating_sub(1);
    }
}

/// # Safety
/// Called by PostgreSQL as its planner hook.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: as planner.
    unsafe {
        // Checked before planning, which rewrites the tree in place.
        check_query_parameters(parse);
        let implicit = std::mem::replace(&mut *(&raw mut IMPLICIT_SCROLL), false);
        let scroll = (implicit || cursor_options as u32 & pg_sys::CURSOR_OPT_SCROLL != 0) && has_volatile(parse);
        let planned = match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => raw_standard_planner(parse, query_string, cursor_options, bound_params),
        };
        if scroll {
            materialize(planned);
        }
        planned
    }
}

/// Refuses a statement whose dpnoise calls have privacy parameters that are
/// not fixed, before anything runs or is charged (`parameters::check_plan`).
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given.
#[pg_guard]
unsafe extern "C-unwind" fn check_parameters(query: *mut pg_sys::QueryDesc) {
    // SAFETY: PostgreSQL passes a live QueryDesc to ExecutorStart.
    unsafe { crate::parameters::check_plan((*query).plannedstmt) }
}

/// Refuses a query whose dpnoise calls take privacy parameters from
/// functions outside pg_catalog, before the planner folds them away.
///
/// # Safety
/// `parse` is the live Query the planner hook was given.
#[pg_guard]
unsafe extern "C-unwind" fn check_query_parameters(parse: *mut pg_sys::Query) {
    // SAFETY: parse is the live Query the planner hook was given.
    unsafe { crate::parameters::check_query(parse) }
}

/// # Safety
/// `parse` is the live Query the planner hook was given.
#[pg_guard]
unsafe extern "C-unwind" fn has_volatile(parse: *mut pg_sys::Query) -> bool {
    // SAFETY: parse is the live Query the planner hook was given.
    unsafe { pg_sys::contain_volatile_functions(parse as *mut pg_sys::Node) }
}

/// Puts a Material node on top of a plan that has none, so that a SCROLL
/// cursor moving back returns the rows it released, not new draws.
///
/// # Safety
/// `planned` is the live PlannedStmt the planner returned.
#[pg_guard]
unsafe extern "C-unwind" fn materialize(planned: *mut pg_sys::PlannedStmt) {
    // SAFETY: planned is the live PlannedStmt the planner returned; its plan tree is replaced whole.
    unsafe {
        let top = (*planned).planTree;
        if !top.is_null() && (*top).type_ != pg_sys::NodeTag::T_Material {
            (*planned).planTree = pg_sys::materialize_finished_plan(top);
        }
    }
}

/// Refuses `DROP EXTENSION dpnoise` while the ledger holds charges, unless
/// a superuser set `dpnoise.drop_ledger` (docs/budget.md).
///
/// # Safety
/// `drop` is the live DropStmt ProcessUtility was given, inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn guard_ledger(drop: *mut pg_sys::DropStmt) {
    // SAFETY: drop is the live DropStmt ProcessUtility was given; its objects are String nodes for extensions.
    unsafe {
        if (*drop).removeType != pg_sys::ObjectType::OBJECT_EXTENSION || gucs::drop_ledger() {
            return;
        }
        let objects = (*drop).objects;
        let n = if objects.is_null() { 0 } else { (*objects).length as usize };
        let names_dpnoise = (0..n).any(|i| {
            let node = (*(*objects).elements.add(i)).ptr_value as *mut pg_sys::Node;
            !node.is_null()
                && (*node).type_ == pg_sys::NodeTag::T_String
                && std::ffi::CStr::from_ptr((*(node as *mut pg_sys::String)).sval).to_bytes() == b"dpnoise"
        });
        if !names_dpnoise {
            return;
        }
        // Two queries: one naming dpnoise.ledger would fail to parse in a
        // database without the extension (DROP EXTENSION IF EXISTS there).
        let has_ledger = Spi::get_one::<bool>("SELECT pg_catalog.to_regclass('dpnoise.ledger') IS NOT NULL")
            .ok()
            .flatten()
            .unwrap_or(false);
        if !has_ledger {
            return;
        }
        let charges =
            Spi::get_one::<i64>("SELECT pg_catalog.count(*) FROM dpnoise.ledger").ok().flatten().unwrap_or(0);
        if charges > 0 {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
                format!("dpnoise: dropping the extension would delete every budget and the ledger's {charges} charges"),
                "Keep a copy first (pg_dump -n dpnoise --data-only), then a superuser may SET dpnoise.drop_ledger = on and drop it."
            );
        }
    }
}
