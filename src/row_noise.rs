//! Per-row noise functions: `dp_laplace(value, epsilon, sensitivity)`.
//!
//! The lattice and the noise are calibrated once per call site (cached in
//! `fn_extra`), so a row costs one rounding and one exact draw.

use crate::errors::OrRaise;
use crate::fmgr::{arg_f64, call_site_cache, f64_datum, required_f64, return_null, v1_function};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Epsilon, Laplace, LatticeNoise};
use pgrx::pg_sys;

/// Noises one value: NULL stays NULL (nothing is released), parameters must
/// be given.
#[inline]
unsafe fn release_value<N: LatticeNoise + Copy>(
    fcinfo: pg_sys::FunctionCallInfo,
    calibrate: impl FnOnce(Epsilon, f64) -> (Calibration, N),
) -> pg_sys::Datum {
    unsafe {
        let epsilon = required_f64(fcinfo, 1, "epsilon");
        let sensitivity = required_f64(fcinfo, 2, "sensitivity");
        let (cal, noise) = call_site_cache(fcinfo, [epsilon.to_bits(), sensitivity.to_bits()], || {
            calibrate(Epsilon::new(epsilon).or_raise(), sensitivity)
        });
        let Some(value) = arg_f64(fcinfo, 0) else {
            return return_null(fcinfo);
        };
        let true_steps = cal.lattice.round(value).or_raise();
        f64_datum(with_rng(|rng| cal.release(noise, rng, true_steps)))
    }
}

v1_function!(pg_finfo_dp_laplace, dp_laplace, |fcinfo| {
    unsafe {
        release_value(fcinfo, |epsilon, sensitivity| {
            let cal = Calibration::value(epsilon, sensitivity).or_raise();
            (cal, Laplace::new(epsilon, cal.steps).or_raise())
        })
    }
});
