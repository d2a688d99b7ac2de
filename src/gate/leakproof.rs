//! What an admitted level may evaluate on protected rows: dpnoise
//! aggregates only, and in WHERE, group keys and an aggregate's arguments
//! nothing that can fail, or take another path, depending on the values
//! (LEAKPROOF functions and operators, or those the DBA allowed).

use super::{list_items, refuse, Checked, SHAPE};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashSet;

/// The dpnoise aggregates an analyst may use: those whose parameters the
/// statement's advance payment can check (`cost`).

/// The expressions of an admitted level: protected values reach an answer
/// only through a dpnoise aggregate, and nothing evaluated on them (in
/// WHERE, in an aggregate's arguments or FILTER) can fail, or so take
/// another path, depending on their values.
pub(super) struct Leakproof<'a> {
    pub(super) allowed: &'a HashSet<pg_sys::Oid>,
    /// Protected columns may appear here (WHERE, inside a dpnoise
    /// aggregate); outside, in the output, only the aggregates' answers may.
    pub(super) rows: bool,
    /// The level's GROUP BY keys: in the output, a column that is one of
    /// them shows a released key (post-processing, as `k.m + 1`).
    pub(super) keys: &'a [*mut pg_sys::Node],
    /// A per-person level (`persons`): its aggregates are the built-ins
    /// that cannot fail, not dpnoise's.
    pub(super) per_person: bool,
}

impl Leakproof<'_> {
    fn function(&self, funcid: pg_sys::Oid, what: &str) -> Checked {
        // SAFETY: a syscache lookup by OID inside a transaction.
        if unsafe { pg_sys::get_func_leakproof(funcid) }
            || self.allowed.contains(&funcid)
            || super::substitute::proven_total(funcid)
        {
            return Ok(());
        }
        Err(refuse(
            &format!("{what} {} is not LEAKPROOF (it can fail, or show a value, on some rows)", function_name(funcid)),
            super::substitute::instead(funcid).unwrap_or(
                "Use only LEAKPROOF operators and functions on protected columns (docs/analysts.md lists the built-ins the gate \
                 replaces by total forms: arithmetic, casts, LIKE, date_trunc, extract, ...), or ask the DBA to allow one with dp_allow_function.",
            ),
        ))
    }

    /// # Safety
    /// `node` is null or a live expression node of the admitted level.
    pub(super) unsafe fn node(&mut self, node: *mut pg_sys::Node) -> Checked {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return Ok(());
            }
            // In the output, a group's key as the level groups by it (a
            // protected text key capped: `substitute::cap_group_keys`).
            if !self.rows
                && self
                    .keys
                    .iter()
                    .any(|k| pg_sys::equal((*k).cast(), node.cast()))
            {
                return Ok(());
            }
            use pg_sys::NodeTag::*;
            match (*node).type_ {
                T_Const | T_CaseTestExpr => Ok(()),
                T_Param => {
                    if (*(node as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_EXTERN {
                        Ok(())
                    } else {
                        Err(refuse("a value computed by the executor cannot meet protected rows", SHAPE))
                    }
                }
                T_Var => {
                    if (*(node as *mut pg_sys::Var)).varlevelsup != 0 {
                        Err(refuse("a correlated subquery cannot read protected rows", SHAPE))
                    } else if !self.rows && !self.keys.iter().any(|k| pg_sys::equal((*k).cast(), node.cast())) {
                        Err(refuse("a protected column can appear only in WHERE or inside a dpnoise aggregate", SHAPE))
                    } else {
                        Ok(())
                    }
                }
                T_Aggref => {
                    let aggref = node as *mut pg_sys::Aggref;
                    if self.per_person {
                        total_aggregate(aggref)?;
                    }
                    let admitted = self.per_person || crate::functions::releasing((*aggref).aggfnoid).is_some_and(|f| f.analysts);
                    if (*aggref).agglevelsup != 0 || !admitted {
                        // count, sum, ... per person: in a subquery in FROM grouped by the unit.
                        let per_person = total_aggregate(aggref).is_ok();
                        let instead = dpnoise_form(aggref);
                        return Err(refuse(
                            &format!(
                                "only these dpnoise aggregates may summarise protected rows: {}",
                                crate::functions::for_analysts().join(", ")
                            ),
                            match &instead {
                                Some(form) => form,
                                None if per_person => PER_PERSON,
                                None => SHAPE,
                            },
                        ));
                    }
                    if !(*aggref).aggdistinct.is_null() || !(*aggref).aggorder.is_null() {
                        return Err(refuse("DISTINCT and ORDER BY inside an aggregate are not admitted", SHAPE));
                    }
                    let was = std::mem::replace(&mut self.rows, true);
                    let mut checked = Ok(());
                    for entry in list_items::<pg_sys::TargetEntry>((*aggref).args) {
                        checked = checked.and_then(|_| self.node((*entry).expr.cast()));
                    }
                    checked = checked.and_then(|_| self.node((*aggref).aggfilter.cast()));
                    self.rows = was;
                    checked
                }
                // No protected column below (outside aggregates, which are
                // still checked). In the output that is post-processing of
                // the answers. Among the rows (WHERE, an aggregate's
                // arguments) a CASE or an AND could still decide by the data
                // whether it runs, so it must be folded to a constant when
                // planned (immutable, no parameter), or be leakproof too.
                // In a per-person level an aggregate's result is a person's
                // value, not an answer: it counts as a column.
                _ if !touches_rows(node)
                    && !(self.per_person && pg_sys::contain_agg_clause(node))
                    && (!self.rows || folded_when_planned(node)) =>
                {
                    self.children(node)
                }
                T_FuncExpr => {
                    self.function((*(node as *mut pg_sys::FuncExpr)).funcid, "function")?;
                    self.children(node)
                }
                T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    pg_sys::set_opfuncid(op);
                    self.function((*op).opfuncid, "operator")?;
                    self.children(node)
                }
                T_ScalarArrayOpExpr => {
                    let op = node as *mut pg_sys::ScalarArrayOpExpr;
                    pg_sys::set_sa_opfuncid(op);
                    self.function((*op).opfuncid, "operator")?;
                    self.children(node)
                }
                T_MinMaxExpr => {
                    self.function(minmax_comparison(node.cast())?, "comparison")?;
                    self.children(node)
                }
                T_BoolExpr | T_NullTest | T_BooleanTest | T_RelabelType | T_CaseExpr | T_CaseWhen | T_CoalesceExpr
                | T_List => self.children(node),
                T_SubLink => Err(refuse("subqueries cannot be mixed with protected rows at the same query level", super::SUBQUERY)),
                _ => Err(refuse(
                    "an expression on protected columns that can fail on some values (a cast, a domain, an array or row operation)",
                    "Use only LEAKPROOF operators and functions on protected columns.",
                )),
            }
        }
    }

    /// Checks each direct child of `node`.
    ///
    /// # Safety
    /// `node` is a live expression node.
    unsafe fn children(&mut self, node: *mut pg_sys::Node) -> Checked {
        // SAFETY: the caller's contract; `node` recurses into each child.
        unsafe { each_child(node, &mut |child| self.node(child)) }
    }
}

/// Runs `check` on each direct child of the expression `node`, stopping at
/// the first refusal (PostgreSQL's walker, which cannot carry a Rust error).
///
/// # Safety
/// `node` is a live expression node.
pub(super) unsafe fn each_child(
    node: *mut pg_sys::Node,
    check: &mut dyn FnMut(*mut pg_sys::Node) -> Checked,
) -> Checked {
    struct Context<'a> {
        check: &'a mut dyn FnMut(*mut pg_sys::Node) -> Checked,
        checked: Checked,
    }
    /// # Safety
    /// Called by `expression_tree_walker` with the live children of a node and our context.
    #[pg_guard]
    unsafe extern "C-unwind" fn each(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            let context = &mut *(context as *mut Context);
            context.checked = (context.check)(node);
            context.checked.is_err()
        }
    }
    let mut context = Context {
        check,
        checked: Ok(()),
    };
    // SAFETY: the caller's contract; `each` sees every direct child.
    unsafe { pg_sys::expression_tree_walker(node, Some(each), (&raw mut context).cast()) };
    context.checked
}

/// Whether the planner folds `node` to a constant: immutable functions of
/// constants only (an error there is raised while planning, whatever the data).
fn folded_when_planned(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pg_guard]
    unsafe extern "C-unwind" fn param(
        node: *mut pg_sys::Node,
        _context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            (*node).type_ == pg_sys::NodeTag::T_Param
                || pg_sys::expression_tree_walker(node, Some(param), std::ptr::null_mut())
        }
    }
    // SAFETY: `node` is a live expression node (callers' contract); both walks only read it.
    unsafe { !pg_sys::contain_mutable_functions(node) && !param(node, std::ptr::null_mut()) }
}

/// Whether a column of this level lies below `node` outside any aggregate.
fn touches_rows(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        _context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; aggregates are not entered.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Aggref {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                return true;
            }
            pg_sys::expression_tree_walker(node, Some(find), std::ptr::null_mut())
        }
    }
    // SAFETY: `node` is a live expression node (callers' contract).
    unsafe { find(node, std::ptr::null_mut()) }
}

/// A function's name, for messages (a catalog name, never data).
/// The comparison function GREATEST or LEAST calls: its type's ordering.
///
/// # Safety
/// `node` is a live MinMaxExpr; inside a transaction.
pub(super) unsafe fn minmax_comparison(
    node: *mut pg_sys::MinMaxExpr,
) -> Result<pg_sys::Oid, super::Refusal> {
    // SAFETY: the caller's contract; a type cache lookup by OID.
    unsafe {
        let typcache =
            pg_sys::lookup_type_cache((*node).minmaxtype, pg_sys::TYPECACHE_CMP_PROC as i32);
        if typcache.is_null() || (*typcache).cmp_proc == pg_sys::InvalidOid {
            return Err(refuse(
                "GREATEST or LEAST of a type without a total order",
                SHAPE,
            ));
        }
        Ok((*typcache).cmp_proc)
    }
}

pub(super) fn function_name(funcid: pg_sys::Oid) -> String {
    // SAFETY: a syscache lookup by OID; a non-null result is a palloc'd NUL-terminated string.
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() {
            format!("{}", u32::from(funcid))
        } else {
            std::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// Built-in aggregates that return for every input, in a per-person level
/// and in the plan check: counts; sums and averages of integers (kept in
/// int8 beyond any table's reach, or in numeric) and of numeric; min and
/// max of numbers, dates, timestamps and text; bool_and, bool_or, every.
pub(super) const TOTAL_AGGREGATES: &[u32] = &[
    2803, 2147, // count(*), count(any)
    2107, 2108, 2109, 2114, // sum of bigint, integer, smallint, numeric
    2100, 2101, 2102, 2103, // avg of bigint, integer, smallint, numeric
    2115, 2116, 2117, 2119, 2120, 2122, 2126, 2127, 2129, 2130, // max
    2131, 2132, 2133, 2135, 2136, 2138, 2142, 2143, 2145, 2146, // min
    2517, 2518, 2519, // bool_and, bool_or, every
];

pub(super) const PER_PERSON: &str = "Compute per-person values in a subquery in FROM (not a CTE) grouped by the privacy unit, with count, sum, avg, min, max, \
                          bool_and, bool_or, and summarise them with dpnoise aggregates: SELECT dp_avg(spent, 1.0, 0, 500) \
                          FROM (SELECT person_id, sum(amount) AS spent FROM visits GROUP BY person_id) p.";

/// Refuses an aggregate a per-person level may not use.
///
/// # Safety
/// `aggref` is a live Aggref.
pub(super) unsafe fn total_aggregate(aggref: *mut pg_sys::Aggref) -> Checked {
    // SAFETY: the caller's contract.
    unsafe {
        if TOTAL_AGGREGATES.contains(&u32::from((*aggref).aggfnoid)) {
            return Ok(());
        }
        let name = function_name((*aggref).aggfnoid);
        Err(refuse(
            &format!("the aggregate {name} of these argument types is not admitted in a per-person subquery (it can fail on some values, or is not one of the built-ins admitted)"),
            "Use count, sum, avg, min, max, bool_and or bool_or of numbers, dates or text (sum of real: cast to float8 or numeric).",
        ))
    }
}

/// The dpnoise aggregate that answers what a refused built-in aggregate
/// asks, as a hint naming both (None: no such aggregate).
///
/// # Safety
/// `aggref` is a live Aggref; inside a transaction.
unsafe fn dpnoise_form(aggref: *mut pg_sys::Aggref) -> Option<String> {
    // SAFETY: the caller's contract; get_func_name returns null or a palloc'd C string.
    let name = unsafe {
        let name = pg_sys::get_func_name((*aggref).aggfnoid);
        if name.is_null()
            || pg_sys::get_func_namespace((*aggref).aggfnoid)
                != pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE)
        {
            return None;
        }
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: as above.
    let star = unsafe { (*aggref).aggstar };
    let form = match name.as_str() {
        "count" if star => "dp_count(epsilon) (rows on a table of one row per person, persons otherwise), for example dp_count(1.0)",
        "count" => "dp_count(value, epsilon) (persons with a non-NULL value; count(DISTINCT <the privacy unit>) is dp_count(epsilon)), for example dp_count(amount, 1.0)",
        "sum" => "dp_sum(value, epsilon, lower, upper) (each person's sum clamped to [lower, upper]), for example dp_sum(amount, 1.0, 0, 100)",
        "avg" => "dp_avg(value, epsilon, lower, upper), for example dp_avg(amount, 1.0, 0, 100)",
        "min" => "dp_min(value, epsilon, lower, upper) (a private low percentile, not the exact least value), for example dp_min(amount, 1.0, 0, 100)",
        "max" => "dp_max(value, epsilon, lower, upper) (a private high percentile, not the exact greatest value), for example dp_max(amount, 1.0, 0, 100)",
        "stddev" | "stddev_pop" | "stddev_samp" => "dp_stddev(value, epsilon, lower, upper), for example dp_stddev(amount, 1.0, 0, 100)",
        "variance" | "var_pop" | "var_samp" => "dp_var(value, epsilon, lower, upper), for example dp_var(amount, 1.0, 0, 100)",
        "percentile_cont" | "percentile_disc" => "dp_quantile(value, epsilon, lower, upper, p) (dp_median at p = 0.5), for example dp_quantile(amount, 1.0, 0, 100, 0.5)",
        _ => return None,
    };
    let domain = if name != "count" {
        // `policy`: an aggregate of a column with a domain is answered as written.
        " Or ask the DBA for the column's domain (dp_domain): then this aggregate of the column is answered as written."
    } else {
        ""
    };
    Some(format!("Instead of {name}, write {form}.{domain}"))
}
