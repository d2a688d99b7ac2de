//! Values above the releases in their normal form.
//!
//! The gate shows a protected level's group keys in their normal form
//! (`gate::keys`), so that which of several equal values a group shows
//! cannot follow the plan. A level above the releases groups, removes
//! duplicates and takes minima and maxima too: `SELECT DISTINCT x`, a
//! UNION, `GROUP BY x`, `max(x)` over values such as `0.0` and `0.00`
//! (equal, shown differently) keep the one their plan met first, and an
//! attack read a hashed plan's `0.0` and a sorted plan's `0.000` from one
//! statement, the second a free repeat. So in an analyst's statement that
//! reads a protected table, at every level whose rows are releases or come
//! from them (not a level of protected rows, which only dpnoise's
//! aggregates summarise):
//!
//! - each column the level shows, groups by or removes duplicates on;
//! - each argument of `min` and `max`;
//!
//! is written through its type's normal form (`canonical::normal_datum`'s
//! functions: `-0` as `0`, `3.00` as `3`), where its type has one. A
//! release level's group keys are the gate's already.

use super::canonical::{form, Form};
use crate::pg_list::list_nodes;
use pgrx::pg_sys;
use std::collections::HashMap;

/// What a level's rows are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No protected table below it.
    Public,
    /// Protected rows, not yet summarised.
    Raw,
    /// dpnoise aggregates of protected rows: releases.
    Release,
    /// Rows from releases (and public rows).
    Post,
}

/// What the rewrite needs: the normal forms by name, and which tables are protected.
pub struct Forms<'a> {
    pub functions: &'a HashMap<String, pg_sys::Oid>,
    pub protected: &'a dyn Fn(pg_sys::Oid) -> bool,
}

/// Writes the normal forms into every level of `query` above its releases.
///
/// # Safety
/// `query` is the live top-level Query of an analyst's statement, after the
/// gate's checks, before planning.
pub unsafe fn normal_values(query: *mut pg_sys::Query, forms: &Forms) {
    // SAFETY: the caller's contract; each level is a live Query of the tree.
    unsafe {
        // The statement's CTEs by name (a name given twice is not looked up).
        let mut ctes: HashMap<Vec<u8>, Vec<*mut pg_sys::Query>> = HashMap::new();
        super::each_level(query, &mut |level, _| {
            for cte in list_nodes((*level).cteList) {
                let cte = cte as *mut pg_sys::CommonTableExpr;
                let name = std::ffi::CStr::from_ptr((*cte).ctename).to_bytes().to_vec();
                // A recursive one reads itself: taken for protected rows.
                let body = if (*cte).cterecursive {
                    std::ptr::null_mut()
                } else {
                    (*cte).ctequery.cast()
                };
                ctes.entry(name).or_default().push(body);
            }
        });
        super::each_level(query, &mut |level, _| self::level(level, forms, &ctes));
    }
}

/// The statement's CTEs by name.
type Ctes = HashMap<Vec<u8>, Vec<*mut pg_sys::Query>>;

/// What `query`'s rows are, from its range table down.
///
/// # Safety
/// `query` is a live Query; inside a transaction.
unsafe fn kind(query: *mut pg_sys::Query, forms: &Forms, ctes: &Ctes) -> Kind {
    // SAFETY: the caller's contract; range table entries are read by their kinds.
    unsafe {
        let releases = super::order::releases((*query).targetList.cast())
            || super::order::releases((*query).havingQual);
        let mut below = Kind::Public;
        for rte in list_nodes((*query).rtable) {
            let rte = rte as *mut pg_sys::RangeTblEntry;
            let child = match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION if (forms.protected)((*rte).relid) => Kind::Raw,
                pg_sys::RTEKind::RTE_SUBQUERY => kind((*rte).subquery, forms, ctes),
                // A CTE, of this level or one above, is what its query is
                // (one whose name is given twice, or recursive, is taken for
                // protected rows).
                pg_sys::RTEKind::RTE_CTE => {
                    match ctes
                        .get(std::ffi::CStr::from_ptr((*rte).ctename).to_bytes())
                        .map(Vec::as_slice)
                    {
                        Some([cte]) if !cte.is_null() => kind(*cte, forms, ctes),
                        _ => Kind::Raw,
                    }
                }
                _ => Kind::Public,
            };
            below = match (below, child) {
                (Kind::Raw, _) | (_, Kind::Raw) => Kind::Raw,
                (Kind::Public, other) | (other, Kind::Public) => other,
                _ => Kind::Post,
            };
        }
        match (releases, below) {
            (true, _) => Kind::Release,
            (false, Kind::Release | Kind::Post) => Kind::Post,
            (false, other) => other,
        }
    }
}

/// Rewrites one level, by what its rows are.
///
/// # Safety
/// `query` is a live Query; inside a transaction.
unsafe fn level(query: *mut pg_sys::Query, forms: &Forms, ctes: &Ctes) {
    // SAFETY: the caller's contract; the target list is a List of TargetEntry.
    unsafe {
        if (*query).commandType != pg_sys::CmdType::CMD_SELECT {
            return;
        }
        let kind = kind(query, forms, ctes);
        if kind != Kind::Release && kind != Kind::Post {
            return;
        }
        let keyed = |reference: u32| {
            reference != 0
                && list_nodes((*query).groupClause)
                    .into_iter()
                    .chain(list_nodes((*query).distinctClause))
                    .any(|c| (*(c as *mut pg_sys::SortGroupClause)).tleSortGroupRef == reference)
        };
        for entry in list_nodes((*query).targetList) {
            let entry = entry as *mut pg_sys::TargetEntry;
            let grouped = keyed((*entry).ressortgroupref);
            // A release level's keys are the gate's; a junk column is
            // shown nowhere unless the level groups on it.
            if (kind == Kind::Release && grouped) || ((*entry).resjunk && !grouped) {
                continue;
            }
            (*entry).expr = normal((*entry).expr.cast(), forms).cast();
        }
        if kind == Kind::Post {
            let context = (forms as *const Forms).cast_mut().cast();
            (*query).targetList = extremes((*query).targetList.cast(), context).cast();
            (*query).havingQual = extremes((*query).havingQual, context);
        }
    }
}

/// `expr` through its type's normal form, if its type has one (the same
/// expression otherwise).
///
/// # Safety
/// `expr` is a live expression; inside a transaction.
unsafe fn normal(expr: *mut pg_sys::Node, forms: &Forms) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the call is palloc'd.
    unsafe {
        let (type_, collation) = (pg_sys::exprType(expr), pg_sys::exprCollation(expr));
        let Form::Normalised(name) = form(type_, collation) else {
            return expr;
        };
        let Some(&function) = forms.functions.get(name) else {
            return expr;
        };
        // Already in its normal form (a key the gate wrote).
        if (*expr).type_ == pg_sys::NodeTag::T_FuncExpr
            && (*(expr as *mut pg_sys::FuncExpr)).funcid == function
        {
            return expr;
        }
        pg_sys::makeFuncExpr(
            function,
            type_,
            pg_sys::lappend(std::ptr::null_mut(), expr.cast()),
            collation,
            collation,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}

/// Writes each argument of this level's `min` and `max` through its normal form.
///
/// # Safety
/// Called by the expression mutator with live nodes and the `Forms`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn extremes(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow node tags; a sublink's query is another level.
    unsafe {
        if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
            return node;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Aggref {
            let aggref = node as *mut pg_sys::Aggref;
            if (*aggref).agglevelsup == 0
                && pg_sys::get_func_namespace((*aggref).aggfnoid)
                    == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE)
                && list_nodes((*aggref).args).len() == 1
            {
                let name = pg_sys::get_func_name((*aggref).aggfnoid);
                let named = !name.is_null()
                    && matches!(std::ffi::CStr::from_ptr(name).to_bytes(), b"min" | b"max");
                if named {
                    let entry = list_nodes((*aggref).args)[0] as *mut pg_sys::TargetEntry;
                    (*entry).expr =
                        normal((*entry).expr.cast(), &*(context as *const Forms)).cast();
                }
            }
            return node;
        }
        crate::versions::expression_tree_mutator(node, extremes, context)
    }
}
