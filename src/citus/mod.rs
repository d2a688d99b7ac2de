//! dpnoise over Citus tables: exact partials on the workers, noise once on
//! the coordinator.
//!
//! Citus runs an aggregate either whole on the workers (GROUP BY the
//! distribution column, a query that hits one shard) or in two phases; in
//! both, a dpnoise aggregate's final function would run where Citus put it,
//! charging that node's ledger. So before Citus plans it, the planner hook
//! splits every query level whose dpnoise aggregates read a Citus table:
//!
//! - the partials: the level's FROM, WHERE and GROUP BY, with each dpnoise
//!   aggregate replaced by exact partials Citus knows how to push down,
//!   its own `count` and `sum` (of `dp_lattice_steps`, the value clamped
//!   and rounded onto the aggregate's lattice exactly as its transition
//!   does, so the distributed sum is bit-identical to the serial one);
//! - the release: the level's outputs, HAVING, ORDER BY and LIMIT over
//!   `dp_partials(<the partials as SQL>)`, a function Citus cannot ship,
//!   each dpnoise aggregate replaced by its merge (`dp_merge_count`,
//!   `dp_merge_sum`), which takes the original parameters as constants,
//!   pays once per call site on this node's ledger and draws the noise.
//!
//! The privacy parameters are folded to constants here (a refusal happens
//! before anything runs), so both halves see the same ones. A release on a
//! Citus worker node is refused (`extensions::refuse_on_worker`): budgets live on the
//! coordinator.
//!
//! An analyst's admitted level over a protected table (the gate has
//! rewritten it: bounded per person, partition selection in HAVING) is
//! split the same way, its partials run as the extension's owner in
//! `dp_partials_sealed` (`sealing`, `crate::seal`); `finish` refuses a plan
//! holding a seal its planning did not write.
//!
//! Here: detection (does a level call dpnoise over a Citus table, is this
//! node a worker) and the entry points the planner hook calls. A level is
//! split in `split`, each aggregate's partials and merge planned in
//! `merge`, an analyst's partials sealed in `sealing`; the nodes the split
//! writes are built in `nodes`.

use crate::gate::bounding::collect_aggregates;
use crate::gate::{aggregate_types, list_items};
use pgrx::pg_sys;
use pgrx::prelude::*;

mod merge;
mod nodes;
mod sealing;
mod split;

pgrx::extension_sql_file!(
    "citus.sql",
    name = "citus_sql",
    requires = ["sum_sql", "count_sql"]
);
const _: () = assert!(crate::fmgr::every_sspace_is(
    include_str!("citus.sql"),
    std::mem::size_of::<crate::sum::SumState>()
));

fn unsupported(what: &str, hint: &str) -> ! {
    crate::errors::raise_sqlstate(
        "0A000",
        format!("dpnoise over a Citus table: {what}"),
        Some(hint.to_owned()),
    )
}

/// The first column of a catalog query's first row, read-only: pgrx's
/// Spi::get_one assigns a transaction ID, which a parallel query's leader
/// (where a release runs) and a standby cannot.
fn read_one<T: pgrx::FromDatum + pgrx::IntoDatum>(sql: &str) -> Option<T> {
    Spi::connect(|client| client.select(sql, Some(1), &[])?.first().get_one::<T>())
        .ok()
        .flatten()
}

fn citus_installed() -> bool {
    // SAFETY: inside a transaction (every caller's).
    unsafe { crate::extensions::oid(crate::extensions::Extension::Citus) != pg_sys::InvalidOid }
}

/// What one planning split, for `finish` once the plan is made.
#[derive(Default)]
pub struct Planning {
    /// A generic plan that needed a split (parameters not known when
    /// planned): left to Citus, where its releases would be refused on the
    /// workers, and priced out of the plan cache, which then keeps making
    /// custom plans.
    generic: bool,
    /// The tables the partials read, which the plan now reads only as text:
    /// a change to one (a REVOKE, an ALTER) must invalidate it all the same.
    relations: Vec<pg_sys::Oid>,
    /// The seals this planning wrote (`dp_partials_sealed`).
    seals: Vec<[u8; crate::seal::SEAL_BYTES]>,
    /// The tables sealed partials read with the analyst's privileges:
    /// added to the plan's range table, so the executor checks them again
    /// each time the plan runs (a cached plan outlives a REVOKE of a role).
    checked: Vec<crate::versions::Recheck>,
}

/// Splits every query level of `query` whose dpnoise aggregates read a
/// Citus table (see the module's comment), noting in `planning` what the
/// plan needs once made (`finish`).
///
/// # Safety
/// `query` is the live Query the planner hook was given, before planning;
/// `params` its bound parameters or null; inside a transaction.
pub unsafe fn distribute(
    query: *mut pg_sys::Query,
    params: pg_sys::ParamListInfo,
    planning: &mut Planning,
) {
    // SAFETY: the caller's contract.
    unsafe {
        if query.is_null()
            || (*query).commandType != pg_sys::CmdType::CMD_SELECT
            || !has_dp_calls(query)
        {
            return;
        }
        if !citus_installed() {
            return;
        }
        if unknown_params(query.cast(), params) {
            planning.generic = true;
            return;
        }
        visit(query, params, planning);
    }
}

/// Completes a plan made after `distribute`: prices a generic plan out of
/// the plan cache, makes it depend on the tables its partials read, and,
/// for an analyst, refuses any call of `dp_partials_sealed` in it that this
/// planning did not write (one the analyst wrote, or a SQL function of
/// theirs that the planner inlined, carrying a seal read from a printed plan).
///
/// # Safety
/// `planned` is the live PlannedStmt the planner made; inside a transaction.
pub unsafe fn finish(planned: *mut pg_sys::PlannedStmt, planning: &Planning) {
    // SAFETY: the caller's contract.
    unsafe {
        if planned.is_null() {
            return;
        }
        if planning.generic && !(*planned).planTree.is_null() {
            (*(*planned).planTree).total_cost = 1e100;
        }
        for relid in &planning.relations {
            (*planned).relationOids = pg_sys::lappend_oid((*planned).relationOids, *relid);
        }
        for recheck in &planning.checked {
            crate::versions::add_recheck(planned, recheck);
        }
        if crate::gate::gated() {
            sealing::check_sealed_calls(planned, &planning.seals);
        }
    }
}

/// Whether a Query or expression tree uses an external parameter whose
/// value is not fixed for this plan (a generic plan's).
///
/// # Safety
/// `node` is null or a live Query or expression tree; `params` live or null.
unsafe fn unknown_params(node: *mut pg_sys::Node, params: pg_sys::ParamListInfo) -> bool {
    /// # Safety
    /// Called by the tree walkers with live nodes and the ParamListInfo.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            match (*node).type_ {
                pg_sys::NodeTag::T_Query => {
                    pg_sys::query_tree_walker(node.cast(), Some(walk), context, 0)
                }
                pg_sys::NodeTag::T_Param => {
                    let p = node as *mut pg_sys::Param;
                    (*p).paramkind == pg_sys::ParamKind::PARAM_EXTERN
                        && crate::parameters::fixed_param(p, context as pg_sys::ParamListInfo)
                            .is_none()
                }
                _ => pg_sys::expression_tree_walker(node, Some(walk), context),
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, params.cast()) }
}

/// The dpnoise aggregates of one level (its outputs and HAVING).
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn level_calls(
    level: *mut pg_sys::Query,
) -> Vec<(*mut pg_sys::Aggref, Option<(String, usize)>)> {
    // SAFETY: the caller's contract.
    unsafe {
        let mut found = Vec::new();
        collect_aggregates((*level).targetList.cast(), &mut found);
        collect_aggregates((*level).havingQual, &mut found);
        found
            .into_iter()
            .map(|a| {
                (
                    a,
                    crate::parameters::releasing((*a).aggfnoid, &aggregate_types(a)),
                )
            })
            .collect()
    }
}

/// Whether any level (FROM subqueries and CTEs) calls a dpnoise aggregate
/// or per-row function.
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn has_dp_calls(level: *mut pg_sys::Query) -> bool {
    // SAFETY: the caller's contract; RTEs and CTEs are read by their kinds.
    unsafe {
        if (*level).hasAggs && level_calls(level).iter().any(|(_, r)| r.is_some()) {
            return true;
        }
        if !(*level).hasAggs && row_calls((*level).targetList.cast()) {
            return true;
        }
        sub_levels(level).into_iter().any(|q| has_dp_calls(q))
    }
}

/// dpnoise's releasing function that `node` calls, if it is one: its name
/// and first privacy argument.
///
/// # Safety
/// `node` is a live node; inside a transaction.
unsafe fn releasing_call(node: *mut pg_sys::Node) -> Option<(String, usize)> {
    // SAFETY: the caller's contract; a FuncExpr's args is a List of expressions.
    unsafe {
        if (*node).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let f = node as *mut pg_sys::FuncExpr;
        let types: Vec<pg_sys::Oid> = list_items::<pg_sys::Node>((*f).args)
            .into_iter()
            .map(|a| pg_sys::exprType(a))
            .collect();
        crate::parameters::releasing((*f).funcid, &types)
    }
}

/// Whether an expression tree calls one of dpnoise's per-row releasing functions.
///
/// # Safety
/// `node` is null or a live expression tree; inside a transaction.
unsafe fn row_calls(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            releasing_call(node).is_some()
                || pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, std::ptr::null_mut()) }
}

/// A level's FROM subqueries (not LATERAL ones, which read the level) and CTEs.
///
/// # Safety
/// `level` is a live Query.
unsafe fn sub_levels(level: *mut pg_sys::Query) -> Vec<*mut pg_sys::Query> {
    // SAFETY: the caller's contract; a CTE's query and a subquery RTE's are Queries once analysed.
    unsafe {
        let mut levels: Vec<*mut pg_sys::Query> =
            list_items::<pg_sys::RangeTblEntry>((*level).rtable)
                .into_iter()
                .filter(|rte| (**rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && !(**rte).lateral)
                .map(|rte| (*rte).subquery)
                .collect();
        levels.extend(
            list_items::<pg_sys::CommonTableExpr>((*level).cteList)
                .into_iter()
                .map(|cte| (*cte).ctequery as *mut pg_sys::Query)
                .filter(|q| !q.is_null() && (**q).type_ == pg_sys::NodeTag::T_Query),
        );
        levels
    }
}

/// # Safety
/// As `distribute`, for one level.
unsafe fn visit(level: *mut pg_sys::Query, params: pg_sys::ParamListInfo, planning: &mut Planning) {
    // SAFETY: the caller's contract.
    unsafe {
        for sub in sub_levels(level) {
            visit(sub, params, planning);
        }
        if !(*level).hasAggs {
            if row_calls((*level).targetList.cast()) && reads_citus(level) {
                split::split_rows(level, params, planning);
            }
            return;
        }
        let calls = level_calls(level);
        if calls.iter().all(|(_, r)| r.is_none()) || !reads_citus(level) {
            return;
        }
        split::split(level, &calls, params, planning);
    }
}

/// The relations the level's FROM reads, its subqueries' and CTEs' included.
///
/// # Safety
/// `level` is a live Query.
unsafe fn relations(level: *mut pg_sys::Query, into: &mut Vec<pg_sys::Oid>) {
    // SAFETY: the caller's contract.
    unsafe {
        for rte in list_items::<pg_sys::RangeTblEntry>((*level).rtable) {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                into.push((*rte).relid);
            }
        }
        for sub in sub_levels(level) {
            relations(sub, into);
        }
    }
}

/// Whether the level's FROM (its subqueries and CTEs included) reads a Citus table.
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn reads_citus(level: *mut pg_sys::Query) -> bool {
    let mut relids = Vec::new();
    // SAFETY: the caller's contract.
    unsafe { relations(level, &mut relids) };
    if relids.is_empty() {
        return false;
    }
    let list = relids
        .iter()
        .map(|r| r.to_u32().to_string())
        .collect::<Vec<_>>()
        .join(",");
    read_one::<bool>(&format!(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition \
         WHERE logicalrelid OPERATOR(pg_catalog.=) ANY ('{{{list}}}'::pg_catalog.oid[]))"
    ))
    .unwrap_or(false)
}
