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
use crate::pg_list::oid_list;
use pgrx::pg_sys;

/// Whether `node` (a planned expression) is built only from constants,
/// query parameters and immutable functions.
///
/// # Safety
/// `node` is null or a live expression tree; inside a transaction (it reads the catalog).
pub unsafe fn is_fixed(node: *mut pg_sys::Node) -> bool {
    // SAFETY: `node` is null (tested first, so nothing below sees it) or a live expression tree
    // (the caller's contract), which is all that contain_var_clause, contain_mutable_functions,
    // contain_subplans, expression_tree_walker and forbidden read; forbidden_walker gets a null
    // context it never reads. The catalog lookups (volatility, schemas) run in the caller's
    // transaction.
    unsafe {
        if let Some(args) = share_call(node) {
            // dp_share is STABLE only to stay a call in the plan (the
            // statement's cost reads its total): its arguments decide.
            return crate::pg_list::list_nodes(args)
                .into_iter()
                .all(|arg| is_fixed(arg));
        }
        node.is_null()
            || !(pg_sys::contain_var_clause(node)
                || pg_sys::contain_mutable_functions(node)
                || pg_sys::contain_subplans(node)
                || pg_sys::expression_tree_walker(
                    node,
                    Some(forbidden_walker),
                    std::ptr::null_mut(),
                ))
                && !forbidden(node)
    }
}

/// The arguments of `node` if it is a call of dpnoise's `dp_share`, which
/// the gate writes around ε and δ when a person's groups share them.
///
/// # Safety
/// `node` is null or a live expression node; inside a transaction.
pub unsafe fn share_call(node: *mut pg_sys::Node) -> Option<*mut pg_sys::List> {
    // SAFETY: the caller's contract; the cast follows the tag; the catalog lookups run in the
    // caller's transaction and answer null / InvalidOid for unknown OIDs.
    unsafe {
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let call = node as *mut pg_sys::FuncExpr;
        share_function((*call).funcid).then_some((*call).args)
    }
}

/// Whether `funcid` is dpnoise's `dp_share`.
///
/// # Safety
/// Inside a transaction (catalog lookups by OID).
pub unsafe fn share_function(funcid: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract; unknown OIDs answer null / InvalidOid.
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        let named = !name.is_null() && std::ffi::CStr::from_ptr(name).to_bytes() == b"dp_share";
        named && !untrusted(funcid)
    }
}

/// A node that is never fixed on its own: a parameter set by the executor
/// (a scalar subquery's result, a correlated outer value), an aggregate or
/// a window function, or a call of a function outside pg_catalog. A
/// function any role can write may be labelled IMMUTABLE and still read a
/// table; the planner then runs it once and leaves its result as a
/// constant, so it is refused here, in the query before planning.
///
/// # Safety
/// `node` is non-null and a live expression node; inside a transaction.
unsafe fn forbidden(node: *mut pg_sys::Node) -> bool {
    // SAFETY: `node` is a live, non-null node (the caller's contract): its tag is read first, and it
    // is cast only to the struct that tag names (DistinctExpr and NullIfExpr are typedefs of
    // OpExpr). untrusted's catalog lookups run in the caller's transaction.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_Param => {
                (*(node as *mut pg_sys::Param)).paramkind != pg_sys::ParamKind::PARAM_EXTERN
            }
            pg_sys::NodeTag::T_Aggref
            | pg_sys::NodeTag::T_WindowFunc
            | pg_sys::NodeTag::T_GroupingFunc => true,
            pg_sys::NodeTag::T_SubLink
            | pg_sys::NodeTag::T_SubPlan
            | pg_sys::NodeTag::T_AlternativeSubPlan => true,
            pg_sys::NodeTag::T_FuncExpr => untrusted((*(node as *mut pg_sys::FuncExpr)).funcid),
            // DistinctExpr and NullIfExpr are OpExprs by another tag.
            pg_sys::NodeTag::T_OpExpr
            | pg_sys::NodeTag::T_DistinctExpr
            | pg_sys::NodeTag::T_NullIfExpr => untrusted((*(node as *mut pg_sys::OpExpr)).opfuncid),
            pg_sys::NodeTag::T_ScalarArrayOpExpr => {
                untrusted((*(node as *mut pg_sys::ScalarArrayOpExpr)).opfuncid)
            }
            _ => false,
        }
    }
}

/// A function that is neither one of PostgreSQL's own (pg_catalog) nor
/// dpnoise's (its prior constructors).
///
/// # Safety
/// Inside a transaction (it reads the catalog).
pub(crate) unsafe fn untrusted(function: pg_sys::Oid) -> bool {
    // SAFETY: inside a transaction (the caller's contract), so the syscache lookup of
    // get_func_namespace and the catalog scans of extensions::oid and getExtensionOfObject may
    // run. They take OIDs and a NUL-terminated literal, and answer InvalidOid for an unknown
    // function or a missing extension (missing_ok) instead of raising.
    unsafe {
        if function == pg_sys::InvalidOid {
            return true;
        }
        if pg_sys::get_func_namespace(function) == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE) {
            return false;
        }
        let extension = crate::extensions::oid(crate::extensions::Extension::Dpnoise);
        extension == pg_sys::InvalidOid
            || pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, function) != extension
    }
}

/// # Safety
/// `node` is null or a live expression node (as `expression_tree_walker`
/// passes them), inside a transaction; `context` is never read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forbidden_walker(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: `node` is null (tested first) or a live node of the tree being walked (the caller's
    // contract), which is what forbidden and expression_tree_walker read; the catalog lookups run
    // in the caller's transaction, and `context` is passed on unread.
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
///
/// # Safety
/// `fcinfo` is the live FunctionCallInfo that PostgreSQL's function manager
/// passed to a dpnoise per-row function (a call without `flinfo`, such as a
/// DirectFunctionCall, is refused before `call_site` would dereference it),
/// whose `fn_extra` only `call_site` sets; the caller holds no reference to
/// its call site; inside a transaction.
#[inline(always)]
pub unsafe fn require_fixed_call(fcinfo: pg_sys::FunctionCallInfo, data: usize, function: &str) {
    // SAFETY: the caller's contract; `call_site` needs `flinfo`, checked non-null first; the
    // reference is dropped at once.
    unsafe {
        // Checked on the call's first row (this runs for every row).
        if !(*fcinfo).flinfo.is_null() && crate::call_site::call_site(fcinfo).checked {
            return;
        }
        check_fixed_call(fcinfo, data, function)
    }
}

/// `require_fixed_call` on a call's first row.
///
/// # Safety
/// As `require_fixed_call`.
#[inline(never)]
unsafe fn check_fixed_call(fcinfo: pg_sys::FunctionCallInfo, data: usize, function: &str) {
    // SAFETY: `fcinfo` is a live call of a dpnoise per-row function (the caller's contract); its
    // `flinfo` is checked non-null before call_site, which requires it; `site` is the only reference to that call site
    // while it lives. `fn_expr` is null (refused) or the call's FuncExpr or OpExpr in the plan tree
    // (set by the executor when it initialised the call), live for this execution; it is cast
    // only to the struct its tag names, and its `args` is a List of expressions, as
    // require_fixed_list accepts with `entries = false`, inside the transaction.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null() {
            errors::varying_parameter(function);
        }
        let site = crate::call_site::call_site(fcinfo);
        let expr = (*flinfo).fn_expr;
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
///
/// # Safety
/// `args` is null or a live List of expressions (of TargetEntry nodes when
/// `entries`); inside a transaction.
pub unsafe fn require_fixed_list(
    args: *mut pg_sys::List,
    data: usize,
    entries: bool,
    function: &str,
) {
    // SAFETY: all_fixed's contract is this function's own: `args` null or a live List of the kind
    // `entries` says, inside a transaction.
    if !unsafe { all_fixed(args, data, entries) } {
        errors::varying_parameter(function);
    }
}

/// What a plan or query walk looks for, and the first call it found.
struct Search {
    /// Before planning: only calls of functions outside pg_catalog and
    /// dpnoise (columns may still be constants folded in by the planner,
    /// as from a CTE of constants); after: everything `is_fixed` refuses.
    functions_only: bool,
    found: Option<String>,
}

/// Whether the elements of `args` from index `data` on pass `search`.
///
/// # Safety
/// `args` is null or a live List of expressions (of TargetEntry nodes when
/// `entries`); inside a transaction.
unsafe fn arguments_pass(
    args: *mut pg_sys::List,
    data: usize,
    entries: bool,
    search: &Search,
) -> bool {
    if !search.functions_only {
        // SAFETY: all_fixed's contract is this function's own: `args` null or a live List of the
        // kind `entries` says, inside a transaction.
        return unsafe { all_fixed(args, data, entries) };
    }
    // SAFETY: `args` is null (length 0) or a live List of expression pointers, TargetEntry
    // pointers when `entries` (the caller's contract): its cells are read below `length`, and a
    // node is unwrapped to its `expr` as a TargetEntry only when `entries`. Each node is null
    // (passes) or live, as calls_untrusted and expression_tree_walker need; untrusted_walker gets
    // a null context it never reads; the catalog lookups run in the caller's transaction.
    unsafe {
        let n = if args.is_null() {
            0
        } else {
            (*args).length as usize
        };
        (data..n).all(|i| {
            let mut node = (*(*args).elements.add(i)).ptr_value as *mut pg_sys::Node;
            if entries && !node.is_null() {
                node = (*(node as *mut pg_sys::TargetEntry)).expr.cast();
            }
            node.is_null()
                || !(calls_untrusted(node)
                    || pg_sys::expression_tree_walker(
                        node,
                        Some(untrusted_walker),
                        std::ptr::null_mut(),
                    ))
        })
    }
}

/// A call of a function outside pg_catalog and dpnoise.
///
/// # Safety
/// `node` is non-null and a live expression node; inside a transaction.
unsafe fn calls_untrusted(node: *mut pg_sys::Node) -> bool {
    // SAFETY: `node` is a live, non-null node (the caller's contract), so its tag can be read, and
    // it is passed to forbidden, which needs just that and the caller's transaction.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_FuncExpr
            | pg_sys::NodeTag::T_OpExpr
            | pg_sys::NodeTag::T_DistinctExpr
            | pg_sys::NodeTag::T_NullIfExpr
            | pg_sys::NodeTag::T_ScalarArrayOpExpr => forbidden(node),
            _ => false,
        }
    }
}

/// # Safety
/// `node` is null or a live expression node (as `expression_tree_walker`
/// passes them), inside a transaction; `context` is never read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn untrusted_walker(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: `node` is null (tested first) or a live node of the tree being walked (the caller's
    // contract), which is what calls_untrusted and expression_tree_walker read; the catalog
    // lookups run in the caller's transaction, and `context` is passed on unread.
    unsafe {
        !node.is_null()
            && (calls_untrusted(node)
                || pg_sys::expression_tree_walker(node, Some(untrusted_walker), context))
    }
}

/// Whether the elements of `args` from index `data` on are fixed.
///
/// # Safety
/// `args` is null or a live List of expressions (of TargetEntry nodes when
/// `entries`); inside a transaction.
unsafe fn all_fixed(args: *mut pg_sys::List, data: usize, entries: bool) -> bool {
    // SAFETY: `args` is null (length 0) or a live List of expression pointers, TargetEntry
    // pointers when `entries` (the caller's contract): its cells are read below `length`, and a
    // node is unwrapped to its `expr` as a TargetEntry only when `entries`. Each node is null or
    // a live expression tree, which is is_fixed's contract, inside the caller's transaction.
    unsafe {
        let n = if args.is_null() {
            0
        } else {
            (*args).length as usize
        };
        (data..n).all(|i| {
            let mut node = (*(*args).elements.add(i)).ptr_value as *mut pg_sys::Node;
            if entries && !node.is_null() {
                node = (*(node as *mut pg_sys::TargetEntry)).expr.cast();
            }
            is_fixed(node)
        })
    }
}

/// Refuses a statement, before it runs, if any dpnoise call in its plan has
/// a privacy parameter that is not fixed: so no call site of the statement
/// can be charged before another's refusal (final functions run one after
/// another). The per-call checks stay, for calls outside any plan.
///
/// # Safety
/// `stmt` is null or the live PlannedStmt of the QueryDesc that ExecutorStart
/// was given; inside a transaction.
pub unsafe fn check_plan(stmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: `stmt` is null (returns) or the live PlannedStmt ExecutorStart was given (the
    // caller's contract), as plan_nodes requires; each node's header is read, and its
    // `targetlist` and `qual` (and a function scan's functions, a values scan's lists) are null
    // (skipped) or Lists of expressions, which expression_tree_walker walks. `found` points to
    // the local `search`, which outlives every walk: check_call is the only user of the pointer,
    // and `search` itself is read only after a walk has returned. The catalog lookups run in the caller's transaction.
    unsafe {
        if stmt.is_null() {
            return;
        }
        // The walker stops at the first call found unfixed and names it; the
        // error is raised here, not inside PostgreSQL's walker.
        let mut search = Search {
            functions_only: false,
            found: None,
        };
        let found = &raw mut search;
        for plan in plan_nodes(stmt) {
            // A function in FROM, or a VALUES list, is evaluated by its scan.
            let scanned = match (*plan).type_ {
                pg_sys::NodeTag::T_FunctionScan => (*(plan as *mut pg_sys::FunctionScan)).functions,
                pg_sys::NodeTag::T_ValuesScan => (*(plan as *mut pg_sys::ValuesScan)).values_lists,
                _ => std::ptr::null_mut(),
            };
            for list in [(*plan).targetlist, (*plan).qual, scanned] {
                if !list.is_null()
                    && pg_sys::expression_tree_walker(list.cast(), Some(check_call), found.cast())
                {
                    errors::varying_parameter(
                        search.found.as_deref().unwrap_or("a dpnoise function"),
                    );
                }
            }
        }
    }
}

/// The same check on a query before it is planned, when a function's call
/// is still a call (the planner would fold an IMMUTABLE one into a constant).
///
/// # Safety
/// `query` is null or the live Query the planner was given; inside a transaction.
pub unsafe fn check_query(query: *mut pg_sys::Query) {
    // SAFETY: `query` is null (returns) or the live Query the planner was given (the caller's
    // contract), which query_tree_walker (flags 0) walks, calling check_call on its nodes with
    // `found`, a pointer to the local `search` that outlives the walk; `search` itself is read only
    // after the walk has returned. The catalog lookups run in the caller's transaction.
    unsafe {
        if query.is_null() {
            return;
        }
        let mut search = Search {
            functions_only: true,
            found: None,
        };
        let found = &raw mut search;
        if pg_sys::query_tree_walker(query, Some(check_call), found.cast(), 0) {
            errors::varying_parameter(search.found.as_deref().unwrap_or("a dpnoise function"));
        }
    }
}

/// Whether `query` reads an external parameter ($1): what a cached plan's
/// generic form leaves unbound.
///
/// # Safety
/// `query` is a live Query.
pub unsafe fn has_extern(query: *mut pg_sys::Query) -> bool {
    /// # Safety
    /// Called by the tree walkers with live nodes.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                return pg_sys::query_tree_walker(node.cast(), Some(walk), context, 0);
            }
            if (*node).type_ == pg_sys::NodeTag::T_Param
                && (*(node as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_EXTERN
            {
                return true;
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(query.cast(), std::ptr::null_mut()) }
}

/// Every node of a statement's plan: its tree, with the children of
/// Append, MergeAppend and SubqueryScan, and its subplans.
///
/// # Safety
/// `stmt` is the live PlannedStmt of a query that has not ended.
pub unsafe fn plan_nodes(stmt: *mut pg_sys::PlannedStmt) -> Vec<*mut pg_sys::Plan> {
    // SAFETY: the caller's contract: the plan tree and its `subplans` List of Plan pointers (null
    // for an unused subplan: skipped) are live. Each Plan is read through the header all plan nodes
    // begin with, and cast to Append, MergeAppend or SubqueryScan only when its tag says so; their
    // child lists are Lists of Plan pointers.
    unsafe {
        let mut nodes = Vec::new();
        let mut plans = vec![(*stmt).planTree];
        plans.extend(list_plans((*stmt).subplans));
        while let Some(plan) = plans.pop() {
            if plan.is_null() {
                continue;
            }
            nodes.push(plan);
            plans.push((*plan).lefttree);
            plans.push((*plan).righttree);
            match (*plan).type_ {
                pg_sys::NodeTag::T_Append => {
                    plans.extend(list_plans((*(plan as *mut pg_sys::Append)).appendplans))
                }
                pg_sys::NodeTag::T_MergeAppend => {
                    plans.extend(list_plans((*(plan as *mut pg_sys::MergeAppend)).mergeplans))
                }
                pg_sys::NodeTag::T_SubqueryScan => {
                    plans.push((*(plan as *mut pg_sys::SubqueryScan)).subplan)
                }
                _ => {}
            }
        }
        nodes
    }
}

/// # Safety
/// `list` is null or a live List of Plan pointers.
unsafe fn list_plans(list: *mut pg_sys::List) -> Vec<*mut pg_sys::Plan> {
    // SAFETY: the caller's contract.
    unsafe { crate::pg_list::list_items(list) }
}

/// The name of dpnoise's releasing function `funcid` (its merges aside)
/// and the index of its first privacy argument, for a call with argument
/// types `arg_types` (`functions`).
///
/// # Safety
/// Inside a transaction.
pub(crate) unsafe fn releasing(
    funcid: pg_sys::Oid,
    arg_types: &[pg_sys::Oid],
) -> Option<(String, usize)> {
    // SAFETY: the caller's contract.
    let function = unsafe { crate::functions::releasing(funcid) }?;
    (function.kind != crate::functions::Kind::Merge).then(|| {
        (
            function.name.to_owned(),
            function.first_parameter(arg_types),
        )
    })
}

/// dpnoise's estimates of a query's error (`dp_query_accuracy`,
/// `dp_aggregate_accuracy`), whose every argument is a parameter: one
/// computed as the statement runs (from `dp_laplace(…)`, a release) would
/// be refused only after that release's charge.
///
/// # Safety
/// Inside a transaction.
unsafe fn estimate(funcid: pg_sys::Oid) -> Option<(String, usize)> {
    // SAFETY: the caller's contract; get_func_name returns null or a palloc'd copy.
    unsafe {
        if untrusted(funcid) {
            return None;
        }
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned();
        matches!(name.as_str(), "dp_query_accuracy" | "dp_aggregate_accuracy").then_some((name, 0))
    }
}

/// # Safety
/// `node` is null or a live node of the tree being walked (a Query or an
/// expression node); `context` is the `*mut Search` that `check_plan` or
/// `check_query` gave the walker, valid and not otherwise borrowed for the
/// call; inside a transaction.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_call(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: `node` is null (returns) or a live node of the walked tree (the caller's contract),
    // cast only to the struct its tag names (Query, Aggref, FuncExpr); the walkers get that node
    // and the same `context`. An Aggref's `args` is a List of TargetEntry nodes and its
    // `aggargtypes` an OID List, and a FuncExpr's `args` a List of expressions, as arguments_pass
    // and oid_list need. `context` is the live `*mut Search` of check_plan or check_query,
    // borrowed nowhere else during the walk: the shared borrow made for arguments_pass ends with
    // that call, before the write to `found`. The catalog lookups run in the caller's transaction.
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Query {
            return pg_sys::query_tree_walker(
                node as *mut pg_sys::Query,
                Some(check_call),
                context,
                0,
            );
        }
        match (*node).type_ {
            // A combining Aggref's arguments are the partial results; the
            // partial Aggref below it, with the call's own arguments, is checked.
            pg_sys::NodeTag::T_Aggref
                if (*(node as *mut pg_sys::Aggref)).aggsplit & pg_sys::AGGSPLITOP_COMBINE == 0 =>
            {
                let aggref = node as *mut pg_sys::Aggref;
                let types = oid_list((*aggref).aggargtypes);
                if let Some((name, first)) = releasing((*aggref).aggfnoid, &types) {
                    if !arguments_pass((*aggref).args, first, true, &*(context as *mut Search)) {
                        (*(context as *mut Search)).found = Some(name);
                        return true;
                    }
                }
            }
            pg_sys::NodeTag::T_FuncExpr => {
                let call = node as *mut pg_sys::FuncExpr;
                if let Some((name, first)) =
                    releasing((*call).funcid, &[]).or_else(|| estimate((*call).funcid))
                {
                    if !arguments_pass((*call).args, first, false, &*(context as *mut Search)) {
                        (*(context as *mut Search)).found = Some(name);
                        return true;
                    }
                }
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(check_call), context)
    }
}

/// The value of an external parameter fixed for this plan (a custom plan's), if it is.
///
/// # Safety
/// `p` is a live PARAM_EXTERN Param; `params` live or null.
pub(crate) unsafe fn fixed_param(
    p: *mut pg_sys::Param,
    params: pg_sys::ParamListInfo,
) -> Option<*mut pg_sys::ParamExternData> {
    // SAFETY: the caller's contract; a ParamListInfo's params array holds numParams entries
    // (paramFetch, when set, returns one of them or its workspace, which is leaked to the planner's context).
    unsafe {
        let id = (*p).paramid;
        if params.is_null() || id < 1 || id > (*params).numParams {
            return None;
        }
        let data = match (*params).paramFetch {
            Some(fetch) => {
                let workspace = pg_sys::palloc0(std::mem::size_of::<pg_sys::ParamExternData>())
                    as *mut pg_sys::ParamExternData;
                fetch(params, id, false, workspace)
            }
            None => (*params).params.as_mut_ptr().add(id as usize - 1),
        };
        (!data.is_null()
            && (*data).pflags as u32 & pg_sys::PARAM_FLAG_CONST != 0
            && (*data).ptype == (*p).paramtype)
            .then_some(data)
    }
}
