//! The order in which a plan node's rows come, read from the plan, so that
//! a stored answer served in place of a sorted aggregation comes in the
//! order the nodes above it were planned for.
//!
//! A sorted aggregation hands its groups out in the order of its input,
//! and the planner leans on it: a LIMIT under ORDER BY, a merge join or an
//! upper grouping above it add no sort of their own. A stored answer
//! recorded under a hashed plan holds its rows in another order; served
//! as it is under the sorted plan, an `ORDER BY age DESC LIMIT 2` would
//! show two other groups. The order is read down the plan to what makes
//! it (a Sort, an incremental sort, a Gather Merge, a Merge Append, an
//! ordered index scan) through the nodes that keep their input's order,
//! and the served rows are sorted by it (`serve::stored_scan`). Sorting by
//! a longer or stricter order than the parents need is harmless; where
//! nothing is found, the group columns in their types' ascending order
//! are used (`fallback`), which is what a GROUP BY's sort is unless an
//! ORDER BY turned it.

use crate::pg_list::list_nodes;
use pgrx::pg_sys;

/// One sort key: a column of the node's output (from 1), its ordering
/// operator, collation and where its NULLs go.
#[derive(Clone, Copy)]
pub struct Key {
    pub column: i16,
    pub operator: pg_sys::Oid,
    pub collation: pg_sys::Oid,
    pub nulls_first: bool,
}

/// The keys of a node with a sorting node's arrays (numCols, sortColIdx,
/// sortOperators, collations, nullsFirst).
macro_rules! sort_keys {
    ($node:expr) => {{
        let s = $node;
        keys(
            (*s).numCols,
            (*s).sortColIdx,
            (*s).sortOperators,
            (*s).collations,
            (*s).nullsFirst,
        )
    }};
}

/// The order of `plan`'s output rows, as far as the plan tells it (empty:
/// none known).
///
/// # Safety
/// `plan` is null or a live Plan of a finished plan tree.
pub unsafe fn ordering(plan: *mut pg_sys::Plan) -> Vec<Key> {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if plan.is_null() {
            return Vec::new();
        }
        use pg_sys::NodeTag::*;
        match (*plan).type_ {
            T_Sort => sort_keys!(plan as *mut pg_sys::Sort),
            T_IncrementalSort => {
                sort_keys!(&raw mut (*(plan as *mut pg_sys::IncrementalSort)).sort)
            }
            T_GatherMerge => sort_keys!(plan as *mut pg_sys::GatherMerge),
            T_MergeAppend => sort_keys!(plan as *mut pg_sys::MergeAppend),
            T_IndexScan => {
                let s = plan as *mut pg_sys::IndexScan;
                index_ordering(
                    plan,
                    (*s).indexid,
                    (*s).indexorderdir,
                    (*s).scan.scanrelid as i32,
                    false,
                )
            }
            T_IndexOnlyScan => {
                let s = plan as *mut pg_sys::IndexOnlyScan;
                index_ordering(
                    plan,
                    (*s).indexid,
                    (*s).indexorderdir,
                    pg_sys::INDEX_VAR,
                    true,
                )
            }
            T_Agg
                if (*(plan as *mut pg_sys::Agg)).aggstrategy == pg_sys::AggStrategy::AGG_HASHED
                    || (*(plan as *mut pg_sys::Agg)).aggstrategy
                        == pg_sys::AggStrategy::AGG_MIXED =>
            {
                Vec::new()
            }
            T_Material | T_Memoize | T_Unique | T_Limit | T_Result | T_Agg | T_Group
            | T_WindowAgg | T_NestLoop | T_MergeJoin | T_LockRows | T_ProjectSet => {
                mapped(plan, ordering((*plan).lefttree), pg_sys::OUTER_VAR)
            }
            T_SubqueryScan => {
                let s = plan as *mut pg_sys::SubqueryScan;
                mapped(plan, ordering((*s).subplan), (*s).scan.scanrelid as i32)
            }
            _ => Vec::new(),
        }
    }
}

/// The keys of a sorting node's arrays.
///
/// # Safety
/// The arrays hold `n` entries each.
unsafe fn keys(
    n: i32,
    columns: *mut pg_sys::AttrNumber,
    operators: *mut pg_sys::Oid,
    collations: *mut pg_sys::Oid,
    nulls_first: *mut bool,
) -> Vec<Key> {
    // SAFETY: the caller's contract.
    unsafe {
        (0..n.max(0) as usize)
            .map(|i| Key {
                column: *columns.add(i),
                operator: *operators.add(i),
                collation: *collations.add(i),
                nulls_first: *nulls_first.add(i),
            })
            .collect()
    }
}

/// `input`'s order, as columns of `plan`, whose target list reads the
/// input's columns as Vars numbered `varno`: up to the first key that
/// `plan` does not pass on.
///
/// # Safety
/// `plan` is a live Plan.
unsafe fn mapped(plan: *mut pg_sys::Plan, input: Vec<Key>, varno: i32) -> Vec<Key> {
    // SAFETY: the caller's contract.
    unsafe {
        let mut out = Vec::new();
        for key in input {
            match column_of(plan, varno, key.column) {
                Some(column) => out.push(Key { column, ..key }),
                None => break,
            }
        }
        out
    }
}

/// The first column of `plan`'s output that is the Var (`varno`, `attno`).
///
/// # Safety
/// `plan` is a live Plan.
unsafe fn column_of(plan: *mut pg_sys::Plan, varno: i32, attno: i16) -> Option<i16> {
    // SAFETY: the caller's contract; the target list is a List of TargetEntry.
    unsafe {
        list_nodes((*plan).targetlist)
            .into_iter()
            .position(|entry| {
                let expr = (*(entry as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
                (*expr).type_ == pg_sys::NodeTag::T_Var && {
                    let var = expr as *mut pg_sys::Var;
                    (*var).varno == varno && (*var).varattno == attno
                }
            })
            .map(|p| (p + 1) as i16)
    }
}

/// The order of an index scan's rows: the index's key columns, each in
/// its own direction (turned by a backward scan), as far as the scan's
/// output holds them; none for an index without order.
///
/// # Safety
/// `plan` is a live index scan of index `index`, which the execution has
/// locked; `varno` how its target list reads a column (the heap's
/// attribute numbers, or the index's for an index-only scan: `by_position`).
unsafe fn index_ordering(
    plan: *mut pg_sys::Plan,
    index: pg_sys::Oid,
    direction: pg_sys::ScanDirection::Type,
    varno: i32,
    by_position: bool,
) -> Vec<Key> {
    // SAFETY: the caller's contract; the relation's arrays hold its key columns.
    unsafe {
        let rel = pg_sys::index_open(index, pg_sys::AccessShareLock as _);
        let mut out = Vec::new();
        if (*(*rel).rd_indam).amcanorder {
            let columns = (*(*rel).rd_index).indnkeyatts as usize;
            let heap = (*(*rel).rd_index).indkey.values.as_slice(columns);
            let backward = direction == pg_sys::ScanDirection::BackwardScanDirection;
            for (k, heap_attno) in heap.iter().enumerate() {
                let option = i32::from(*(*rel).rd_indoption.add(k));
                let descending = (option & pg_sys::INDOPTION_DESC as i32 != 0) != backward;
                let nulls_first = (option & pg_sys::INDOPTION_NULLS_FIRST as i32 != 0) != backward;
                let family = *(*rel).rd_opfamily.add(k);
                let input = *(*rel).rd_opcintype.add(k);
                let strategy = if descending {
                    pg_sys::BTGreaterStrategyNumber
                } else {
                    pg_sys::BTLessStrategyNumber
                };
                let operator = pg_sys::get_opfamily_member(family, input, input, strategy as i16);
                let attno = if by_position {
                    (k + 1) as i16
                } else {
                    *heap_attno
                };
                let column = (attno != 0)
                    .then(|| column_of(plan, varno, attno))
                    .flatten();
                let (Some(column), true) = (column, operator != pg_sys::InvalidOid) else {
                    break;
                };
                out.push(Key {
                    column,
                    operator,
                    collation: *(*rel).rd_indcollation.add(k),
                    nulls_first,
                });
            }
        }
        pg_sys::index_close(rel, pg_sys::AccessShareLock as _);
        out
    }
}

/// The order of a sorted Agg's output when the plan does not tell it: its
/// group columns, each in its type's ascending order, NULLs last.
///
/// # Safety
/// `agg` is a live Agg plan node.
pub unsafe fn fallback(agg: *mut pg_sys::Agg) -> Vec<Key> {
    // SAFETY: the caller's contract; grpColIdx holds numCols entries.
    unsafe {
        let plan = agg as *mut pg_sys::Plan;
        let entries = list_nodes((*plan).targetlist);
        let mut out = Vec::new();
        for i in 0..(*agg).numCols.max(0) as usize {
            let Some(column) = column_of(plan, pg_sys::OUTER_VAR, *(*agg).grpColIdx.add(i)) else {
                break;
            };
            let expr = (*(entries[column as usize - 1] as *mut pg_sys::TargetEntry)).expr;
            let type_ = pg_sys::exprType(expr.cast());
            let cache = pg_sys::lookup_type_cache(type_, pg_sys::TYPECACHE_LT_OPR as i32);
            if (*cache).lt_opr == pg_sys::InvalidOid {
                break;
            }
            out.push(Key {
                column,
                operator: (*cache).lt_opr,
                collation: pg_sys::exprCollation(expr.cast()),
                nulls_first: false,
            });
        }
        out
    }
}
