//! A public list in WHERE, as analysts write it, becomes the join that
//! the gate admits, before anything is checked:
//!
//! ```sql
//! SELECT dp_count(1.0) FROM visits WHERE site IN (SELECT site FROM sites WHERE region = 'north');
//! ```
//!
//! is checked, bounded, charged and answered as
//!
//! ```sql
//! SELECT dp_count(1.0) FROM visits,
//!     (SELECT DISTINCT site FROM sites WHERE region = 'north') AS l WHERE site = l.site;
//! ```
//!
//! the same rows (DISTINCT: each protected row matches a listed value
//! once, as IN does), with the public side a FROM item like any other
//! public subquery. PostgreSQL's planner turns such sublinks into
//! semi-joins itself; here it happens first, so that the checks see one
//! level of protected rows joined to public ones.
//!
//! Taken in: a condition of the level's WHERE, ANDed with the others,
//! that is `x IN (SELECT y ...)` (one column, an equality that agrees with
//! the list's DISTINCT) over a SELECT that reads no protected table,
//! refers to nothing outside itself, and has no LIMIT, OFFSET or set
//! operation (DISTINCT would change what they pick); and a correlated
//! `EXISTS (SELECT ... FROM public WHERE p.y = x AND ...)` on one equality
//! as the IN list it asks (`exists_as_list`). NOT IN (its NULLs), NOT
//! EXISTS, `> ANY`, an uncorrelated EXISTS (its one-time test would run
//! only when a protected row arrives), a sublink elsewhere, a correlated or
//! protected one stay as written, and are refused.

use super::catalog::Protected;
use super::joins::{reads_protected, refers_outside};
use super::list_items;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Takes the public lists of every level of `query` into its FROM.
///
/// # Safety
/// `query` is the live Query the planner hook was given; inside a
/// transaction.
pub(super) unsafe fn semijoins(query: *mut pg_sys::Query, protected: &Protected) {
    /// # Safety
    /// Called by the tree walkers with live nodes and the `Protected`.
    #[pg_guard]
    unsafe extern "C-unwind" fn levels(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                let level = node as *mut pg_sys::Query;
                let stop = pg_sys::query_tree_walker(level, Some(levels), context, 0);
                take_lists(level, &*(context as *const Protected));
                return stop;
            }
            pg_sys::expression_tree_walker(node, Some(levels), context)
        }
    }
    // SAFETY: the caller's contract; the walker gets `protected` back as its context.
    unsafe {
        levels(
            query.cast(),
            (protected as *const Protected).cast_mut().cast(),
        )
    };
}

/// Rewrites the public sublinks ANDed in `level`'s WHERE, if it reads a
/// protected table directly.
///
/// # Safety
/// `level` is a live Query not yet planned.
unsafe fn take_lists(level: *mut pg_sys::Query, protected: &Protected) {
    // SAFETY: the caller's contract; node and RTE casts follow their tags and kinds.
    unsafe {
        let q = &mut *level;
        if q.commandType != pg_sys::CmdType::CMD_SELECT
            || !q.hasSubLinks
            || q.jointree.is_null()
            || (*q.jointree).quals.is_null()
            || !list_items::<pg_sys::RangeTblEntry>(q.rtable)
                .iter()
                .any(|rte| {
                    (**rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                        && protected.tables.contains_key(&(**rte).relid)
                })
        {
            return;
        }
        let conditions =
            list_items::<pg_sys::Node>(pg_sys::make_ands_implicit((*q.jointree).quals.cast()));
        let mut kept = std::ptr::null_mut();
        let mut taken = false;
        for condition in conditions {
            match public_list(condition, protected) {
                Some(rewrite) => {
                    let rtindex = list_items::<pg_sys::RangeTblEntry>(q.rtable).len() as i32 + 1;
                    let (rte, join) = rewrite.into_from(rtindex);
                    q.rtable = pg_sys::lappend(q.rtable, rte.cast());
                    let reference = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblRef>())
                        as *mut pg_sys::RangeTblRef;
                    (*reference).type_ = pg_sys::NodeTag::T_RangeTblRef;
                    (*reference).rtindex = rtindex;
                    (*q.jointree).fromlist =
                        pg_sys::lappend((*q.jointree).fromlist, reference.cast());
                    kept = pg_sys::lappend(kept, join.cast());
                    taken = true;
                }
                None => kept = pg_sys::lappend(kept, condition.cast()),
            }
        }
        if !taken {
            return;
        }
        (*q.jointree).quals = if kept.is_null() {
            std::ptr::null_mut()
        } else {
            pg_sys::make_ands_explicit(kept).cast()
        };
        q.hasSubLinks = checkExprHasSubLink(level.cast());
    }
}

/// A public list found in a condition: `x = ANY (SELECT y ...)`, its
/// comparison and its SELECT made DISTINCT.
struct List {
    test: *mut pg_sys::Node,
    select: *mut pg_sys::Query,
}

impl List {
    /// The FROM item that holds the list at `rtindex`, and the join
    /// condition that takes its place in WHERE.
    ///
    /// # Safety
    /// Inside a transaction; the nodes are live.
    unsafe fn into_from(self, rtindex: i32) -> (*mut pg_sys::RangeTblEntry, *mut pg_sys::Node) {
        // SAFETY: the caller's contract; the nodes are zeroed and then filled as the parser fills them.
        unsafe {
            let entry = list_items::<pg_sys::TargetEntry>((*self.select).targetList)[0];
            let column = (*entry).expr.cast::<pg_sys::Node>();
            let var = pg_sys::makeVar(
                rtindex,
                1,
                pg_sys::exprType(column),
                pg_sys::exprTypmod(column),
                pg_sys::exprCollation(column),
                0,
            );
            let join = replace_param(self.test, var.cast());
            let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>())
                as *mut pg_sys::RangeTblEntry;
            (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
            (*rte).rtekind = pg_sys::RTEKind::RTE_SUBQUERY;
            (*rte).subquery = self.select;
            (*rte).inFromCl = true;
            let name = if (*entry).resname.is_null() {
                c"?column?".as_ptr()
            } else {
                (*entry).resname.cast_const()
            };
            let names = pg_sys::lappend(
                std::ptr::null_mut(),
                pg_sys::makeString(pg_sys::pstrdup(name)).cast(),
            );
            (*rte).eref = pg_sys::makeAlias(c"public_list".as_ptr(), names);
            (rte, join)
        }
    }
}

/// The public list in `condition`, if it is one the gate takes in.
///
/// # Safety
/// `condition` is a live expression of a level not yet planned.
unsafe fn public_list(condition: *mut pg_sys::Node, protected: &Protected) -> Option<List> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        if (*condition).type_ != pg_sys::NodeTag::T_SubLink {
            return None;
        }
        let sublink = condition as *mut pg_sys::SubLink;
        if (*sublink).subLinkType == pg_sys::SubLinkType::EXISTS_SUBLINK {
            return exists_as_list(sublink, protected);
        }
        let select = (*sublink).subselect as *mut pg_sys::Query;
        let q = &*select;
        let public = q.commandType == pg_sys::CmdType::CMD_SELECT
            && q.utilityStmt.is_null()
            && q.setOperations.is_null()
            && q.limitCount.is_null()
            && q.limitOffset.is_null()
            && !q.hasDistinctOn
            && q.rowMarks.is_null()
            && !q.hasModifyingCTE
            && !reads_protected(select.cast(), protected)
            && !refers_outside(select);
        if !public {
            return None;
        }
        match (*sublink).subLinkType {
            pg_sys::SubLinkType::ANY_SUBLINK => {
                let test = (*sublink).testexpr;
                let visible: Vec<*mut pg_sys::TargetEntry> =
                    list_items::<pg_sys::TargetEntry>(q.targetList)
                        .into_iter()
                        .filter(|e| !(**e).resjunk)
                        .collect();
                if test.is_null()
                    || (*test).type_ != pg_sys::NodeTag::T_OpExpr
                    || visible.len() != 1
                    || list_items::<pg_sys::TargetEntry>(q.targetList).len() != 1
                {
                    return None;
                }
                // An equality under the list's own collation, that the
                // list's DISTINCT agrees with: each protected row then
                // matches one listed value at most, as in IN. Not volatile
                // (a join evaluates it once a pair).
                let op = test as *mut pg_sys::OpExpr;
                let left = list_items::<pg_sys::Node>((*op).args)[0];
                let column = (*visible[0]).expr.cast::<pg_sys::Node>();
                let eqop = match list_items::<pg_sys::SortGroupClause>(q.distinctClause).first() {
                    Some(clause) => (**clause).eqop,
                    None => default_equality(pg_sys::exprType(column))?,
                };
                if !pg_sys::op_mergejoinable((*op).opno, pg_sys::exprType(left))
                    || !pg_sys::equality_ops_are_compatible((*op).opno, eqop)
                    || (*op).inputcollid != pg_sys::exprCollation(column)
                    || pg_sys::contain_volatile_functions(test)
                {
                    return None;
                }
                if q.distinctClause.is_null() && !distinct(select) {
                    return None;
                }
                Some(List { test, select })
            }
            _ => None,
        }
    }
}

/// A correlated EXISTS on the public side as the IN list it asks:
/// `EXISTS (SELECT ... FROM public WHERE p.y = x AND <conditions on
/// public>)`, with x a column or expression of this level alone and p.y
/// of the subquery alone, is `x IN (SELECT p.y FROM public WHERE
/// <conditions>)`, then taken in as any list (`public_list`). Not with
/// several correlated conditions, a correlation other than that one
/// equality, aggregates, grouping, windows, LIMIT or OFFSET (they would
/// change what is listed), or a subquery that reads a protected table.
///
/// # Safety
/// `sublink` is a live EXISTS sublink of a level not yet planned.
unsafe fn exists_as_list(sublink: *mut pg_sys::SubLink, protected: &Protected) -> Option<List> {
    // SAFETY: the caller's contract; casts follow the node tags; the copy is the gate's own.
    unsafe {
        let original = (*sublink).subselect as *mut pg_sys::Query;
        let q = &*original;
        let shape = q.commandType == pg_sys::CmdType::CMD_SELECT
            && q.utilityStmt.is_null()
            && q.setOperations.is_null()
            && q.limitCount.is_null()
            && q.limitOffset.is_null()
            && q.distinctClause.is_null()
            && q.groupClause.is_null()
            && q.groupingSets.is_null()
            && q.havingQual.is_null()
            && !q.hasAggs
            && !q.hasWindowFuncs
            && !q.hasTargetSRFs
            && q.rowMarks.is_null()
            && !q.hasModifyingCTE
            && !q.jointree.is_null()
            && !(*q.jointree).quals.is_null()
            && !reads_protected(original.cast(), protected);
        if !shape {
            return None;
        }
        let select = pg_sys::copyObjectImpl(original.cast()) as *mut pg_sys::Query;
        let conditions = list_items::<pg_sys::Node>(pg_sys::make_ands_implicit(
            (*(*select).jointree).quals.cast(),
        ));
        let outside = |n: *mut pg_sys::Node| pg_sys::contain_vars_of_level(n, 1);
        let correlated: Vec<usize> = (0..conditions.len())
            .filter(|&i| outside(conditions[i]))
            .collect();
        let [at] = correlated[..] else { return None };
        let equality = conditions[at];
        if (*equality).type_ != pg_sys::NodeTag::T_OpExpr {
            return None;
        }
        let op = equality as *mut pg_sys::OpExpr;
        let [a, b] = list_items::<pg_sys::Node>((*op).args)[..] else {
            return None;
        };
        // Which side is this level's column (x) and which the list's
        // (p.y, of the subquery alone: `refers_outside` checks it below).
        let outer_column = |n: *mut pg_sys::Node| {
            let mut n = n;
            while (*n).type_ == pg_sys::NodeTag::T_RelabelType {
                n = (*(n as *mut pg_sys::RelabelType)).arg.cast();
            }
            (*n).type_ == pg_sys::NodeTag::T_Var && (*(n as *mut pg_sys::Var)).varlevelsup == 1
        };
        let (outer, inner, commuted) = if outer_column(a) && !outside(b) {
            (a, b, false)
        } else if outer_column(b) && !outside(a) {
            (b, a, true)
        } else {
            return None;
        };
        let opno = if commuted {
            pg_sys::get_commutator((*op).opno)
        } else {
            (*op).opno
        };
        if opno == pg_sys::InvalidOid {
            return None;
        }
        // The list: p.y, where the other conditions hold.
        let rest: Vec<*mut pg_sys::Node> = conditions
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != at)
            .map(|(_, c)| *c)
            .collect();
        let mut quals = std::ptr::null_mut();
        for c in rest {
            quals = pg_sys::lappend(quals, c.cast());
        }
        (*(*select).jointree).quals = if quals.is_null() {
            std::ptr::null_mut()
        } else {
            pg_sys::make_ands_explicit(quals).cast()
        };
        let entry =
            pg_sys::makeTargetEntry(inner.cast(), 1, pg_sys::pstrdup(c"listed".as_ptr()), false);
        (*select).targetList = pg_sys::lappend(std::ptr::null_mut(), entry.cast());
        (*select).sortClause = std::ptr::null_mut();
        if refers_outside(select) {
            return None;
        }
        // x = <the list's value>, as an IN list's test reads it.
        let param = pg_sys::palloc0(std::mem::size_of::<pg_sys::Param>()) as *mut pg_sys::Param;
        (*param).xpr.type_ = pg_sys::NodeTag::T_Param;
        (*param).paramkind = pg_sys::ParamKind::PARAM_SUBLINK;
        (*param).paramid = 1;
        (*param).paramtype = pg_sys::exprType(inner);
        (*param).paramtypmod = pg_sys::exprTypmod(inner);
        (*param).paramcollid = pg_sys::exprCollation(inner);
        (*param).location = -1;
        // x, now of this level.
        let outer = pg_sys::copyObjectImpl(outer.cast()) as *mut pg_sys::Node;
        let mut var = outer;
        while (*var).type_ == pg_sys::NodeTag::T_RelabelType {
            var = (*(var as *mut pg_sys::RelabelType)).arg.cast();
        }
        (*(var as *mut pg_sys::Var)).varlevelsup = 0;
        let test = pg_sys::make_opclause(
            opno,
            pg_sys::BOOLOID,
            false,
            outer.cast(),
            param.cast(),
            pg_sys::InvalidOid,
            (*op).inputcollid,
        );
        (*(test as *mut pg_sys::OpExpr)).opfuncid = pg_sys::get_opcode(opno);
        let list = pg_sys::copyObjectImpl(sublink.cast()) as *mut pg_sys::SubLink;
        (*list).subLinkType = pg_sys::SubLinkType::ANY_SUBLINK;
        (*list).testexpr = test.cast();
        (*list).subselect = select.cast();
        public_list(list.cast(), protected)
    }
}

/// The default equality of `kind` (its btree or hash class's), if any.
///
/// # Safety
/// Inside a transaction.
unsafe fn default_equality(kind: pg_sys::Oid) -> Option<pg_sys::Oid> {
    let (mut sortop, mut eqop, mut hashable) = (pg_sys::InvalidOid, pg_sys::InvalidOid, false);
    // SAFETY: the caller's contract; the lookup writes only to the places given.
    unsafe {
        pg_sys::get_sort_group_operators(
            kind,
            false,
            false,
            false,
            &mut sortop,
            &mut eqop,
            std::ptr::null_mut(),
            &mut hashable,
        );
    }
    (eqop != pg_sys::InvalidOid).then_some(eqop)
}

/// Makes `select`'s one output DISTINCT, with its type's default equality
/// and ordering; false if it has none (or is grouped in a way that DISTINCT
/// cannot follow).
///
/// # Safety
/// `select` is a live Query of one output column.
unsafe fn distinct(select: *mut pg_sys::Query) -> bool {
    // SAFETY: the caller's contract; the clause is zeroed and filled as the parser fills it.
    unsafe {
        let entry = list_items::<pg_sys::TargetEntry>((*select).targetList)[0];
        let kind = pg_sys::exprType((*entry).expr.cast());
        let (mut sortop, mut eqop, mut hashable) = (pg_sys::InvalidOid, pg_sys::InvalidOid, false);
        pg_sys::get_sort_group_operators(
            kind,
            false,
            true,
            false,
            &mut sortop,
            &mut eqop,
            std::ptr::null_mut(),
            &mut hashable,
        );
        if eqop == pg_sys::InvalidOid {
            return false;
        }
        let mut reference = (*entry).ressortgroupref;
        if reference == 0 {
            reference = list_items::<pg_sys::SortGroupClause>((*select).groupClause)
                .iter()
                .chain(list_items::<pg_sys::SortGroupClause>((*select).sortClause).iter())
                .map(|c| (**c).tleSortGroupRef)
                .max()
                .unwrap_or(0)
                + 1;
            (*entry).ressortgroupref = reference;
        }
        let clause = pg_sys::palloc0(std::mem::size_of::<pg_sys::SortGroupClause>())
            as *mut pg_sys::SortGroupClause;
        (*clause).type_ = pg_sys::NodeTag::T_SortGroupClause;
        (*clause).tleSortGroupRef = reference;
        (*clause).eqop = eqop;
        (*clause).sortop = sortop;
        (*clause).nulls_first = false;
        (*clause).hashable = hashable;
        (*select).distinctClause = pg_sys::lappend(std::ptr::null_mut(), clause.cast());
        true
    }
}

/// `test` with its sublink parameter (the list's value) replaced by `value`.
///
/// # Safety
/// `test` is a live expression whose only PARAM_SUBLINK is the list's one column.
unsafe fn replace_param(test: *mut pg_sys::Node, value: *mut pg_sys::Node) -> *mut pg_sys::Node {
    /// # Safety
    /// Called by the tree mutator with live nodes and the value.
    #[pg_guard]
    unsafe extern "C-unwind" fn each(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; the cast follows the tag.
        unsafe {
            if node.is_null() {
                return node;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Param
                && (*(node as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_SUBLINK
            {
                return pg_sys::copyObjectImpl(context.cast()).cast();
            }
            crate::versions::expression_tree_mutator(node, each, context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { each(test, value.cast()) }
}

// SAFETY: the prototype of rewrite/rewriteManip.h (the same on 15 to 18), which pgrx does not bind.
unsafe extern "C-unwind" {
    fn checkExprHasSubLink(node: *mut pg_sys::Node) -> bool;
}
