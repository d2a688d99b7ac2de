//! Multivariate noise: `dp_noise_box`, `dp_noise_l1_staircase`,
//! `dp_accuracy_multi` and the `dp_sum_multi` aggregate. The math lives in
//! `dpnoise_core::multivariate`.

use crate::aggref::{aggregate_arguments, f64_parameter};
use crate::errors::{self, OrRaise};
use crate::fmgr::{arg_datum, arg_is_null, refuse_window, required_f64, return_null, v1_function};
use crate::rng::with_rng;
use dpnoise_core::lattice::Lattice;
use dpnoise_core::multivariate::{BoxPlan, MAX_COMPONENTS};
use dpnoise_core::{Epsilon, Error, Sensitivity};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

pgrx::extension_sql_file!(
    "multi.sql",
    name = "multi_sql",
    requires = [dp_accuracy_multi, dp_noise_box, dp_noise_l1_staircase]
);
const _: () = assert!(crate::fmgr::every_sspace_is(
    include_str!("multi.sql"),
    std::mem::size_of::<MultiState>()
));

/// A float8[] parameter: not NULL, no NULL or non-finite elements. For
/// `values` (the data) the message does not show the element.
fn finite_array(name: &'static str, items: Option<Vec<Option<f64>>>) -> Vec<f64> {
    let items = items.unwrap_or_else(|| errors::null_parameter(name));
    items
        .into_iter()
        .map(|v| match v {
            Some(x) if x.is_finite() => x,
            Some(_) if name == "values" => {
                errors::raise(Error::invalid_data(name, "finite numbers"))
            }
            Some(x) => errors::raise(Error::invalid(name, "finite numbers", x)),
            None if name == "values" => {
                errors::raise(Error::invalid_data(name, "free of NULL elements"))
            }
            None => errors::raise(Error::invalid(name, "free of NULL elements", "NULL")),
        })
        .collect()
}

fn epsilon_of(epsilon: Option<f64>) -> (f64, Epsilon) {
    let e = epsilon.unwrap_or_else(|| errors::null_parameter("epsilon"));
    (e, Epsilon::new(e).or_raise())
}

/// The box plan of per-row noise: sensitivities and inner in units.
fn value_plan(
    epsilon: Option<f64>,
    sensitivities: Option<Vec<Option<f64>>>,
    inner: Option<Vec<Option<f64>>>,
) -> (f64, BoxPlan) {
    let (e, eps) = epsilon_of(epsilon);
    let s = finite_array("sensitivities", sensitivities);
    let z = inner.map(|z| finite_array("inner", Some(z)));
    (e, crate::plans::box_values(eps, &s, z.as_deref()))
}

/// values plus box noise (Soria-Comas & Domingo-Ferrer, Theorem 13) for the
/// per-component sensitivities; `inner` is S_0's half-widths (default: the
/// z that minimises the sum of relative variances).
#[pg_extern(volatile, parallel_restricted)]
fn dp_noise_box(
    values: Option<Vec<Option<f64>>>,
    epsilon: Option<f64>,
    sensitivities: Option<Vec<Option<f64>>>,
    inner: default!(Option<Vec<Option<f64>>>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<Vec<f64>> {
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe { crate::parameters::require_fixed_call(fcinfo, 1, "dp_noise_box") };
    let (e, plan) = value_plan(epsilon, sensitivities, inner);
    let values = values.map(|v| finite_array("values", Some(v)))?;
    let exact = plan.round(&values).or_raise();
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe { crate::release::pay(fcinfo, "dp_noise_box", "box", (e, 0.0)) };
    Some(with_rng(|rng| plan.release(rng, &exact)))
}

/// Two values plus Geng's two-dimensional L1 staircase noise (γ for the least
/// E‖X‖₁), for an L1 sensitivity.
#[pg_extern(volatile, parallel_restricted)]
fn dp_noise_l1_staircase(
    values: Option<Vec<Option<f64>>>,
    epsilon: Option<f64>,
    sensitivity: Option<f64>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<Vec<f64>> {
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe { crate::parameters::require_fixed_call(fcinfo, 1, "dp_noise_l1_staircase") };
    let (e, eps) = epsilon_of(epsilon);
    let s = sensitivity.unwrap_or_else(|| errors::null_parameter("sensitivity"));
    let plan = crate::plans::l1(eps, Sensitivity::new(s).or_raise());
    let values = values.map(|v| finite_array("values", Some(v)))?;
    let exact = plan.round(&values).or_raise();
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe { crate::release::pay(fcinfo, "dp_noise_l1_staircase", "l1 staircase", (e, 0.0)) };
    Some(with_rng(|rng| plan.release(rng, exact)).to_vec())
}

/// The exact figures of box noise before spending anything: each
/// component's variance, the inner half-widths used, and the volume of the
/// smallest box region holding 90, 95 and 99 % of the noise.
#[pg_extern(immutable, parallel_safe)]
fn dp_accuracy_multi(
    epsilon: Option<f64>,
    sensitivities: Option<Vec<Option<f64>>>,
    inner: default!(Option<Vec<Option<f64>>>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(variances, Vec<f64>),
        name!(inner, Vec<f64>),
        name!(volume_90, f64),
        name!(volume_95, f64),
        name!(volume_99, f64),
    ),
> {
    let (_, plan) = value_plan(epsilon, sensitivities, inner);
    let (variances, volumes) = plan.accuracy(&[0.90, 0.95, 0.99]).or_raise();
    TableIterator::once((
        variances,
        plan.inner.clone(),
        volumes[0],
        volumes[1],
        volumes[2],
    ))
}

// dp_sum_multi(values float8[], epsilon float8, bounds float8[]) ----------------

/// The transition state: parameters, each component's lattice, and the
/// exact lattice sums (i128 as two words: palloc aligns to 8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct MultiState {
    epsilon: u64,
    bounds: u64,
    /// The bounds array's datum on the last row that read it: rows passing
    /// the same datum (a constant) skip reading and hashing it again.
    bounds_datum: usize,
    bound: [f64; MAX_COMPONENTS],
    components: u32,
    lattice_k: [i32; MAX_COMPONENTS],
    sums: [[u64; 2]; MAX_COMPONENTS],
}

impl MultiState {
    fn sum(&self, j: usize) -> i128 {
        ((self.sums[j][1] as i128) << 64) | self.sums[j][0] as i128
    }

    fn add(&mut self, j: usize, steps: i128) {
        let total = self
            .sum(j)
            .checked_add(steps)
            .unwrap_or_else(|| errors::sum_overflow());
        self.sums[j] = [total as u64, (total >> 64) as u64];
    }
}

/// A fingerprint of the bounds' bits, to check every row passes the same.
fn bounds_key(bounds: &[f64]) -> u64 {
    bounds.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b.to_bits()).wrapping_mul(0x100000001b3)
    })
}

/// The plan of a sum: values are clamped to [−b_j, b_j] (`BoxPlan::for_sums`).
fn sum_plan(epsilon: f64, bounds: &[f64]) -> BoxPlan {
    crate::plans::box_sums(Epsilon::new(epsilon).or_raise(), bounds)
}

/// Checks the privacy parameters of a dp_noise_box, dp_noise_l1_staircase
/// or dp_sum_multi call as the call will (`values`: its evaluated
/// arguments, None for NULL) and returns what it pays, (ε, 0).
///
/// # Safety
/// The arrays in `values` are live.
pub(crate) unsafe fn checked_cost(name: &str, values: &[Option<pg_sys::Datum>]) -> (f64, f64) {
    let arg = |i: usize| values.get(i).copied().flatten();
    let array = |i: usize| {
        arg(i)
            // SAFETY: the caller's contract: arrays are live float8[] datums.
            .map(|d| unsafe { <Vec<Option<f64>> as FromDatum>::from_datum(d, false) })
            .flatten()
    };
    let epsilon = f64_parameter(arg(1), "epsilon");
    match name {
        "dp_noise_box" => {
            value_plan(Some(epsilon), array(2), array(3));
        }
        "dp_noise_l1_staircase" => {
            let (_, eps) = epsilon_of(Some(epsilon));
            let s = arg(2)
                .map(|d| f64::from_bits(d.value() as u64))
                .unwrap_or_else(|| errors::null_parameter("sensitivity"));
            crate::plans::l1(eps, Sensitivity::new(s).or_raise());
        }
        _ => {
            sum_plan(epsilon, &finite_array("bounds", array(2)));
        }
    }
    (epsilon, 0.0)
}

/// A float8[] argument, checked by `finite_array`.
///
/// # Safety
/// `datum` is a non-NULL float8[] datum.
unsafe fn array_arg(datum: pg_sys::Datum, name: &'static str) -> Vec<f64> {
    // SAFETY: the caller passes a non-NULL float8[] datum (its contract).
    finite_array(name, unsafe {
        <Vec<Option<f64>> as FromDatum>::from_datum(datum, false)
    })
}

/// The state in argument `i`, or null.
///
/// # Safety
/// `fcinfo` is a live call whose argument `i` is NULL or a `MultiState` this module made.
unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut MultiState {
    // SAFETY: the caller's contract: argument i is NULL or a MultiState this module made.
    unsafe {
        if arg_is_null(fcinfo, i) {
            std::ptr::null_mut()
        } else {
            arg_datum(fcinfo, i).cast_mut_ptr()
        }
    }
}

/// # Safety
/// `fcinfo` is a live aggregate support call.
unsafe fn new_state(fcinfo: pg_sys::FunctionCallInfo, init: MultiState) -> *mut MultiState {
    // SAFETY: the caller's contract: a live aggregate call.
    unsafe { crate::fmgr::new_state(fcinfo, "dp_sum_multi", init) }
}

// One row: each component clamped to [−b_j, b_j], rounded, added.
v1_function!(pg_finfo_dp_sum_multi_step, dp_sum_multi_step, |fcinfo| {
    let epsilon = required_f64(fcinfo, 2, "epsilon");
    if arg_is_null(fcinfo, 3) {
        errors::null_parameter("bounds");
    }
    let bounds_datum = arg_datum(fcinfo, 3);
    let mut state = state_arg(fcinfo, 0);
    if state.is_null() {
        refuse_window(fcinfo, "dp_sum_multi");
        crate::aggref::require_fixed_arguments(fcinfo, 1, "dp_sum_multi");
        let bounds = array_arg(bounds_datum, "bounds");
        let plan = sum_plan(epsilon, &bounds);
        let mut init = MultiState {
            epsilon: epsilon.to_bits(),
            bounds: bounds_key(&bounds),
            bounds_datum: bounds_datum.value(),
            bound: [0.0; MAX_COMPONENTS],
            components: bounds.len() as u32,
            lattice_k: [0; MAX_COMPONENTS],
            sums: [[0; 2]; MAX_COMPONENTS],
        };
        for (j, l) in plan.lattices.iter().enumerate() {
            init.lattice_k[j] = l.k;
            init.bound[j] = bounds[j];
        }
        state = new_state(fcinfo, init);
    } else if (*state).epsilon != epsilon.to_bits() {
        errors::varying_parameter("dp_sum_multi");
    } else if (*state).bounds_datum != bounds_datum.value() {
        if bounds_key(&array_arg(bounds_datum, "bounds")) != (*state).bounds {
            errors::varying_parameter("dp_sum_multi");
        }
        (*state).bounds_datum = bounds_datum.value();
    }
    if !arg_is_null(fcinfo, 1) {
        let s = &mut *state;
        let values = array_arg(arg_datum(fcinfo, 1), "values");
        if values.len() != s.components as usize {
            errors::raise(Error::invalid_data(
                "values",
                "an array as long as the sensitivities (or bounds)",
            ));
        }
        for (j, v) in values.iter().enumerate() {
            let b = s.bound[j];
            let steps = Lattice { k: s.lattice_k[j] }
                .round(v.clamp(-b, b))
                .or_raise();
            s.add(j, steps);
        }
    }
    pg_sys::Datum::from(state)
});

v1_function!(pg_finfo_dp_sum_multi_final, dp_sum_multi_final, |fcinfo| {
    refuse_window(fcinfo, "dp_sum_multi");
    let [e, b] = aggregate_arguments(fcinfo, [1, 2], "dp_sum_multi");
    let epsilon = f64_parameter(e, "epsilon");
    let bounds = array_arg(
        b.unwrap_or_else(|| errors::null_parameter("bounds")),
        "bounds",
    );
    let plan = sum_plan(epsilon, &bounds);
    let state = state_arg(fcinfo, 0);
    let sums: Vec<i128> = if state.is_null() {
        vec![0; bounds.len()]
    } else {
        let s = &*state;
        if s.epsilon != epsilon.to_bits() || s.bounds != bounds_key(&bounds) {
            errors::varying_parameter("dp_sum_multi");
        }
        if plan
            .lattices
            .iter()
            .enumerate()
            .any(|(j, l)| s.lattice_k[j] != l.k)
        {
            pgrx::error!(
                "dp_sum_multi: the sum was accumulated on another lattice (internal error)"
            );
        }
        (0..bounds.len()).map(|j| s.sum(j)).collect()
    };
    crate::release::pay(fcinfo, "dp_sum_multi", "box", (epsilon, 0.0));
    crate::repeat::with_release_rng(fcinfo, |rng| plan.release(rng, &sums))
        .into_datum()
        .unwrap_or_else(|| return_null(fcinfo))
});

v1_function!(
    pg_finfo_dp_sum_multi_combine,
    dp_sum_multi_combine,
    |fcinfo| {
        crate::fmgr::combine_states::<MultiState>(fcinfo, "dp_sum_multi", |a, b| {
            if a.epsilon != b.epsilon || a.bounds != b.bounds || a.lattice_k != b.lattice_k {
                errors::varying_parameter("dp_sum_multi");
            }
            for j in 0..a.components as usize {
                a.add(j, b.sum(j));
            }
        })
    }
);

v1_function!(
    pg_finfo_dp_sum_multi_serialize,
    dp_sum_multi_serialize,
    |fcinfo| { crate::fmgr::serialize_state::<MultiState>(fcinfo) }
);

v1_function!(
    pg_finfo_dp_sum_multi_deserialize,
    dp_sum_multi_deserialize,
    |fcinfo| { crate::fmgr::deserialize_state::<MultiState>(fcinfo, "dp_sum_multi") }
);
