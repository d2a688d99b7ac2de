//! An analyst's statement pays its whole cost before it runs.
//!
//! The default model charges a call site at its first release, so a GROUP BY
//! that finds no rows releases nothing and pays nothing: the ledger would
//! tell an analyst whether any row matched. For analysts the cost comes
//! from the plan alone: at ExecutorStart every finalizing dpnoise aggregate
//! in it is read, its parameters are checked as its final function will
//! check them (a refusal charges nothing), and the sum of their (ε, δ) is
//! charged at once, as one ledger entry. The call sites' own payments then
//! draw on that (`take`), so nothing is charged twice; what was not
//! foreseen (a rescan, a per-row function over released answers) pays as
//! the default model says.

use crate::budget::{charge, Charge};
use crate::gate::{raise, refuse};
use pgrx::pg_sys;
use std::cell::RefCell;

thread_local! {
    /// (statement, the (ε, δ) bits of each release paid for in advance).
    static PREPAID: RefCell<(u64, Vec<[u64; 2]>)> = const { RefCell::new((0, Vec::new())) };
    /// (statement, the ε it has spent: prepaid, then each release not foreseen).
    static SPENT: std::cell::Cell<(u64, f64)> = const { std::cell::Cell::new((0, 0.0)) };
}

/// Counts a release of an analyst's statement that its plan did not show
/// (a call site run again: a rescan, a per-row function over released
/// answers) against `dpnoise.max_epsilon_per_query`, before it is charged.
/// Such releases are driven by public rows or released answers only: the
/// plan check refuses a dpnoise aggregate that protected rows would run
/// again.
pub fn unforeseen(statement: u64, epsilon: f64) {
    if !super::gated() {
        return;
    }
    let (at, spent) = SPENT.with(|s| s.get());
    let spent = if at == statement { spent + epsilon } else { epsilon };
    let cap = super::max_epsilon_per_query();
    if cap > 0.0 && spent > cap {
        raise(refuse(
            &format!(
                "this query spends epsilon = {} in all (a release ran again), over this role's limit of {} per query",
                dpnoise_core::rational::decimal(spent),
                cap
            ),
            "Compute each answer once (a MATERIALIZED CTE) rather than once per row of another table.",
        ));
    }
    SPENT.with(|s| s.set((statement, spent)));
}

/// Whether a release at (ε, δ) in `statement` was paid for in advance;
/// takes it, so each prepaid release covers one call site.
pub fn take(statement: u64, epsilon: f64, delta: f64) -> bool {
    PREPAID.with(|p| {
        let mut p = p.borrow_mut();
        if p.0 != statement {
            return false;
        }
        let wanted = [epsilon.to_bits(), delta.to_bits()];
        match p.1.iter().position(|e| *e == wanted) {
            Some(i) => {
                p.1.swap_remove(i);
                true
            }
            None => false,
        }
    })
}

/// Charges an analyst's statement for every release its plan can make,
/// before it runs. Does nothing for other sessions, for EXPLAIN without
/// ANALYZE, and in parallel workers (their leader paid).
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given, inside a transaction.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn prepay(query: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: by-value reads of this process's state.
    let worker = unsafe { pg_sys::ParallelWorkerNumber } >= 0;
    if !super::gated() || worker || eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 != 0 || !crate::gucs::enforce_budget() {
        return;
    }
    // SAFETY: the caller's contract.
    let costs = unsafe { releases((*query).plannedstmt, (*query).params, (*query).estate) };
    if costs.is_empty() {
        return;
    }
    // A release paid for once and for all before (`repeat`) is free: its
    // final function knows, and nothing is prepaid for it.
    let costs: Vec<Cost> = costs.into_iter().filter(|c| !c.identity.is_some_and(|i| i.paid)).collect();
    if costs.is_empty() {
        return;
    }
    // Charged: what each call's parameters say in all (a call whose groups
    // share them spends at most that); prepaid: what its final function
    // will ask to pay.
    let epsilons: Vec<f64> = costs.iter().map(|c| c.charged.0).collect();
    let deltas: Vec<f64> = costs.iter().map(|c| c.charged.1).collect();
    let total: f64 = epsilons.iter().sum();
    let cap = super::max_epsilon_per_query();
    if cap > 0.0 && total > cap {
        raise(refuse(
            &format!(
                "this query spends epsilon = {} in all, over this role's limit of {} per query",
                dpnoise_core::rational::decimal(total),
                cap
            ),
            "Lower the epsilon of its aggregates (dpnoise.selection_epsilon for its group keys).",
        ));
    }
    // One charge for the whole statement, all or nothing, recording the
    // releases it pays for once and for all.
    let identities: Vec<[u8; 32]> = costs.iter().filter_map(|c| c.identity.map(|i| i.identity)).collect();
    let what = format!("analyst query ({} releases)", costs.len());
    charge(&Charge {
        mechanism: &what,
        epsilon: total,
        delta: deltas.iter().sum(),
        releases: 1,
        exact: Some([dpnoise_core::rational::decimal_sum(&epsilons), dpnoise_core::rational::decimal_sum(&deltas)]),
        identities: &identities,
        repeat: false,
    });
    let statement = crate::hooks::statement();
    SPENT.with(|s| s.set((statement, total)));
    PREPAID.with(|p| {
        let mut p = p.borrow_mut();
        if p.0 != statement {
            *p = (statement, Vec::new());
        }
        p.1.extend(costs.iter().map(|c| [c.paid.0.to_bits(), c.paid.1.to_bits()]));
    });
}

/// What one release costs.
struct Cost {
    /// The (ε, δ) its final function pays with.
    paid: (f64, f64),
    /// The (ε, δ) charged for it: its parameters' totals, which the groups
    /// of a person share when the gate bounded them (`dp_share`).
    charged: (f64, f64),
    /// Its identity, if it can be answered again (`repeat`).
    identity: Option<crate::repeat::Identified>,
}

/// The cost of every finalizing dpnoise aggregate in the plan, each
/// checked as its final function will check it.
///
/// # Safety
/// `stmt` is null or a live PlannedStmt; `params` its live parameters or
/// null; `estate` its execution's, started.
unsafe fn releases(stmt: *mut pg_sys::PlannedStmt, params: pg_sys::ParamListInfo, estate: *mut pg_sys::EState) -> Vec<Cost> {
    // SAFETY: the caller's contract: the plan tree and its subplans are live; lists are read below their length.
    unsafe {
        if stmt.is_null() {
            return Vec::new();
        }
        // The finalizing Aggrefs of each plan node (a partial one's final function runs above it).
        let mut calls = Vec::new();
        for plan in crate::parameters::plan_nodes(stmt) {
            let mut found = Vec::new();
            for list in [(*plan).targetlist, (*plan).qual] {
                super::bounding::collect_aggregates(list.cast(), &mut found);
            }
            calls.extend(
                found
                    .into_iter()
                    .filter(|aggref| (**aggref).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL == 0)
                    .map(|aggref| (plan, aggref)),
            );
        }
        let mut costs = Vec::new();
        for (plan, aggref) in calls {
            let types = super::aggregate_types(aggref);
            let Some((name, first)) = crate::parameters::releasing((*aggref).aggfnoid, &types).or_else(|| merging((*aggref).aggfnoid))
            else {
                continue;
            };
            let args = crate::aggref::plan_arguments(plan, aggref, &name);
            let mut cost = checked(&name, first, &types, args, params);
            cost.identity = crate::repeat::planned_identity(estate, aggref);
            costs.push(cost);
        }
        costs
    }
}

/// dpnoise's merges (a split over a Citus table, `citus`): their name and
/// first privacy argument (the ones before are the partials).
fn merging(funcid: pg_sys::Oid) -> Option<(String, usize)> {
    // SAFETY: catalog lookups by OID inside the caller's transaction; null / InvalidOid for unknown ones.
    let (name, schema) = unsafe {
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() {
            return None;
        }
        (std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned(), pg_sys::get_func_namespace(funcid))
    };
    let first = match name.as_str() {
        "dp_merge_count" | "dp_merge_selected" => 1,
        "dp_merge_sum" => 2,
        _ => return None,
    };
    // Only dpnoise's own.
    (super::own_schema() == Some(schema)).then_some((name, first))
}

/// Evaluates one call's privacy parameters and checks them, as shared
/// (what its final function pays) and in all (what is charged).
///
/// # Safety
/// `args` is the call's live List of TargetEntry; `params` live or null.
unsafe fn checked(
    name: &str,
    first: usize,
    types: &[pg_sys::Oid],
    args: *mut pg_sys::List,
    params: pg_sys::ParamListInfo,
) -> Cost {
    // SAFETY: the caller's contract. The expressions were found fixed (constants, parameters,
    // immutable functions) by parameters::check_plan before this runs; they are evaluated in a
    // standalone context freed (with the texts read from it) before returning.
    unsafe {
        let context = pg_sys::CreateStandaloneExprContext();
        // A parameter is read from the context when the expression runs.
        (*context).ecxt_param_list_info = params;
        let entries = super::list_items::<pg_sys::TargetEntry>(args);
        let evaluate = |expr: *mut pg_sys::Expr| {
            let state = pg_sys::ExecInitExprWithParams(expr, params);
            let mut isnull = false;
            let value = pg_sys::ExecEvalExprSwitchContext(state, context, &mut isnull);
            (!isnull).then_some(value)
        };
        let mut values: Vec<Option<pg_sys::Datum>> = Vec::new();
        let mut totals: Vec<Option<pg_sys::Datum>> = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            if i < first {
                values.push(None);
                totals.push(None);
                continue;
            }
            let expr = (**entry).expr;
            values.push(evaluate(expr));
            totals.push(match crate::parameters::share_call(expr.cast()) {
                Some(share) => evaluate(super::list_nodes(share)[0].cast()),
                None => *values.last().expect("pushed"),
            });
        }
        let paid = cost(name, first, types, &values);
        let charged = cost(name, first, types, &totals);
        pg_sys::FreeExprContext(context, true);
        Cost { paid, charged, identity: None }
    }
}

/// One call's (ε, δ) from its evaluated parameters, checked.
///
/// # Safety
/// `values` are the call's evaluated arguments (None: NULL); texts are live.
unsafe fn cost(
    name: &str,
    first: usize,
    types: &[pg_sys::Oid],
    values: &[Option<pg_sys::Datum>],
) -> (f64, f64) {
    let integer = types.first() == Some(&pg_sys::INT8OID);
    match name {
        // The merges: dp_merge_count(partial, ε, δ, mechanism) is dp_count's
        // (ε, δ, mechanism) form; dp_merge_sum's bounds tell its type.
        // SAFETY: the caller's contract is the check's own.
        "dp_merge_count" => unsafe { crate::count::checked_cost(true, values) },
        // SAFETY: the caller's contract is the check's own.
        "dp_merge_selected" => unsafe { cost("dp_partition_selected", 0, &[], &values[1..]) },
        // SAFETY: the caller's contract is the check's own.
        "dp_merge_sum" => unsafe { crate::sum::merged_cost(types.get(5) == Some(&pg_sys::INT8OID), values) },
        // SAFETY: the caller's contract is the check's own.
        "dp_count" => unsafe { crate::count::checked_cost(first == 1, values) },
        "dp_partition_selected" => {
            let epsilon = crate::aggref::f64_parameter(values[0], "epsilon");
            let delta = crate::aggref::f64_parameter(values[1], "delta");
            crate::selection::selection(epsilon, delta);
            (epsilon, delta)
        }
        // SAFETY: the caller's contract is the check's own.
        _ => match unsafe { crate::sum::checked_cost(name, integer, values) } {
            Some(cost) => cost,
            None => raise(refuse(
                &format!("{name} is not available to analysts"),
                "Use dp_count, dp_sum or dp_avg.",
            )),
        },
    }
}
