//! Sums and averages of floats in an analyst's statement, computed exactly.
//!
//! Floating-point addition is not associative: a `sum` of float8 values
//! rounds by the order it meets them, and a level above the releases meets
//! them in the order its plan makes (a hashed grouping in its hash table's,
//! a sorted one in its keys'). An attack summed 1e16, −1e16 and small
//! counts over released rows and read 500 under one plan and 502 under
//! another, the second a free repeat of the first. So, in a statement
//! that reads a protected table, `sum` and `avg` of float4 and float8 run
//! in numeric, where addition is exact and the order does not matter, and
//! their result is cast back to the float type the query asked for. (The
//! levels of protected rows have no such aggregate: only dpnoise's
//! summarise them, and a per-person subquery's already run in numeric.)

use pgrx::pg_sys;

/// Each float aggregate: its OID, its numeric counterpart, the cast of its
/// argument to numeric, and the cast of the numeric result back to the
/// aggregate's own result type.
const IN_NUMERIC: &[(u32, u32, u32, u32)] = &[
    (2111, 2114, 1743, 1746), // sum(float8): float8(sum(numeric(x)))
    (2110, 2114, 1742, 1745), // sum(float4): float4(sum(numeric(x)))
    (2105, 2103, 1743, 1746), // avg(float8): float8(avg(numeric(x)))
    (2104, 2103, 1742, 1746), // avg(float4): float8(avg(numeric(x)))
];

/// Makes every float `sum` and `avg` of `query`'s levels run in numeric.
///
/// # Safety
/// `query` is the live top-level Query of an analyst's statement, before planning.
pub unsafe fn exact_sums(query: *mut pg_sys::Query) {
    // SAFETY: the caller's contract; each level is a live Query of the tree.
    unsafe { super::each_level(query, &mut |level, _| self::level(level)) };
}

/// Rewrites one level's select list and HAVING.
///
/// # Safety
/// `query` is a live Query.
unsafe fn level(query: *mut pg_sys::Query) {
    // SAFETY: the caller's contract; the mutator returns nodes of the same kind for a List.
    unsafe {
        if !(*query).hasAggs {
            return;
        }
        (*query).targetList =
            mutate((*query).targetList.cast(), std::ptr::null_mut()) as *mut pg_sys::List;
        (*query).havingQual = mutate((*query).havingQual, std::ptr::null_mut());
    }
}

/// Replaces each float sum or average of this level by its numeric form.
///
/// # Safety
/// Called by the expression mutator with live nodes.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn mutate(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow node tags; new nodes are palloc'd; a sublink's
    // query is another level (the walker reaches it).
    unsafe {
        if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
            return node;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Aggref {
            let aggref = node as *mut pg_sys::Aggref;
            let found = IN_NUMERIC
                .iter()
                .find(|(f, ..)| *f == u32::from((*aggref).aggfnoid));
            // A DISTINCT or ORDER BY inside the call compares its argument
            // with the float type's operators: left as written.
            let (Some(&(_, numeric, to_numeric, back)), 0, true, true) = (
                found,
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
            (*entry).expr = call(to_numeric, pg_sys::NUMERICOID, (*entry).expr.cast()).cast();
            return call(back, (*aggref).aggtype, copy.cast());
        }
        crate::versions::expression_tree_mutator(node, mutate, context)
    }
}

/// A call of the built-in `function` on `arg`, returning `result`.
///
/// # Safety
/// Inside a transaction; palloc'd in the current memory context.
unsafe fn call(function: u32, result: pg_sys::Oid, arg: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract.
    unsafe {
        pg_sys::makeFuncExpr(
            pg_sys::Oid::from(function),
            result,
            pg_sys::lappend(std::ptr::null_mut(), arg.cast()),
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}
