//! The accountants a budget can keep (`dpnoise.budget.accountant`):
//! 'additive' adds up each release's (ε, δ); 'zcdp' adds up each release's
//! ρ, and the δ of releases with no finite ρ (`dpnoise_core::zcdp`). The
//! charge request carries both costs (`budget::Charge`); the ledger's
//! `charge_batch` checks the one the role's budget keeps. Here: the
//! conversions a DBA grants with, as SQL functions.

use crate::errors::raise_sqlstate;
use pgrx::prelude::*;

/// Refuses an amount that is not a finite number in `range` (22023).
fn checked(name: &str, value: Option<f64>, positive: bool, below_one: bool) -> f64 {
    let ok = |x: f64| {
        x.is_finite() && if positive { x > 0.0 } else { x >= 0.0 } && (!below_one || x < 1.0)
    };
    match value {
        Some(x) if ok(x) => x,
        _ => raise_sqlstate(
            "22023",
            format!(
                "{name} must be a finite number {}{}",
                if positive { "> 0" } else { ">= 0" },
                if below_one { " and < 1" } else { "" }
            ),
            None,
        ),
    }
}

/// The largest ρ whose (ε, δ) guarantee is within `epsilon` at `delta`
/// (Canonne, Kamath & Steinke 2020, Corollary 13): what a zCDP budget
/// granted as (ε, δ) may spend. Rounded down.
#[pg_extern(immutable, parallel_safe)]
fn dp_zcdp_rho(epsilon: Option<f64>, delta: Option<f64>) -> f64 {
    let epsilon = checked("epsilon", epsilon, false, false);
    let delta = checked("delta", delta, true, true);
    dpnoise_core::zcdp::rho_for(epsilon, delta)
}

/// The ε of the (ε, δ)-DP guarantee that ρ-zCDP gives at `delta`
/// (Canonne, Kamath & Steinke 2020, Corollary 13). Rounded up.
#[pg_extern(immutable, parallel_safe)]
fn dp_zcdp_epsilon(rho: Option<f64>, delta: Option<f64>) -> f64 {
    let rho = checked("rho", rho, false, false);
    let delta = checked("delta", delta, true, true);
    dpnoise_core::zcdp::epsilon_of(rho, delta)
}

/// The ε at which `dp_sum(value, ε, lower, upper, delta, 'gaussian')`
/// costs at most `rho` under zCDP (within a relative 1e-6): how an analyst
/// asks a Gaussian release for a share of a zCDP budget.
#[pg_extern(immutable, parallel_safe)]
fn dp_zcdp_gaussian_epsilon(
    rho: Option<f64>,
    delta: Option<f64>,
    lower: Option<f64>,
    upper: Option<f64>,
) -> f64 {
    let rho = checked("rho", rho, true, false);
    let delta = checked("delta", delta, true, true);
    let bounds = match (lower, upper) {
        (Some(lower), Some(upper)) => dpnoise_core::Bounds::new(lower, upper),
        _ => raise_sqlstate("22023", "lower and upper must not be NULL".into(), None),
    }
    .unwrap_or_else(|e| raise_sqlstate("22023", e.to_string(), None));
    dpnoise_core::zcdp::gaussian_epsilon(rho, delta, dpnoise_core::Shape::Sum(bounds), 1)
        .unwrap_or_else(|e| raise_sqlstate("22023", e.to_string(), None))
}
