//! The analyst gate: roles marked as analysts (`dpnoise.analyst`, set per
//! role by `dp_analyst`) get only differentially private answers from
//! protected tables (`dp_protect`). docs/analysts.md has the threat model.
//!
//! Three checkpoints, each refusing with ZB003 before anything is read or
//! charged:
//! - the planner hook (`check_query`): every query level that reads a
//!   protected table directly must be an admitted aggregate (protected
//!   tables joined on their privacy unit, public tables, inner joins;
//!   dpnoise aggregates only, leakproof filters, keys and arguments, no
//!   correlation); levels above it only post-process its answers. An
//!   admitted level's protected tables are vouched for (no SELECT
//!   privilege needed), as a view's owner vouches;
//! - ExecutorStart (`check_plan`): a plan an analyst runs may read a
//!   protected table only where the gate vouched for it, whoever planned it
//!   (a cached plan from before the role became an analyst is refused);
//! - ProcessUtility (`check_utility`): COPY to or from a protected table,
//!   and EXPLAIN of a query over one (estimates come from the data), are
//!   refused.
//!
//! An admitted level may GROUP BY expressions of its protected table: the
//! gate adds private partition selection (`dp_partition_selected` in
//! HAVING, at `dpnoise.selection_epsilon` / `dpnoise.selection_delta`), so a
//! key appears only if the optimal keep test on its number of persons
//! passes. Every statement pays its whole cost from its plan before it
//! runs (`crate::charge`), whatever the data. A level over a table with
//! several rows per person, or over a join, is rewritten so that each
//! person adds one combined value to at most `max_groups_contributed`
//! groups (`bounding`).
//!
//! Here: the entry points the hooks call and the walk over a query's
//! levels; each level is checked by `level`. The protected-table catalog is `catalog`; an admitted level's
//! FROM and joins `joins`, its expressions `leakproof`, its partition
//! selection `partitions`, its rewrite per person `bounding`; the plan
//! check `plan`. Before any of them, `inline` takes raw-row CTEs and
//! subqueries into the level that aggregates them, `policy` rewrites plain
//! aggregates, and `substitute` writes dpnoise's total
//! forms (`crate::total`) in place of built-ins that can fail. The settings are in
//! `crate::gucs`.

use crate::errors::raise_sqlstate;
pub(crate) use crate::pg_list::{list_items, list_nodes};
pub(crate) use catalog::{as_superuser, gated, own_schema, protected_unit};
use catalog::{protected, Protected, Table};
use joins::FromItems;
use joins::{joined_on_unit, public_keys};
use leakproof::Leakproof;
pub(crate) use partitions::aggregate_types;
use partitions::select_partitions;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashSet;

pub mod accuracy;
pub mod bounding;
mod catalog;
pub mod constants;
mod inline;
mod joins;
mod keys;
mod leakproof;
mod level;
use level::{grouped_by, plain, protected_from, reads_only};
mod partitions;
mod persons;
pub mod plan;
mod policy;
mod semijoin;
mod statistics;
mod substitute;

pgrx::extension_sql_file!(
    "policy/policy.sql",
    name = "policy_sql",
    requires = ["gate_sql", "repeat_sql", dp_estimate]
);
pgrx::extension_sql_file!(
    "policy/values.sql",
    name = "values_sql",
    requires = ["policy_sql"]
);
pgrx::extension_sql_file!(
    "policy/bias.sql",
    name = "bias_sql",
    requires = ["values_sql"]
);
pgrx::extension_sql_file!(
    "schema.sql",
    name = "gate_sql",
    requires = [
        "budget_sql",
        dp_gate_changed,
        dp_query_accuracy,
        dp_query_cost
    ]
);

/// SQLSTATE of every refusal by the gate.
pub const QUERY_REFUSED: &str = "ZB003";

/// k for a level whose protected tables allow `tables` groups a person:
/// lowered by the role's cap and the session's setting, never raised.
pub(super) fn max_groups(tables: i32) -> i32 {
    [
        crate::gucs::role_max_groups_contributed(),
        crate::gucs::max_groups_contributed(),
    ]
    .into_iter()
    .filter(|&k| k > 0)
    .fold(tables, i32::min)
}

pub fn init() {
    statistics::init();
    policy::define_narrowed_domains();
    // SAFETY: runs once, from _PG_init, on the process's only thread; the callbacks have the
    // transaction and relcache callbacks' signatures.
    unsafe {
        pg_sys::RegisterXactCallback(Some(transaction_ended), std::ptr::null_mut());
        pg_sys::CacheRegisterRelcacheCallback(
            Some(catalog::relcache_changed),
            pg_sys::Datum::from(0usize),
        );
    }
}

thread_local! {
    /// Set while an analyst's EXPLAIN runs.
    static EXPLAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// # Safety
/// Called by PostgreSQL as a transaction callback.
#[pg_guard]
unsafe extern "C-unwind" fn transaction_ended(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_ABORT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    ) {
        catalog::loading_ended();
        EXPLAINING.with(|e| e.set(false));
    }
}

/// Why a query is refused, and how to write it instead. Checks return it
/// rather than raise: a custom SQLSTATE raised inside PostgreSQL's tree
/// walkers would not survive pgrx's error rethrow, so `raise` runs once the
/// walk is over.
struct Refusal {
    what: String,
    instead: String,
    /// A privacy parameter of this dpnoise function reads the data: refused
    /// as for every role (22023, `errors::varying_parameter`), not ZB003.
    parameter: Option<String>,
}

type Checked = Result<(), Refusal>;

fn refuse(what: &str, instead: &str) -> Refusal {
    Refusal {
        what: what.to_string(),
        instead: instead.to_string(),
        parameter: None,
    }
}

/// The refusal of a call of `function` whose privacy parameters are not
/// fixed (`crate::parameters`), found by the gate before planning.
fn varying_parameter(function: &str) -> Refusal {
    Refusal {
        what: String::new(),
        instead: String::new(),
        parameter: Some(function.to_string()),
    }
}

/// Refuses an analyst's statement (ZB003) with what and how to write it instead.
pub(crate) fn refused(what: &str, instead: &str) -> ! {
    raise(refuse(what, instead))
}

fn raise(refusal: Refusal) -> ! {
    if let Some(function) = refusal.parameter {
        crate::errors::varying_parameter(&function);
    }
    raise_sqlstate(
        QUERY_REFUSED,
        format!(
            "dpnoise: analysts get only differentially private aggregates of protected tables: {}",
            refusal.what
        ),
        Some(refusal.instead),
    )
}

/// The hint for a subquery among protected rows.
const SUBQUERY: &str = "A public list ANDed in WHERE is admitted as x IN (SELECT y FROM public_table ...) (no LIMIT, not \
                        correlated); for NOT IN, EXISTS or another comparison join the public table instead \
                        (FROM visits v JOIN sites s ON s.site = v.site), and compare with a constant or a query parameter \
                        ($1) where a value would come from a subquery over protected rows (ask it first, as its own \
                        dpnoise query).";

const SHAPE: &str = "Write SELECT dp_count(epsilon), dp_sum(column, epsilon, lower, upper), ... FROM protected_table \
                     WHERE <conditions on its columns>; wrap it in a subquery or CTE to post-process the answers.";

/// What the walk over an analyst's query carries.
struct Walk {
    protected: std::rc::Rc<Protected>,
    explaining: bool,
    /// The statement's top level (a level below it is a subquery or CTE).
    top: *mut pg_sys::Query,
    /// The first refusal; the walk stops there.
    refused: Option<Refusal>,
}

/// Checks an analyst's query before planning; vouches for the protected
/// tables of the levels it admits. Does nothing for other sessions.
///
/// # Safety
/// `query` is the live Query the planner hook was given.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_query(query: *mut pg_sys::Query) {
    if !gated() {
        return;
    }
    // Time zones only as the gate loads them, from statements' constants.
    crate::total::restrict_zones();
    let Some(protected) = protected() else { return };
    // Raw rows passed through a CTE or subquery join the level that
    // aggregates them; plain aggregates become dpnoise's under the tables'
    // policies, then total forms: the checks below see only dpnoise
    // aggregates and functions that cannot fail.
    // SAFETY: the caller's contract.
    unsafe { inline::inline(query, &protected) };
    // A public IN or EXISTS list in WHERE joins the level's FROM.
    // SAFETY: the caller's contract.
    unsafe { semijoin::semijoins(query, &protected) };
    // Filter values of a listed column come from the list, not the rows.
    // SAFETY: the caller's contract.
    unsafe { policy::answer_from_lists(query, &protected) };
    // SAFETY: the caller's contract.
    unsafe { policy::rewrite(query, &protected) };
    // SAFETY: the caller's contract.
    unsafe { substitute::substitute(query, &protected) };
    let mut walk = Walk {
        protected,
        explaining: EXPLAINING.with(|e| e.get()),
        top: query,
        refused: None,
    };
    // SAFETY: the caller's contract; the walker gets `walk` back as its context.
    unsafe { walker(query.cast(), (&raw mut walk).cast()) };
    if let Some(refusal) = walk.refused {
        raise(refusal);
    }
    // What it reads of protected tables is shown in normal forms above the
    // releases, comes in an order that is a function of its rows, not of
    // its plan, and float sums over them do not round by that order.
    if joins::reads_protected(query.cast(), &walk.protected) {
        let protected = |relid: pg_sys::Oid| walk.protected.tables.contains_key(&relid);
        let forms = crate::output::normal::Forms {
            functions: &walk.protected.forms,
            protected: &protected,
        };
        // SAFETY: the caller's contract.
        unsafe {
            crate::output::normal::normal_values(query, &forms);
            crate::output::order::order_rows(query);
            crate::output::exact::exact_sums(query, &walk.protected.forms);
        }
    }
}

/// # Safety
/// Called by PostgreSQL's tree walkers, with the `Walk` of `check_query` as context.
#[pg_guard]
unsafe extern "C-unwind" fn walker(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: nodes of a live query tree; casts follow the node tags.
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Query {
            let query = node as *mut pg_sys::Query;
            let walk = &mut *(context as *mut Walk);
            return match level::check_level(query, walk) {
                Err(refusal) => {
                    walk.refused = Some(refusal);
                    true
                }
                Ok(false) => false,
                Ok(true) => pg_sys::query_tree_walker(query, Some(walker), context, 0),
            };
        }
        pg_sys::expression_tree_walker(node, Some(walker), context)
    }
}

/// Refuses a plan an analyst runs if it reads a protected table the gate
/// did not vouch for (a plan made before the role became an analyst, or by
/// another role).
///
/// # Safety
/// `stmt` is null or the PlannedStmt ExecutorStart runs; `params` null or its live parameters.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_plan(
    stmt: *mut pg_sys::PlannedStmt,
    params: pg_sys::ParamListInfo,
) -> f64 {
    if stmt.is_null() || !gated() {
        return 0.0;
    }
    let Some(protected) = protected() else {
        return 0.0;
    };
    // SAFETY: the caller's contract; the flattened range table of a live plan.
    unsafe {
        let permissions = crate::versions::plan_permissions(stmt);
        for rte in list_items::<pg_sys::RangeTblEntry>((*stmt).rtable) {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && protected.tables.contains_key(&(*rte).relid)
                && crate::versions::required_privileges(permissions, rte) != 0
            {
                raise(refuse(
                    "this plan reads a protected table the gate did not admit (prepared before the role became an analyst?)",
                    SHAPE,
                ));
            }
        }
        // SAFETY: as above.
        if pg_sys::ParallelWorkerNumber < 0 {
            match plan::check(stmt, params, &protected) {
                Ok(work) => return work,
                Err(refusal) => raise(refusal),
            }
        }
        0.0
    }
}

/// Whether the server's LOG and DEBUG messages reach this client
/// (client_min_messages below NOTICE), and a superuser did not allow it
/// (`dpnoise.analyst_server_messages`, for tests).
fn messages_shown() -> bool {
    // SAFETY: a GUC variable, read on the backend's only thread.
    unsafe {
        pg_sys::client_min_messages < pg_sys::NOTICE as i32
            && !crate::gucs::analyst_server_messages()
    }
}

/// The refusal of a statement over protected tables while LOG and DEBUG
/// messages reach the client: `trace_sort` reports each sort's rows and
/// memory, `debug_print_plan` the plan with its constants; a message would
/// describe the protected rows (an attack saw the bounding's sort grow
/// from 27 KB to 161 KB with the rows a WHERE kept).
fn messages_refused() -> Refusal {
    refuse(
        "with client_min_messages below NOTICE the server's LOG and DEBUG messages (sort sizes, plans) would describe the protected rows",
        "RESET client_min_messages (or set it to notice or above).",
    )
}

/// Refuses to run (or, for a cursor, to fetch from) an analyst's plan
/// that reads a protected table while LOG and DEBUG messages reach the
/// client: the setting may have changed since the plan was made.
///
/// # Safety
/// `stmt` is null or the live PlannedStmt being started or run.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_messages(stmt: *mut pg_sys::PlannedStmt) {
    if stmt.is_null() || !messages_shown() || !gated() {
        return;
    }
    let Some(protected) = protected() else { return };
    // SAFETY: the caller's contract; the flattened range table of a live plan.
    let reads = unsafe {
        list_items::<pg_sys::RangeTblEntry>((*stmt).rtable)
            .iter()
            .any(|rte| {
                (**rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                    && protected.tables.contains_key(&(**rte).relid)
            })
    };
    if reads {
        raise(messages_refused());
    }
}

/// The plan check's part that must also hold for what never reaches
/// ExecutorStart (a PL/pgSQL simple expression): no statistics function.
///
/// # Safety
/// `stmt` is the live PlannedStmt the planner returned.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_planned(stmt: *mut pg_sys::PlannedStmt) {
    if stmt.is_null() || !gated() {
        return;
    }
    // SAFETY: the caller's contract.
    if let Err(refusal) = unsafe { plan::planned(stmt) } {
        raise(refusal);
    }
    // The bounding's window (an analyst writes none) makes the plan look
    // costly enough to compile: compiling its expressions took 1.8 s of
    // a 10 s query over 10M rows, and ran no faster.
    // SAFETY: the caller's contract; plan nodes are read through their tags.
    unsafe {
        if crate::parameters::plan_nodes(stmt)
            .iter()
            .any(|p| (**p).type_ == pg_sys::NodeTag::T_WindowAgg)
        {
            (*stmt).jitFlags = pg_sys::PGJIT_NONE as i32;
        }
    }
}

/// Refuses an analyst's COPY of a protected table, and marks an EXPLAIN so
/// that the planner hook refuses one over protected tables. Returns whether
/// an EXPLAIN was marked (the caller clears it with `explained`).
///
/// # Safety
/// `statement` is null or the live utility statement ProcessUtility runs.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_utility(statement: *mut pg_sys::Node) -> bool {
    if statement.is_null() || !gated() {
        return false;
    }
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*statement).type_ {
            pg_sys::NodeTag::T_CopyStmt => {
                let copy = statement as *mut pg_sys::CopyStmt;
                if (*copy).relation.is_null() {
                    return false; // COPY (query): the planner hook sees the query.
                }
                let Some(protected) = protected() else {
                    return false;
                };
                let relid = pg_sys::RangeVarGetRelidExtended(
                    (*copy).relation,
                    pg_sys::NoLock as i32,
                    pg_sys::RVROption::RVR_MISSING_OK,
                    None,
                    std::ptr::null_mut(),
                );
                if protected.tables.contains_key(&relid) {
                    raise(refuse(
                        "COPY reads or writes the rows of a protected table",
                        SHAPE,
                    ));
                }
                false
            }
            pg_sys::NodeTag::T_ExplainStmt => {
                EXPLAINING.with(|e| e.set(true));
                true
            }
            _ => false,
        }
    }
}

/// Ends what `check_utility` marked.
pub fn explained() {
    EXPLAINING.with(|e| e.set(false));
}
