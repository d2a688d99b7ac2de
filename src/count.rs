//! `dp_count`: noisy counts on the unit lattice (sensitivity one).
//!
//! The state is a plain int8 combined with PostgreSQL's own `int8pl`, so a
//! row costs what `count(*)` costs; the privacy parameters are read once per
//! group in the final function.

use crate::aggref::{aggregate_arguments, f64_parameter};
use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, arg_is_null, i64_datum, refuse_window, v1_function};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Epsilon, Laplace};
use pgrx::pg_sys;

// dp_count(epsilon): every row counts.
v1_function!(pg_finfo_dp_count_step, dp_count_step, |fcinfo| {
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    i64_datum(count + 1)
});

// dp_count(value, epsilon): rows whose value is not NULL count.
v1_function!(pg_finfo_dp_count_value_step, dp_count_value_step, |fcinfo| {
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    i64_datum(count + i64::from(!unsafe { arg_is_null(fcinfo, 1) }))
});

// The noisy release: ε is the last argument of either form.
v1_function!(pg_finfo_dp_count_final, dp_count_final, |fcinfo| {
    unsafe { refuse_window(fcinfo, "dp_count") };
    let count = unsafe { arg_datum(fcinfo, 0) }.value() as i64;
    let last = unsafe { count_arguments(fcinfo) } - 1;
    let [epsilon] = unsafe { aggregate_arguments(fcinfo, [last], "dp_count") };
    let epsilon = Epsilon::new(f64_parameter(epsilon, "epsilon")).or_raise();
    let cal = Calibration::COUNT;
    let noise = Laplace::new(epsilon, cal.steps).or_raise();
    i64_datum(with_rng(|rng| cal.release_integer(&noise, rng, count as i128)).or_raise())
});

/// The number of arguments the user passed: `aggargtypes` lists them even in
/// a combining Aggref, whose own `args` hold the partial result.
unsafe fn count_arguments(fcinfo: pg_sys::FunctionCallInfo) -> usize {
    unsafe {
        let aggref = pg_sys::AggGetAggref(fcinfo);
        if aggref.is_null() || (*aggref).aggargtypes.is_null() {
            return 1;
        }
        (*(*aggref).aggargtypes).length as usize
    }
}
