//! The privacy parameters of an aggregate call, read from its Aggref.
//!
//! A final function must know ε even when no row reached the transition
//! function (empty input still gets a noisy answer), so it evaluates the
//! parameter arguments of the call itself. They must be free of columns and
//! volatile functions: the same for every row. Under a parallel or
//! partitionwise plan the finalizing Aggref only references the partial
//! aggregate's output, so we follow that reference down to the partial
//! Aggref, which still holds the original arguments.

use crate::errors;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// A node's tag.
///
/// # Safety
/// `node` points to a live PostgreSQL node.
unsafe fn tag(node: *const std::ffi::c_void) -> pg_sys::NodeTag {
    // SAFETY: the caller's contract: every node starts with its NodeTag.
    unsafe { (*(node as *const pg_sys::Node)).type_ }
}

/// The `n`th pointer of a List, or null past its end.
///
/// # Safety
/// `list` is null or a live pointer List.
unsafe fn nth<T>(list: *mut pg_sys::List, n: usize) -> *mut T {
    // SAFETY: the caller's contract; n is checked against the list's length.
    unsafe {
        if list.is_null() || n >= (*list).length as usize {
            return std::ptr::null_mut();
        }
        (*(*list).elements.add(n)).ptr_value as *mut T
    }
}

fn lost(aggregate: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("{aggregate}: cannot find the privacy parameters of this call in the plan")
    );
}

/// The plan node whose output an OUTER_VAR of `plan` refers to.
///
/// # Safety
/// `plan` is a live Plan node.
unsafe fn outer_child(plan: *mut pg_sys::Plan) -> *mut pg_sys::Plan {
    // SAFETY: the caller's contract; the casts follow the node's own tag.
    unsafe {
        match (*plan).type_ {
            pg_sys::NodeTag::T_Append => nth((*(plan as *mut pg_sys::Append)).appendplans, 0),
            pg_sys::NodeTag::T_MergeAppend => nth((*(plan as *mut pg_sys::MergeAppend)).mergeplans, 0),
            _ => (*plan).lefttree,
        }
    }
}

/// The argument list (of TargetEntry) as the user wrote it.
///
/// # Safety
/// `fcinfo` is a live aggregate support call.
unsafe fn original_arguments(fcinfo: pg_sys::FunctionCallInfo, aggregate: &str) -> *mut pg_sys::List {
    // SAFETY: the caller's contract: AggGetAggref returns the running Aggref (or
    // null); fcinfo->context, once its tag is checked, is the running AggState,
    // whose plan tree is live for the whole execution.
    unsafe {
        let aggref = pg_sys::AggGetAggref(fcinfo);
        if aggref.is_null() {
            lost(aggregate);
        }
        if (*aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE == 0 {
            return (*aggref).args;
        }
        let context = (*fcinfo).context;
        if context.is_null() || tag(context.cast()) != pg_sys::NodeTag::T_AggState {
            lost(aggregate);
        }
        let mut plan = (*(context as *mut pg_sys::AggState)).ss.ps.plan;
        let first: *mut pg_sys::TargetEntry = nth((*aggref).args, 0);
        if first.is_null() {
            lost(aggregate);
        }
        let mut expr = (*first).expr as *mut std::ffi::c_void;
        // Each step goes one plan level down, so this ends at the leaves.
        while !expr.is_null() && !plan.is_null() {
            match tag(expr) {
                pg_sys::NodeTag::T_Aggref => return (*(expr as *mut pg_sys::Aggref)).args,
                pg_sys::NodeTag::T_Var if (*(expr as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR => {
                    let attno = (*(expr as *mut pg_sys::Var)).varattno as usize;
                    plan = outer_child(plan);
                    if plan.is_null() || attno == 0 {
                        break;
                    }
                    let entry: *mut pg_sys::TargetEntry = nth((*plan).targetlist, attno - 1);
                    if entry.is_null() {
                        break;
                    }
                    expr = (*entry).expr.cast();
                }
                _ => break,
            }
        }
        lost(aggregate)
    }
}

/// Evaluates the arguments at `indices` of this aggregate call; `None` is NULL.
///
/// # Safety
/// `fcinfo` is a live transition or final call of `aggregate`.
pub unsafe fn aggregate_arguments<const N: usize>(
    fcinfo: pg_sys::FunctionCallInfo,
    indices: [usize; N],
    aggregate: &str,
) -> [Option<pg_sys::Datum>; N] {
    // SAFETY: the caller's contract; an index past the arguments gives a null entry,
    // refused; only a Const or a fixed expression is evaluated, in the AggState's
    // own expression context.
    unsafe {
        let args = original_arguments(fcinfo, aggregate);
        let context = (*fcinfo).context as *mut pg_sys::AggState;
        indices.map(|i| {
            let entry: *mut pg_sys::TargetEntry = nth(args, i);
            if entry.is_null() {
                lost(aggregate);
            }
            let expr = (*entry).expr;
            if tag(expr.cast()) == pg_sys::NodeTag::T_Const {
                let c = expr as *mut pg_sys::Const;
                return (!(*c).constisnull).then_some((*c).constvalue);
            }
            if !crate::parameters::is_fixed(expr.cast()) {
                errors::varying_parameter(aggregate);
            }
            let state = pg_sys::ExecInitExpr(expr, &mut (*context).ss.ps);
            let mut isnull = false;
            let value = pg_sys::ExecEvalExprSwitchContext(state, (*context).ss.ps.ps_ExprContext, &mut isnull);
            (!isnull).then_some(value)
        })
    }
}

/// Refuses an aggregate call whose privacy parameters (every argument but
/// the first `data`) are not fixed; for transition functions, which see
/// only the evaluated values. Checked once per call site.
///
/// # Safety
/// `fcinfo` is a live transition call of `aggregate`.
pub unsafe fn require_fixed_arguments(fcinfo: pg_sys::FunctionCallInfo, data: usize, aggregate: &str) {
    // SAFETY: the caller's contract; the call site reference is dropped before returning.
    unsafe {
        let site = crate::call_site::call_site(fcinfo);
        if site.checked {
            return;
        }
        let args = original_arguments(fcinfo, aggregate);
        crate::parameters::require_fixed_list(args, data, true, aggregate);
        site.checked = true;
    }
}

/// A float8 parameter of the call that must not be NULL.
pub fn f64_parameter(value: Option<pg_sys::Datum>, name: &str) -> f64 {
    match value {
        Some(d) => f64::from_bits(d.value() as u64),
        None => errors::null_parameter(name),
    }
}

/// An int8 parameter of the call that must not be NULL.
pub fn i64_parameter(value: Option<pg_sys::Datum>, name: &str) -> i64 {
    match value {
        Some(d) => d.value() as i64,
        None => errors::null_parameter(name),
    }
}

/// A text parameter of the call that must not be NULL.
///
/// # Safety
/// `value` is what `aggregate_arguments` gave for an argument declared text.
pub unsafe fn text_parameter(value: Option<pg_sys::Datum>, name: &str) -> String {
    match value {
        // SAFETY: the caller's contract: a non-NULL text datum.
        Some(d) => unsafe { <String as pgrx::FromDatum>::from_datum(d, false) }.unwrap_or_default(),
        None => errors::null_parameter(name),
    }
}

/// How many arguments the user passed: `aggargtypes` lists them even in a
/// combining Aggref, whose own `args` hold the partial result.
///
/// # Safety
/// `fcinfo` is a live aggregate support call.
pub unsafe fn argument_count(fcinfo: pg_sys::FunctionCallInfo) -> usize {
    // SAFETY: the caller's contract; AggGetAggref gives the running Aggref or null.
    unsafe {
        let aggref = pg_sys::AggGetAggref(fcinfo);
        if aggref.is_null() || (*aggref).aggargtypes.is_null() {
            return 0;
        }
        (*(*aggref).aggargtypes).length as usize
    }
}
