//! The charge stage: every statement pays its whole cost from its plan
//! before it runs, for every role.
//!
//! At ExecutorStart every release the plan can make is read: each
//! finalizing dpnoise aggregate (once per grouping set its Agg computes)
//! and each per-row releasing call. Its privacy parameters are checked as
//! its function will check them (a refusal charges nothing), and the sum
//! of their (ε, δ) is charged at once, as one ledger entry, before a row
//! is read: a GROUP BY matching no row and one matching every row are
//! charged alike. The call sites then only check that they are covered
//! (`budget::pay`); what no plan shows in advance (a rescan, a call
//! evaluated without an executor start) is charged as it releases.
//!
//! For an analyst the statement's total is held to
//! `dpnoise.max_epsilon_per_query`, rescans included.

use crate::budget::{Cap, Charge, Site};
use crate::functions::{self, Function, Kind};
use crate::pg_list::{list_items, list_nodes, oid_list};
use pgrx::pg_sys;

/// An analyst's cap on what one statement spends (None for other roles).
pub fn cap() -> Option<Cap> {
    let epsilon = crate::gucs::max_epsilon_per_query();
    (crate::gate::gated() && epsilon > 0.0).then_some(Cap {
        epsilon,
        refuse: over_cap,
    })
}

fn over_cap(spent: f64, cap: f64) -> ! {
    crate::gate::refused(
        &format!(
            "this query spends epsilon = {} in all, over this role's limit of {} per query",
            // A sum of floats (1.1 + 0.1): shown to 12 places, as it was asked.
            format!("{spent:.12}").trim_end_matches('0').trim_end_matches('.'),
            cap
        ),
        "Lower the epsilon of its aggregates (dpnoise.selection_epsilon for its group keys); compute each \
         answer once (a MATERIALIZED CTE) rather than once per row of another table.",
    )
}

/// Charges a statement for every release its plan can make, before it
/// runs, and an analyst's statement with any for its run time too
/// (`output::timing`). Does nothing for EXPLAIN without ANALYZE, in
/// parallel workers (their leader paid), or with the budget not enforced.
/// Whether an analyst's statement paid for its run time (its answer is to
/// be held).
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given, started, inside a transaction.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn prepay(query: *mut pg_sys::QueryDesc, eflags: i32) -> bool {
    // SAFETY: by-value reads of this process's state.
    let worker = unsafe { pg_sys::ParallelWorkerNumber } >= 0;
    if worker
        || eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 != 0
        || !crate::gucs::enforce_budget()
    {
        return false;
    }
    // SAFETY: the caller's contract.
    let (stmt, params, estate) =
        unsafe { ((*query).plannedstmt, (*query).params, (*query).estate) };
    // SAFETY: as above.
    let costs = unsafe { releases(stmt, params, estate) };
    if costs.is_empty() {
        return false;
    }
    // Budgets live on a Citus coordinator: a worker node refuses before it
    // would charge its own ledger.
    crate::extensions::refuse_on_worker();
    // A release paid for once and for all before (`repeat`) is free: its
    // final function knows, and nothing is paid for it.
    let costs: Vec<Cost> = costs
        .into_iter()
        .filter(|c| !c.identity.is_some_and(|i| i.paid))
        .collect();
    // Charged: what each call's parameters say in all (a call whose groups
    // share them spends at most that), once per grouping set.
    // Two calls of one identity (the same release in both arms of a
    // UNION) draw the same noise for the same true values: one release.
    // Under zCDP (`dpnoise_core::zcdp`) a Gaussian costs its ρ and no δ;
    // any other release its (ε, δ) as δ-approximate ε²/(2k)-zCDP.
    let mut epsilons = Vec::new();
    let mut deltas = Vec::new();
    let (mut rhos, mut rho_deltas) = (Vec::new(), Vec::new());
    let mut identities: Vec<[u8; 32]> = Vec::new();
    for c in &costs {
        if let Some(identified) = c.identity {
            if identities.contains(&identified.identity) {
                continue;
            }
            identities.push(identified.identity);
        }
        let Priced {
            epsilon,
            delta,
            gaussian_rho,
        } = c.charged;
        let (rho, rho_delta) = gaussian_rho.map_or_else(
            || dpnoise_core::zcdp::approximate_cost(epsilon, delta, c.groups),
            |rho| (rho, 0.0),
        );
        for _ in 0..c.site.sets {
            epsilons.push(epsilon);
            deltas.push(delta);
            rhos.push(rho);
            rho_deltas.push(rho_delta);
        }
    }
    // An analyst's statement that releases anything reads protected rows:
    // its run time is a release of its own.
    let timed = crate::gate::gated() && !epsilons.is_empty() && crate::gucs::timing().is_some();
    if let Some((epsilon, delta, _)) = crate::gucs::timing().filter(|_| timed) {
        epsilons.push(epsilon);
        deltas.push(delta);
        let (rho, rho_delta) = dpnoise_core::zcdp::approximate_cost(epsilon, delta, 1);
        rhos.push(rho);
        rho_deltas.push(rho_delta);
    }
    let total: f64 = epsilons.iter().sum();
    // The cap holds for the top-level statement: what its other executions
    // (a function called per row, a DO block's loop) spent counts too.
    let spent = crate::budget::spent(crate::execution::statement()) + total;
    let cap = cap();
    if let Some(cap) = cap.filter(|c| spent > c.epsilon) {
        over_cap(spent, cap.epsilon);
    }
    let who = if crate::gate::gated() {
        "analyst query"
    } else {
        "query"
    };
    let releases = epsilons.len() - usize::from(timed);
    let what = match (releases, timed) {
        (1, false) => format!("{who} (1 release)"),
        (n, false) => format!("{who} ({n} releases)"),
        (1, true) => format!("{who} (1 release, run time)"),
        (n, true) => format!("{who} ({n} releases, run time)"),
    };
    let request = Charge {
        mechanism: &what,
        epsilon: total,
        delta: deltas.iter().sum(),
        rho: rhos.iter().sum(),
        rho_delta: rho_deltas.iter().sum(),
        releases: i64::from(!epsilons.is_empty()),
        exact: Some(
            [&epsilons, &deltas, &rhos, &rho_deltas]
                .map(|v| dpnoise_core::rational::decimal_sum(v)),
        ),
        identities: &identities,
        repeat: false,
        // SAFETY: the caller's contract: the statement's plan is live.
        tables: unsafe { relations(stmt) },
    };
    crate::budget::prepay(
        estate,
        costs.into_iter().map(|c| c.site).collect(),
        &request,
        cap,
    );
    timed
}

/// The tables (and views) a planned statement reads, each once: what its
/// role's budgets on tables are matched against. None where it reads
/// from a function (a set-returning function or a table function may read
/// any table): then every budget on tables of the role is charged.
///
/// # Safety
/// `stmt` is a live PlannedStmt.
unsafe fn relations(stmt: *mut pg_sys::PlannedStmt) -> Option<Vec<pg_sys::Oid>> {
    // SAFETY: the caller's contract; rtable is a List of RangeTblEntry.
    unsafe {
        let mut found: Vec<pg_sys::Oid> = Vec::new();
        for rte in list_items::<pg_sys::RangeTblEntry>((*stmt).rtable) {
            match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION if !found.contains(&(*rte).relid) => {
                    found.push((*rte).relid);
                }
                pg_sys::RTEKind::RTE_FUNCTION | pg_sys::RTEKind::RTE_TABLEFUNC => return None,
                _ => {}
            }
        }
        Some(found)
    }
}

/// What one call costs: (ε, δ) as written, and its ρ where its noise is
/// the Gaussian (`dpnoise_core::zcdp::gaussian_rho`).
#[derive(Clone, Copy)]
struct Priced {
    epsilon: f64,
    delta: f64,
    gaussian_rho: Option<f64>,
}

/// What one call site costs.
struct Cost {
    /// Where it is and what its function pays with.
    site: Site,
    /// The (ε, δ) charged for each of its grouping sets: its parameters'
    /// totals, which the groups of a person share when the gate bounded
    /// them (`dp_share`).
    charged: Priced,
    /// The groups k those totals are shared over (1: not shared).
    groups: u32,
    /// Its identity, if it can be answered again (`repeat`).
    identity: Option<crate::budget::Identified>,
}

/// A releasing call found in a plan node.
enum Call {
    Aggregate(*mut pg_sys::Aggref),
    PerRow(*mut pg_sys::FuncExpr),
    /// A per-row call on the left of `op ANY/ALL (subquery)`: PostgreSQL
    /// evaluates it once per row of the subquery, each a fresh draw of the
    /// same value, with no rescan to charge.
    Redrawn(*mut pg_sys::FuncExpr),
}

/// Refuses a constant data argument that its function would refuse: a
/// per-row function's float8 that is not finite, a float8[] with a NULL or
/// non-finite element (the analyst's own text: shown).
///
/// # Safety
/// `expr` is a live expression node.
unsafe fn refuse_constant_data(function: &Function, expr: *mut pg_sys::Expr) {
    use pgrx::FromDatum;
    // SAFETY: the caller's contract; a Const's value is of its consttype, read only when not null.
    unsafe {
        if (*expr).type_ != pg_sys::NodeTag::T_Const {
            return;
        }
        let constant = expr as *mut pg_sys::Const;
        if (*constant).constisnull {
            return;
        }
        let value = (*constant).constvalue;
        match (*constant).consttype {
            pg_sys::FLOAT8OID if function.kind == Kind::PerRow => {
                let x = f64::from_datum(value, false).unwrap_or(0.0);
                if !x.is_finite() {
                    crate::errors::raise(dpnoise_core::Error::invalid(
                        "value",
                        "a finite number",
                        sql_float(x),
                    ));
                }
            }
            pg_sys::FLOAT8ARRAYOID if function.cost == functions::Cost::Multi => {
                for x in Vec::<Option<f64>>::from_datum(value, false).unwrap_or_default() {
                    match x {
                        None => crate::errors::raise(dpnoise_core::Error::invalid(
                            "values",
                            "free of NULL elements",
                            "NULL",
                        )),
                        Some(x) if !x.is_finite() => crate::errors::raise(
                            dpnoise_core::Error::invalid("values", "finite numbers", sql_float(x)),
                        ),
                        Some(_) => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// A float8 as PostgreSQL prints it (Infinity, -Infinity, NaN).
fn sql_float(x: f64) -> String {
    match x {
        x if x.is_nan() => "NaN".to_owned(),
        x if x == f64::INFINITY => "Infinity".to_owned(),
        x if x == f64::NEG_INFINITY => "-Infinity".to_owned(),
        x => x.to_string(),
    }
}

/// The cost of every release in the plan, each checked as its function
/// will check it.
///
/// # Safety
/// `stmt` is null or a live PlannedStmt; `params` its live parameters or
/// null; `estate` its execution's, started.
unsafe fn releases(
    stmt: *mut pg_sys::PlannedStmt,
    params: pg_sys::ParamListInfo,
    estate: *mut pg_sys::EState,
) -> Vec<Cost> {
    // SAFETY: the caller's contract: the plan tree and its subplans are live; lists are read below their length.
    unsafe {
        if stmt.is_null() {
            return Vec::new();
        }
        let mut costs: Vec<Cost> = Vec::new();
        for plan in crate::parameters::plan_nodes(stmt) {
            let mut found = Vec::new();
            for list in [(*plan).targetlist, (*plan).qual] {
                collect_calls(list.cast(), &mut found);
            }
            refuse_unpaired_selection(&found);
            for call in found {
                let cost = match call {
                    Call::Aggregate(aggref) => {
                        // A partial Aggref's final function runs above it; an
                        // Aggref outside an Agg node is a copy of its target
                        // list (a Material put on top shares it).
                        if (*aggref).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0
                            || (*plan).type_ != pg_sys::NodeTag::T_Agg
                        {
                            continue;
                        }
                        let site = Site {
                            node: plan as usize,
                            aggno: (*aggref).aggno,
                            sets: grouping_sets(plan),
                            epsilon: 0.0,
                            delta: 0.0,
                        };
                        // The same aggregate in the select list and HAVING is one call.
                        if costs
                            .iter()
                            .any(|c| c.site.node == site.node && c.site.aggno == site.aggno)
                        {
                            continue;
                        }
                        let types = oid_list((*aggref).aggargtypes);
                        let Some(function) = functions::releasing((*aggref).aggfnoid) else {
                            continue;
                        };
                        // The aggregate's own arguments: an ORDER BY inside it adds
                        // its sort expressions as junk entries, which are not (they
                        // have no type in aggargtypes).
                        let args = list_items::<pg_sys::TargetEntry>(
                            crate::aggref::plan_arguments(plan, aggref, function.name),
                        )
                        .into_iter()
                        .filter(|&e| !(*e).resjunk)
                        .map(|e| (*e).expr)
                        .collect();
                        let Some(mut cost) = checked(function, &types, args, params, site) else {
                            continue;
                        };
                        cost.identity = crate::repeat::planned_identity(estate, aggref);
                        cost
                    }
                    Call::Redrawn(call) => {
                        let name = functions::releasing((*call).funcid)
                            .map_or("a dpnoise function", |f| f.name);
                        crate::errors::raise_sqlstate(
                            "0A000",
                            format!("{name} on the left of ANY, ALL or IN (subquery) would draw once per row of the subquery"),
                            Some("Compute the noisy value once, in a subquery or a MATERIALIZED CTE, then compare it.".to_owned()),
                        );
                    }
                    Call::PerRow(call) => {
                        let Some(function) = functions::releasing((*call).funcid) else {
                            continue;
                        };
                        let site = Site {
                            node: call as usize,
                            aggno: -1,
                            sets: 1,
                            epsilon: 0.0,
                            delta: 0.0,
                        };
                        // A target list shared by two nodes holds one call.
                        if costs.iter().any(|c| c.site.node == site.node) {
                            continue;
                        }
                        let args: Vec<*mut pg_sys::Expr> = list_nodes((*call).args)
                            .into_iter()
                            .map(|e| e.cast())
                            .collect();
                        let types: Vec<pg_sys::Oid> =
                            args.iter().map(|&e| pg_sys::exprType(e.cast())).collect();
                        let Some(cost) = checked(function, &types, args, params, site) else {
                            continue;
                        };
                        cost
                    }
                };
                costs.push(cost);
            }
        }
        costs
    }
}

/// Refuses, before anything is charged, a dp_count_selected (or
/// dp_sum_selected) whose node holds no dp_count of the same ε and
/// mechanism (no float8 dp_sum of the same ε, bounds, mechanism and loss,
/// at δ = 0) for it to read (a call written by hand: the gate writes one
/// only beside its release).
///
/// # Safety
/// `found` are the live calls of one plan node.
unsafe fn refuse_unpaired_selection(found: &[Call]) {
    // SAFETY: the caller's contract; an Aggref's args are TargetEntries.
    unsafe {
        let aggregates: Vec<(
            &'static functions::Function,
            Vec<*mut pg_sys::Node>,
            Vec<pg_sys::Oid>,
        )> = found
            .iter()
            .filter_map(|call| match call {
                Call::Aggregate(aggref) => {
                    let function = functions::releasing((**aggref).aggfnoid)?;
                    let args = list_items::<pg_sys::TargetEntry>((**aggref).args)
                        .into_iter()
                        .filter(|&e| !(*e).resjunk)
                        .map(|e| (*e).expr.cast())
                        .collect();
                    Some((function, args, oid_list((**aggref).aggargtypes)))
                }
                _ => None,
            })
            .collect();
        let text_is = |m: *mut pg_sys::Node, text: &str| {
            (*m).type_ == pg_sys::NodeTag::T_Const
                && !(*(m as *mut pg_sys::Const)).constisnull
                && pgrx::text_to_rust_str_unchecked(
                    (*(m as *mut pg_sys::Const)).constvalue.cast_mut_ptr(),
                ) == text
        };
        let zero = |d: *mut pg_sys::Node| {
            (*d).type_ == pg_sys::NodeTag::T_Const
                && !(*(d as *mut pg_sys::Const)).constisnull
                && (*(d as *mut pg_sys::Const)).constvalue.value() as u64 == 0
        };
        // The argument `at` of a release, or the default it plans with.
        let same = |of: &[*mut pg_sys::Node], at: usize, written: *mut pg_sys::Node, default| {
            of.get(at).map_or_else(
                || text_is(written, default),
                |&a| pg_sys::equal(a.cast(), written.cast()),
            )
        };
        for (function, args, _) in &aggregates {
            let counted = match (function.name, args.len()) {
                ("dp_count_selected", 3) => true,
                ("dp_sum_selected", 6) => false,
                _ => continue,
            };
            let paired = aggregates.iter().any(|(release, release_args, types)| {
                if counted {
                    if release.name != "dp_count" {
                        return false;
                    }
                    let first = release.first_parameter(types);
                    let mechanism_matches = match release_args.len() - first {
                        1 => text_is(args[1], "laplace"),
                        2 => pg_sys::equal(release_args[first + 1].cast(), args[1].cast()),
                        _ => false,
                    };
                    return mechanism_matches
                        && pg_sys::equal(release_args[first].cast(), args[0].cast());
                }
                release.name == "dp_sum"
                    && types.first() == Some(&pg_sys::FLOAT8OID)
                    && (1..4).all(|i| pg_sys::equal(release_args[i].cast(), args[i - 1].cast()))
                    && release_args.get(4).is_none_or(|&d| zero(d))
                    && same(release_args, 5, args[3], "auto")
                    && same(release_args, 6, args[4], "l2")
            });
            if !paired {
                let (name, release) = if counted {
                    (
                        "dp_count_selected",
                        "dp_count of the same epsilon and mechanism",
                    )
                } else {
                    (
                        "dp_sum_selected",
                        "dp_sum of the same epsilon, bounds, mechanism and loss",
                    )
                };
                crate::errors::raise_sqlstate(
                    "0A000",
                    format!("{name} reads the {release} released beside it in the same query level, and there is none"),
                    Some("The analyst gate writes it; in your own HAVING use dp_partition_selected(epsilon, delta).".to_string()),
                );
            }
        }
    }
}

/// How many grouping sets the Agg `plan` computes (its chain's too); 1 for
/// a plain or simply grouped aggregate.
///
/// # Safety
/// `plan` is a live plan node.
unsafe fn grouping_sets(plan: *mut pg_sys::Plan) -> u32 {
    // SAFETY: the caller's contract; an Agg's groupingSets and chain are Lists (of Lists, and of Agg nodes).
    unsafe {
        if (*plan).type_ != pg_sys::NodeTag::T_Agg {
            return 1;
        }
        let agg = plan as *mut pg_sys::Agg;
        let sets = |agg: *mut pg_sys::Agg| list_nodes((*agg).groupingSets).len() as u32;
        let chained: u32 = list_items::<pg_sys::Agg>((*agg).chain)
            .into_iter()
            .map(sets)
            .sum();
        (sets(agg) + chained).max(1)
    }
}

/// The dpnoise calls under `node`: Aggrefs, and per-row releasing calls
/// (also inside an aggregate's arguments).
///
/// # Safety
/// `node` is null or a live expression tree; inside a transaction.
unsafe fn collect_calls(node: *mut pg_sys::Node, into: &mut Vec<Call>) {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Vec.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the walker's contract; casts follow the tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            let into = &mut *(context as *mut Vec<Call>);
            match (*node).type_ {
                pg_sys::NodeTag::T_Aggref => into.push(Call::Aggregate(node.cast())),
                pg_sys::NodeTag::T_WindowFunc => {
                    // Refused by the aggregate as it runs (fmgr::refuse_window),
                    // which would be after the charge: refused here, before it.
                    if let Some(function) =
                        functions::releasing((*(node as *mut pg_sys::WindowFunc)).winfnoid)
                    {
                        pgrx::ereport!(
                            ERROR,
                            pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                            format!("{} cannot be used as a window function", function.name),
                            "Overlapping window frames would release the same individuals many times."
                        );
                    }
                }
                pg_sys::NodeTag::T_FuncExpr
                    if functions::is_per_row((*(node as *mut pg_sys::FuncExpr)).funcid) =>
                {
                    into.push(Call::PerRow(node.cast()))
                }
                pg_sys::NodeTag::T_SubPlan => {
                    let subplan = node as *mut pg_sys::SubPlan;
                    let mut tested = Vec::new();
                    collect_calls((*subplan).testexpr, &mut tested);
                    into.extend(tested.into_iter().map(|c| match c {
                        Call::PerRow(call) | Call::Redrawn(call) => Call::Redrawn(call),
                        other => other,
                    }));
                    return pg_sys::expression_tree_walker(
                        (*subplan).args.cast(),
                        Some(walk),
                        context,
                    );
                }
                _ => {}
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract; `into` outlives the walk.
    unsafe {
        if !node.is_null() {
            walk(node, (into as *mut Vec<Call>).cast());
        }
    }
}

/// Evaluates one call's privacy parameters and checks them, as shared
/// (what its function pays) and in all (what is charged). None: a
/// function whose cost no plan shows (it is charged as it releases).
///
/// # Safety
/// `args` are the call's live argument expressions; `params` live or null.
unsafe fn checked(
    function: &Function,
    types: &[pg_sys::Oid],
    args: Vec<*mut pg_sys::Expr>,
    params: pg_sys::ParamListInfo,
    mut site: Site,
) -> Option<Cost> {
    let first = function.first_parameter(types);
    // SAFETY: the caller's contract. The expressions were found fixed (constants, parameters,
    // immutable functions) by parameters::check_plan before this runs; they are evaluated in a
    // standalone context freed (with the texts read from it) before returning.
    unsafe {
        // Most parameters are constants, read as they are; an expression
        // context is made only for the others.
        let mut context: *mut pg_sys::ExprContext = std::ptr::null_mut();
        let mut evaluate = |expr: *mut pg_sys::Expr| {
            if (*expr).type_ == pg_sys::NodeTag::T_Const {
                let constant = expr as *mut pg_sys::Const;
                return (!(*constant).constisnull).then_some((*constant).constvalue);
            }
            if context.is_null() {
                context = pg_sys::CreateStandaloneExprContext();
                // A parameter is read from the context when the expression runs.
                (*context).ecxt_param_list_info = params;
            }
            let state = pg_sys::ExecInitExprWithParams(expr, params);
            let mut isnull = false;
            let value = pg_sys::ExecEvalExprSwitchContext(state, context, &mut isnull);
            (!isnull).then_some(value)
        };
        // Data written as a constant is checked as the function will check
        // it, so that it is refused before the charge (a value read from a
        // row is known only as the statement runs: refused after).
        for &expr in args.iter().take(first) {
            refuse_constant_data(function, expr);
        }
        let mut values: Vec<Option<pg_sys::Datum>> = Vec::new();
        let mut totals: Vec<Option<pg_sys::Datum>> = Vec::new();
        // k: the most groups a person's share is spread over (1: not shared).
        let mut groups = 1u32;
        for (i, &expr) in args.iter().enumerate() {
            if i < first {
                values.push(None);
                totals.push(None);
                continue;
            }
            values.push(evaluate(expr));
            let share = if (*expr).type_ == pg_sys::NodeTag::T_Const {
                None
            } else {
                crate::parameters::share_call(expr.cast())
            };
            totals.push(match share {
                Some(share) => {
                    let parts = list_nodes(share);
                    let k = evaluate(parts[1].cast()).map_or(1, |d| d.value() as i32);
                    groups = groups.max(k.max(1) as u32);
                    evaluate(parts[0].cast())
                }
                None => *values.last().expect("pushed"),
            });
        }
        // The share as written, then the whole with k: the plan the
        // aggregate will make (a Gaussian over k groups is calibrated to
        // the L2 sensitivity), so that it cannot refuse after the charge.
        let paid = cost(function, types, &args, &values, 1);
        let charged = if groups > 1 {
            paid.and_then(|_| cost(function, types, &args, &totals, groups))
        } else {
            paid
        };
        if !context.is_null() {
            pg_sys::FreeExprContext(context, true);
        }
        let (paid, charged) = match (paid, charged) {
            (Some(paid), Some(charged)) => (paid, charged),
            _ if crate::gate::gated() && function.kind != Kind::PerRow => crate::gate::refused(
                &format!("{} is not available to analysts", function.name),
                "Use dp_count, dp_sum or dp_avg.",
            ),
            _ => return None,
        };
        (site.epsilon, site.delta) = (paid.epsilon, paid.delta);
        Some(Cost {
            site,
            charged,
            groups,
            identity: None,
        })
    }
}

/// One call's (ε, δ) from its evaluated arguments (None: NULL), checked as
/// its function checks them (`args`: the argument expressions) when it
/// releases over a person's `groups` groups; None if the sum module does
/// not know the name.
///
/// # Safety
/// `values` are the call's evaluated arguments; texts are live.
unsafe fn cost(
    function: &Function,
    types: &[pg_sys::Oid],
    args: &[*mut pg_sys::Expr],
    values: &[Option<pg_sys::Datum>],
    groups: u32,
) -> Option<Priced> {
    let first = function.first_parameter(types);
    let integer = types.first() == Some(&pg_sys::INT8OID);
    let priced = |(epsilon, delta, gaussian_rho)| Priced {
        epsilon,
        delta,
        gaussian_rho,
    };
    // SAFETY: the caller's contract is each check's own.
    unsafe {
        Some(priced(match function.cost {
            functions::Cost::Count => crate::count::checked_cost(first == 1, values, groups),
            functions::Cost::Sum => {
                crate::sum::checked_cost(function.name, integer, values, groups)?
            }
            // dp_merge_count(partial, ε, δ, mechanism) is dp_count's (ε, δ, mechanism) form.
            functions::Cost::MergeCount => crate::count::checked_cost(true, values, groups),
            // dp_merge_sum's bounds tell its type.
            functions::Cost::MergeSum => {
                crate::sum::merged_cost(types.get(5) == Some(&pg_sys::INT8OID), values, groups)
            }
            _ => {
                let (epsilon, delta) = pure_cost(function, types, args, values, groups)?;
                (epsilon, delta, None)
            }
        }))
    }
}

/// The (ε, δ) of a call whose noise is never the Gaussian (`cost`).
///
/// # Safety
/// As `cost`.
unsafe fn pure_cost(
    function: &Function,
    types: &[pg_sys::Oid],
    args: &[*mut pg_sys::Expr],
    values: &[Option<pg_sys::Datum>],
    groups: u32,
) -> Option<(f64, f64)> {
    // SAFETY: the caller's contract is each check's own.
    unsafe {
        Some(match function.cost {
            functions::Cost::Count
            | functions::Cost::Sum
            | functions::Cost::MergeCount
            | functions::Cost::MergeSum => return None,
            functions::Cost::Selection => selection_cost(values),
            functions::Cost::CountSelection => crate::count::selection_cost(values, groups),
            functions::Cost::SumSelection => crate::sum::selection_cost(values, groups),
            functions::Cost::Value => crate::row_noise::checked_cost(function.name, values),
            functions::Cost::MergeSelected => selection_cost(&values[1..]),
            functions::Cost::Multi => crate::multi::checked_cost(function.name, values),
            functions::Cost::Moments => crate::moments::checked_cost(values),
            functions::Cost::Quantile => crate::quantile::checked_cost(function.name, values)?,
            functions::Cost::Refine => {
                let fixed = args
                    .first()
                    .is_some_and(|&a| crate::parameters::is_fixed(a.cast()));
                crate::refine::checked_cost(
                    types.first() == Some(&pg_sys::FLOAT8OID),
                    fixed,
                    values,
                )
            }
        })
    }
}

/// dp_partition_selected(ε, δ)'s cost, checked.
fn selection_cost(values: &[Option<pg_sys::Datum>]) -> (f64, f64) {
    let epsilon = crate::aggref::f64_parameter(values[0], "epsilon");
    let delta = crate::aggref::f64_parameter(values[1], "delta");
    crate::selection::selection(epsilon, delta);
    (epsilon, delta)
}
