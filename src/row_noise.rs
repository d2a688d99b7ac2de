//! Per-row noise: `dp_laplace(value, epsilon, sensitivity)`,
//! `dp_staircase(value, epsilon, sensitivity [, loss])` and
//! `dp_noise(value, epsilon, sensitivity, delta, mechanism, loss)`.
//!
//! The lattice and the noise are calibrated once per call site (cached in
//! `fn_extra`), so a row costs one rounding and one exact draw.

use crate::call_site::text_fingerprint;
use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, arg_f64, arg_is_null, required_f64, return_null, v1_function};
use crate::release::{release, site_plan, Release};
use dpnoise_core::{Choice, Delta, Epsilon, Loss, Mechanism, Plan, Request, Sensitivity, Shape};
use pgrx::pg_sys;
use pgrx::prelude::*;

pgrx::extension_sql_file!(
    "row_noise.sql",
    name = "row_noise_sql",
    requires = [dp_accuracy]
);

/// Noises argument 0 with (ε, sensitivity) from arguments 1 and 2 and the
/// rest of the request from `request`: NULL stays NULL (nothing is
/// released), parameters must be given. `key` tells call sites with
/// different δ, mechanisms or losses apart.
///
/// # Safety
/// `fcinfo` is the live call of a per-row function with at least 3 arguments.
#[inline]
unsafe fn release_value(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    delta: f64,
    key: [u64; 2],
    request: impl FnOnce() -> (Choice, Loss),
) -> pg_sys::Datum {
    // SAFETY: the caller's contract: arguments 0, 1 and 2 exist.
    unsafe {
        crate::parameters::require_fixed_call(fcinfo, 1, function);
        let epsilon = required_f64(fcinfo, 1, "epsilon");
        let sensitivity = required_f64(fcinfo, 2, "sensitivity");
        let plan = site_plan(
            fcinfo,
            [epsilon.to_bits(), sensitivity.to_bits(), key[0], key[1], 0],
            || {
                let epsilon = Epsilon::new(epsilon).or_raise();
                let shape = Shape::Value(Sensitivity::new(sensitivity).or_raise());
                let delta = Delta::new(delta).or_raise();
                let (choice, loss) = request();
                Request {
                    choice,
                    epsilon,
                    delta,
                    loss,
                    shape,
                    groups: 1,
                }
            },
        );
        let Some(value) = arg_f64(fcinfo, 0) else {
            return return_null(fcinfo);
        };
        let true_steps = plan.calibration.lattice.round(value).or_raise();
        release(
            fcinfo,
            function,
            plan,
            (epsilon, delta),
            true_steps,
            Release::Float,
        )
    }
}

/// Checks the privacy parameters of a dp_laplace, dp_staircase or dp_noise
/// call as the call will (`values`: its evaluated arguments, None for NULL,
/// the value's own None) and returns what it pays, (ε, δ) as written.
///
/// # Safety
/// The texts in `values` are live.
pub(crate) unsafe fn checked_cost(name: &str, values: &[Option<pg_sys::Datum>]) -> (f64, f64) {
    use crate::aggref::{f64_parameter, text_parameter};
    let arg = |i: usize| values.get(i).copied().flatten();
    let epsilon = f64_parameter(arg(1), "epsilon");
    let sensitivity = f64_parameter(arg(2), "sensitivity");
    // SAFETY: the caller's contract: texts are live.
    let (delta, choice, loss) = unsafe {
        match name {
            "dp_laplace" => (0.0, Choice::Fixed(Mechanism::Laplace), Loss::Variance),
            "dp_staircase" => {
                let loss = if values.len() > 3 {
                    Loss::parse(&text_parameter(arg(3), "loss")).or_raise()
                } else {
                    Loss::Variance
                };
                (0.0, Choice::Fixed(Mechanism::Staircase), loss)
            }
            _ => (
                f64_parameter(arg(3), "delta"),
                Choice::parse(&text_parameter(arg(4), "mechanism")).or_raise(),
                Loss::parse(&text_parameter(arg(5), "loss")).or_raise(),
            ),
        }
    };
    crate::plans::plan(Request {
        choice,
        epsilon: Epsilon::new(epsilon).or_raise(),
        delta: Delta::new(delta).or_raise(),
        loss,
        shape: Shape::Value(Sensitivity::new(sensitivity).or_raise()),
        groups: 1,
    });
    (epsilon, delta)
}

/// A text argument that must not be NULL, borrowed from the call.
///
/// # Safety
/// `fcinfo` is a live call whose argument `i` is a text.
unsafe fn text_arg<'a>(fcinfo: pg_sys::FunctionCallInfo, i: usize, name: &str) -> &'a str {
    // SAFETY: the caller's contract; the detoasted copy lives in the call's memory context, past this row.
    unsafe {
        if arg_is_null(fcinfo, i) {
            crate::errors::null_parameter(name);
        }
        let raw = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, i).cast_mut_ptr());
        pgrx::text_to_rust_str_unchecked(raw)
    }
}

v1_function!(pg_finfo_dp_laplace, dp_laplace, |fcinfo| {
    release_value(fcinfo, "dp_laplace", 0.0, [0, 0], || {
        (Choice::Fixed(Mechanism::Laplace), Loss::Variance)
    })
});

/// The fingerprint of a per-row call's text parameters, read (`read`) on
/// its first row only: they are fixed for the execution
/// (`require_fixed_call`, which the caller has run).
///
/// # Safety
/// `fcinfo` is the live call of a dpnoise per-row function.
unsafe fn texts_key(fcinfo: pg_sys::FunctionCallInfo, read: impl FnOnce() -> u64) -> u64 {
    // SAFETY: the caller's contract; the reference is dropped before `read` runs.
    if let Some(key) = unsafe { crate::call_site::call_site(fcinfo) }.texts {
        return key;
    }
    let key = read();
    // SAFETY: as above.
    unsafe { crate::call_site::call_site(fcinfo) }.texts = Some(key);
    key
}

// dp_staircase(value, epsilon, sensitivity [, loss]): the loss text keys
// the cache; it is parsed when the key changes.
v1_function!(pg_finfo_dp_staircase, dp_staircase, |fcinfo| {
    crate::parameters::require_fixed_call(fcinfo, 1, "dp_staircase");
    let loss = || {
        if (*fcinfo).nargs > 3 {
            Some(text_arg(fcinfo, 3, "loss"))
        } else {
            None
        }
    };
    let key = texts_key(fcinfo, || loss().map_or(0, text_fingerprint));
    release_value(fcinfo, "dp_staircase", 0.0, [key, 0], || {
        (
            Choice::Fixed(Mechanism::Staircase),
            loss().map_or(Ok(Loss::Variance), Loss::parse).or_raise(),
        )
    })
});

// dp_noise(value, epsilon, sensitivity, delta, mechanism, loss): any
// mechanism, or 'auto', per row; the texts key the cache.
v1_function!(pg_finfo_dp_noise, dp_noise, |fcinfo| {
    crate::parameters::require_fixed_call(fcinfo, 1, "dp_noise");
    let delta = required_f64(fcinfo, 3, "delta");
    let texts = || {
        (
            text_arg(fcinfo, 4, "mechanism"),
            text_arg(fcinfo, 5, "loss"),
        )
    };
    let key = texts_key(fcinfo, || {
        let (mechanism, loss) = texts();
        text_fingerprint(mechanism).rotate_left(32) ^ text_fingerprint(loss)
    });
    release_value(fcinfo, "dp_noise", delta, [key, delta.to_bits()], || {
        let (mechanism, loss) = texts();
        (
            Choice::parse(mechanism).or_raise(),
            Loss::parse(loss).or_raise(),
        )
    })
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
    (
        name!(mechanism, String),
        name!(mean_abs_error, f64),
        name!(std_dev, f64),
        name!(ci_half_width, f64),
    ),
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
    let plan: Plan = crate::plans::plan(Request {
        choice,
        epsilon: Epsilon::new(epsilon).or_raise(),
        delta: Delta::new(delta).or_raise(),
        loss,
        shape: Shape::Value(Sensitivity::new(sensitivity).or_raise()),
        groups: 1,
    });
    let a = plan.accuracy(confidence);
    TableIterator::once((
        plan.mechanism.name().to_string(),
        a.mean_abs_error,
        a.std_dev,
        a.ci_half_width,
    ))
}
