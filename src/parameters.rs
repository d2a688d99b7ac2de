//! Privacy parameters must be fixed before the data is read.
//!
//! ε, δ, bounds, sensitivities, losses and priors decide how much noise a
//! release gets. If they could be computed from the data (a column, a
//! scalar subquery over the table, a volatile or stable function that reads
//! it), then the noise, the charge, and even whether an error is raised
//! would depend on the data. So each such argument must be built only from
//! constants and query parameters ($n), combined by immutable functions
//! (casts, arithmetic): anything else is refused (22023) before anything
//! is evaluated or charged.

use crate::errors;
use pgrx::pg_sys;

/// Whether `node` (a planned expression) is built only from constants,
/// query parameters and immutable functions.
pub unsafe fn is_fixed(node: *mut pg_sys::Node) -> bool {
    // SAFETY: node is a live planned expression (or NULL, handled first).
    unsafe {
        node.is_null()
            || !(pg_sys::contain_var_clause(node)
                || pg_sys::contain_mutable_functions(node)
                || pg_sys::contain_subplans(node)
                || pg_sys::expression_tree_walker(node, Some(forbidden_walker), std::ptr::null_mut()))
                && !forbidden(node)
    }
}

/// A node that is never fixed on its own: a parameter set by the executor
/// (a scalar subquery's result, a correlated outer value), an aggregate or
/// a window function.
unsafe fn forbidden(node: *mut pg_sys::Node) -> bool {
    // SAFETY: node is a live, non-NULL expression node: its tag says which struct it is.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_Param => (*(node as *mut pg_sys::Param)).paramkind != pg_sys::ParamKind::PARAM_EXTERN,
            pg_sys::NodeTag::T_Aggref | pg_sys::NodeTag::T_WindowFunc | pg_sys::NodeTag::T_GroupingFunc => true,
            pg_sys::NodeTag::T_SubLink | pg_sys::NodeTag::T_SubPlan | pg_sys::NodeTag::T_AlternativeSubPlan => true,
            _ => false,
        }
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forbidden_walker(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL's walker passes live nodes or NULL.
    unsafe {
        if node.is_null() {
            return false;
        }
        forbidden(node) || pg_sys::expression_tree_walker(node, Some(forbidden_walker), context)
    }
}

/// Refuses `function` unless every one of its arguments except the first
/// `data` (the values it releases) is fixed. For per-row functions: reads
/// the call's expression (`fn_expr`). A call without one (from C code) is
/// refused too: nothing could vouch for its parameters.
pub unsafe fn require_fixed_call(fcinfo: pg_sys::FunctionCallInfo, data: usize, function: &str) {
    // SAFETY: fcinfo is the live call PostgreSQL made; fn_expr is its live expression node or NULL.
    unsafe {
        let site = crate::fmgr::call_site(fcinfo);
        if site.checked {
            return;
        }
        let flinfo = (*fcinfo).flinfo;
        let expr = if flinfo.is_null() { std::ptr::null_mut() } else { (*flinfo).fn_expr };
        if expr.is_null() {
            errors::varying_parameter(function);
        }
        let args = match (*expr).type_ {
            pg_sys::NodeTag::T_FuncExpr => (*(expr as *mut pg_sys::FuncExpr)).args,
            pg_sys::NodeTag::T_OpExpr => (*(expr as *mut pg_sys::OpExpr)).args,
            _ => errors::varying_parameter(function),
        };
        require_fixed_list(args, data, false, function);
        site.checked = true;
    }
}

/// Refuses unless the elements of `args` from index `data` on are fixed;
/// `entries`: the list holds TargetEntry nodes (an Aggref's arguments).
pub unsafe fn require_fixed_list(args: *mut pg_sys::List, data: usize, entries: bool, function: &str) {
    // SAFETY: args is a live List (or NULL) of expression nodes, or of TargetEntry nodes when `entries`.
    unsafe {
        let n = if args.is_null() { 0 } else { (*args).length as usize };
        for i in data..n {
            let mut node = (*(*args).elements.add(i)).ptr_value as *mut pg_sys::Node;
            if entries && !node.is_null() {
                node = (*(node as *mut pg_sys::TargetEntry)).expr.cast();
            }
            if !is_fixed(node) {
                errors::varying_parameter(function);
            }
        }
    }
}
