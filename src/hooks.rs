//! Executor, planner and utility hooks: the composition root. Each hook
//! calls the stages in PostgreSQL's order (gate, Citus, repeat, charge) and
//! keeps the executor state they share (`execution`); nothing imports it.
//!
//! - A SCROLL cursor re-evaluates its target list when it moves backwards
//!   over a plan that can scan backwards: fetched again, a released row would
//!   get fresh noise. Such plans are materialised, so a row fetched again is
//!   the same row.
//! - `DROP EXTENSION dpnoise` deletes every budget and the whole ledger: it is
//!   refused while the ledger holds charges, unless a superuser has set
//!   `dpnoise.drop_ledger`.

use crate::execution;
use crate::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_char, CStr};

// The hooks call on into PostgreSQL directly, not through pgrx's guarded
// bindings: an error raised below them must reach PostgreSQL's handler as
// it was raised (its SQLSTATE, detail and hint), not be caught and raised
// again by Rust. So the hooks below hold nothing that needs dropping, and
// what a longjmp skips (a depth decrement) is repaired by the transaction
// callbacks.
// SAFETY: these match PostgreSQL's prototypes (executor/executor.h,
// tcop/utility.h, optimizer/planner.h; 14 and later for ProcessUtility's
// read_only_tree), argument for argument.
unsafe extern "C-unwind" {
    #[link_name = "standard_ExecutorStart"]
    fn raw_standard_executor_start(query: *mut pg_sys::QueryDesc, eflags: i32);
    #[link_name = "standard_ExecutorFinish"]
    fn raw_standard_executor_finish(query: *mut pg_sys::QueryDesc);
    #[link_name = "standard_ExecutorEnd"]
    fn raw_standard_executor_end(query: *mut pg_sys::QueryDesc);
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

/// Set while a cursor declared with neither SCROLL nor NO SCROLL is being
/// opened: PostgreSQL lets it scroll when its plan can run backwards, which
/// would evaluate its expressions again; the planner materialises it.
static mut IMPLICIT_SCROLL: bool = false;

static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_RUN: pg_sys::ExecutorRun_hook_type = None;
static mut PREV_EXECUTOR_FINISH: pg_sys::ExecutorFinish_hook_type = None;
static mut PREV_EXECUTOR_END: pg_sys::ExecutorEnd_hook_type = None;
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

pub fn init() {
    crate::budget::set_cap_source(crate::charge::cap);
    // SAFETY: runs once, from _PG_init, on the process's only thread. Each hook global is read by
    // value into our PREV_ static (written only here, read by our hook to chain to it) and then set
    // to our function, whose signature is the hook type's. RegisterXactCallback and
    // RegisterSubXactCallback store the function pointers, with a null arg our callbacks never
    // read, in TopMemoryContext. Hooks installed while a statement already runs (the library loaded
    // mid-query) see only the calls that start afterwards, each of which undoes its own changes.
    unsafe {
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_EXECUTOR_RUN = pg_sys::ExecutorRun_hook;
        pg_sys::ExecutorRun_hook = Some(executor_run);
        PREV_EXECUTOR_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(executor_finish);
        PREV_EXECUTOR_END = pg_sys::ExecutorEnd_hook;
        pg_sys::ExecutorEnd_hook = Some(executor_end);
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
/// Only for PostgreSQL, as a transaction callback (registered in `init`), on
/// the backend's only thread; `_arg` is never read.
#[pg_guard]
unsafe extern "C-unwind" fn transaction_ended(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PREPARE
            | pg_sys::XactEvent::XACT_EVENT_ABORT
    ) {
        crate::gate::constants::transaction_ended();
    }
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    ) {
        // SAFETY: a by-value write of this backend's static, on its only thread.
        unsafe { IMPLICIT_SCROLL = false };
        execution::aborted();
        crate::budget::aborted();
        crate::repeat::aborted();
        // Not at a subtransaction's abort: a cursor opened before it stays held.
        crate::output::timing::aborted();
    }
}

/// A subtransaction rolled back (a PL/pgSQL EXCEPTION block) abandons the
/// runs that the error unwound: back to the depth it began at.
///
/// # Safety
/// Only for PostgreSQL, as a subtransaction callback (registered in `init`),
/// on the backend's only thread; `_arg` is never read.
#[pg_guard]
unsafe extern "C-unwind" fn subtransaction_event(
    event: pg_sys::SubXactEvent::Type,
    id: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if execution::subtransaction(event, id) {
        crate::repeat::aborted();
    }
}

/// # Safety
/// Only for PostgreSQL, as ExecutorStart_hook: `query` is the live QueryDesc
/// being started, inside a transaction, on the backend's only thread.
unsafe extern "C-unwind" fn executor_start(query: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: `query` is the live QueryDesc PostgreSQL is starting, inside a transaction (the
    // caller's contract), as check_parameters requires; we are on the backend's only thread, as
    // begin_statement_if_top_level requires. PREV_EXECUTOR_START, read by value, is the hook
    // installed before ours (or None), called like standard_ExecutorStart with the arguments
    // unchanged. An error raised below longjmps through this frame, which owns nothing to drop.
    unsafe {
        // The ledger worker runs only dpnoise's own charge query, once per
        // batch of charges: nothing in it to check or to pay for.
        let ledger = crate::budget::worker::is_ledger_worker() || crate::repeat::reading();
        // What one protected row can make the statement do (the run time's bound).
        let mut work = 0.0;
        if !ledger {
            execution::begin_statement_if_top_level();
            work = crate::gate::check_plan((*query).plannedstmt, (*query).params);
            crate::gate::check_messages((*query).plannedstmt);
            check_parameters(query);
            // The identities of its repeatable releases, under its snapshot;
            // those answered from the store are taken out of its plan.
            identify_releases(query, eflags);
        }
        match PREV_EXECUTOR_START {
            Some(prev) => prev(query, eflags),
            None => raw_standard_executor_start(query, eflags),
        }
        // The identities registered for the execution; then the statement
        // pays for all its releases before it runs (after ExecutorStart's
        // own checks, so their errors charge nothing).
        if !ledger {
            start_releases(query, eflags);
            // An analyst's releases are drawn once, however often the
            // plan reads them.
            if crate::gate::gated() {
                hold_releases(query);
            }
            // Paid for its run time too: its answer is held.
            if crate::charge::prepay(query, eflags) {
                crate::output::timing::hold(query, work);
            }
        }
    }
}

crate::versions::executor_run_hook!(executor_run, run);

/// # Safety
/// Only for PostgreSQL, from ExecutorRun_hook: `query` is the live QueryDesc
/// being run, on the backend's only thread.
unsafe fn run(
    query: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
    arguments: crate::versions::RunArguments,
) {
    // SAFETY: `query` is the live QueryDesc PostgreSQL is running (the caller's contract), and
    // stays live until this returns, when leave_run removes it; on the backend's only thread, with no
    // borrow of RUNNING held. PREV_EXECUTOR_RUN, read by value, is the hook installed before ours
    // (or None), called like standard_ExecutorRun with the arguments unchanged. An error below
    // longjmps through this frame, which owns nothing to drop, skipping leave_run: the
    // (sub)transaction abort callbacks then drop the pointer from RUNNING.
    unsafe {
        crate::gate::check_messages((*query).plannedstmt);
        execution::enter_run(query);
        // An analyst's answer is held for its run time's delay (`output::timing`).
        let run =
            || crate::versions::executor_run(PREV_EXECUTOR_RUN, query, direction, count, arguments);
        crate::output::timing::run(query, count, || {
            // Read when the Gather Merge first runs: as planned (`planner`).
            if window_over_workers((*query).plannedstmt) {
                crate::gucs::with_settings(&[(c"parallel_leader_participation", c"off")], run)
            } else {
                run()
            }
            // Run to its end: the releases its plan skipped are kept too,
            // within the run time held.
            if count == 0 && direction == pg_sys::ScanDirection::ForwardScanDirection {
                crate::repeat::complete((*query).estate);
            }
        });
        execution::leave_run();
    }
}

/// # Safety
/// Only for PostgreSQL, as ExecutorFinish_hook: `query` is the live QueryDesc
/// being finished, on the backend's only thread.
unsafe extern "C-unwind" fn executor_finish(query: *mut pg_sys::QueryDesc) {
    // SAFETY: `query` is the live QueryDesc PostgreSQL is finishing (the caller's contract), and
    // stays live until this returns, when leave_run removes it; on the backend's only thread, with no
    // borrow of RUNNING held. PREV_EXECUTOR_FINISH, read by value, is the hook installed before
    // ours (or None), called like standard_ExecutorFinish with the argument unchanged. An error
    // below longjmps through this frame, which owns nothing to drop, skipping leave_run: the
    // (sub)transaction abort callbacks then drop the pointer from RUNNING.
    unsafe {
        crate::gate::check_messages((*query).plannedstmt);
        execution::enter_run(query);
        match PREV_EXECUTOR_FINISH {
            Some(prev) => prev(query),
            None => raw_standard_executor_finish(query),
        }
        execution::leave_run();
    }
}

/// # Safety
/// Only for PostgreSQL, as ExecutorEnd_hook: `query` is the live QueryDesc
/// being ended, inside a transaction, on the backend's only thread.
unsafe extern "C-unwind" fn executor_end(query: *mut pg_sys::QueryDesc) {
    // SAFETY: `query` is the live QueryDesc PostgreSQL is ending (the caller's contract); its
    // estate, and the query memory context in it, are freed only by the ExecutorEnd called below,
    // so return_unused runs while the call sites it reads are live. PREV_EXECUTOR_END, read by
    // value, is the hook installed before ours (or None), called like standard_ExecutorEnd with the
    // argument unchanged. An error raised below longjmps through this frame, which owns nothing.
    unsafe {
        // What it paid for and did not release stays charged.
        crate::budget::ended((*query).estate);
        crate::repeat::ended((*query).estate);
        crate::output::timing::ended(query);
        match PREV_EXECUTOR_END {
            Some(prev) => prev(query),
            None => raw_standard_executor_end(query),
        }
    }
}

/// # Safety
/// Only for PostgreSQL, as ProcessUtility_hook: `pstmt` is the live
/// PlannedStmt of the utility statement, inside a transaction, on the
/// backend's only thread; the other arguments are passed on unread.
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
    // SAFETY: `pstmt` is the live PlannedStmt of the utility statement (the caller's contract); its
    // `utilityStmt` is null (tested) or a live node, cast to DropStmt or DeclareCursorStmt only
    // when its tag says so, and guard_ledger gets the live DropStmt inside the transaction. DEPTH
    // and IMPLICIT_SCROLL are written by value on the backend's only thread. PREV_PROCESS_UTILITY,
    // read by value, is the hook installed before ours (or None), called like
    // standard_ProcessUtility with the arguments unchanged. An error below longjmps through this
    // frame, which owns nothing to drop, skipping the two resets after the call: the (sub)transaction
    // abort callbacks restore DEPTH, the transaction's clears IMPLICIT_SCROLL (as does the planner
    // hook whenever it reads it).
    unsafe {
        let statement = (*pstmt).utilityStmt;
        let tag = if statement.is_null() {
            pg_sys::NodeTag::T_Invalid
        } else {
            (*statement).type_
        };
        // FETCH and MOVE continue a cursor's statement; anything else is one.
        if tag != pg_sys::NodeTag::T_FetchStmt {
            execution::begin_statement_if_top_level();
        }
        if tag == pg_sys::NodeTag::T_DropStmt {
            guard_ledger(statement as *mut pg_sys::DropStmt);
        }
        let explaining = crate::gate::check_utility(statement);
        let scroll_flags = (pg_sys::CURSOR_OPT_SCROLL | pg_sys::CURSOR_OPT_NO_SCROLL) as i32;
        IMPLICIT_SCROLL = tag == pg_sys::NodeTag::T_DeclareCursorStmt
            && (*(statement as *mut pg_sys::DeclareCursorStmt)).options & scroll_flags == 0;
        execution::enter_utility();
        match PREV_PROCESS_UTILITY {
            Some(prev) => prev(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
            None => raw_standard_process_utility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
        IMPLICIT_SCROLL = false;
        if explaining {
            crate::gate::explained();
        }
        execution::leave_utility();
    }
}

/// # Safety
/// Only for PostgreSQL, as planner_hook: `parse` is the live Query to plan,
/// inside a transaction, on the backend's only thread.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: `parse` is the live Query PostgreSQL is planning, inside a transaction (the caller's
    // contract), as check_query_parameters and has_volatile require; both run before planning,
    // which rewrites it in place. The &mut to IMPLICIT_SCROLL lasts for the replace alone, on the
    // backend's only thread. PREV_PLANNER, read by value, is the hook installed before ours (or
    // None), called like standard_planner with the arguments unchanged; either returns a live
    // PlannedStmt (failure is an error, never null), as materialize requires. An error below
    // longjmps through this frame, which owns nothing to drop.
    unsafe {
        // dpnoise's own read of table versions, and the ledger worker's
        // fixed statements: nothing to check or mark.
        if crate::repeat::reading() || crate::budget::worker::is_ledger_worker() {
            return match PREV_PLANNER {
                Some(prev) => prev(parse, query_string, cursor_options, bound_params),
                None => raw_standard_planner(parse, query_string, cursor_options, bound_params),
            };
        }
        // Every stage reads GROUP BY keys where 15 to 17 parse them.
        crate::versions::flatten_grouping(parse);
        // Checked before planning, which rewrites the tree in place: the
        // analyst gate first (it refuses raw reads before anything else).
        let outer = crate::gate::bounding::take_bounding();
        crate::gate::check_query(parse);
        let bounding = crate::gate::bounding::take_bounding();
        crate::gate::bounding::restore_bounding(outer);
        check_query_parameters(parse);
        touch_session();
        let mut planning = crate::citus::Planning::default();
        distribute(parse, bound_params, &raw mut planning);
        // After the gate's and Citus's rewrites: what is planned is what runs.
        let releases = mark_releases(parse, bound_params);
        let implicit = std::mem::replace(&mut *(&raw mut IMPLICIT_SCROLL), false);
        let scroll = (implicit || cursor_options as u32 & pg_sys::CURSOR_OPT_SCROLL != 0)
            && has_volatile(parse);
        let plan = || match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => raw_standard_planner(parse, query_string, cursor_options, bound_params),
        };
        use crate::gate::bounding::Bounding;
        // A bounded level sorts every row by person. The planner prices
        // the Gather Merge that lets workers share that sort at
        // parallel_tuple_cost a row (0.1: more than the sort itself), and
        // so never chooses it; measured over 3M rows on 2 cores, the
        // shared sort took the by-person total from 0.95 s to 0.76 s and
        // the windowed GROUP BY from 2.5 s to 2.2 s. Workers change no
        // answer: each person's rows still meet in one place, and their
        // combines do not depend on the order of the rows. A lower
        // setting of the session's is kept (gate_plan.sql's forced plans).
        let mut settings: Vec<(&CStr, &CStr)> = Vec::new();
        if bounding == Bounding::ByPerson {
            settings.push((c"enable_hashagg", c"off"));
        }
        if bounding != Bounding::None && pg_sys::parallel_tuple_cost > 0.01 {
            settings.push((c"parallel_tuple_cost", c"0.01"));
        }
        if bounding == Bounding::Window {
            // The window and the aggregates above it run in the leader, the
            // busiest process of that plan: the workers sort without it
            // (2.05 s against 2.2 s with the leader sorting a share).
            settings.push((c"parallel_leader_participation", c"off"));
        }
        // An analyst's statement is planned from a copy: planning rewrites
        // the tree, and it may be planned again below.
        let gated = crate::gate::gated();
        // A cached statement's generic plan (no values for its $n): its
        // releases have no identity and are drawn and charged at every run.
        let generic = gated && bound_params.is_null() && crate::parameters::has_extern(parse);
        let original = if gated {
            pg_sys::copyObjectImpl(parse.cast()) as *mut pg_sys::Query
        } else {
            std::ptr::null_mut()
        };
        let mut planned = if settings.is_empty() {
            plan()
        } else {
            crate::gucs::with_settings(&settings, plan)
        };
        // A release in a parallel worker would be drawn in each worker
        // that runs it (the inner side of a join each builds whole), for
        // one charge: such a statement is planned again without workers,
        // whatever the plan, so that what it shows does not follow it.
        if gated && crate::gate::plan::released_in_workers(planned) {
            settings.push((c"max_parallel_workers_per_gather", c"0"));
            let again = || match PREV_PLANNER {
                Some(prev) => prev(original, query_string, cursor_options, bound_params),
                None => raw_standard_planner(original, query_string, cursor_options, bound_params),
            };
            planned = crate::gucs::with_settings(&settings, again);
        }
        if bounding == Bounding::ByPerson {
            // JIT compiles the plan's expressions (150 ms of a 1.2 s total
            // over 3M rows) and runs them no faster here, as for the window.
            (*planned).jitFlags = pg_sys::PGJIT_NONE as i32;
        }
        crate::gate::check_planned(planned);
        if generic {
            // Priced so that PostgreSQL's plan cache keeps planning it with
            // the values (plan_cache_mode auto): each run then has its
            // identity, and a repeat is free. A session that forces the
            // generic plan pays each run.
            (*(*planned).planTree).total_cost = 1e100;
        }
        if scroll {
            materialize(planned);
        }
        finish(planned, &raw const planning);
        attach_releases(planned, releases);
        planned
    }
}

/// Whether an analyst's plan runs a window over workers: the bounding's
/// (an analyst's own window, over public rows only, gets the same, which
/// changes only where its sort runs).
///
/// # Safety
/// `stmt` is null or a live PlannedStmt.
unsafe fn window_over_workers(stmt: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller's contract; plan nodes are read through their tags.
    unsafe {
        if stmt.is_null() || !(*stmt).parallelModeNeeded || !crate::gucs::analyst() {
            return false;
        }
        let nodes = crate::parameters::plan_nodes(stmt);
        let has = |tag| nodes.iter().any(|p| (**p).type_ == tag);
        has(pg_sys::NodeTag::T_WindowAgg) && has(pg_sys::NodeTag::T_GatherMerge)
    }
}

/// Refuses a statement whose dpnoise calls have privacy parameters that are
/// not fixed, before anything runs or is charged (`parameters::check_plan`).
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn check_parameters(query: *mut pg_sys::QueryDesc) {
    // SAFETY: `query` is the live QueryDesc ExecutorStart was given (the caller's contract), so its
    // `plannedstmt` is null or the live PlannedStmt being started, which with the caller's
    // transaction is check_plan's contract.
    unsafe { crate::parameters::check_plan((*query).plannedstmt) }
}

/// Identifies the repeatable releases of `parse` (`repeat::mark`).
///
/// # Safety
/// `parse` is the live Query the planner hook was given, `params` its bound
/// parameters or null; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn mark_releases(
    parse: *mut pg_sys::Query,
    params: pg_sys::ParamListInfo,
) -> *mut pg_sys::List {
    // SAFETY: the caller's contract is mark's.
    unsafe { crate::repeat::mark(parse, params) }
}

/// Carries the identified releases into the plan (`repeat::attach`).
///
/// # Safety
/// `planned` is the live PlannedStmt just made; `names` what mark_releases returned.
#[pg_guard]
unsafe extern "C-unwind" fn attach_releases(
    planned: *mut pg_sys::PlannedStmt,
    names: *mut pg_sys::List,
) {
    // SAFETY: the caller's contract is attach's.
    unsafe { crate::repeat::attach(planned, names) }
}

/// Identifies a starting execution's repeatable releases and answers what
/// the store keeps (`repeat::identify`).
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given, not yet started; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn identify_releases(query: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: the caller's contract is identify's.
    unsafe { crate::repeat::identify(query, eflags) }
}

/// Holds the releases of a started analyst's execution (`repeat::hold`).
///
/// # Safety
/// As `repeat::hold`.
#[pg_guard]
unsafe extern "C-unwind" fn hold_releases(query: *mut pg_sys::QueryDesc) {
    // SAFETY: the caller's contract is hold's.
    unsafe { crate::repeat::hold(query) }
}

/// Registers the identities of a started execution (`repeat::start`).
///
/// # Safety
/// As `repeat::start`.
#[pg_guard]
unsafe extern "C-unwind" fn start_releases(query: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: the caller's contract is start's.
    unsafe { crate::repeat::start(query, eflags) }
}

/// Publishes the session's role and caps for dp_sessions (an error in it
/// becomes a PostgreSQL error here, not an unwind through the planner).
#[pg_guard]
extern "C-unwind" fn touch_session() {
    crate::budget::touch_session();
}

/// Refuses a query whose dpnoise calls take privacy parameters from
/// functions outside pg_catalog, before the planner folds them away.
///
/// # Safety
/// `parse` is the live Query the planner hook was given; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn check_query_parameters(parse: *mut pg_sys::Query) {
    // SAFETY: `parse` is the live Query the planner hook was given, inside a transaction (the
    // caller's contract), which is check_query's contract.
    unsafe { crate::parameters::check_query(parse) }
}

/// Splits the levels of `parse` whose dpnoise aggregates read a Citus
/// table, before Citus plans them (`citus::distribute`).
///
/// # Safety
/// `parse` is the live Query the planner hook was given, `params` its bound
/// parameters or null; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn distribute(
    parse: *mut pg_sys::Query,
    params: pg_sys::ParamListInfo,
    planning: *mut crate::citus::Planning,
) {
    // SAFETY: the caller's contract is distribute's; `planning` points to the caller's local.
    unsafe { crate::citus::distribute(parse, params, &mut *planning) }
}

/// Completes the plan after `distribute` (`citus::finish`).
///
/// # Safety
/// `planned` is the live PlannedStmt the planner made; `planning` points to
/// what `distribute` noted; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn finish(
    planned: *mut pg_sys::PlannedStmt,
    planning: *const crate::citus::Planning,
) {
    // SAFETY: the caller's contract is finish's; `planning` points to the caller's local.
    unsafe { crate::citus::finish(planned, &*planning) }
}

/// # Safety
/// `parse` is the live Query the planner hook was given; inside a transaction.
#[pg_guard]
unsafe extern "C-unwind" fn has_volatile(parse: *mut pg_sys::Query) -> bool {
    // SAFETY: `parse` is the live Query the planner hook was given (the caller's contract); a Query
    // is a Node, which contain_volatile_functions walks with query_tree_walker, looking up
    // functions' volatility in the catalog inside the caller's transaction.
    unsafe { pg_sys::contain_volatile_functions(parse as *mut pg_sys::Node) }
}

/// Puts a Material node on top of a plan that has none, so that a SCROLL
/// cursor moving back returns the rows it released, not new draws.
///
/// # Safety
/// `planned` is the non-null, live PlannedStmt the planner just returned, in
/// the memory context that is still current.
#[pg_guard]
unsafe extern "C-unwind" fn materialize(planned: *mut pg_sys::PlannedStmt) {
    // SAFETY: `planned` is the live PlannedStmt the planner just returned (the caller's contract);
    // its `planTree` is null (left alone) or a live Plan, whose tag is read through the Plan
    // header. materialize_finished_plan puts it under a new Material node, allocated in the
    // current memory context, the one the planner built the plan in, so both live equally long;
    // the new node replaces `planTree` whole.
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
    // SAFETY: `drop` is the live DropStmt ProcessUtility was given (the caller's contract). Its
    // `objects` is read only for DROP EXTENSION, where it is null (length 0) or a List of
    // extension names, read below `length`; each is null or a live node, cast to String only when
    // tagged T_String, and its `sval` is a NUL-terminated name. SPI runs in the caller's transaction.
    unsafe {
        if (*drop).removeType != pg_sys::ObjectType::OBJECT_EXTENSION || gucs::drop_ledger() {
            return;
        }
        let objects = (*drop).objects;
        let n = if objects.is_null() {
            0
        } else {
            (*objects).length as usize
        };
        let names_dpnoise = (0..n).any(|i| {
            let node = (*(*objects).elements.add(i)).ptr_value as *mut pg_sys::Node;
            !node.is_null()
                && (*node).type_ == pg_sys::NodeTag::T_String
                && CStr::from_ptr((*(node as *mut pg_sys::String)).sval).to_bytes() == b"dpnoise"
        });
        if !names_dpnoise {
            return;
        }
        // Two queries: one naming dpnoise.ledger would fail to parse in a
        // database without the extension (DROP EXTENSION IF EXISTS there).
        let has_ledger =
            Spi::get_one::<bool>("SELECT pg_catalog.to_regclass('dpnoise.ledger') IS NOT NULL")
                .ok()
                .flatten()
                .unwrap_or(false);
        if !has_ledger {
            return;
        }
        let charges = Spi::get_one::<i64>("SELECT pg_catalog.count(*) FROM dpnoise.ledger")
            .ok()
            .flatten()
            .unwrap_or(0);
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
