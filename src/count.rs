//! `dp_count`: noisy counts on the unit lattice (sensitivity one).
//!
//! The state is a plain int8 combined with PostgreSQL's own `int8pl`, so a
//! row costs what `count(*)` costs; the privacy parameters are read once per
//! group in the final function.

use crate::aggref::{
    aggregate_arguments, argument_count, f64_parameter, shared_totals, text_parameter,
};
use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, arg_is_null, i64_datum, refuse_window, v1_function};
use crate::release::{site_plan, Release};
use dpnoise_core::plan::Plan;
use dpnoise_core::{Choice, Delta, Epsilon, Loss, Mechanism, Request, Shape};
use pgrx::pg_sys;

pgrx::extension_sql_file!("count.sql", name = "count_sql");

// dp_count(epsilon [, mechanism]): every row counts.
v1_function!(pg_finfo_dp_count_step, dp_count_step, |fcinfo| {
    // SAFETY: argument 0 of a final function is the int8 state (SQL: STYPE = bigint, INITCOND 0), never NULL.
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    i64_datum(count + 1)
});

// dp_count(value, epsilon): rows whose value is not NULL count.
v1_function!(
    pg_finfo_dp_count_value_step,
    dp_count_value_step,
    |fcinfo| {
        // SAFETY: argument 0 of a final function is the int8 state (SQL: STYPE = bigint, INITCOND 0), never NULL.
        let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
        i64_datum(count + i64::from(!unsafe { arg_is_null(fcinfo, 1) }))
    }
);

/// Releases `count` with the mechanism chosen at (ε, δ), which it pays.
/// Over a person's k groups (the gate's `dp_share`, read from the call
/// at `budget`: the indices of ε and δ) the plan takes the whole (ε, δ)
/// and k. Geometric noise is the discrete staircase for sensitivity 1
/// (see the README). The noisy count is left for a thresholded count's
/// selection in the same group (`release::note_released`).
///
/// # Safety
/// `fcinfo` is the live call of one of dp_count's final functions.
unsafe fn release(
    fcinfo: pg_sys::FunctionCallInfo,
    epsilon: Option<pg_sys::Datum>,
    delta: f64,
    choice: Choice,
    budget: &[usize],
) -> pg_sys::Datum {
    // SAFETY: argument 0 of a final function is the int8 state (SQL: STYPE = bigint, INITCOND 0), never NULL.
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    // SAFETY: fcinfo is the live final call (this function's contract).
    let (key, plan, _, requested) = unsafe { count_plan(fcinfo, epsilon, delta, choice, budget) };
    // SAFETY: as above.
    let released = unsafe {
        crate::release::release(
            fcinfo,
            "dp_count",
            plan,
            (requested, delta),
            count as i128,
            Release::Integer,
        )
    };
    // SAFETY: as above.
    unsafe { crate::release::note_released(fcinfo, key, i128::from(released.value() as i64)) };
    released
}

/// A count call's plan (kept per call site), its cache key, the groups k
/// it is shared over and ε as written. Over a person's k groups (the
/// gate's `dp_share`, read from the call at `budget`: the indices of ε and
/// δ) the plan takes the whole (ε, δ) and k.
///
/// # Safety
/// `fcinfo` is the live final call of a dpnoise aggregate whose arguments
/// at `budget` are ε (and δ); the plan is not held past the call.
pub(crate) unsafe fn count_plan<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
    epsilon: Option<pg_sys::Datum>,
    delta: f64,
    choice: Choice,
    budget: &[usize],
) -> ([u64; 5], &'a Plan, u32, f64) {
    let requested = f64_parameter(epsilon, "epsilon");
    // SAFETY: the caller's contract.
    let shared = unsafe {
        match *budget {
            [e] => shared_totals(fcinfo, [e], "dp_count")
                .map(|(k, [e])| (k, f64_parameter(e, "epsilon"), delta)),
            [e, d] => shared_totals(fcinfo, [e, d], "dp_count")
                .map(|(k, [e, d])| (k, f64_parameter(e, "epsilon"), f64_parameter(d, "delta"))),
            _ => None,
        }
    };
    let (groups, total, total_delta) = shared.unwrap_or((1, requested, delta));
    let key = [
        requested.to_bits(),
        delta.to_bits(),
        choice_key(choice),
        total.to_bits() ^ u64::from(groups),
        total_delta.to_bits(),
    ];
    // SAFETY: the caller's contract.
    let plan = unsafe { site_plan(fcinfo, key, || request(total, total_delta, choice, groups)) };
    (key, plan, groups, requested)
}

/// A count's request; every check that can refuse its parameters runs here.
pub(crate) fn request(epsilon: f64, delta: f64, choice: Choice, groups: u32) -> Request {
    Request {
        choice,
        epsilon: Epsilon::new(epsilon).or_raise(),
        delta: Delta::new(delta).or_raise(),
        loss: Loss::Variance,
        shape: Shape::Count,
        groups,
    }
}

/// Checks the parameters of a dp_count call as its final function would
/// and returns what it pays, (ε, δ) as written. `args` are the call's
/// evaluated arguments (None: NULL), `value`: the form with a value first;
/// over a person's `groups` groups the arguments are the totals the groups
/// share.
///
/// # Safety
/// A text in `args` is live.
pub(crate) unsafe fn checked_cost(
    value: bool,
    args: &[Option<pg_sys::Datum>],
    groups: u32,
) -> (f64, f64, Option<f64>) {
    let params = &args[usize::from(value)..];
    let arg = |i: usize| params.get(i).copied().flatten();
    // SAFETY: the caller's contract: texts are live.
    let (epsilon, delta, choice) = unsafe {
        match params.len() {
            1 => (
                f64_parameter(arg(0), "epsilon"),
                0.0,
                Choice::Fixed(Mechanism::Laplace),
            ),
            2 => (
                f64_parameter(arg(0), "epsilon"),
                0.0,
                Choice::parse(&text_parameter(arg(1), "mechanism")).or_raise(),
            ),
            _ => (
                f64_parameter(arg(0), "epsilon"),
                f64_parameter(arg(1), "delta"),
                Choice::parse(&text_parameter(arg(2), "mechanism")).or_raise(),
            ),
        }
    };
    let plan = crate::plans::plan(request(epsilon, delta, choice, groups));
    (
        epsilon,
        delta,
        dpnoise_core::zcdp::gaussian_rho(&plan, groups),
    )
}

/// Checks dp_count_selected(ε, mechanism, δ) as its final function will
/// (its count's plan over `groups` groups, the threshold at δ) and returns
/// what it pays, (0, δ): its ε is its count's.
///
/// # Safety
/// The mechanism text in `args` is live.
pub(crate) unsafe fn selection_cost(args: &[Option<pg_sys::Datum>], groups: u32) -> (f64, f64) {
    let arg = |i: usize| args.get(i).copied().flatten();
    let epsilon = f64_parameter(arg(0), "epsilon");
    // SAFETY: the caller's contract.
    let choice = Choice::parse(&unsafe { text_parameter(arg(1), "mechanism") }).or_raise();
    let delta = f64_parameter(arg(2), "delta");
    let plan = crate::plans::plan(request(epsilon, 0.0, choice, groups));
    dpnoise_core::threshold::CountThreshold::new(&plan, groups, delta).or_raise();
    (0.0, delta)
}

/// A cache key for a mechanism choice.
pub(crate) fn choice_key(choice: Choice) -> u64 {
    match choice {
        Choice::Auto => 1,
        Choice::Fixed(m) => 2 + m as u64,
    }
}

// dp_count(epsilon) and dp_count(value, epsilon): ε is the last argument.
v1_function!(pg_finfo_dp_count_final, dp_count_final, |fcinfo| {
    refuse_window(fcinfo, "dp_count");
    let last = argument_count(fcinfo).max(1) - 1;
    let [epsilon] = aggregate_arguments(fcinfo, [last], "dp_count");
    release(
        fcinfo,
        epsilon,
        0.0,
        Choice::Fixed(Mechanism::Laplace),
        &[last],
    )
});

// dp_count(epsilon, mechanism): pure ε-DP.
v1_function!(
    pg_finfo_dp_count_mechanism_final,
    dp_count_mechanism_final,
    |fcinfo| {
        refuse_window(fcinfo, "dp_count");
        let [epsilon, mechanism] = aggregate_arguments(fcinfo, [0, 1], "dp_count");
        let choice = Choice::parse(&text_parameter(mechanism, "mechanism")).or_raise();
        release(fcinfo, epsilon, 0.0, choice, &[0])
    }
);

// dp_count(epsilon, delta, mechanism).
v1_function!(
    pg_finfo_dp_count_delta_final,
    dp_count_delta_final,
    |fcinfo| {
        refuse_window(fcinfo, "dp_count");
        let [epsilon, delta, mechanism] = aggregate_arguments(fcinfo, [0, 1, 2], "dp_count");
        let choice = Choice::parse(&text_parameter(mechanism, "mechanism")).or_raise();
        release(
            fcinfo,
            epsilon,
            f64_parameter(delta, "delta"),
            choice,
            &[0, 1],
        )
    }
);

// dp_merge_count(partial, epsilon, delta, mechanism): dp_count over exact
// partial counts (a Citus table's shards); see src/citus/merge.rs.
v1_function!(
    pg_finfo_dp_merge_count_step,
    dp_merge_count_step,
    |fcinfo| {
        // SAFETY: argument 0 is the int8 state (SQL: STYPE = bigint, INITCOND 0), never NULL.
        let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
        let partial = if unsafe { arg_is_null(fcinfo, 1) } {
            0
        } else {
            unsafe { arg_datum(fcinfo, 1) }.value() as i64
        };
        i64_datum(
            count
                .checked_add(partial)
                .unwrap_or_else(|| crate::errors::sum_overflow()),
        )
    }
);

v1_function!(
    pg_finfo_dp_merge_count_final,
    dp_merge_count_final,
    |fcinfo| {
        refuse_window(fcinfo, "dp_count");
        let [epsilon, delta, mechanism] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_count");
        let choice = Choice::parse(&text_parameter(mechanism, "mechanism")).or_raise();
        release(
            fcinfo,
            epsilon,
            f64_parameter(delta, "delta"),
            choice,
            &[1, 2],
        )
    }
);
