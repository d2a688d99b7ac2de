//! Sums and averages: `dp_sum_laplace`, `dp_sum_staircase`, `dp_avg`.
//!
//! Values are clamped, rounded to the lattice and accumulated exactly as
//! integers (i128), so the sum is the same whatever the row order or the
//! split between parallel workers (MECHANISMS.md §1). Noise is added once,
//! in the final function.

use crate::aggref::{aggregate_arguments, f64_parameter, i64_parameter, text_parameter};
use crate::errors::{self, OrRaise};
use crate::fmgr::{
    aggregate_context, arg_datum, arg_f64, arg_i64, arg_is_null, f64_datum, i64_datum, refuse_window,
    required_f64, required_i64, return_null, v1_function,
};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Epsilon, Lattice, Loss, Mechanism, Noise};
use pgrx::pg_sys;

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
    unsafe {
        let context = aggregate_context(fcinfo, "a dpnoise sum");
        let p = pg_sys::MemoryContextAlloc(context, std::mem::size_of::<SumState>()) as *mut SumState;
        p.write(init);
        p
    }
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

/// The lattice of a float8 sum whose noise spends `epsilon` (dp_avg's sum spends ε/2).
fn sum_calibration(epsilon: f64, lower: f64, upper: f64) -> Calibration {
    Calibration::sum(Epsilon::new(epsilon).or_raise(), lower, upper).or_raise()
}

/// One float8 row: clamp to [lower, upper], round to the lattice, add.
/// `share` is the fraction of ε the sum's noise spends.
#[inline]
unsafe fn accumulate_f64(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
    lower: f64,
    upper: f64,
    share: f64,
) -> pg_sys::Datum {
    unsafe {
        let epsilon = required_f64(fcinfo, 2, "epsilon");
        let params = [epsilon.to_bits(), lower.to_bits(), upper.to_bits()];
        let state = state_for(fcinfo, aggregate, params, || {
            Epsilon::new(epsilon).or_raise();
            sum_calibration(epsilon * share, lower, upper)
        });
        if let Some(x) = arg_f64(fcinfo, 1) {
            if x.is_nan() {
                errors::nan_value(aggregate);
            }
            let lattice = Lattice { k: state.lattice_k };
            state.add(lattice.round(x.clamp(lower, upper)).or_raise(), 1);
        }
        pg_sys::Datum::from(state as *mut SumState)
    }
}

/// One int8 row: clamp to [lower, upper], round to the (integer) lattice, add.
#[inline]
unsafe fn accumulate_i64(fcinfo: pg_sys::FunctionCallInfo, aggregate: &str, lower: i64, upper: i64) -> pg_sys::Datum {
    unsafe {
        let epsilon = required_f64(fcinfo, 2, "epsilon");
        let params = [epsilon.to_bits(), lower as u64, upper as u64];
        let state = state_for(fcinfo, aggregate, params, || {
            Calibration::sum_integer(Epsilon::new(epsilon).or_raise(), lower, upper).or_raise()
        });
        if let Some(v) = arg_i64(fcinfo, 1) {
            let lattice = Lattice { k: state.lattice_k };
            state.add(lattice.round_integer(v.clamp(lower, upper)), 1);
        }
        pg_sys::Datum::from(state as *mut SumState)
    }
}

/// The sensitivity of `dp_sum_staircase`, which clamps to [−Δ, Δ].
unsafe fn symmetric_f64(fcinfo: pg_sys::FunctionCallInfo) -> (f64, f64) {
    let s = unsafe { required_f64(fcinfo, 3, "sensitivity") };
    if !(s.is_finite() && s > 0.0) {
        errors::raise(dpnoise_core::Error::invalid("sensitivity", "a finite number > 0", s));
    }
    (-s, s)
}

unsafe fn symmetric_i64(fcinfo: pg_sys::FunctionCallInfo) -> (i64, i64) {
    let s = unsafe { required_i64(fcinfo, 3, "sensitivity") };
    if s <= 0 || s == i64::MAX {
        errors::raise(dpnoise_core::Error::invalid("sensitivity", "in [1, 2^63 − 2]", s));
    }
    (-s, s)
}

// dp_sum_laplace(value, epsilon, lower, upper), float8 and int8.
v1_function!(pg_finfo_dp_sum_laplace_step, dp_sum_laplace_step, |fcinfo| {
    unsafe {
        let (l, u) = (required_f64(fcinfo, 3, "lower"), required_f64(fcinfo, 4, "upper"));
        accumulate_f64(fcinfo, "dp_sum_laplace", l, u, 1.0)
    }
});
v1_function!(pg_finfo_dp_sum_laplace_int_step, dp_sum_laplace_int_step, |fcinfo| {
    unsafe {
        let (l, u) = (required_i64(fcinfo, 3, "lower"), required_i64(fcinfo, 4, "upper"));
        accumulate_i64(fcinfo, "dp_sum_laplace", l, u)
    }
});
// dp_sum_staircase(value, epsilon, sensitivity [, loss]), float8 and int8.
v1_function!(pg_finfo_dp_sum_staircase_step, dp_sum_staircase_step, |fcinfo| {
    unsafe {
        let (l, u) = symmetric_f64(fcinfo);
        accumulate_f64(fcinfo, "dp_sum_staircase", l, u, 1.0)
    }
});
v1_function!(pg_finfo_dp_sum_staircase_int_step, dp_sum_staircase_int_step, |fcinfo| {
    unsafe {
        let (l, u) = symmetric_i64(fcinfo);
        accumulate_i64(fcinfo, "dp_sum_staircase", l, u)
    }
});
// dp_avg(value, epsilon, lower, upper).
v1_function!(pg_finfo_dp_avg_step, dp_avg_step, |fcinfo| {
    unsafe {
        let (l, u) = (required_f64(fcinfo, 3, "lower"), required_f64(fcinfo, 4, "upper"));
        accumulate_f64(fcinfo, "dp_avg", l, u, 0.5)
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

/// A float8 sum's release: the parameters from the call, then noise.
unsafe fn release_f64(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
    epsilon: f64,
    (lower, upper): (f64, f64),
    mechanism: Mechanism,
    loss: Loss,
) -> pg_sys::Datum {
    let epsilon_exact = Epsilon::new(epsilon).or_raise();
    let cal = Calibration::sum(epsilon_exact, lower, upper).or_raise();
    let (sum, _) = unsafe { exact_state(fcinfo, aggregate, [epsilon.to_bits(), lower.to_bits(), upper.to_bits()], &cal) };
    let noise = Noise::new(mechanism, epsilon_exact, cal.steps, loss).or_raise();
    f64_datum(with_rng(|rng| cal.release(&noise, rng, sum)))
}

unsafe fn release_i64(
    fcinfo: pg_sys::FunctionCallInfo,
    aggregate: &str,
    epsilon: f64,
    (lower, upper): (i64, i64),
    mechanism: Mechanism,
    loss: Loss,
) -> pg_sys::Datum {
    let epsilon_exact = Epsilon::new(epsilon).or_raise();
    let cal = Calibration::sum_integer(epsilon_exact, lower, upper).or_raise();
    let (sum, _) = unsafe { exact_state(fcinfo, aggregate, [epsilon.to_bits(), lower as u64, upper as u64], &cal) };
    let noise = Noise::new(mechanism, epsilon_exact, cal.steps, loss).or_raise();
    i64_datum(with_rng(|rng| cal.release_integer(&noise, rng, sum)).or_raise())
}

v1_function!(pg_finfo_dp_sum_laplace_final, dp_sum_laplace_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_sum_laplace");
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_sum_laplace");
        let bounds = (f64_parameter(l, "lower"), f64_parameter(u, "upper"));
        release_f64(fcinfo, "dp_sum_laplace", f64_parameter(e, "epsilon"), bounds, Mechanism::Laplace, Loss::Variance)
    }
});

v1_function!(pg_finfo_dp_sum_laplace_int_final, dp_sum_laplace_int_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_sum_laplace");
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_sum_laplace");
        let bounds = (i64_parameter(l, "lower"), i64_parameter(u, "upper"));
        release_i64(fcinfo, "dp_sum_laplace", f64_parameter(e, "epsilon"), bounds, Mechanism::Laplace, Loss::Variance)
    }
});

v1_function!(pg_finfo_dp_sum_staircase_final, dp_sum_staircase_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_sum_staircase");
        let [e, s] = aggregate_arguments(fcinfo, [1, 2], "dp_sum_staircase");
        let s = f64_parameter(s, "sensitivity");
        let loss = loss_argument(fcinfo, 3, "dp_sum_staircase");
        release_f64(fcinfo, "dp_sum_staircase", f64_parameter(e, "epsilon"), (-s, s), Mechanism::Staircase, loss)
    }
});

v1_function!(pg_finfo_dp_sum_staircase_int_final, dp_sum_staircase_int_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_sum_staircase");
        let [e, s] = aggregate_arguments(fcinfo, [1, 2], "dp_sum_staircase");
        let s = i64_parameter(s, "sensitivity");
        let loss = loss_argument(fcinfo, 3, "dp_sum_staircase");
        release_i64(fcinfo, "dp_sum_staircase", f64_parameter(e, "epsilon"), (-s, s), Mechanism::Staircase, loss)
    }
});

// dp_avg: a noisy sum (staircase, ε/2) over a noisy count (geometric, ε/2),
// the count floored at 1, the ratio clamped to [lower, upper].
v1_function!(pg_finfo_dp_avg_final, dp_avg_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_avg");
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_avg");
        let (epsilon, lower, upper) = (f64_parameter(e, "epsilon"), f64_parameter(l, "lower"), f64_parameter(u, "upper"));
        let whole = Epsilon::new(epsilon).or_raise();
        let half = Epsilon::new(whole.value() / 2.0).or_raise();
        let cal = sum_calibration(half.value(), lower, upper);
        let (sum, count) = exact_state(fcinfo, "dp_avg", [epsilon.to_bits(), lower.to_bits(), upper.to_bits()], &cal);
        let sum_noise = Noise::new(Mechanism::Staircase, half, cal.steps, Loss::Variance).or_raise();
        let count_cal = Calibration::COUNT;
        let count_noise = Noise::new(Mechanism::Laplace, half, count_cal.steps, Loss::Variance).or_raise();
        let (noisy_sum, noisy_count) = with_rng(|rng| {
            (cal.release(&sum_noise, rng, sum), count_cal.release(&count_noise, rng, count as i128))
        });
        f64_datum((noisy_sum / noisy_count.max(1.0)).clamp(lower, upper))
    }
});

// Combine two partial states (parallel workers, partitions).
v1_function!(pg_finfo_dp_sum_combine, dp_sum_combine, |fcinfo| {
    unsafe {
        let (a, b) = (state_arg(fcinfo, 0), state_arg(fcinfo, 1));
        if b.is_null() {
            return if a.is_null() { return_null(fcinfo) } else { pg_sys::Datum::from(a) };
        }
        if a.is_null() {
            return pg_sys::Datum::from(new_state(fcinfo, *b));
        }
        if (*a).params != (*b).params || (*a).lattice_k != (*b).lattice_k {
            errors::varying_parameter("a dpnoise sum");
        }
        (*a).add((*b).sum(), (*b).count);
        pg_sys::Datum::from(a)
    }
});

const STATE_BYTES: usize = std::mem::size_of::<SumState>();

v1_function!(pg_finfo_dp_sum_serialize, dp_sum_serialize, |fcinfo| {
    unsafe {
        let state = state_arg(fcinfo, 0);
        let total = pg_sys::VARHDRSZ + STATE_BYTES;
        let out = pg_sys::palloc(total) as *mut pg_sys::varlena;
        pgrx::set_varsize_4b(out, total as i32);
        std::ptr::copy_nonoverlapping(state as *const u8, pgrx::vardata_4b(out) as *mut u8, STATE_BYTES);
        pg_sys::Datum::from(out)
    }
});

v1_function!(pg_finfo_dp_sum_deserialize, dp_sum_deserialize, |fcinfo| {
    unsafe {
        let raw = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, 0).cast_mut_ptr());
        if pgrx::varsize_any_exhdr(raw) != STATE_BYTES {
            pgrx::error!("dpnoise: malformed partial sum state");
        }
        let mut state = std::mem::MaybeUninit::<SumState>::uninit();
        std::ptr::copy_nonoverlapping(pgrx::vardata_any(raw) as *const u8, state.as_mut_ptr() as *mut u8, STATE_BYTES);
        pg_sys::Datum::from(new_state(fcinfo, state.assume_init()))
    }
});
