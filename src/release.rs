//! The SQL layer's one release path: every function that releases reads
//! its arguments, gets its plan here (the call site's, else the backend's
//! plan cache, else the core plans it), pays, and draws. The core decides
//! lattice, sensitivity, mechanism and noise; nothing here computes them.

use crate::call_site::call_site_cache;
use crate::errors::OrRaise;
use crate::fmgr::{f64_datum, i64_datum};
use dpnoise_core::{Plan, Request};
use pgrx::pg_sys;

/// The plan for `request()`, kept at the call site under `key` (the raw
/// bits of the call's parameters; texts by `text_fingerprint`): a call site
/// plans once per parameter set, not once per row or group.
///
/// # Safety
/// `fcinfo` is the live call of a dpnoise function; the plan is not held
/// past the call or across another `site_plan` of the same call.
#[inline]
pub unsafe fn site_plan<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
    key: [u64; 5],
    request: impl FnOnce() -> Request,
) -> &'a Plan {
    // SAFETY: the caller's contract; Plan is plain data.
    unsafe { call_site_cache(fcinfo, key, || crate::plans::plan(request())) }
}

/// Pays for one release at (`epsilon`, `delta`) as the user wrote them, then
/// releases `true_steps` with `plan`'s noise: as float8 (`Release::Float`)
/// or int8 (`Release::Integer`).
///
/// # Safety
/// `fcinfo` is the live call of a final or per-row function.
#[inline]
pub unsafe fn release(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    plan: &Plan,
    (epsilon, delta): (f64, f64),
    true_steps: i128,
    as_type: Release,
) -> pg_sys::Datum {
    // SAFETY: the caller's contract.
    unsafe { pay(fcinfo, function, plan.mechanism.name(), (epsilon, delta)) };
    // SAFETY: as above.
    unsafe {
        crate::repeat::with_release_rng(fcinfo, |rng| match as_type {
            Release::Float => f64_datum(plan.release(rng, true_steps)),
            Release::Integer => i64_datum(plan.release_integer(rng, true_steps).or_raise()),
        })
    }
}

/// Pays for one release at (ε, δ) (`budget::pay`), with its identity if it
/// can be answered again (`repeat`). Call it after every parameter is
/// checked and before any noise is drawn.
///
/// # Safety
/// `fcinfo` is the live call of a final or per-row function.
#[inline(always)]
pub unsafe fn pay(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    mechanism: &str,
    amounts: (f64, f64),
) {
    // SAFETY: the caller's contract.
    unsafe {
        let identified = crate::repeat::identity(fcinfo);
        crate::budget::pay(fcinfo, function, mechanism, amounts, identified)
    }
}

/// The SQL type a release is returned as.
#[derive(Clone, Copy)]
pub enum Release {
    Float,
    Integer,
}
