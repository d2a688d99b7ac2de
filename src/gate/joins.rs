//! An admitted level's FROM: its tables, inner joins and public rows; the
//! outer join whose public side lists the group keys; protected tables
//! joined on their privacy units.

use super::catalog::{Protected, Table};
use super::{list_items, refuse, Checked, Refusal, SHAPE};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The FROM items of an admitted level.
pub(super) struct FromItems<'a> {
    /// Range table indexes of its tables (and key lists).
    pub(super) leaves: Vec<i32>,
    /// WHERE and every JOIN ... ON: conditions on the rows.
    pub(super) quals: Vec<*mut pg_sys::Node>,
    /// The outer join whose public side lists the group keys, if any.
    pub(super) listed: Option<*mut pg_sys::JoinExpr>,
    pub(super) protected: &'a Protected,
}

impl FromItems<'_> {
    /// # Safety
    /// `node` is a live jointree item of the query whose range table is `rtable`.
    pub(super) unsafe fn item(
        &mut self,
        node: *mut pg_sys::Node,
        rtable: &[*mut pg_sys::RangeTblEntry],
    ) -> Checked {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            match (*node).type_ {
                pg_sys::NodeTag::T_RangeTblRef => {
                    let index = (*(node as *mut pg_sys::RangeTblRef)).rtindex;
                    let rte = rtable[index as usize - 1];
                    // Public rows: a subquery (such as a VALUES list) that
                    // reads no protected table, or a function of constants
                    // (generate_series); neither may see another FROM item.
                    let admitted = match (*rte).rtekind {
                        pg_sys::RTEKind::RTE_RELATION => true,
                        // Not correlated with an outer level either: it
                        // would be a new list, and a new release of the
                        // level, for each outer row.
                        pg_sys::RTEKind::RTE_SUBQUERY => {
                            !(*rte).lateral
                                && !reads_protected((*rte).subquery.cast(), self.protected)
                                && !refers_outside((*rte).subquery)
                        }
                        pg_sys::RTEKind::RTE_FUNCTION => {
                            !(*rte).lateral && !mentions_columns((*rte).functions.cast())
                        }
                        _ => false,
                    };
                    if !admitted {
                        return Err(refuse(
                            "beside protected tables a query level may read only tables, subqueries of public tables and functions of constants (no LATERAL, no reference to an outer query)",
                            SHAPE,
                        ));
                    }
                    self.leaves.push(index);
                    Ok(())
                }
                pg_sys::NodeTag::T_JoinExpr => {
                    let join = node as *mut pg_sys::JoinExpr;
                    if (*join).jointype != pg_sys::JoinType::JOIN_INNER && self.listed != Some(join)
                    {
                        return Err(refuse(
                            "only inner joins are admitted over protected rows, and one outer join that lists public group keys",
                            LISTED,
                        ));
                    }
                    self.item((*join).larg, rtable)?;
                    self.item((*join).rarg, rtable)?;
                    self.quals.push((*join).quals);
                    Ok(())
                }
                _ => Err(refuse(
                    "this FROM item is not admitted over protected rows",
                    SHAPE,
                )),
            }
        }
    }
}

const LISTED: &str = "To show every key of a public list, even keys without rows: SELECT k.key, dp_count(epsilon) \
                      FROM keys k LEFT JOIN protected_table t ON t.column = k.key WHERE <conditions on k> GROUP BY k.key.";

/// Whether the level's keys are listed by a public table: `public LEFT
/// JOIN protected ON …` (or RIGHT JOIN the other way round), the only FROM
/// item, grouped by columns of the public side, with WHERE on that side
/// only. Every key the public side lists is then shown, each with a noisy
/// answer (those without rows too), so the set of keys shown says nothing
/// of the protected rows and needs no partition selection.
///
/// # Safety
/// `query` is a live Query whose range table is `rtable`.
pub(super) unsafe fn public_keys(
    query: *mut pg_sys::Query,
    rtable: &[*mut pg_sys::RangeTblEntry],
    protected: &Protected,
) -> Result<Option<*mut pg_sys::JoinExpr>, Refusal> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        let items = list_items::<pg_sys::Node>((*(*query).jointree).fromlist);
        let [item] = items[..] else { return Ok(None) };
        if (*item).type_ != pg_sys::NodeTag::T_JoinExpr {
            return Ok(None);
        }
        let join = item as *mut pg_sys::JoinExpr;
        let kept = match (*join).jointype {
            pg_sys::JoinType::JOIN_LEFT => (*join).larg,
            pg_sys::JoinType::JOIN_RIGHT => (*join).rarg,
            _ => return Ok(None),
        };
        let mut public = Vec::new();
        jointree_indexes(kept, &mut public);
        let is_protected = |i: &i32| {
            let rte = rtable[*i as usize - 1];
            (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && protected.tables.contains_key(&(*rte).relid)
        };
        if public.iter().any(is_protected) {
            return Ok(None);
        }
        let refs: Vec<u32> = list_items::<pg_sys::SortGroupClause>((*query).groupClause)
            .iter()
            .map(|c| (**c).tleSortGroupRef)
            .collect();
        let keys: Vec<*mut pg_sys::Node> = list_items::<pg_sys::TargetEntry>((*query).targetList)
            .into_iter()
            .filter(|e| refs.contains(&(**e).ressortgroupref))
            .map(|e| (*e).expr.cast())
            .collect();
        let on_public_side = |node: *mut pg_sys::Node| {
            let flat = crate::versions::flatten_join_alias_vars(
                query,
                pg_sys::copyObjectImpl(node.cast()).cast(),
            );
            columns_of(flat).iter().all(|i| public.contains(i))
        };
        if keys.is_empty()
            || !keys.iter().all(|k| on_public_side(*k))
            || !on_public_side((*(*query).jointree).quals)
        {
            return Err(refuse(
                "an outer join over protected rows is admitted only to list group keys: every key, and WHERE, must be on its public side",
                LISTED,
            ));
        }
        Ok(Some(join))
    }
}

/// The range table indexes of a jointree item (its tables and joins).
///
/// # Safety
/// `node` is a live jointree node.
pub(super) unsafe fn jointree_indexes(node: *mut pg_sys::Node, into: &mut Vec<i32>) {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_RangeTblRef => {
                into.push((*(node as *mut pg_sys::RangeTblRef)).rtindex)
            }
            pg_sys::NodeTag::T_JoinExpr => {
                let join = node as *mut pg_sys::JoinExpr;
                into.push((*join).rtindex);
                jointree_indexes((*join).larg, into);
                jointree_indexes((*join).rarg, into);
            }
            pg_sys::NodeTag::T_FromExpr => {
                for item in list_items::<pg_sys::Node>((*(node as *mut pg_sys::FromExpr)).fromlist)
                {
                    jointree_indexes(item, into);
                }
            }
            _ => {}
        }
    }
}

/// The range table indexes of this level's columns below `node`.
fn columns_of(node: *mut pg_sys::Node) -> Vec<i32> {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Vec.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                let var = node as *mut pg_sys::Var;
                if (*var).varlevelsup == 0 {
                    (*(context as *mut Vec<i32>)).push((*var).varno as i32);
                }
                return false;
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    let mut found = Vec::new();
    // SAFETY: `node` is null or a live expression node (callers' contract).
    unsafe { find(node, (&raw mut found).cast()) };
    found
}

/// Whether `node` (a Query or expression) or anything below it reads a
/// protected table (directly or through a view).
pub(super) fn reads_protected(node: *mut pg_sys::Node, protected: &Protected) -> bool {
    /// # Safety
    /// Called by PostgreSQL's tree walkers with live nodes and the Protected.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                let query = node as *mut pg_sys::Query;
                let protected = &*(context as *const Protected);
                let direct = list_items::<pg_sys::RangeTblEntry>((*query).rtable)
                    .iter()
                    .any(|rte| {
                        (**rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                            && protected.tables.contains_key(&(**rte).relid)
                    });
                return direct || pg_sys::query_tree_walker(query, Some(find), context, 0);
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    // SAFETY: `node` is null or a live Query or expression (callers' contract); the walk only reads.
    unsafe { find(node, (protected as *const Protected).cast_mut().cast()) }
}

/// Whether a column, of any query level, or a subquery lies below `node`.
fn mentions_columns(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        _context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            use pg_sys::NodeTag::*;
            matches!(
                (*node).type_,
                T_Var | T_PlaceHolderVar | T_SubLink | T_Query
            ) || pg_sys::expression_tree_walker(node, Some(find), std::ptr::null_mut())
        }
    }
    // SAFETY: `node` is null or a live expression node or List (callers' contract).
    unsafe { find(node, std::ptr::null_mut()) }
}

/// Refuses a join of protected tables unless each is equated with the
/// others on its privacy unit (a condition ANDed into WHERE or an ON): a
/// joined row must belong to one person.
///
/// # Safety
/// Live nodes of the query whose range table is `rtable`.
pub(super) unsafe fn joined_on_unit(
    rtable: &[*mut pg_sys::RangeTblEntry],
    persons: &[(i32, Table)],
    quals: &[*mut pg_sys::Node],
) -> Checked {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        // A column through join aliases to its table's (index, column).
        let resolve = |mut node: *mut pg_sys::Node| -> Option<(i32, i16)> {
            loop {
                while !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_RelabelType {
                    node = (*(node as *mut pg_sys::RelabelType)).arg.cast();
                }
                if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_Var {
                    return None;
                }
                let var = node as *mut pg_sys::Var;
                if (*var).varlevelsup != 0
                    || (*var).varno < 1
                    || (*var).varno as usize > rtable.len()
                {
                    return None;
                }
                let rte = rtable[(*var).varno as usize - 1];
                if (*rte).rtekind != pg_sys::RTEKind::RTE_JOIN {
                    return Some(((*var).varno as i32, (*var).varattno));
                }
                node = *list_items::<pg_sys::Node>((*rte).joinaliasvars)
                    .get((*var).varattno as usize - 1)?;
            }
        };
        let mut conjuncts: Vec<*mut pg_sys::Node> = quals.to_vec();
        let mut group: Vec<usize> = (0..persons.len()).collect();
        fn root(group: &mut [usize], i: usize) -> usize {
            if group[i] == i {
                i
            } else {
                let r = root(group, group[i]);
                group[i] = r;
                r
            }
        }
        while let Some(node) = conjuncts.pop() {
            if node.is_null() {
                continue;
            }
            match (*node).type_ {
                pg_sys::NodeTag::T_BoolExpr
                    if (*(node as *mut pg_sys::BoolExpr)).boolop
                        == pg_sys::BoolExprType::AND_EXPR =>
                {
                    conjuncts.extend(list_items::<pg_sys::Node>(
                        (*(node as *mut pg_sys::BoolExpr)).args,
                    ));
                }
                pg_sys::NodeTag::T_List => {
                    conjuncts.extend(list_items::<pg_sys::Node>(node.cast()))
                }
                pg_sys::NodeTag::T_OpExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    let args = list_items::<pg_sys::Node>((*op).args);
                    if args.len() != 2
                        || !pg_sys::op_mergejoinable((*op).opno, pg_sys::exprType(args[0]))
                    {
                        continue;
                    }
                    let side = |n| {
                        let (index, column) = resolve(n)?;
                        persons
                            .iter()
                            .position(|(leaf, table)| *leaf == index && table.unit == column)
                    };
                    if let (Some(a), Some(b)) = (side(args[0]), side(args[1])) {
                        let (ra, rb) = (root(&mut group, a), root(&mut group, b));
                        group[ra] = rb;
                    }
                }
                _ => {}
            }
        }
        let first = root(&mut group, 0);
        if (1..persons.len()).all(|i| root(&mut group, i) == first) {
            Ok(())
        } else {
            Err(refuse(
                "protected tables must be joined on their privacy units (so that each joined row belongs to one person)",
                "Join them with ON a.person_id = b.person_id (their privacy unit columns).",
            ))
        }
    }
}

/// Whether `select` refers to any level outside itself (a Var, an
/// aggregate or a placeholder of an outer level): a list that would change
/// with an outer row.
///
/// # Safety
/// `select` is a live Query.
pub(super) unsafe fn refers_outside(select: *mut pg_sys::Query) -> bool {
    /// # Safety
    /// Called by the tree walkers with live nodes and the depth.
    #[pg_guard]
    unsafe extern "C-unwind" fn outer(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            let depth = &mut *(context as *mut u32);
            // A CTE of a level outside it (which may read protected rows).
            if (*node).type_ == pg_sys::NodeTag::T_RangeTblEntry {
                let rte = node as *mut pg_sys::RangeTblEntry;
                return (*rte).rtekind == pg_sys::RTEKind::RTE_CTE && (*rte).ctelevelsup > *depth;
            }
            let up = match (*node).type_ {
                pg_sys::NodeTag::T_Var => Some((*(node as *mut pg_sys::Var)).varlevelsup),
                pg_sys::NodeTag::T_Aggref => Some((*(node as *mut pg_sys::Aggref)).agglevelsup),
                pg_sys::NodeTag::T_PlaceHolderVar => {
                    Some((*(node as *mut pg_sys::PlaceHolderVar)).phlevelsup)
                }
                pg_sys::NodeTag::T_GroupingFunc => {
                    Some((*(node as *mut pg_sys::GroupingFunc)).agglevelsup)
                }
                _ => None,
            };
            if up.is_some_and(|up| up > *depth) {
                return true;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                *depth += 1;
                let found = pg_sys::query_tree_walker(
                    node.cast(),
                    Some(outer),
                    context,
                    pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
                );
                *depth -= 1;
                return found;
            }
            pg_sys::expression_tree_walker(node, Some(outer), context)
        }
    }
    let mut depth = 0u32;
    // SAFETY: the caller's contract; the walker gets `depth` back as its context.
    unsafe {
        pg_sys::query_tree_walker(
            select,
            Some(outer),
            (&raw mut depth).cast(),
            pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
        )
    }
}
