//! `dp_count`: noisy counts on the unit lattice (sensitivity one).
//!
//! The state is a plain int8 combined with PostgreSQL's own `int8pl`, so a
//! row costs what `count(*)` costs; the privacy parameters are read once per
//! group in the final function.

use crate::aggref::{aggregate_arguments, argument_count, f64_parameter, text_parameter};
use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, arg_is_null, i64_datum, refuse_window, v1_function};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Epsilon, Loss, Mechanism, Noise};
use pgrx::pg_sys;

// dp_count(epsilon [, mechanism]): every row counts.
v1_function!(pg_finfo_dp_count_step, dp_count_step, |fcinfo| {
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    i64_datum(count + 1)
});

// dp_count(value, epsilon): rows whose value is not NULL count.
v1_function!(pg_finfo_dp_count_value_step, dp_count_value_step, |fcinfo| {
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    i64_datum(count + i64::from(!unsafe { arg_is_null(fcinfo, 1) }))
});

/// Releases `count` with geometric noise, or the discrete staircase (which
/// for sensitivity 1 is the same law: see the README).
unsafe fn release(fcinfo: pg_sys::FunctionCallInfo, epsilon: Option<pg_sys::Datum>, mechanism: Mechanism) -> pg_sys::Datum {
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    let requested = f64_parameter(epsilon, "epsilon");
    let epsilon = Epsilon::new(requested).or_raise();
    let cal = Calibration::COUNT;
    let noise = Noise::new(mechanism, epsilon, cal.steps, Loss::Variance).or_raise();
    unsafe { crate::budget::pay(fcinfo, "dp_count", mechanism.name(), requested, 0.0) };
    i64_datum(with_rng(|rng| cal.release_integer(&noise, rng, count as i128)).or_raise())
}

// dp_count(epsilon) and dp_count(value, epsilon): ε is the last argument.
v1_function!(pg_finfo_dp_count_final, dp_count_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_count");
        let last = argument_count(fcinfo).max(1) - 1;
        let [epsilon] = aggregate_arguments(fcinfo, [last], "dp_count");
        release(fcinfo, epsilon, Mechanism::Laplace)
    }
});

// dp_count(epsilon, mechanism).
v1_function!(pg_finfo_dp_count_mechanism_final, dp_count_mechanism_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_count");
        let [epsilon, mechanism] = aggregate_arguments(fcinfo, [0, 1], "dp_count");
        let mechanism = Mechanism::parse(&text_parameter(mechanism, "mechanism")).or_raise();
        release(fcinfo, epsilon, mechanism)
    }
});
