//! The SQL layer's one release path: every function that releases reads
//! its arguments, gets its plan here (the call site's, else the backend's
//! plan cache, else the core plans it), pays, and draws. The core decides
//! lattice, sensitivity, mechanism and noise; nothing here computes them.

use crate::call_site::call_site_cache;
use crate::errors::OrRaise;
use crate::fmgr::{f64_datum, i64_datum};
use dpnoise_core::{Plan, Request};
use pgrx::pg_sys;
use std::cell::RefCell;

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
    paid: (f64, f64),
    true_steps: i128,
    as_type: Release,
) -> pg_sys::Datum {
    // SAFETY: the caller's contract.
    unsafe { release_steps(fcinfo, function, plan, paid, true_steps, as_type).0 }
}

/// `release`, also returning the noisy value in lattice steps (what a
/// thresholded selection compares: `note_released`). The same draws as
/// `Plan::release`: the true steps plus one sample, onto the lattice.
///
/// # Safety
/// `fcinfo` is the live call of a final or per-row function.
pub unsafe fn release_steps(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    plan: &Plan,
    (epsilon, delta): (f64, f64),
    true_steps: i128,
    as_type: Release,
) -> (pg_sys::Datum, i128) {
    use dpnoise_core::noise::LatticeNoise;
    // SAFETY: the caller's contract.
    unsafe { pay(fcinfo, function, plan.mechanism.name(), (epsilon, delta)) };
    let lattice = plan.calibration.lattice;
    // SAFETY: as above.
    unsafe {
        crate::repeat::with_release_rng(fcinfo, |rng| {
            let noisy = true_steps + plan.noise.sample(rng);
            let datum = match as_type {
                Release::Float => f64_datum(lattice.release(noisy)),
                Release::Integer => i64_datum(lattice.release_integer(noisy).or_raise()),
            };
            (datum, noisy)
        })
    }
}

thread_local! {
    /// The latest noisy value, in lattice steps, of each thresholded
    /// release in each Agg: (the Agg's state, the release's plan key, the
    /// steps). A group's aggregates are finalized before its HAVING is
    /// read, the target list's first (PostgreSQL numbers them so:
    /// prepagg.c), so the count or sum the gate thresholds has always just
    /// written its group's value here when its selection, in that HAVING,
    /// reads it.
    static RELEASED: RefCell<Vec<(usize, [u64; 5], i128)>> = const { RefCell::new(Vec::new()) };
}

/// Notes a count's or sum's release of `steps` in its group, under its
/// plan `key`, for a thresholded selection in the same Agg (`noted`).
///
/// # Safety
/// `fcinfo` is a live final call.
pub unsafe fn note_released(fcinfo: pg_sys::FunctionCallInfo, key: [u64; 5], steps: i128) {
    // SAFETY: the caller's contract: context is null or a live node.
    let agg = unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_AggState {
            return;
        }
        context as usize
    };
    RELEASED.with(|r| {
        let mut r = r.borrow_mut();
        // The newest last: an entry of an earlier statement whose Agg state
        // happened to sit at the same address is moved up, so that the
        // oldest dropped below is never this statement's (which left its
        // selection reading nothing, 0A000, once 64 entries had piled up).
        if let Some(at) = r.iter().position(|e| e.0 == agg && e.1 == key) {
            r.remove(at);
        }
        if r.len() >= 64 {
            r.remove(0);
        }
        r.push((agg, key, steps));
    });
}

/// The noisy steps a release of plan `key` noted last in the Agg whose
/// state is at `agg` (`note_released`), if any.
pub fn noted(agg: usize, key: [u64; 5]) -> Option<i128> {
    RELEASED.with(|r| {
        r.borrow()
            .iter()
            .find(|e| e.0 == agg && e.1 == key)
            .map(|e| e.2)
    })
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
