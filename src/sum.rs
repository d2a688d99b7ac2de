//! Sums and averages: `dp_sum_laplace`, `dp_sum_staircase`, `dp_avg`.
//!
//! Values are clamped, rounded to the lattice and accumulated exactly as
//! integers (i128), so the sum is the same whatever the row order or the
//! split between parallel workers (MECHANISMS.md §1). Noise is added once,
//! in the final function.

use crate::aggref::{aggregate_arguments, f64_parameter, i64_parameter, text_parameter};
use crate::errors::{self, OrRaise};
use crate::fmgr::{
    call_site_cache, text_fingerprint, arg_datum, arg_f64, arg_i64, arg_is_null, f64_datum, i64_datum, refuse_window,
    required_f64, v1_function,
};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Choice, Epsilon, Lattice, LatticeNoise, Loss, Mechanism, Noise, Plan, Shape};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The transition state: the parameters every row must share, the lattice
/// they chose, the exact lattice sum and the number of values summed.
#[repr(C)]
#[derive(Clone, Copy)]
struct SumState {
    /// Raw bits of (epsilon, lower, upper).
    params: [u64; 3],
    lattice_k: i32,
    /// The i128 sum as two words: palloc only guarantees 8-byte alignment,
    /// and a Rust i128 field would demand 16.
    sum: [u64; 2],
    count: i64,
}

impl SumState {
    #[inline]
    fn sum(&self) -> i128 {
        ((self.sum[1] as i128) << 64) | self.sum[0] as i128
    }

    #[inline]
    fn add(&mut self, steps: i128, count: i64) {
        let total = self.sum().checked_add(steps).unwrap_or_else(|| errors::sum_overflow());
        self.sum = [total as u64, (total >> 64) as u64];
        self.count += count;
    }
}

unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut SumState {
    if unsafe { arg_is_null(fcinfo, i) } {
        std::ptr::null_mut()
    } else {
        unsafe { arg_datum(fcinfo, i) }.cast_mut_ptr()
    }
}

unsafe fn new_state(fcinfo: pg_sys::FunctionCallInfo, init: SumState) -> *mut SumState {
    unsafe { crate::fmgr::new_state(fcinfo, "a dpnoise sum", init) }
}

/// Word-by-word comparison: comparing the arrays whole compiles to a 16-byte
/// load of words just stored one by one, a store-forwarding stall per row.
#[inline(always)]
fn same_params(a: &[u64; 3], b: &[u64; 3]) -> bool {
    let x = std::hint::black_box(a[0] ^ b[0]);
    x | (a[1] ^ b[1]) | (a[2] ^ b[2]) == 0
}

/// The state for this row's parameters: created on the first row, checked on the others.
#[inline]
unsafe fn state_for(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
    params: [u64; 3],
    calibrate: impl FnOnce() -> Calibration,
) -> &'static mut SumState {
    unsafe {
        let state = state_arg(fcinfo, 0);
        if state.is_null() {
            refuse_window(fcinfo, aggregate);
            crate::aggref::require_fixed_arguments(fcinfo, 1, aggregate);
            let cal = calibrate();
            let init = SumState { params, lattice_k: cal.lattice.k, sum: [0, 0], count: 0 };
            return &mut *new_state(fcinfo, init);
        }
        if !same_params(&(*state).params, &params) {
            errors::varying_parameter(aggregate);
        }
        &mut *state
    }
}

/// What differs between float8 and int8 sums: how a value is read, rounded
/// and released, and which lattice it lives on.
trait SumValue: Copy {
    /// The raw bits kept in the state to check every row's parameters.
    fn bits(self) -> u64;
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<Self>;
    fn parameter(value: Option<pg_sys::Datum>, name: &str) -> Self;
    fn calibrate(epsilon: Epsilon, lower: Self, upper: Self) -> Calibration;
    /// The release's shape for a sum clamped to [lower, upper].
    fn shape(lower: Self, upper: Self) -> Shape;
    /// Clamps to [lower, upper] and rounds onto the lattice.
    fn lattice_steps(self, lattice: Lattice, lower: Self, upper: Self, aggregate: &str) -> i128;
    fn release<N: LatticeNoise>(cal: &Calibration, noise: &N, sum: i128) -> pg_sys::Datum;
    fn negate(self) -> Self;
    /// Checks a sensitivity for `dp_sum_staircase`, which clamps to [−Δ, Δ].
    fn check_sensitivity(self);
    /// Refuses, before the charge, a release whose noise alone would
    /// usually overflow the result type.
    fn check_noise_fits(_mechanism: Mechanism, _epsilon: Epsilon, _delta: f64, _bounds: (Self, Self)) {}
}

impl SumValue for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<f64> {
        unsafe { arg_f64(fcinfo, i) }
    }
    fn parameter(value: Option<pg_sys::Datum>, name: &str) -> f64 {
        f64_parameter(value, name)
    }
    fn calibrate(epsilon: Epsilon, lower: f64, upper: f64) -> Calibration {
        Calibration::sum(epsilon, lower, upper).or_raise()
    }
    fn shape(lower: f64, upper: f64) -> Shape {
        Shape::Sum(lower, upper)
    }
    #[inline]
    fn lattice_steps(self, lattice: Lattice, lower: f64, upper: f64, aggregate: &str) -> i128 {
        if self.is_nan() {
            errors::nan_value(aggregate);
        }
        lattice.round(self.clamp(lower, upper)).or_raise()
    }
    fn release<N: LatticeNoise>(cal: &Calibration, noise: &N, sum: i128) -> pg_sys::Datum {
        f64_datum(with_rng(|rng| cal.release(noise, rng, sum)))
    }
    fn negate(self) -> f64 {
        -self
    }
    fn check_sensitivity(self) {
        if !(self.is_finite() && self > 0.0) {
            errors::raise(dpnoise_core::Error::invalid("sensitivity", "a finite number > 0", self));
        }
    }
}

impl SumValue for i64 {
    fn bits(self) -> u64 {
        self as u64
    }
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<i64> {
        unsafe { arg_i64(fcinfo, i) }
    }
    fn parameter(value: Option<pg_sys::Datum>, name: &str) -> i64 {
        i64_parameter(value, name)
    }
    fn calibrate(epsilon: Epsilon, lower: i64, upper: i64) -> Calibration {
        Calibration::sum_integer(epsilon, lower, upper).or_raise()
    }
    fn shape(lower: i64, upper: i64) -> Shape {
        Shape::SumInteger(lower, upper)
    }
    #[inline]
    fn lattice_steps(self, lattice: Lattice, lower: i64, upper: i64, _aggregate: &str) -> i128 {
        lattice.round_integer(self.clamp(lower, upper))
    }
    fn release<N: LatticeNoise>(cal: &Calibration, noise: &N, sum: i128) -> pg_sys::Datum {
        i64_datum(with_rng(|rng| cal.release_integer(noise, rng, sum)).or_raise())
    }
    fn negate(self) -> i64 {
        -self
    }
    fn check_sensitivity(self) {
        if self <= 0 || self == i64::MAX {
            errors::raise(dpnoise_core::Error::invalid("sensitivity", "in [1, 2^63 − 2]", self));
        }
    }
    /// Noise of scale s exceeds 2^63 in magnitude with probability
    /// e^(−2^63/s) for the Laplace family: at s ≥ 2^62 more than one draw in
    /// eight would not fit bigint, whatever the data.
    fn check_noise_fits(mechanism: Mechanism, epsilon: Epsilon, delta: f64, (lower, upper): (i64, i64)) {
        let sensitivity = (lower as f64).abs().max((upper as f64).abs());
        let scale = sensitivity * mechanism.scale_ratio(epsilon, delta);
        if scale >= 2f64.powi(62) {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("a bigint sum with bounds [{lower}, {upper}] at epsilon = {} has noise too large for bigint", epsilon.value()),
                "The noise's scale, max(|lower|, |upper|)/epsilon, must be below 2^62: narrow the bounds, raise epsilon, or sum float8 values."
            );
        }
    }
}

/// One row: clamp, round onto the lattice, add.
#[inline]
unsafe fn accumulate<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo, aggregate: &str, bounds: (T, T)) -> pg_sys::Datum {
    unsafe {
        accumulate_on(fcinfo, aggregate, bounds, |epsilon, (lower, upper)| {
            T::calibrate(Epsilon::new(epsilon).or_raise(), lower, upper)
        })
    }
}

/// One row, on the lattice `calibrate` picks on the first row.
#[inline]
unsafe fn accumulate_on<T: SumValue>(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
    (lower, upper): (T, T),
    calibrate: impl FnOnce(f64, (T, T)) -> Calibration,
) -> pg_sys::Datum {
    unsafe {
        let epsilon = required_f64(fcinfo, 2, "epsilon");
        let params = [epsilon.to_bits(), lower.bits(), upper.bits()];
        let state = state_for(fcinfo, aggregate, params, || calibrate(epsilon, (lower, upper)));
        if let Some(v) = T::arg(fcinfo, 1) {
            let lattice = Lattice { k: state.lattice_k };
            state.add(v.lattice_steps(lattice, lower, upper, aggregate), 1);
        }
        pg_sys::Datum::from(state as *mut SumState)
    }
}

/// [lower, upper] from arguments 3 and 4 of a transition call.
unsafe fn bounds<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> (T, T) {
    let required = |i, name| unsafe { T::arg(fcinfo, i) }.unwrap_or_else(|| errors::null_parameter(name));
    (required(3, "lower"), required(4, "upper"))
}

/// [−Δ, Δ] from argument 3 of a `dp_sum_staircase` transition call.
unsafe fn symmetric<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> (T, T) {
    let s = unsafe { T::arg(fcinfo, 3) }.unwrap_or_else(|| errors::null_parameter("sensitivity"));
    s.check_sensitivity();
    (s.negate(), s)
}

// dp_sum_laplace(value, epsilon, lower, upper), float8 and int8.
v1_function!(pg_finfo_dp_sum_laplace_step, dp_sum_laplace_step, |fcinfo| {
    unsafe { accumulate::<f64>(fcinfo, "dp_sum_laplace", bounds(fcinfo)) }
});
v1_function!(pg_finfo_dp_sum_laplace_int_step, dp_sum_laplace_int_step, |fcinfo| {
    unsafe { accumulate::<i64>(fcinfo, "dp_sum_laplace", bounds(fcinfo)) }
});
// dp_sum_staircase(value, epsilon, sensitivity [, loss]), float8 and int8.
v1_function!(pg_finfo_dp_sum_staircase_step, dp_sum_staircase_step, |fcinfo| {
    unsafe { accumulate::<f64>(fcinfo, "dp_sum_staircase", symmetric(fcinfo)) }
});
v1_function!(pg_finfo_dp_sum_staircase_int_step, dp_sum_staircase_int_step, |fcinfo| {
    unsafe { accumulate::<i64>(fcinfo, "dp_sum_staircase", symmetric(fcinfo)) }
});
// dp_avg(value, epsilon, lower, upper): the sum's lattice is the one
// `Plan::average` gives the final function.
v1_function!(pg_finfo_dp_avg_step, dp_avg_step, |fcinfo| {
    unsafe {
        accumulate_on::<f64>(fcinfo, "dp_avg", bounds(fcinfo), |epsilon, (lower, upper)| {
            Plan::average(Epsilon::new(epsilon).or_raise(), lower, upper).or_raise().0.calibration
        })
    }
});

/// The exact sum and count, after checking the state was built with the
/// parameters and the lattice the final function sees; zero for empty input.
unsafe fn exact_state(fcinfo: pg_sys::FunctionCallInfo, aggregate: &str, params: [u64; 3], cal: &Calibration) -> (i128, i64) {
    let state = unsafe { state_arg(fcinfo, 0) };
    if state.is_null() {
        return (0, 0);
    }
    let state = unsafe { &*state };
    if state.params != params {
        errors::varying_parameter(aggregate);
    }
    if state.lattice_k != cal.lattice.k {
        pgrx::error!("{aggregate}: the sum was accumulated on another lattice (internal error)");
    }
    (state.sum(), state.count)
}

/// The loss argument at `index` if the call has one; `l2` otherwise.
unsafe fn loss_argument(fcinfo: pg_sys::FunctionCallInfo, index: usize, aggregate: &str) -> Loss {
    if unsafe { crate::aggref::argument_count(fcinfo) } <= index {
        return Loss::Variance;
    }
    let [loss] = unsafe { aggregate_arguments(fcinfo, [index], aggregate) };
    Loss::parse(&text_parameter(loss, "loss")).or_raise()
}

/// A sum's release: its parameters read from the call, then noise.
/// `symmetric` sums take one sensitivity argument and an optional loss;
/// the others take lower and upper.
unsafe fn release_sum<T: SumValue>(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
    mechanism: Mechanism,
    symmetric: bool,
) -> pg_sys::Datum {
    unsafe {
        refuse_window(fcinfo, aggregate);
        let (epsilon, (lower, upper), loss) = if symmetric {
            let [e, s] = aggregate_arguments(fcinfo, [1, 2], aggregate);
            let s = T::parameter(s, "sensitivity");
            (f64_parameter(e, "epsilon"), (s.negate(), s), loss_argument(fcinfo, 3, aggregate))
        } else {
            let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], aggregate);
            let bounds = (T::parameter(l, "lower"), T::parameter(u, "upper"));
            (f64_parameter(e, "epsilon"), bounds, Loss::Variance)
        };
        let epsilon_exact = Epsilon::new(epsilon).or_raise();
        let cal = T::calibrate(epsilon_exact, lower, upper);
        let (sum, _) = exact_state(fcinfo, aggregate, [epsilon.to_bits(), lower.bits(), upper.bits()], &cal);
        let noise = Noise::new(mechanism, epsilon_exact, 0.0, cal.steps, loss).or_raise();
        T::check_noise_fits(mechanism, epsilon_exact, 0.0, (lower, upper));
        crate::budget::pay(fcinfo, aggregate, mechanism.name(), epsilon, 0.0);
        T::release(&cal, &noise, sum)
    }
}

/// The plan of a `dp_sum` call: (value, epsilon, lower, upper [, delta
/// [, mechanism [, loss]]]), read from the call itself so the transition's
/// first row and the final function agree.
unsafe fn sum_plan<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> (f64, f64, (T, T), Plan) {
    unsafe {
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_sum");
        let n = crate::aggref::argument_count(fcinfo);
        let delta = if n > 4 { f64_parameter(aggregate_arguments(fcinfo, [4], "dp_sum")[0], "delta") } else { 0.0 };
        let text = |i: usize, name: &str, default: &str| {
            if n > i { text_parameter(aggregate_arguments(fcinfo, [i], "dp_sum")[0], name) } else { default.to_string() }
        };
        let (mechanism, loss) = (text(5, "mechanism", "auto"), text(6, "loss", "l2"));
        let epsilon = f64_parameter(e, "epsilon");
        let bounds = (T::parameter(l, "lower"), T::parameter(u, "upper"));
        // Planning ('auto' above all) costs microseconds: once per call site
        // and parameter set, not once per group.
        let key = [
            epsilon.to_bits(),
            bounds.0.bits(),
            bounds.1.bits(),
            delta.to_bits(),
            text_fingerprint(&mechanism).rotate_left(32) ^ text_fingerprint(&loss),
        ];
        let plan = *call_site_cache(fcinfo, key, || {
            let choice = Choice::parse(&mechanism).or_raise();
            let loss = Loss::parse(&loss).or_raise();
            Plan::new(choice, Epsilon::new(epsilon).or_raise(), delta, loss, T::shape(bounds.0, bounds.1)).or_raise()
        });
        (epsilon, delta, bounds, plan)
    }
}

unsafe fn dp_sum_transition<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        accumulate_on::<T>(fcinfo, "dp_sum", bounds(fcinfo), |_, _| {
            // A window's Aggref is not where sum_plan looks: refuse it first, by name.
            refuse_window(fcinfo, "dp_sum");
            sum_plan::<T>(fcinfo).3.calibration
        })
    }
}

unsafe fn dp_sum_release<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        refuse_window(fcinfo, "dp_sum");
        let (epsilon, delta, (lower, upper), plan) = sum_plan::<T>(fcinfo);
        let params = [epsilon.to_bits(), lower.bits(), upper.bits()];
        let (sum, _) = exact_state(fcinfo, "dp_sum", params, &plan.calibration);
        T::check_noise_fits(plan.mechanism, Epsilon::new(epsilon).or_raise(), delta, (lower, upper));
        crate::budget::pay(fcinfo, "dp_sum", plan.mechanism.name(), epsilon, delta);
        T::release(&plan.calibration, &plan.noise, sum)
    }
}

// dp_sum(value, epsilon, lower, upper [, delta [, mechanism [, loss]]]), float8 and int8.
v1_function!(pg_finfo_dp_sum_step, dp_sum_step, |fcinfo| { unsafe { dp_sum_transition::<f64>(fcinfo) } });
v1_function!(pg_finfo_dp_sum_int_step, dp_sum_int_step, |fcinfo| { unsafe { dp_sum_transition::<i64>(fcinfo) } });
v1_function!(pg_finfo_dp_sum_final, dp_sum_final, |fcinfo| { unsafe { dp_sum_release::<f64>(fcinfo) } });
v1_function!(pg_finfo_dp_sum_int_final, dp_sum_int_final, |fcinfo| { unsafe { dp_sum_release::<i64>(fcinfo) } });

v1_function!(pg_finfo_dp_sum_laplace_final, dp_sum_laplace_final, |fcinfo| {
    unsafe { release_sum::<f64>(fcinfo, "dp_sum_laplace", Mechanism::Laplace, false) }
});
v1_function!(pg_finfo_dp_sum_laplace_int_final, dp_sum_laplace_int_final, |fcinfo| {
    unsafe { release_sum::<i64>(fcinfo, "dp_sum_laplace", Mechanism::Laplace, false) }
});
v1_function!(pg_finfo_dp_sum_staircase_final, dp_sum_staircase_final, |fcinfo| {
    unsafe { release_sum::<f64>(fcinfo, "dp_sum_staircase", Mechanism::Staircase, true) }
});
v1_function!(pg_finfo_dp_sum_staircase_int_final, dp_sum_staircase_int_final, |fcinfo| {
    unsafe { release_sum::<i64>(fcinfo, "dp_sum_staircase", Mechanism::Staircase, true) }
});

// dp_avg: a noisy sum (staircase, ε/2) over a noisy count (geometric, ε/2),
// the count floored at 1, the ratio clamped to [lower, upper].
v1_function!(pg_finfo_dp_avg_final, dp_avg_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_avg");
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_avg");
        let (epsilon, lower, upper) = (f64_parameter(e, "epsilon"), f64_parameter(l, "lower"), f64_parameter(u, "upper"));
        let (sum_plan, count_plan) = Plan::average(Epsilon::new(epsilon).or_raise(), lower, upper).or_raise();
        let (cal, count_cal) = (sum_plan.calibration, count_plan.calibration);
        let (sum, count) = exact_state(fcinfo, "dp_avg", [epsilon.to_bits(), lower.to_bits(), upper.to_bits()], &cal);
        crate::budget::pay(fcinfo, "dp_avg", "staircase sum, geometric count", epsilon, 0.0);
        let (noisy_sum, noisy_count) = with_rng(|rng| {
            (cal.release(&sum_plan.noise, rng, sum), count_cal.release(&count_plan.noise, rng, count as i128))
        });
        f64_datum((noisy_sum / noisy_count.max(1.0)).clamp(lower, upper))
    }
});

// Combine two partial states (parallel workers, partitions).
v1_function!(pg_finfo_dp_sum_combine, dp_sum_combine, |fcinfo| {
    unsafe {
        crate::fmgr::combine_states::<SumState>(fcinfo, "a dpnoise sum", |a, b| {
            if a.params != b.params || a.lattice_k != b.lattice_k {
                errors::varying_parameter("a dpnoise sum");
            }
            a.add(b.sum(), b.count);
        })
    }
});

v1_function!(pg_finfo_dp_sum_serialize, dp_sum_serialize, |fcinfo| {
    unsafe { crate::fmgr::serialize_state::<SumState>(fcinfo) }
});

v1_function!(pg_finfo_dp_sum_deserialize, dp_sum_deserialize, |fcinfo| {
    unsafe { crate::fmgr::deserialize_state::<SumState>(fcinfo, "a dpnoise sum") }
});
