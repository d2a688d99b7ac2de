//! Sums and averages of floats in an analyst's statement, computed exactly.
//!
//! Floating-point addition is not associative: a `sum` of float8 values
//! rounds by the order it meets them, and a level above the releases meets
//! them in the order its plan makes (a hashed grouping in its hash table's,
//! a sorted one in its keys'). An attack summed 1e16, −1e16 and small
//! counts over released rows and read 500 under one plan and 502 under
//! another, the second a free repeat of the first. So, in a statement
//! that reads a protected table, `sum` and `avg` of float4 and float8 (as
//! aggregates and over windows) run in numeric, where addition is exact and
//! the order does not matter, each value taken as the shortest decimal that
//! reads back as it, and their result is cast back to the float type the
//! query asked for (±Infinity beyond float8's range). (The
//! levels of protected rows have no such aggregate: only dpnoise's
//! summarise them, and a per-person subquery's already run in numeric.)

use pgrx::pg_sys;
use std::collections::HashMap;

/// Each float aggregate: its OID, its numeric counterpart, and the cast of
/// the numeric result back to the aggregate's own result type (float4's;
/// float8's is dpnoise's total form, ±Infinity beyond its range, as a
/// float8 sum overflows to, not an error that prints the value).
const IN_NUMERIC: &[(u32, u32, Option<u32>)] = &[
    (2111, 2114, None),       // sum(float8)
    (2110, 2114, Some(1745)), // sum(float4): float4(numeric)
    (2105, 2103, None),       // avg(float8)
    (2104, 2103, None),       // avg(float4)
];

/// dpnoise's total numeric to float8 cast, by name among the total forms.
const TO_FLOAT8: &str = "dp_total_float8_numeric";

/// Makes every float `sum` and `avg` of `query`'s levels run in numeric.
///
/// # Safety
/// `query` is the live top-level Query of an analyst's statement, before planning.
pub unsafe fn exact_sums(query: *mut pg_sys::Query, forms: &HashMap<String, pg_sys::Oid>) {
    let Some(&to_float8) = forms.get(TO_FLOAT8) else {
        return;
    };
    // SAFETY: the caller's contract; each level is a live Query of the tree.
    unsafe { super::each_level(query, &mut |level, _| self::level(level, to_float8)) };
}

/// Rewrites one level's select list and HAVING.
///
/// # Safety
/// `query` is a live Query.
unsafe fn level(query: *mut pg_sys::Query, to_float8: pg_sys::Oid) {
    // SAFETY: the caller's contract; the mutator returns nodes of the same kind for a List.
    unsafe {
        if !(*query).hasAggs && !(*query).hasWindowFuncs {
            return;
        }
        let mut context = to_float8;
        let context = (&raw mut context).cast();
        (*query).targetList = mutate((*query).targetList.cast(), context) as *mut pg_sys::List;
        (*query).havingQual = mutate((*query).havingQual, context);
    }
}

/// Replaces each float sum or average of this level (an aggregate, or one
/// over a window) by its numeric form.
///
/// # Safety
/// Called by the expression mutator with live nodes and the total cast's OID.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn mutate(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow node tags; new nodes are palloc'd; a sublink's
    // query is another level (the walk reaches it).
    unsafe {
        if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
            return node;
        }
        let to_float8 = *(context as *const pg_sys::Oid);
        let found = |function: pg_sys::Oid| {
            IN_NUMERIC
                .iter()
                .find(|(f, ..)| *f == u32::from(function))
                .copied()
        };
        if (*node).type_ == pg_sys::NodeTag::T_Aggref {
            let aggref = node as *mut pg_sys::Aggref;
            // A DISTINCT or ORDER BY inside the call compares its argument
            // with the float type's operators: left as written.
            let (Some((_, numeric, back)), 0, true, true) = (
                found((*aggref).aggfnoid),
                (*aggref).agglevelsup,
                (*aggref).aggdistinct.is_null(),
                (*aggref).aggorder.is_null(),
            ) else {
                return node;
            };
            let copy = pg_sys::copyObjectImpl(aggref.cast()) as *mut pg_sys::Aggref;
            (*copy).aggfnoid = pg_sys::Oid::from(numeric);
            (*copy).aggtype = pg_sys::NUMERICOID;
            (*copy).aggtranstype = pg_sys::InvalidOid;
            (*(*(*copy).aggargtypes).elements).oid_value = pg_sys::NUMERICOID;
            let entry = crate::pg_list::list_nodes((*copy).args)[0] as *mut pg_sys::TargetEntry;
            (*entry).expr = exact_numeric((*entry).expr.cast()).cast();
            return cast_back(copy.cast(), (*aggref).aggtype, back, to_float8);
        }
        if (*node).type_ == pg_sys::NodeTag::T_WindowFunc {
            let window = node as *mut pg_sys::WindowFunc;
            let Some((_, numeric, back)) = found((*window).winfnoid).filter(|_| (*window).winagg)
            else {
                return crate::versions::expression_tree_mutator(node, mutate, context);
            };
            let copy = pg_sys::copyObjectImpl(window.cast()) as *mut pg_sys::WindowFunc;
            (*copy).winfnoid = pg_sys::Oid::from(numeric);
            (*copy).wintype = pg_sys::NUMERICOID;
            let cell = (*(*copy).args).elements;
            (*cell).ptr_value = exact_numeric((*cell).ptr_value.cast()).cast();
            return cast_back(copy.cast(), (*window).wintype, back, to_float8);
        }
        crate::versions::expression_tree_mutator(node, mutate, context)
    }
}

/// A float `arg` as the numeric of the shortest decimal that reads back as
/// it (its text form: `float8out`, then `numeric_in`), so that a sum of
/// one value is that value. (The float8 to numeric cast keeps 15 digits.)
///
/// # Safety
/// `arg` is a live float4 or float8 expression; palloc'd in the current memory context.
unsafe fn exact_numeric(arg: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the node is filled as the parser fills one.
    unsafe {
        let coerce =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::CoerceViaIO>()) as *mut pg_sys::CoerceViaIO;
        (*coerce).xpr.type_ = pg_sys::NodeTag::T_CoerceViaIO;
        (*coerce).arg = arg.cast();
        (*coerce).resulttype = pg_sys::NUMERICOID;
        (*coerce).resultcollid = pg_sys::InvalidOid;
        (*coerce).coerceformat = pg_sys::CoercionForm::COERCE_EXPLICIT_CAST;
        (*coerce).location = -1;
        coerce.cast()
    }
}

/// The numeric `value` cast back to `result`: float4 through `back`,
/// float8 through dpnoise's total cast `to_float8`.
///
/// # Safety
/// `value` is a live numeric expression.
unsafe fn cast_back(
    value: *mut pg_sys::Node,
    result: pg_sys::Oid,
    back: Option<u32>,
    to_float8: pg_sys::Oid,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract.
    unsafe {
        match back {
            Some(function) => call(pg_sys::Oid::from(function), result, value),
            None => call(to_float8, result, value),
        }
    }
}

/// A call of the built-in `function` on `arg`, returning `result`.
///
/// # Safety
/// Inside a transaction; palloc'd in the current memory context.
unsafe fn call(
    function: pg_sys::Oid,
    result: pg_sys::Oid,
    arg: *mut pg_sys::Node,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract.
    unsafe {
        pg_sys::makeFuncExpr(
            function,
            result,
            pg_sys::lappend(std::ptr::null_mut(), arg.cast()),
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}
