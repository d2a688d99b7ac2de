//! An analyst's statement is planned without column statistics.
//!
//! The plan check refuses some plans and admits others for the same SQL,
//! and a rescan is charged as it happens: which plan the planner picks must
//! not depend on a protected row. Column statistics do: a histogram's last
//! bound is one person's value, a most-common value one person's too, and a
//! selectivity estimated from them flips a join's plan (attack 16: whether a
//! statement was refused told whether anyone earned more than C). So in an
//! analyst's session the planner sees no `pg_statistic` row, no extended
//! statistics and no average width for any table: it estimates with
//! PostgreSQL's defaults, from the table's size alone (`reltuples`, pages),
//! which docs/analysts.md says what it reveals. Other sessions plan as
//! usual.

use pgrx::pg_sys;

static mut PREV_RELATION_STATS: pg_sys::get_relation_stats_hook_type = None;
static mut PREV_INDEX_STATS: pg_sys::get_index_stats_hook_type = None;
static mut PREV_RELATION_INFO: pg_sys::get_relation_info_hook_type = None;
static mut PREV_ATTAVGWIDTH: pg_sys::get_attavgwidth_hook_type = None;

/// Installs the hooks; once, from _PG_init.
pub fn init() {
    // SAFETY: from _PG_init, on the process's only thread, once: each hook global is read by value
    // into our PREV_ static (written only here) and set to our function, of the hook's type.
    unsafe {
        PREV_RELATION_STATS = pg_sys::get_relation_stats_hook;
        pg_sys::get_relation_stats_hook = Some(relation_stats);
        PREV_INDEX_STATS = pg_sys::get_index_stats_hook;
        pg_sys::get_index_stats_hook = Some(index_stats);
        PREV_RELATION_INFO = pg_sys::get_relation_info_hook;
        pg_sys::get_relation_info_hook = Some(relation_info);
        PREV_ATTAVGWIDTH = pg_sys::get_attavgwidth_hook;
        pg_sys::get_attavgwidth_hook = Some(attavgwidth);
    }
}

/// A column's statistics: none for an analyst (true: handled, with no
/// tuple), else the previous hook's or PostgreSQL's own.
///
/// # Safety
/// Only for PostgreSQL's planner, as get_relation_stats_hook.
unsafe extern "C-unwind" fn relation_stats(
    root: *mut pg_sys::PlannerInfo,
    rte: *mut pg_sys::RangeTblEntry,
    attnum: pg_sys::AttrNumber,
    vardata: *mut pg_sys::VariableStatData,
) -> bool {
    // SAFETY: the caller's contract: `vardata` is the planner's live VariableStatData; the
    // previous hook, read by value, has this hook's signature.
    unsafe {
        if super::gated() {
            (*vardata).statsTuple = std::ptr::null_mut();
            (*vardata).freefunc = None;
            return true;
        }
        PREV_RELATION_STATS.is_some_and(|prev| prev(root, rte, attnum, vardata))
    }
}

/// An expression index column's statistics: as `relation_stats`.
///
/// # Safety
/// Only for PostgreSQL's planner, as get_index_stats_hook.
unsafe extern "C-unwind" fn index_stats(
    root: *mut pg_sys::PlannerInfo,
    index: pg_sys::Oid,
    attnum: pg_sys::AttrNumber,
    vardata: *mut pg_sys::VariableStatData,
) -> bool {
    // SAFETY: as relation_stats.
    unsafe {
        if super::gated() {
            (*vardata).statsTuple = std::ptr::null_mut();
            (*vardata).freefunc = None;
            return true;
        }
        PREV_INDEX_STATS.is_some_and(|prev| prev(root, index, attnum, vardata))
    }
}

/// A relation's planning information: without extended statistics for an
/// analyst.
///
/// # Safety
/// Only for PostgreSQL's planner, as get_relation_info_hook.
unsafe extern "C-unwind" fn relation_info(
    root: *mut pg_sys::PlannerInfo,
    relation: pg_sys::Oid,
    inherited: bool,
    rel: *mut pg_sys::RelOptInfo,
) {
    // SAFETY: the caller's contract: `rel` is the planner's live RelOptInfo; the previous hook,
    // read by value, has this hook's signature.
    unsafe {
        if let Some(prev) = PREV_RELATION_INFO {
            prev(root, relation, inherited, rel);
        }
        if super::gated() {
            (*rel).statlist = std::ptr::null_mut();
        }
    }
}

/// A column's average width: the type's default for an analyst (0 asks
/// PostgreSQL for it).
///
/// # Safety
/// Only for PostgreSQL, as get_attavgwidth_hook.
unsafe extern "C-unwind" fn attavgwidth(relation: pg_sys::Oid, attnum: pg_sys::AttrNumber) -> i32 {
    if super::gated() {
        // SAFETY: syscache lookups by OID inside the planner's transaction.
        let width = unsafe {
            let type_ = pg_sys::get_atttype(relation, attnum);
            if type_ == pg_sys::InvalidOid {
                32
            } else {
                pg_sys::get_typavgwidth(type_, -1)
            }
        };
        return width.max(1);
    }
    // SAFETY: the previous hook, read by value, has this hook's signature.
    unsafe { PREV_ATTAVGWIDTH.map_or(0, |prev| prev(relation, attnum)) }
}
