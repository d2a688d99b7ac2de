//! Raw rows passed through a CTE or a subquery, as BI tools and analysts
//! write them, become part of the level that aggregates them, before
//! anything is checked:
//!
//! ```sql
//! SELECT count(*) FROM (SELECT * FROM visits WHERE site = 'a') AS virtual_table;
//! WITH recent AS (SELECT * FROM visits WHERE day > DATE '2024-01-01')
//!   SELECT dp_count(1.0) FROM recent;
//! ```
//!
//! are checked, rewritten, bounded, charged and identified as
//! `SELECT … FROM visits WHERE site = 'a'` (Superset wraps a virtual
//! dataset's SQL as `virtual_table`, Metabase a saved question's as
//! `source`). PostgreSQL's planner makes the same change itself
//! (`pull_up_subqueries`, and inlining a CTE read once); here it happens
//! first, so the gate sees one level whose every row is an input of its
//! aggregates, and nothing in the wrapper can pass a protected row up.
//!
//! A CTE is inlined where PostgreSQL may inline it: not `MATERIALIZED`,
//! not recursive, a plain SELECT without volatile functions, reading a
//! protected table directly and aggregating nothing (a CTE of dpnoise
//! aggregates, post-processed above, stays as it is). A subquery is pulled
//! up into the level that reads it if it is such a SELECT: no aggregate,
//! GROUP BY, HAVING, DISTINCT, window, set-returning function, LIMIT,
//! OFFSET, row lock, set operation, sublink or volatile output, not
//! LATERAL, not a view, and reached from its level's FROM through inner
//! joins only (an outer join's nullable side would need PostgreSQL's
//! placeholders). Its ORDER BY, which orders nothing an aggregate sees, is
//! dropped. Anything else stays as written and is checked as it is: a
//! wrapper that still passes raw rows up is refused.
//!
//! Only analysts' statements are changed (the gate's caller).

use super::catalog::Protected;
use super::list_items;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Inlines and pulls up, bottom-up, every level of `query`.
///
/// # Safety
/// `query` is the live Query the planner hook was given, before any other
/// stage; inside a transaction.
pub(super) unsafe fn inline(query: *mut pg_sys::Query, protected: &Protected) {
    // SAFETY: the caller's contract.
    unsafe { flatten(query, protected) };
}

/// Flattens `level`: its sublevels first, then its CTEs, then its FROM.
///
/// # Safety
/// `level` is a live Query not yet planned.
unsafe fn flatten(level: *mut pg_sys::Query, protected: &Protected) {
    // SAFETY: the caller's contract; each child is a live Query of `level`.
    unsafe {
        for child in children(level) {
            flatten(child, protected);
        }
        inline_ctes(level, protected);
        pull_up(level, protected);
    }
}

/// The Queries one level below `level`: its CTE bodies, FROM subqueries
/// and sublinks.
///
/// # Safety
/// `level` is a live Query.
unsafe fn children(level: *mut pg_sys::Query) -> Vec<*mut pg_sys::Query> {
    /// # Safety
    /// Called by PostgreSQL's tree walkers, with a `Vec` of Queries as context.
    #[pg_guard]
    unsafe extern "C-unwind" fn sublinks(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: live nodes of the walked tree; the context is the Vec below.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                (*(context as *mut Vec<*mut pg_sys::Query>)).push(node.cast());
                return false;
            }
            pg_sys::expression_tree_walker(node, Some(sublinks), context)
        }
    }
    // SAFETY: the caller's contract; RTE and CTE casts follow their kinds and tags.
    unsafe {
        let mut found: Vec<*mut pg_sys::Query> = Vec::new();
        pg_sys::query_tree_walker(
            level,
            Some(sublinks),
            (&raw mut found).cast(),
            pg_sys::QTW_IGNORE_RC_SUBQUERIES as i32,
        );
        for rte in list_items::<pg_sys::RangeTblEntry>((*level).rtable) {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && !(*rte).subquery.is_null() {
                found.push((*rte).subquery);
            }
        }
        for cte in list_items::<pg_sys::CommonTableExpr>((*level).cteList) {
            let body = (*cte).ctequery;
            if !body.is_null() && (*body).type_ == pg_sys::NodeTag::T_Query {
                found.push(body.cast());
            }
        }
        found
    }
}

/// Whether `level` is a plain SELECT of rows that reads a protected table
/// directly and aggregates nothing: raw rows passed up.
///
/// # Safety
/// `level` is a live Query.
unsafe fn raw_rows(level: *mut pg_sys::Query, protected: &Protected) -> bool {
    // SAFETY: the caller's contract; RTE casts follow their kinds.
    unsafe {
        let q = &*level;
        q.commandType == pg_sys::CmdType::CMD_SELECT
            && q.utilityStmt.is_null()
            && q.setOperations.is_null()
            && !q.hasAggs
            && q.groupClause.is_null()
            && q.groupingSets.is_null()
            && q.havingQual.is_null()
            && !q.hasWindowFuncs
            && !q.hasTargetSRFs
            && q.distinctClause.is_null()
            && q.limitCount.is_null()
            && q.limitOffset.is_null()
            && q.rowMarks.is_null()
            && !q.hasForUpdate
            && q.cteList.is_null()
            && !q.hasModifyingCTE
            && !q.hasRecursive
            && list_items::<pg_sys::RangeTblEntry>(q.rtable)
                .iter()
                .any(|rte| {
                    (**rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                        && protected.tables.contains_key(&(**rte).relid)
                })
    }
}

/// Inlines `level`'s CTEs of raw rows into every reference to them, in the
/// order written (a later CTE may read an earlier one), and drops them
/// from its WITH.
///
/// # Safety
/// `level` is a live Query not yet planned, its sublevels flattened.
unsafe fn inline_ctes(level: *mut pg_sys::Query, protected: &Protected) {
    // SAFETY: the caller's contract; CTE casts follow their tags.
    unsafe {
        let mut kept = std::ptr::null_mut();
        let mut inlined = false;
        for cte in list_items::<pg_sys::CommonTableExpr>((*level).cteList) {
            let body = (*cte).ctequery as *mut pg_sys::Query;
            let inlinable = !(*cte).cterecursive
                && (*cte).ctematerialized != pg_sys::CTEMaterialize::CTEMaterializeAlways
                && !body.is_null()
                && (*body).type_ == pg_sys::NodeTag::T_Query
                && raw_rows(body, protected)
                && !pg_sys::contain_volatile_functions(body.cast());
            if inlinable {
                replace_references(level, cte, 0, protected);
                inlined = true;
            } else {
                kept = pg_sys::lappend(kept, cte.cast());
            }
        }
        if inlined {
            (*level).cteList = kept;
        }
    }
}

/// Makes every reference to `cte` (written at `depth` levels above
/// `level`) a subquery of its body, and pulls it up where it can be.
///
/// # Safety
/// `level` is a live Query not yet planned, `depth` levels below the one
/// whose WITH lists `cte`.
unsafe fn replace_references(
    level: *mut pg_sys::Query,
    cte: *mut pg_sys::CommonTableExpr,
    depth: u32,
    protected: &Protected,
) {
    // SAFETY: the caller's contract; RTE casts follow their kinds, names are C strings.
    unsafe {
        let mut replaced = false;
        for rte in list_items::<pg_sys::RangeTblEntry>((*level).rtable) {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_CTE
                && (*rte).ctelevelsup == depth
                && std::ffi::CStr::from_ptr((*rte).ctename)
                    == std::ffi::CStr::from_ptr((*cte).ctename)
            {
                let body = pg_sys::copyObjectImpl((*cte).ctequery.cast()) as *mut pg_sys::Query;
                // Its outer references (other CTEs of the same WITH) now
                // reach `depth` levels further up.
                if depth > 0 {
                    IncrementVarSublevelsUp(body.cast(), depth as i32, 1);
                }
                (*rte).rtekind = pg_sys::RTEKind::RTE_SUBQUERY;
                (*rte).subquery = body;
                (*rte).security_barrier = false;
                (*rte).ctename = std::ptr::null_mut();
                (*rte).ctelevelsup = 0;
                (*rte).self_reference = false;
                (*rte).coltypes = std::ptr::null_mut();
                (*rte).coltypmods = std::ptr::null_mut();
                (*rte).colcollations = std::ptr::null_mut();
                replaced = true;
            }
        }
        for child in children(level) {
            replace_references(child, cte, depth + 1, protected);
        }
        // The level whose WITH this is pulls up after all its CTEs are
        // inlined (`flatten`): a pull copies the level, its WITH too.
        if replaced && depth > 0 {
            pull_up(level, protected);
        }
    }
}

/// Pulls every subquery of raw rows in `level`'s FROM up into it, one at a
/// time (each pull copies the level).
///
/// # Safety
/// `level` is a live Query not yet planned, its sublevels flattened.
unsafe fn pull_up(level: *mut pg_sys::Query, protected: &Protected) {
    // SAFETY: the caller's contract.
    unsafe {
        if (*level).commandType != pg_sys::CmdType::CMD_SELECT || !(*level).setOperations.is_null()
        {
            return;
        }
        while let Some((rtindex, place)) = pullable(level, protected) {
            pull(level, rtindex, place);
        }
    }
}

/// Where a subquery's RangeTblRef sits in its level's jointree.
#[derive(Clone, Copy)]
enum Place {
    /// An item of the level's FROM list.
    From,
    /// A side of an inner join (its body has one FROM item).
    Joined,
}

/// The first subquery of raw rows that `level` can take in, and where.
///
/// # Safety
/// `level` is a live Query.
unsafe fn pullable(level: *mut pg_sys::Query, protected: &Protected) -> Option<(i32, Place)> {
    // SAFETY: the caller's contract; node and RTE casts follow their tags and kinds.
    unsafe {
        let jointree = (*level).jointree;
        if jointree.is_null() {
            return None;
        }
        let mut inner = Vec::new();
        for item in super::list_nodes((*jointree).fromlist) {
            inner_references(item, Place::From, &mut inner);
        }
        let rtable = list_items::<pg_sys::RangeTblEntry>((*level).rtable);
        inner.into_iter().find(|&(rtindex, place)| {
            let rte = rtable[rtindex as usize - 1];
            let sub = (*rte).subquery;
            (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY
                && !sub.is_null()
                && !(*rte).lateral
                && !(*rte).security_barrier
                && (*rte).relid == pg_sys::InvalidOid
                && raw_rows(sub, protected)
                && !(*sub).hasSubLinks
                && !(*sub).jointree.is_null()
                && match place {
                    Place::From => !(*(*sub).jointree).fromlist.is_null(),
                    Place::Joined => {
                        list_items::<pg_sys::Node>((*(*sub).jointree).fromlist).len() == 1
                    }
                }
                && !list_items::<pg_sys::RangeTblEntry>((*sub).rtable)
                    .iter()
                    .any(|r| {
                        (**r).rtekind == pg_sys::RTEKind::RTE_RELATION
                            && (**r).relkind as u8 == pg_sys::RELKIND_VIEW
                    })
                && !pg_sys::contain_volatile_functions((*sub).targetList.cast())
        })
    }
}

/// The RangeTblRefs reached from `node` through inner joins only.
///
/// # Safety
/// `node` is a live jointree item.
unsafe fn inner_references(node: *mut pg_sys::Node, place: Place, into: &mut Vec<(i32, Place)>) {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_RangeTblRef => {
                into.push(((*(node as *mut pg_sys::RangeTblRef)).rtindex, place));
            }
            pg_sys::NodeTag::T_JoinExpr => {
                let join = node as *mut pg_sys::JoinExpr;
                if (*join).jointype == pg_sys::JoinType::JOIN_INNER {
                    inner_references((*join).larg, Place::Joined, into);
                    inner_references((*join).rarg, Place::Joined, into);
                }
            }
            _ => {}
        }
    }
}

/// Takes the subquery at `rtindex` into `level`: its range table appended,
/// its outputs in place of the level's Vars of it, its FROM items in place
/// of its reference and its WHERE joined to the level's (or to the join's
/// ON). Its own entry stays, as an empty RESULT nothing references.
///
/// # Safety
/// `level` is a live Query not yet planned; `rtindex` a subquery `pullable`
/// found at `place`.
unsafe fn pull(level: *mut pg_sys::Query, rtindex: i32, place: Place) {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        let rte = list_items::<pg_sys::RangeTblEntry>((*level).rtable)[rtindex as usize - 1];
        let sub = (*rte).subquery;
        let offset = list_items::<pg_sys::RangeTblEntry>((*level).rtable).len() as i32;
        OffsetVarNodes(sub.cast(), offset, 0);
        // Its references to levels above are now one level closer.
        IncrementVarSublevelsUp(sub.cast(), -1, 1);
        *level = *crate::versions::replace_vars(level, rtindex as u32, (*sub).targetList);
        let rte = list_items::<pg_sys::RangeTblEntry>((*level).rtable)[rtindex as usize - 1];
        (*rte).rtekind = pg_sys::RTEKind::RTE_RESULT;
        (*rte).subquery = std::ptr::null_mut();
        crate::versions::append_range_table(level, sub);
        let body = (*sub).jointree;
        let items = super::list_nodes((*body).fromlist);
        let jointree = (*level).jointree;
        match place {
            Place::From => {
                let mut from = std::ptr::null_mut();
                for item in super::list_nodes((*jointree).fromlist) {
                    if is_reference(item, rtindex) {
                        for taken in &items {
                            from = pg_sys::lappend(from, (*taken).cast());
                        }
                    } else {
                        from = pg_sys::lappend(from, item.cast());
                    }
                }
                (*jointree).fromlist = from;
                (*jointree).quals = pg_sys::make_and_qual((*jointree).quals, (*body).quals);
            }
            Place::Joined => {
                for item in super::list_nodes((*jointree).fromlist) {
                    replace_in_join(item, rtindex, items[0], (*body).quals);
                }
            }
        }
    }
}

/// Whether `node` is the RangeTblRef of `rtindex`.
///
/// # Safety
/// `node` is a live node.
unsafe fn is_reference(node: *mut pg_sys::Node, rtindex: i32) -> bool {
    // SAFETY: the caller's contract; the cast follows the tag.
    unsafe {
        (*node).type_ == pg_sys::NodeTag::T_RangeTblRef
            && (*(node as *mut pg_sys::RangeTblRef)).rtindex == rtindex
    }
}

/// Replaces, among the inner joins below `node`, the side that is the
/// reference to `rtindex` by `item`, and joins `quals` to that join's ON.
///
/// # Safety
/// `node` is a live jointree item; `item` and `quals` live nodes (or null quals).
unsafe fn replace_in_join(
    node: *mut pg_sys::Node,
    rtindex: i32,
    item: *mut pg_sys::Node,
    quals: *mut pg_sys::Node,
) {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        if (*node).type_ != pg_sys::NodeTag::T_JoinExpr {
            return;
        }
        let join = node as *mut pg_sys::JoinExpr;
        if (*join).jointype != pg_sys::JoinType::JOIN_INNER {
            return;
        }
        for side in [&raw mut (*join).larg, &raw mut (*join).rarg] {
            if is_reference(*side, rtindex) {
                *side = item;
                (*join).quals = pg_sys::make_and_qual((*join).quals, quals);
            } else {
                replace_in_join(*side, rtindex, item, quals);
            }
        }
    }
}

// SAFETY: the prototypes of rewrite/rewriteManip.h (the same on 15 to 18), which pgrx does not
// bind.
unsafe extern "C-unwind" {
    fn OffsetVarNodes(node: *mut pg_sys::Node, offset: i32, sublevels_up: i32);
    pub(super) fn IncrementVarSublevelsUp(
        node: *mut pg_sys::Node,
        delta_sublevels_up: i32,
        min_sublevels_up: i32,
    );
}
