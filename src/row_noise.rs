//! Per-row noise: `dp_laplace(value, epsilon, sensitivity)` and
//! `dp_staircase(value, epsilon, sensitivity [, loss])`.
//!
//! The lattice and the noise are calibrated once per call site (cached in
//! `fn_extra`), so a row costs one rounding and one exact draw.

use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, arg_f64, arg_is_null, call_site_cache, f64_datum, required_f64, return_null, v1_function};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Epsilon, LatticeNoise, Loss, Mechanism, Noise};
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
        let epsilon = required_f64(fcinfo, 1, "epsilon");
        let sensitivity = required_f64(fcinfo, 2, "sensitivity");
        let (cal, noise) = call_site_cache(fcinfo, [epsilon.to_bits(), sensitivity.to_bits(), loss_key], || {
            calibrate(Epsilon::new(epsilon).or_raise(), sensitivity)
        });
        let Some(value) = arg_f64(fcinfo, 0) else {
            return return_null(fcinfo);
        };
        let true_steps = cal.lattice.round(value).or_raise();
        crate::budget::pay(fcinfo, function, mechanism.name(), epsilon, 0.0);
        f64_datum(with_rng(|rng| cal.release(noise, rng, true_steps)))
    }
}

fn calibrated(mechanism: Mechanism, loss: Loss) -> impl FnOnce(Epsilon, f64) -> (Calibration, Noise) {
    move |epsilon, sensitivity| {
        let cal = Calibration::value(epsilon, sensitivity).or_raise();
        (cal, Noise::new(mechanism, epsilon, cal.steps, loss).or_raise())
    }
}

v1_function!(pg_finfo_dp_laplace, dp_laplace, |fcinfo| {
    unsafe { release_value(fcinfo, "dp_laplace", Mechanism::Laplace, 0, calibrated(Mechanism::Laplace, Loss::Variance)) }
});

// dp_staircase(value, epsilon, sensitivity [, loss]): the loss text is read
// per row only to key the cache; it is parsed when the key changes.
v1_function!(pg_finfo_dp_staircase, dp_staircase, |fcinfo| {
    unsafe {
        let text = if (*fcinfo).nargs > 3 {
            if arg_is_null(fcinfo, 3) {
                crate::errors::null_parameter("loss");
            }
            let raw = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, 3).cast_mut_ptr());
            Some(pgrx::text_to_rust_str_unchecked(raw))
        } else {
            None
        };
        let key = text.map_or(0, fingerprint);
        release_value(fcinfo, "dp_staircase", Mechanism::Staircase, key, |epsilon, sensitivity| {
            let loss = text.map_or(Ok(Loss::Variance), Loss::parse).or_raise();
            calibrated(Mechanism::Staircase, loss)(epsilon, sensitivity)
        })
    }
});

/// FNV-1a of the loss text, never 0 (0 means "no loss argument").
fn fingerprint(text: &str) -> u64 {
    let h = text.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    h.max(1)
}

/// The exact error of a mechanism before spending anything: E|X|, the
/// standard deviation and the half-width of the symmetric interval holding
/// `confidence`, computed from the lattice law the mechanism samples.
#[pg_extern(immutable, parallel_safe)]
fn dp_accuracy(
    mechanism: &str,
    epsilon: f64,
    sensitivity: f64,
    loss: default!(Option<&str>, "NULL"),
    confidence: default!(f64, 0.95),
) -> TableIterator<'static, (name!(mean_abs_error, f64), name!(std_dev, f64), name!(ci_half_width, f64))> {
    let mechanism = Mechanism::parse(mechanism).or_raise();
    dpnoise_core::staircase::check_confidence(confidence).or_raise();
    let loss = loss.map_or(Ok(Loss::Variance), Loss::parse).or_raise();
    let (cal, noise) = calibrated(mechanism, loss)(Epsilon::new(epsilon).or_raise(), sensitivity);
    let a = noise.law().accuracy_in_steps(confidence).scaled(cal.lattice.granularity());
    TableIterator::once((a.mean_abs_error, a.std_dev, a.ci_half_width))
}
