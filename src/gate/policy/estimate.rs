//! `dp_estimate`: an interval around a released plain aggregate, from the
//! releases it is computed from and each one's half-width (`split` writes
//! the call above the level that releases them; nothing here reads a row).
//!
//! The interval itself is the core's (`dpnoise_core::interval`).

use dpnoise_core::interval::estimate;
use pgrx::prelude::*;

/// An interval's part around a released plain aggregate (docs/bi.md,
/// "Errors and intervals"): 1 the value, 2 the low end, 3 the high end, 4 the half-width
/// (the larger side). The analyst gate writes it; it reads no table.
#[pg_extern(immutable, strict, parallel_safe)]
fn dp_estimate(parts: Vec<f64>, part: i32) -> f64 {
    let Some(e) = estimate(&parts) else {
        crate::errors::raise(dpnoise_core::Error::invalid(
            "parts",
            "an interval's parts as the analyst gate writes them",
            format!("an array of {}", parts.len()),
        ));
    };
    match part {
        1 => e.value,
        2 => e.low,
        3 => e.high,
        4 => e.error(),
        _ => crate::errors::raise(dpnoise_core::Error::invalid(
            "part",
            "1 (value), 2 (low), 3 (high) or 4 (half-width)",
            part,
        )),
    }
}

