//! Filter values from the policy's public lists: a BI tool fills a filter
//! box with the distinct values of a column,
//!
//! ```sql
//! SELECT region AS region FROM public.visits GROUP BY region ORDER BY region ASC LIMIT 1000;
//! SELECT DISTINCT region FROM visits;
//! ```
//!
//! For a column whose list of values the DBA declared
//! (`dp_domain(tbl, column, ARRAY[...])`, values.sql), such a level is
//! answered from the list instead of the rows: the table's entry becomes
//! the list (`unnest` of it, as a subquery), so nothing protected is read,
//! nothing is released and nothing is charged, and the answer is the same
//! whatever the data (a value without rows is shown; a value the list
//! lacks is not).
//!
//! A level qualifies when it reads the protected table alone, without
//! WHERE, row-level security or TABLESAMPLE, groups or is DISTINCT, has no
//! aggregate, window, set-returning function, HAVING, grouping sets,
//! sublink or row lock, and every column it reads of the table is that one
//! column. Anything else is left to the checks (a key read from the rows
//! goes through private partition selection, charged).

use super::super::catalog::Protected;
use super::list_items;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Answers every qualifying level of `query` from its column's list.
///
/// # Safety
/// `query` is the live Query the planner hook was given, its raw-row
/// wrappers taken in (`inline`); inside a transaction.
pub(in crate::gate) unsafe fn answer_from_lists(query: *mut pg_sys::Query, protected: &Protected) {
    if protected.policy.lists.is_empty() {
        return;
    }
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
                let protected = &*(context as *const Protected);
                if let Some((rtindex, var, list)) = listed(level, protected) {
                    from_list(level, rtindex, var, &list);
                }
                return pg_sys::query_tree_walker(level, Some(levels), context, 0);
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

/// The table entry, one Var of the column and the list of a level that asks only for the
/// distinct values of a listed column.
///
/// # Safety
/// `level` is a live Query.
unsafe fn listed(
    level: *mut pg_sys::Query,
    protected: &Protected,
) -> Option<(i32, *mut pg_sys::Var, String)> {
    // SAFETY: the caller's contract; node and RTE casts follow their tags and kinds.
    unsafe {
        let q = &*level;
        let shape = q.commandType == pg_sys::CmdType::CMD_SELECT
            && q.utilityStmt.is_null()
            && q.setOperations.is_null()
            && !q.hasAggs
            && !q.hasWindowFuncs
            && !q.hasTargetSRFs
            && !q.hasSubLinks
            && q.havingQual.is_null()
            && q.groupingSets.is_null()
            && q.rowMarks.is_null()
            && (!q.groupClause.is_null() || !q.distinctClause.is_null())
            && !q.jointree.is_null()
            && (*q.jointree).quals.is_null();
        if !shape {
            return None;
        }
        let from = super::super::list_nodes((*q.jointree).fromlist);
        let [item] = from[..] else { return None };
        if (*item).type_ != pg_sys::NodeTag::T_RangeTblRef {
            return None;
        }
        let rtindex = (*(item as *mut pg_sys::RangeTblRef)).rtindex;
        let rte = list_items::<pg_sys::RangeTblEntry>(q.rtable)[rtindex as usize - 1];
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
            || !protected.tables.contains_key(&(*rte).relid)
            || !(*rte).tablesample.is_null()
            || !(*rte).securityQuals.is_null()
        {
            return None;
        }
        let mut columns = Columns {
            rtindex,
            found: Vec::new(),
            set: false,
        };
        columns.walk(level);
        let var = *columns.found.first()?;
        let column = (*var).varattno;
        if columns.found.iter().any(|&v| (*v).varattno != column) || column <= 0 {
            return None;
        }
        let list = protected.policy.lists.get(&((*rte).relid, column))?;
        Some((rtindex, var, list.clone()))
    }
}

/// The level's Vars of one table entry: their column numbers, or (`set`)
/// each made column 1 of the list that replaces the entry.
struct Columns {
    rtindex: i32,
    found: Vec<*mut pg_sys::Var>,
    set: bool,
}

impl Columns {
    /// # Safety
    /// `level` is a live Query.
    unsafe fn walk(&mut self, level: *mut pg_sys::Query) {
        /// # Safety
        /// Called by the tree walkers with live nodes and the `Columns`.
        #[pg_guard]
        unsafe extern "C-unwind" fn vars(
            node: *mut pg_sys::Node,
            context: *mut std::ffi::c_void,
        ) -> bool {
            // SAFETY: the caller's contract; casts follow the node tags.
            unsafe {
                if node.is_null() {
                    return false;
                }
                let columns = &mut *(context as *mut Columns);
                match (*node).type_ {
                    // The level has no sublink; its other entries' subqueries
                    // (a pulled-up wrapper's empty entry has none) do not
                    // read this one.
                    pg_sys::NodeTag::T_Query => return false,
                    pg_sys::NodeTag::T_Var => {
                        let var = node as *mut pg_sys::Var;
                        if (*var).varno == columns.rtindex && (*var).varlevelsup == 0 {
                            if columns.set {
                                (*var).varattno = 1;
                                (*var).varattnosyn = 1;
                            } else {
                                columns.found.push(var);
                            }
                        }
                        return false;
                    }
                    _ => {}
                }
                pg_sys::expression_tree_walker(node, Some(vars), context)
            }
        }
        // SAFETY: the caller's contract; the walker gets `self` back as its context.
        unsafe {
            pg_sys::query_tree_walker(level, Some(vars), (self as *mut Columns).cast(), 0);
        }
    }
}

/// Replaces the level's table entry by the list of the values of `var`'s
/// column, a subquery `SELECT v FROM unnest('<list>'::<type>[]) v`, and
/// its Vars by that subquery's one column.
///
/// # Safety
/// `level` is a live Query not yet planned that `listed` accepted with
/// this Var and list; inside a transaction.
unsafe fn from_list(level: *mut pg_sys::Query, rtindex: i32, var: *mut pg_sys::Var, list: &str) {
    // SAFETY: the caller's contract; the entry is a relation (listed checked it).
    unsafe {
        let rte = list_items::<pg_sys::RangeTblEntry>((*level).rtable)[rtindex as usize - 1];
        let column = (*var).varattno;
        let Ok(types) = super::super::bounding::column_types(&[var.cast()]) else {
            return;
        };
        let literal = std::ffi::CString::new(list).expect("no NUL in an array's text");
        let quoted = std::ffi::CStr::from_ptr(pg_sys::quote_literal_cstr(literal.as_ptr()))
            .to_string_lossy()
            .into_owned();
        let (ty, collate) = match types[0].split_once(" COLLATE ") {
            Some((ty, collation)) => (ty.to_string(), format!(" COLLATE {collation}")),
            None => (types[0].clone(), String::new()),
        };
        let text =
            format!("SELECT l.v{collate} AS v FROM pg_catalog.unnest({quoted}::{ty}[]) AS l(v)");
        let list_query = super::super::bounding::parse(&text);
        crate::versions::waive_privileges(crate::versions::query_permissions(level), rte);
        let name = (*(*rte).eref).aliasname;
        let attname = pg_sys::get_attname((*rte).relid, column, false);
        crate::versions::forget_permissions(rte);
        (*rte).rtekind = pg_sys::RTEKind::RTE_SUBQUERY;
        (*rte).subquery = list_query;
        (*rte).relid = pg_sys::InvalidOid;
        (*rte).relkind = 0;
        (*rte).rellockmode = 0;
        (*rte).inh = false;
        (*rte).security_barrier = false;
        (*rte).alias = pg_sys::makeAlias(name, std::ptr::null_mut());
        (*rte).eref = pg_sys::makeAlias(
            name,
            pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeString(attname).cast()),
        );
        Columns {
            rtindex,
            found: Vec::new(),
            set: true,
        }
        .walk(level);
    }
}
