//! Per-row noise: `dp_laplace(value, epsilon, sensitivity)`,
//! `dp_staircase(value, epsilon, sensitivity [, loss])` and
//! `dp_noise(value, epsilon, sensitivity, delta, mechanism, loss)`.
//!
//! The lattice and the noise are calibrated once per call site (cached in
//! `fn_extra`), so a row costs one rounding and one exact draw.

use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, arg_f64, arg_is_null, call_site_cache, text_fingerprint, f64_datum, required_f64, return_null, v1_function};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Choice, Epsilon, Loss, Mechanism, Noise, Plan, Shape};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Noises one value: NULL stays NULL (nothing is released), parameters must
/// be given. `loss_key` tells call sites with different losses apart.
#[inline]
unsafe fn release_value(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    mechanism: Mechanism,
    loss_key: u64,
    calibrate: impl FnOnce(Epsilon, f64) -> (Calibration, Noise),
) -> pg_sys::Datum {
    unsafe {
        release_with(fcinfo, function, 0.0, [loss_key, 0], |epsilon, sensitivity| {
            let (cal, noise) = calibrate(epsilon, sensitivity);
            (mechanism, cal, noise)
        })
    }
}

/// As `release_value`, at (ε, δ), for whichever mechanism `plan` picks.
#[inline]
unsafe fn release_with(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    delta: f64,
    [key, delta_key]: [u64; 2],
    plan: impl FnOnce(Epsilon, f64) -> (Mechanism, Calibration, Noise),
) -> pg_sys::Datum {
    unsafe {
        crate::parameters::require_fixed_call(fcinfo, 1, function);
        let epsilon = required_f64(fcinfo, 1, "epsilon");
        let sensitivity = required_f64(fcinfo, 2, "sensitivity");
        let (mechanism, cal, noise) = call_site_cache(fcinfo, [epsilon.to_bits(), sensitivity.to_bits(), key, delta_key, 0], || {
            plan(Epsilon::new(epsilon).or_raise(), sensitivity)
        });
        let Some(value) = arg_f64(fcinfo, 0) else {
            return return_null(fcinfo);
        };
        let true_steps = cal.lattice.round(value).or_raise();
        crate::budget::pay(fcinfo, function, mechanism.name(), epsilon, delta);
        f64_datum(with_rng(|rng| cal.release(noise, rng, true_steps)))
    }
}

fn calibrated(mechanism: Mechanism, loss: Loss) -> impl FnOnce(Epsilon, f64) -> (Calibration, Noise) {
    move |epsilon, sensitivity| {
        let cal = Calibration::value(epsilon, sensitivity).or_raise();
        (cal, Noise::new(mechanism, epsilon, 0.0, cal.steps, loss).or_raise())
    }
}

v1_function!(pg_finfo_dp_laplace, dp_laplace, |fcinfo| {
    unsafe { release_value(fcinfo, "dp_laplace", Mechanism::Laplace, 0, calibrated(Mechanism::Laplace, Loss::Variance)) }
});

// dp_staircase(value, epsilon, sensitivity [, loss]): the loss text is read
// per row only to key the cache; it is parsed when the key changes.
v1_function!(pg_finfo_dp_staircase, dp_staircase, |fcinfo| {
    unsafe {
        crate::parameters::require_fixed_call(fcinfo, 1, "dp_staircase");
        let text = if (*fcinfo).nargs > 3 { Some(text_arg(fcinfo, 3, "loss")) } else { None };
        let key = text.map_or(0, text_fingerprint);
        release_value(fcinfo, "dp_staircase", Mechanism::Staircase, key, |epsilon, sensitivity| {
            let loss = text.map_or(Ok(Loss::Variance), Loss::parse).or_raise();
            calibrated(Mechanism::Staircase, loss)(epsilon, sensitivity)
        })
    }
});

/// A text argument that must not be NULL, borrowed from the call.
unsafe fn text_arg<'a>(fcinfo: pg_sys::FunctionCallInfo, i: usize, name: &str) -> &'a str {
    unsafe {
        if arg_is_null(fcinfo, i) {
            crate::errors::null_parameter(name);
        }
        let raw = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, i).cast_mut_ptr());
        pgrx::text_to_rust_str_unchecked(raw)
    }
}

// dp_noise(value, epsilon, sensitivity, delta, mechanism, loss): any
// mechanism, or 'auto', per row; the texts are read per row only to key the cache.
v1_function!(pg_finfo_dp_noise, dp_noise, |fcinfo| {
    unsafe {
        crate::parameters::require_fixed_call(fcinfo, 1, "dp_noise");
        let delta = required_f64(fcinfo, 3, "delta");
        let (mechanism, loss) = (text_arg(fcinfo, 4, "mechanism"), text_arg(fcinfo, 5, "loss"));
        let key = text_fingerprint(mechanism).rotate_left(32) ^ text_fingerprint(loss);
        release_with(fcinfo, "dp_noise", delta, [key, delta.to_bits()], |epsilon, sensitivity| {
            let choice = Choice::parse(mechanism).or_raise();
            let plan = Plan::new(choice, epsilon, delta, Loss::parse(loss).or_raise(), Shape::Value(sensitivity)).or_raise();
            (plan.mechanism, plan.calibration, plan.noise)
        })
    }
});

/// The exact error of a mechanism before spending anything: E|X|, the
/// standard deviation and the half-width of the symmetric interval holding
/// `confidence`, computed from the lattice law the mechanism samples; with
/// `'auto'`, for the mechanism it picks (named in the first column).
#[pg_extern(immutable, parallel_safe)]
fn dp_accuracy(
    mechanism: Option<&str>,
    epsilon: Option<f64>,
    sensitivity: Option<f64>,
    loss: default!(Option<&str>, "NULL"),
    confidence: default!(Option<f64>, 0.95),
    delta: default!(Option<f64>, 0.0),
) -> TableIterator<
    'static,
    (name!(mechanism, String), name!(mean_abs_error, f64), name!(std_dev, f64), name!(ci_half_width, f64)),
> {
    use crate::errors::null_parameter;
    let mechanism = mechanism.unwrap_or_else(|| null_parameter("mechanism"));
    let epsilon = epsilon.unwrap_or_else(|| null_parameter("epsilon"));
    let sensitivity = sensitivity.unwrap_or_else(|| null_parameter("sensitivity"));
    let confidence = confidence.unwrap_or_else(|| null_parameter("confidence"));
    let delta = delta.unwrap_or_else(|| null_parameter("delta"));
    let choice = Choice::parse(mechanism).or_raise();
    dpnoise_core::staircase::check_confidence(confidence).or_raise();
    let loss = loss.map_or(Ok(Loss::Variance), Loss::parse).or_raise();
    let plan = Plan::new(choice, Epsilon::new(epsilon).or_raise(), delta, loss, Shape::Value(sensitivity)).or_raise();
    let a = plan.accuracy(confidence);
    TableIterator::once((plan.mechanism.name().to_string(), a.mean_abs_error, a.std_dev, a.ci_half_width))
}
