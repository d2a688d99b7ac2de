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
        let (list, _) = protected.policy.lists.get(&((*rte).relid, column))?;
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
        let Some((array, collate)) = array_of(var, list) else {
            return;
        };
        let text = format!("SELECT l.v{collate} AS v FROM pg_catalog.unnest({array}) AS l(v)");
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

/// A list as an array constant of `var`'s type (`'{…}'::<type>[]`), and
/// the column's collation clause (empty without one).
///
/// # Safety
/// `var` is a live Var; inside a transaction.
unsafe fn array_of(var: *mut pg_sys::Var, list: &str) -> Option<(String, String)> {
    // SAFETY: the caller's contract; quote_literal_cstr returns a palloc'd string.
    unsafe {
        let types = super::super::bounding::column_types(&[var.cast()]).ok()?;
        let literal = std::ffi::CString::new(list).expect("no NUL in an array's text");
        let quoted = std::ffi::CStr::from_ptr(pg_sys::quote_literal_cstr(literal.as_ptr()))
            .to_string_lossy()
            .into_owned();
        let (ty, collate) = match types[0].split_once(" COLLATE ") {
            Some((ty, collation)) => (ty.to_string(), format!(" COLLATE {collation}")),
            None => (types[0].clone(), String::new()),
        };
        Some((format!("{quoted}::{ty}[]"), collate))
    }
}

/// The most groups a level's listed keys may show (the product of their
/// lists' lengths): as many as one list may hold.
const MOST_LISTED_GROUPS: usize = 10_000;

/// Group keys from the policy's lists: when every GROUP BY key of an
/// aggregating `level` is a column of one of its protected tables whose
/// list the DBA declared, the SQL of the level's public keys, `SELECT
/// l1.v AS c1, l2.v AS c2 … FROM unnest(<list 1>) AS l1(v), …` (every
/// combination, in `keys`' order). The level then shows every listed key,
/// each with its noisy answer (those without rows too), as a public table
/// of keys LEFT JOINed would: the keys shown say nothing of the rows and
/// need no partition selection (no δ, no selection ε); a row whose key
/// is not a listed key is in no group shown (under a function of the
/// column, a row whose value maps to a listed key counts under it). `None` when a key is anything
/// else, or the combinations pass `MOST_LISTED_GROUPS`.
///
/// # Safety
/// `level` is a live Query the gate is checking, its range table
/// `rtable`; `keys` its GROUP BY keys' expressions; inside a transaction.
pub(in crate::gate) unsafe fn listed_keys(
    level: *mut pg_sys::Query,
    rtable: &[*mut pg_sys::RangeTblEntry],
    keys: &[*mut pg_sys::Node],
    protected: &Protected,
) -> Option<String> {
    if keys.is_empty() || protected.policy.lists.is_empty() {
        return None;
    }
    // SAFETY: the caller's contract; node and RTE casts follow their tags and kinds.
    unsafe {
        let (mut columns, mut sources, mut groups) = (Vec::new(), Vec::new(), 1usize);
        for (i, key) in keys.iter().enumerate() {
            let flat = crate::versions::flatten_join_alias_vars(
                level,
                pg_sys::copyObjectImpl(key.cast()).cast(),
            );
            // A long text key is read through its cap (`substitute`), a
            // key of a type whose equal values differ in bytes through its
            // normal form (`keys::canonical`): the list's values pass
            // through the same, to meet the rows' keys and show as they do.
            let mut flat = flat;
            let mut through = Vec::new();
            while (*flat).type_ == pg_sys::NodeTag::T_FuncExpr {
                let call = flat as *mut pg_sys::FuncExpr;
                let args = super::super::list_nodes((*call).args);
                let [arg] = args[..] else { return None };
                if !protected.forms.values().any(|f| *f == (*call).funcid) {
                    return None;
                }
                through.push((*call).funcid);
                flat = arg;
            }
            if (*flat).type_ != pg_sys::NodeTag::T_Var {
                return None;
            }
            let var = flat as *mut pg_sys::Var;
            if (*var).varlevelsup != 0 || (*var).varattno <= 0 {
                return None;
            }
            let rte = *rtable.get(((*var).varno as usize).checked_sub(1)?)?;
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
                || !protected.tables.contains_key(&(*rte).relid)
            {
                return None;
            }
            let (list, length) = protected
                .policy
                .lists
                .get(&((*rte).relid, (*var).varattno))?;
            let (array, collate) = array_of(var, list)?;
            groups = groups.checked_mul(*length)?;
            let mut column = format!("l{i}.v{collate}");
            for funcid in through.iter().rev() {
                column = format!("{}({column})", qualified_name(*funcid)?);
            }
            columns.push(format!("{column} AS c{}", i + 1));
            sources.push(format!("pg_catalog.unnest({array}) AS l{i}(v)"));
        }
        (groups <= MOST_LISTED_GROUPS)
            .then(|| format!("SELECT {} FROM {}", columns.join(", "), sources.join(", ")))
    }
}

/// A function's name, schema-qualified and quoted, to call it in SQL.
///
/// # Safety
/// Inside a transaction.
unsafe fn qualified_name(funcid: pg_sys::Oid) -> Option<String> {
    // SAFETY: the caller's contract; catalog lookups return palloc'd strings or null.
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        let schema = pg_sys::get_namespace_name(pg_sys::get_func_namespace(funcid));
        if name.is_null() || schema.is_null() {
            return None;
        }
        let quote = |s: *mut std::ffi::c_char| {
            std::ffi::CStr::from_ptr(pg_sys::quote_identifier(s))
                .to_string_lossy()
                .into_owned()
        };
        Some(format!("{}.{}", quote(schema), quote(name)))
    }
}
