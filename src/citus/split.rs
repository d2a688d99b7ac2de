//! A level split in two: the partials (its FROM, WHERE and GROUP BY, each
//! dpnoise aggregate's exact partials) as SQL text run by `dp_partials`,
//! and the release over them (its outputs and HAVING, each aggregate
//! replaced by its merge). Per-row functions read their rows the same way.

use super::merge::{plan_split, Split};
use super::nodes::{
    aggregate, bytea_const, deparse, extension_schema, function_rte, has_sublink, null_const,
    substitute_params, text_const,
};
use super::sealing::sealed;
use super::{relations, releasing_call, unsupported, Planning};
use crate::gate::list_items;
use pgrx::pg_sys;
use std::collections::HashMap;
use std::ffi::CString;

/// # Safety
/// `level` is a live Query whose dpnoise aggregates `calls` read a Citus
/// table; `params` its bound parameters or null; inside a transaction.
pub(super) unsafe fn split(
    level: *mut pg_sys::Query,
    calls: &[(*mut pg_sys::Aggref, Option<(String, usize)>)],
    params: pg_sys::ParamListInfo,
    planning: &mut Planning,
) {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context, and
    // each node is cast only to the struct its tag names.
    unsafe {
        let sealed = sealed(level, planning);
        let hint = "Write it as separate queries, or over WITH t AS MATERIALIZED (SELECT ...) SELECT ... FROM t.";
        if !(*level).groupingSets.is_null() {
            unsupported("GROUPING SETS, ROLLUP and CUBE are not supported", hint);
        }
        if (*level).hasWindowFuncs || (*level).hasTargetSRFs || !(*level).rowMarks.is_null() {
            unsupported(
                "window functions, set-returning outputs and FOR UPDATE are not supported",
                hint,
            );
        }
        if has_sublink((*level).targetList.cast()) || has_sublink((*level).havingQual) {
            unsupported("a subquery in the outputs or HAVING is not supported", hint);
        }
        let schema = extension_schema();
        let mut splits: HashMap<usize, Split> = HashMap::new();
        for (aggref, releasing) in calls {
            let Some((name, first)) = releasing else {
                // Another aggregate: computed whole with the partials.
                if (**aggref).agglevelsup != 0 {
                    unsupported(
                        "an aggregate of an outer query level is not supported",
                        hint,
                    );
                }
                let partials = vec![pg_sys::copyObjectImpl((*aggref).cast()).cast()];
                splits.insert(
                    *aggref as usize,
                    Split {
                        partials,
                        merge: pg_sys::InvalidOid,
                        result: pg_sys::InvalidOid,
                        constants: Vec::new(),
                        null_count: false,
                    },
                );
                continue;
            };
            if !crate::functions::named(&name).is_some_and(|f| f.splits) {
                unsupported(
                    &format!("{name} is not supported yet"),
                    "dp_count, dp_sum, dp_sum_laplace, dp_sum_staircase, dp_avg and dp_partition_selected are.",
                );
            }
            if !(**aggref).aggdistinct.is_null()
                || !(**aggref).aggorder.is_null()
                || (**aggref).agglevelsup != 0
            {
                unsupported(&format!("{name} with DISTINCT, ORDER BY or an outer level's columns is not supported"), hint);
            }
            splits.insert(
                *aggref as usize,
                plan_split(*aggref, name, *first, &schema, params),
            );
        }

        // The partials: FROM, WHERE and GROUP BY, the keys, then each aggregate's partials.
        let keys = group_keys(level);
        let partials = pg_sys::copyObjectImpl(level.cast()) as *mut pg_sys::Query;
        let mut target = std::ptr::null_mut();
        let mut column = 0i16;
        for (i, (expr, group)) in keys.iter().enumerate() {
            let key = pg_sys::copyObjectImpl((*expr).cast()).cast();
            push_entry(
                &mut target,
                &mut column,
                key,
                &format!("k{}", i + 1),
                *group,
            );
        }
        let mut partial_columns: HashMap<usize, Vec<i16>> = HashMap::new();
        for (aggref, _) in calls {
            let mut at = Vec::new();
            for p in &splits[&(*aggref as usize)].partials {
                let name = format!("p{}", column + 1);
                push_entry(&mut target, &mut column, *p, &name, 0);
                at.push(column);
            }
            partial_columns.insert(*aggref as usize, at);
        }
        (*partials).targetList = target;
        (*partials).havingQual = std::ptr::null_mut();
        (*partials).sortClause = std::ptr::null_mut();
        (*partials).distinctClause = std::ptr::null_mut();
        (*partials).hasDistinctOn = false;
        (*partials).limitOffset = std::ptr::null_mut();
        (*partials).limitCount = std::ptr::null_mut();
        let partials = substitute_params(partials, params);

        // The release: the level over dp_partials(<text>).
        let outputs = list_items::<pg_sys::TargetEntry>((*partials).targetList);
        let var = |attno: i16| -> *mut pg_sys::Node {
            let expr = (*outputs[attno as usize - 1]).expr.cast::<pg_sys::Node>();
            pg_sys::makeVar(
                1,
                attno,
                pg_sys::exprType(expr),
                pg_sys::exprTypmod(expr),
                pg_sys::exprCollation(expr),
                0,
            )
            .cast()
        };
        let mut rewrite = Rewrite {
            keys: keys
                .iter()
                .enumerate()
                .map(|(i, (key, _))| (*key, var(i as i16 + 1)))
                .collect(),
            replaced: HashMap::new(),
            leftover: false,
        };
        // Another aggregate's whole value: a column the release groups by
        // (the partials hold one row per group).
        let mut whole: Vec<i16> = Vec::new();
        for (aggref, _) in calls {
            let s = &splits[&(*aggref as usize)];
            if s.merge == pg_sys::InvalidOid {
                let column = partial_columns[&(*aggref as usize)][0];
                rewrite.replaced.insert(*aggref as usize, var(column));
                whole.push(column);
                continue;
            }
            let mut args: Vec<*mut pg_sys::Node> = partial_columns[&(*aggref as usize)]
                .iter()
                .map(|&c| var(c))
                .collect();
            if s.null_count {
                args.push(null_const(pg_sys::INT8OID));
            }
            args.extend(s.constants.iter().copied());
            rewrite.replaced.insert(
                *aggref as usize,
                aggregate(s.merge, s.result, &args, std::ptr::null_mut()).cast(),
            );
        }
        (*level).targetList = rewrite.apply((*level).targetList.cast()).cast();
        (*level).havingQual = rewrite.apply((*level).havingQual);
        if rewrite.leftover {
            unsupported(
                "an output uses a column that is not a GROUP BY key outside the dpnoise aggregates",
                "List it in GROUP BY.",
            );
        }
        for column in whole {
            group_by(level, var(column));
        }
        release_over(level, partials, &outputs, &schema, sealed, planning);
    }
}

/// Makes `level` read `dp_partials(<partials as SQL>)` alone, or
/// `dp_partials_sealed(<SQL>, <seal>)` when `sealed`.
///
/// # Safety
/// `level` is a live Query, `partials` its partials (live), `outputs` their target entries.
unsafe fn release_over(
    level: *mut pg_sys::Query,
    partials: *mut pg_sys::Query,
    outputs: &[*mut pg_sys::TargetEntry],
    schema: &str,
    sealed: bool,
    planning: &mut Planning,
) {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        relations(partials, &mut planning.relations);
        let text = deparse(partials);
        let (function, args) = if sealed {
            let seal = crate::seal::seal(text.as_bytes());
            planning.seals.push(seal);
            (
                "dp_partials_sealed",
                vec![text_const(&text), bytea_const(&seal)],
            )
        } else {
            ("dp_partials", vec![text_const(&text)])
        };
        (*level).rtable = pg_sys::lappend(
            std::ptr::null_mut(),
            function_rte(schema, function, &args, outputs).cast(),
        );
        let from =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblRef>()) as *mut pg_sys::RangeTblRef;
        (*from).type_ = pg_sys::NodeTag::T_RangeTblRef;
        (*from).rtindex = 1;
        (*level).jointree = pg_sys::makeFromExpr(
            pg_sys::lappend(std::ptr::null_mut(), from.cast()),
            std::ptr::null_mut(),
        );
        (*level).cteList = std::ptr::null_mut();
        (*level).hasSubLinks = false;
        (*level).hasRecursive = false;
        (*level).hasModifyingCTE = false;
        (*level).constraintDeps = std::ptr::null_mut();
    }
}

/// Appends `expr` to a target list as its next column, named `name`.
///
/// # Safety
/// Inside a transaction; `expr` is live, `target` null or a live List.
unsafe fn push_entry(
    target: &mut *mut pg_sys::List,
    column: &mut i16,
    expr: *mut pg_sys::Node,
    name: &str,
    group: u32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *column += 1;
        let name = CString::new(name).expect("no NUL");
        let e =
            pg_sys::makeTargetEntry(expr.cast(), *column, pg_sys::pstrdup(name.as_ptr()), false);
        (*e).ressortgroupref = group;
        *target = pg_sys::lappend(*target, e.cast());
    }
}

/// Adds `expr` to the level's GROUP BY (as a hidden output).
///
/// # Safety
/// `level` is a live Query; `expr` a live expression over its FROM.
unsafe fn group_by(level: *mut pg_sys::Query, expr: *mut pg_sys::Node) {
    // SAFETY: the caller's contract; the SortGroupClause is zeroed, then tagged and filled.
    unsafe {
        let entries = list_items::<pg_sys::TargetEntry>((*level).targetList);
        let group = entries
            .iter()
            .map(|e| (**e).ressortgroupref)
            .max()
            .unwrap_or(0)
            + 1;
        let mut column = entries.len() as i16;
        let mut target = (*level).targetList;
        push_entry(&mut target, &mut column, expr, "dp_group", group);
        (*list_items::<pg_sys::TargetEntry>(target)[column as usize - 1]).resjunk = true;
        (*level).targetList = target;
        let clause = pg_sys::palloc0(std::mem::size_of::<pg_sys::SortGroupClause>())
            as *mut pg_sys::SortGroupClause;
        (*clause).type_ = pg_sys::NodeTag::T_SortGroupClause;
        (*clause).tleSortGroupRef = group;
        let (mut sort, mut eq, mut hashable) = (pg_sys::InvalidOid, pg_sys::InvalidOid, false);
        pg_sys::get_sort_group_operators(
            pg_sys::exprType(expr),
            false,
            true,
            false,
            &mut sort,
            &mut eq,
            std::ptr::null_mut(),
            &mut hashable,
        );
        (*clause).eqop = eq;
        (*clause).sortop = sort;
        (*clause).hashable = hashable;
        (*level).groupClause = pg_sys::lappend((*level).groupClause, clause.cast());
    }
}

/// Per-row functions over a Citus table: the rows (the values the calls
/// read, and every other column the outputs use) come from `dp_partials`,
/// and the functions run here, on the coordinator, charged once per call
/// site.
///
/// # Safety
/// `level` is a live Query without aggregates that calls a per-row dpnoise
/// function and reads a Citus table; `params` as `distribute`'s.
pub(super) unsafe fn split_rows(
    level: *mut pg_sys::Query,
    params: pg_sys::ParamListInfo,
    planning: &mut Planning,
) {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        // The gate admits no per-row function over protected rows: the
        // partials read what the caller may read.
        let hint = "Write it over WITH t AS MATERIALIZED (SELECT ...) SELECT ... FROM t.";
        if (*level).hasWindowFuncs
            || (*level).hasTargetSRFs
            || !(*level).rowMarks.is_null()
            || !(*level).groupClause.is_null()
        {
            unsupported("window functions, set-returning outputs, FOR UPDATE and GROUP BY are not supported with per-row functions", hint);
        }
        if has_sublink((*level).targetList.cast()) {
            unsupported("a subquery in the outputs is not supported", hint);
        }
        let schema = extension_schema();
        let mut rows = Rows {
            columns: Vec::new(),
        };
        (*level).targetList = rows.apply((*level).targetList.cast()).cast();
        let partials = pg_sys::copyObjectImpl(level.cast()) as *mut pg_sys::Query;
        // The partials read the level's original FROM and WHERE (still in `level`, copied above).
        let mut target = std::ptr::null_mut();
        let mut column = 0i16;
        for expr in &rows.columns {
            let name = format!("c{}", column + 1);
            push_entry(&mut target, &mut column, *expr, &name, 0);
        }
        (*partials).targetList = target;
        (*partials).sortClause = std::ptr::null_mut();
        (*partials).distinctClause = std::ptr::null_mut();
        (*partials).hasDistinctOn = false;
        (*partials).limitOffset = std::ptr::null_mut();
        (*partials).limitCount = std::ptr::null_mut();
        let partials = substitute_params(partials, params);
        let outputs = list_items::<pg_sys::TargetEntry>((*partials).targetList);
        release_over(level, partials, &outputs, &schema, false, planning);
    }
}

/// A per-row level's outputs over dp_partials: each value a dpnoise
/// function reads, and each column used outside one, becomes a column.
struct Rows {
    columns: Vec<*mut pg_sys::Node>,
}

impl Rows {
    /// The Var of dp_partials' next column, which computes `expr`.
    ///
    /// # Safety
    /// `expr` is a live expression of the level.
    unsafe fn column(&mut self, expr: *mut pg_sys::Node) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract.
        unsafe {
            self.columns
                .push(pg_sys::copyObjectImpl(expr.cast()).cast());
            let n = self.columns.len() as i16;
            pg_sys::makeVar(
                1,
                n,
                pg_sys::exprType(expr),
                pg_sys::exprTypmod(expr),
                pg_sys::exprCollation(expr),
                0,
            )
            .cast()
        }
    }

    /// # Safety
    /// `node` is null or a live expression tree of the level; inside a transaction.
    unsafe fn apply(&mut self, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
        /// # Safety
        /// Called by `expression_tree_mutator` with live nodes and the Rows.
        #[pgrx::pg_guard]
        unsafe extern "C-unwind" fn mutate(
            node: *mut pg_sys::Node,
            context: *mut std::ffi::c_void,
        ) -> *mut pg_sys::Node {
            // SAFETY: the caller's contract.
            unsafe { (*(context as *mut Rows)).apply(node) }
        }
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return node;
            }
            if let Some((_, first)) = releasing_call(node) {
                let call = pg_sys::copyObjectImpl(node.cast()) as *mut pg_sys::FuncExpr;
                for (i, arg) in list_items::<pg_sys::Node>((*call).args)
                    .into_iter()
                    .enumerate()
                    .take(first)
                {
                    (*(*(*call).args).elements.add(i)).ptr_value = self.column(arg).cast();
                }
                return call.cast();
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var
                && (*(node as *mut pg_sys::Var)).varlevelsup == 0
            {
                return self.column(node);
            }
            crate::versions::expression_tree_mutator(node, mutate, (self as *mut Rows).cast())
        }
    }
}

/// The level's GROUP BY keys: each key's expression and sort-group reference.
///
/// # Safety
/// `level` is a live Query.
unsafe fn group_keys(level: *mut pg_sys::Query) -> Vec<(*mut pg_sys::Node, u32)> {
    // SAFETY: the caller's contract.
    unsafe {
        let refs: Vec<u32> = list_items::<pg_sys::SortGroupClause>((*level).groupClause)
            .iter()
            .map(|c| (**c).tleSortGroupRef)
            .collect();
        list_items::<pg_sys::TargetEntry>((*level).targetList)
            .into_iter()
            .filter(|e| refs.contains(&(**e).ressortgroupref))
            .map(|e| ((*e).expr.cast(), (*e).ressortgroupref))
            .collect()
    }
}

/// The release level's outputs and HAVING: keys become dp_partials'
/// columns, each dpnoise aggregate its merge (another aggregate its column).
struct Rewrite {
    keys: Vec<(*mut pg_sys::Node, *mut pg_sys::Node)>,
    replaced: HashMap<usize, *mut pg_sys::Node>,
    leftover: bool,
}

impl Rewrite {
    /// # Safety
    /// `node` is null or a live expression tree of the level being split.
    unsafe fn apply(&mut self, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
        /// # Safety
        /// Called by `expression_tree_mutator` with live nodes and the Rewrite.
        #[pgrx::pg_guard]
        unsafe extern "C-unwind" fn mutate(
            node: *mut pg_sys::Node,
            context: *mut std::ffi::c_void,
        ) -> *mut pg_sys::Node {
            // SAFETY: the caller's contract.
            unsafe { (*(context as *mut Rewrite)).apply(node) }
        }
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return node;
            }
            for (key, column) in &self.keys {
                if pg_sys::equal(node.cast(), (*key).cast()) {
                    return pg_sys::copyObjectImpl((*column).cast()).cast();
                }
            }
            match (*node).type_ {
                pg_sys::NodeTag::T_Aggref => {
                    if let Some(merge) = self.replaced.get(&(node as usize)) {
                        return pg_sys::copyObjectImpl((*merge).cast()).cast();
                    }
                }
                pg_sys::NodeTag::T_Var => {
                    self.leftover = true;
                    return node;
                }
                _ => {}
            }
            crate::versions::expression_tree_mutator(node, mutate, (self as *mut Rewrite).cast())
        }
    }
}
