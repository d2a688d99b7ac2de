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
/// `node` is non-null and points to a live PostgreSQL node (any struct that
/// begins with a `NodeTag`, as every node does).
unsafe fn tag(node: *const std::ffi::c_void) -> pg_sys::NodeTag {
    // SAFETY: `node` is a live node (the caller's contract) and every node struct begins with its
    // NodeTag, so reading `type_` through a `*const Node` stays inside the node's allocation.
    unsafe { (*(node as *const pg_sys::Node)).type_ }
}

/// The `n`th pointer of a List, or null past its end.
///
/// # Safety
/// `list` is null or a live List of pointers (a T_List, not an integer or OID
/// list) whose elements are `T`s.
unsafe fn nth<T>(list: *mut pg_sys::List, n: usize) -> *mut T {
    // SAFETY: `list` is null (tested first) or a live pointer List (the caller's contract); its
    // `elements` array holds `length` initialised cells and `n < length` is checked before the
    // read, and `ptr_value` is the union field a pointer List stores.
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
/// `plan` is non-null and a live Plan node of the executing plan tree.
unsafe fn outer_child(plan: *mut pg_sys::Plan) -> *mut pg_sys::Plan {
    // SAFETY: `plan` is a live Plan (the caller's contract), so its header (`type_`, `lefttree`)
    // can be read; it is cast to Append or MergeAppend only when its tag says it is one, and
    // their `appendplans` / `mergeplans` are pointer Lists of Plans, as `nth` requires.
    unsafe {
        match (*plan).type_ {
            pg_sys::NodeTag::T_Append => nth((*(plan as *mut pg_sys::Append)).appendplans, 0),
            pg_sys::NodeTag::T_MergeAppend => {
                nth((*(plan as *mut pg_sys::MergeAppend)).mergeplans, 0)
            }
            _ => (*plan).lefttree,
        }
    }
}

/// The argument list (of TargetEntry) as the user wrote it.
///
/// # Safety
/// `fcinfo` is the live FunctionCallInfo of a call that PostgreSQL's function
/// manager is making (for anything but an Agg node's transition or final call,
/// the call is refused). The List returned belongs to the plan tree.
unsafe fn original_arguments(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
) -> *mut pg_sys::List {
    // SAFETY: `fcinfo` is a live call (the caller's contract), and AggGetAggref reads only its
    // `context`: it returns null (refused) unless that is an AggState running a transition or
    // final function, and then the Aggref of that call. In the combining branch the context's tag
    // is checked again before the cast to AggState. The Aggref, the AggState's Plan and every plan
    // node and TargetEntry reached below belong to the executing plan tree, allocated until the
    // executor ends this query. Each expression is non-null (loop condition) and cast only to the
    // struct its tag names; a plan node's `targetlist` is read through the Plan header every plan
    // node begins with; `nth` bounds-checks each index (`varattno` is 1-based, 0 is refused).
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
        plan_arguments(
            (*(context as *mut pg_sys::AggState)).ss.ps.plan,
            aggref,
            aggregate,
        )
    }
}

/// The argument list (of TargetEntry) as the user wrote it, of `aggref` in
/// the plan node `plan` (a combining Aggref's are found in the partial
/// aggregate below).
///
/// # Safety
/// `plan` is the live Plan node whose target list or quals hold the live
/// `aggref`, in a plan tree that stays allocated while the List is used.
pub unsafe fn plan_arguments(
    mut plan: *mut pg_sys::Plan,
    aggref: *mut pg_sys::Aggref,
    aggregate: &str,
) -> *mut pg_sys::List {
    // SAFETY: the caller's contract; each expression is non-null (loop condition) and cast only
    // to the struct its tag names; a plan node's `targetlist` is read through the Plan header every
    // plan node begins with; `nth` bounds-checks each index (`varattno` is 1-based, 0 is refused).
    unsafe {
        if (*aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE == 0 {
            return (*aggref).args;
        }
        let first: *mut pg_sys::TargetEntry = nth((*aggref).args, 0);
        if first.is_null() {
            lost(aggregate);
        }
        let mut expr = (*first).expr as *mut std::ffi::c_void;
        // Each step goes one plan level down, so this ends at the leaves.
        while !expr.is_null() && !plan.is_null() {
            match tag(expr) {
                pg_sys::NodeTag::T_Aggref => return (*(expr as *mut pg_sys::Aggref)).args,
                pg_sys::NodeTag::T_Var
                    if (*(expr as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR =>
                {
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
/// `fcinfo` is the live FunctionCallInfo that an Agg node passed to a
/// transition or final function of the aggregate `aggregate`, inside the
/// query's transaction. A by-reference value returned points into the plan
/// (a Const) or into the per-tuple memory of the AggState's output expression
/// context: use it within this call.
pub unsafe fn aggregate_arguments<const N: usize>(
    fcinfo: pg_sys::FunctionCallInfo,
    indices: [usize; N],
    aggregate: &str,
) -> [Option<pg_sys::Datum>; N] {
    // SAFETY: `fcinfo` is a live transition or final call made by an Agg node (the caller's
    // contract), as original_arguments requires; it returns only once AggGetAggref has found an
    // AggState in fcinfo->context, so the cast of `context` is sound, and the List of TargetEntry
    // it returns lives in the plan tree. `nth` gives a live TargetEntry or null (an index past the
    // arguments: refused). A Const is read through the struct its tag names. Any other expression
    // is evaluated only after is_fixed (a live expression, inside the transaction) accepted it: no
    // Vars, SubPlans or mutable functions. ExecInitExpr builds its ExprState in the current memory
    // context, parented to the AggState's own PlanState, and ExecEvalExprSwitchContext runs it in
    // the AggState's output ExprContext; both belong to the running executor.
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
            let value = pg_sys::ExecEvalExprSwitchContext(
                state,
                (*context).ss.ps.ps_ExprContext,
                &mut isnull,
            );
            (!isnull).then_some(value)
        })
    }
}

/// The groups a person's contribution is spread over, and the totals of
/// the arguments at `indices` (ε, δ), when the gate wrote them as
/// `dp_share(total, k)` (its bounding): each group's release is planned
/// with the whole (ε, δ) and k (`Request::groups`), which calibrates the
/// Gaussian to the L2 sensitivity and gives the other mechanisms their
/// share. An argument not wrapped gives its own value (a share never
/// exceeds it). None: no argument wrapped, one group.
///
/// # Safety
/// As `aggregate_arguments`.
pub unsafe fn shared_totals<const N: usize>(
    fcinfo: pg_sys::FunctionCallInfo,
    indices: [usize; N],
    aggregate: &str,
) -> Option<(u32, [Option<pg_sys::Datum>; N])> {
    // SAFETY: as aggregate_arguments; share_call's arguments are the gate's (a fixed total, an
    // int4 constant) and are evaluated as the call's other parameters are.
    unsafe {
        let args = original_arguments(fcinfo, aggregate);
        let context = (*fcinfo).context as *mut pg_sys::AggState;
        let evaluate = |expr: *mut pg_sys::Expr| -> Option<pg_sys::Datum> {
            if tag(expr.cast()) == pg_sys::NodeTag::T_Const {
                let c = expr as *mut pg_sys::Const;
                return (!(*c).constisnull).then_some((*c).constvalue);
            }
            if !crate::parameters::is_fixed(expr.cast()) {
                errors::varying_parameter(aggregate);
            }
            let state = pg_sys::ExecInitExpr(expr, &mut (*context).ss.ps);
            let mut isnull = false;
            let value = pg_sys::ExecEvalExprSwitchContext(
                state,
                (*context).ss.ps.ps_ExprContext,
                &mut isnull,
            );
            (!isnull).then_some(value)
        };
        let mut groups = 0u32;
        let totals = indices.map(|i| {
            let entry: *mut pg_sys::TargetEntry = nth(args, i);
            if entry.is_null() {
                lost(aggregate);
            }
            let expr = (*entry).expr;
            match crate::parameters::share_call(expr.cast()) {
                Some(share) => {
                    let parts = crate::pg_list::list_nodes(share);
                    let k = evaluate(parts[1].cast()).map_or(1, |d| d.value() as i32);
                    groups = groups.max(k.max(1) as u32);
                    evaluate(parts[0].cast())
                }
                None => evaluate(expr),
            }
        });
        (groups > 1).then_some((groups, totals))
    }
}

/// Refuses an aggregate call whose privacy parameters (every argument but
/// the first `data`) are not fixed; for transition functions, which see
/// only the evaluated values. Checked once per call site.
///
/// # Safety
/// `fcinfo` is the live FunctionCallInfo that an Agg node passed to a
/// transition function of the dpnoise aggregate `aggregate` (so its `flinfo`
/// is set, and its `fn_extra` is only ever set by `call_site`), inside the
/// query's transaction, and the caller holds no reference to its call site.
pub unsafe fn require_fixed_arguments(
    fcinfo: pg_sys::FunctionCallInfo,
    data: usize,
    aggregate: &str,
) {
    // SAFETY: `fcinfo` is a live transition call of a dpnoise aggregate with a non-null `flinfo`
    // (the caller's contract), which is what call_site and original_arguments require. `site` is
    // the only reference to this call site while it lives (nothing called here reaches call_site)
    // and it does not outlive this call. original_arguments gives a live List of TargetEntry
    // nodes, which require_fixed_list accepts with `entries = true`, inside the transaction.
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
/// `value` is what `aggregate_arguments` returned, in this call, for an
/// argument whose SQL type is text: `Some` holds a live (possibly toasted)
/// text varlena.
pub unsafe fn text_parameter(value: Option<pg_sys::Datum>, name: &str) -> String {
    match value {
        // SAFETY: `d` is a live text datum, not NULL (that is `None`), by the caller's contract;
        // from_datum detoasts it and copies the bytes into a String, which borrows nothing from it.
        Some(d) => unsafe { <String as pgrx::FromDatum>::from_datum(d, false) }.unwrap_or_default(),
        None => errors::null_parameter(name),
    }
}

/// How many arguments the user passed: `aggargtypes` lists them even in a
/// combining Aggref, whose own `args` hold the partial result.
///
/// # Safety
/// `fcinfo` is the live FunctionCallInfo of a call that PostgreSQL's function
/// manager is making (anything but an Agg node's transition or final call
/// counts 0 arguments).
pub unsafe fn argument_count(fcinfo: pg_sys::FunctionCallInfo) -> usize {
    // SAFETY: `fcinfo` is a live call (the caller's contract), and AggGetAggref reads only its
    // `context`; a non-null result is the running Aggref, in the plan tree, whose `aggargtypes` is
    // null (tested) or a live OID List, of which only the header's `length` is read.
    unsafe {
        let aggref = pg_sys::AggGetAggref(fcinfo);
        if aggref.is_null() || (*aggref).aggargtypes.is_null() {
            return 0;
        }
        (*(*aggref).aggargtypes).length as usize
    }
}
