//! `dp_sum_laplace`: sums of clamped values, accumulated exactly as lattice
//! integers (i128), so the sum is the same whatever the row order or the
//! split between parallel workers (MECHANISMS.md §1).

use crate::aggref::{aggregate_arguments, f64_parameter, i64_parameter};
use crate::errors::{self, OrRaise};
use crate::fmgr::{
    aggregate_context, arg_datum, arg_f64, arg_i64, arg_is_null, f64_datum, i64_datum, refuse_window,
    required_f64, required_i64, return_null, v1_function,
};
use crate::rng::with_rng;
use dpnoise_core::{Calibration, Epsilon, Laplace, Lattice};
use pgrx::pg_sys;

/// The transition state: the parameters every row must share, the lattice
/// they chose, and the exact lattice sum.
#[repr(C)]
#[derive(Clone, Copy)]
struct SumState {
    /// Raw bits of (epsilon, lower, upper).
    params: [u64; 3],
    lattice_k: i32,
    /// The i128 sum as two words: palloc only guarantees 8-byte alignment,
    /// and a Rust i128 field would demand 16.
    sum: [u64; 2],
}

impl SumState {
    #[inline]
    fn sum(&self) -> i128 {
        ((self.sum[1] as i128) << 64) | self.sum[0] as i128
    }

    #[inline]
    fn set_sum(&mut self, v: i128) {
        self.sum = [v as u64, (v >> 64) as u64];
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
        let context = aggregate_context(fcinfo, "dp_sum_laplace");
        let p = pg_sys::MemoryContextAlloc(context, std::mem::size_of::<SumState>()) as *mut SumState;
        p.write(init);
        p
    }
}

/// The state for this row's parameters: created on the first row, checked on the others.
#[inline]
unsafe fn state_for(
    fcinfo: pg_sys::FunctionCallInfo,
    params: [u64; 3],
    calibrate: impl FnOnce() -> Calibration,
) -> *mut SumState {
    unsafe {
        let state = state_arg(fcinfo, 0);
        if state.is_null() {
            let cal = calibrate();
            return new_state(fcinfo, SumState { params, lattice_k: cal.lattice.k, sum: [0, 0] });
        }
        if (*state).params != params {
            errors::varying_parameter("dp_sum_laplace");
        }
        state
    }
}

#[inline]
fn add(state: &mut SumState, steps: i128) {
    let total = state.sum().checked_add(steps).unwrap_or_else(|| errors::sum_overflow());
    state.set_sum(total);
}

// dp_sum_laplace(value float8, epsilon, lower, upper)
v1_function!(pg_finfo_dp_sum_step, dp_sum_step, |fcinfo| {
    unsafe {
        let epsilon = required_f64(fcinfo, 2, "epsilon");
        let lower = required_f64(fcinfo, 3, "lower");
        let upper = required_f64(fcinfo, 4, "upper");
        let params = [epsilon.to_bits(), lower.to_bits(), upper.to_bits()];
        let state = state_for(fcinfo, params, || {
            Calibration::sum(Epsilon::new(epsilon).or_raise(), lower, upper).or_raise()
        });
        if let Some(x) = arg_f64(fcinfo, 1) {
            if x.is_nan() {
                errors::nan_value("dp_sum_laplace");
            }
            let lattice = Lattice { k: (*state).lattice_k };
            add(&mut *state, lattice.round(x.clamp(lower, upper)).or_raise());
        }
        pg_sys::Datum::from(state)
    }
});

// dp_sum_laplace(value int8, epsilon, lower int8, upper int8)
v1_function!(pg_finfo_dp_sum_int_step, dp_sum_int_step, |fcinfo| {
    unsafe {
        let epsilon = required_f64(fcinfo, 2, "epsilon");
        let lower = required_i64(fcinfo, 3, "lower");
        let upper = required_i64(fcinfo, 4, "upper");
        let params = [epsilon.to_bits(), lower as u64, upper as u64];
        let state = state_for(fcinfo, params, || {
            Calibration::sum_integer(Epsilon::new(epsilon).or_raise(), lower, upper).or_raise()
        });
        if let Some(v) = arg_i64(fcinfo, 1) {
            let lattice = Lattice { k: (*state).lattice_k };
            add(&mut *state, lattice.round_integer(v.clamp(lower, upper)));
        }
        pg_sys::Datum::from(state)
    }
});

/// The exact lattice sum, after checking the state was built with the
/// parameters the final function sees (0 for empty input).
unsafe fn exact_sum(fcinfo: pg_sys::FunctionCallInfo, params: [u64; 3]) -> i128 {
    let state = unsafe { state_arg(fcinfo, 0) };
    if state.is_null() {
        return 0;
    }
    let state = unsafe { &*state };
    if state.params != params {
        errors::varying_parameter("dp_sum_laplace");
    }
    state.sum()
}

v1_function!(pg_finfo_dp_sum_final, dp_sum_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_sum_laplace");
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_sum_laplace");
        let (epsilon, lower, upper) = (f64_parameter(e, "epsilon"), f64_parameter(l, "lower"), f64_parameter(u, "upper"));
        let epsilon_exact = Epsilon::new(epsilon).or_raise();
        let cal = Calibration::sum(epsilon_exact, lower, upper).or_raise();
        let sum = exact_sum(fcinfo, [epsilon.to_bits(), lower.to_bits(), upper.to_bits()]);
        let noise = Laplace::new(epsilon_exact, cal.steps).or_raise();
        f64_datum(with_rng(|rng| cal.release(&noise, rng, sum)))
    }
});

v1_function!(pg_finfo_dp_sum_int_final, dp_sum_int_final, |fcinfo| {
    unsafe {
        refuse_window(fcinfo, "dp_sum_laplace");
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], "dp_sum_laplace");
        let (epsilon, lower, upper) = (f64_parameter(e, "epsilon"), i64_parameter(l, "lower"), i64_parameter(u, "upper"));
        let epsilon_exact = Epsilon::new(epsilon).or_raise();
        let cal = Calibration::sum_integer(epsilon_exact, lower, upper).or_raise();
        let sum = exact_sum(fcinfo, [epsilon.to_bits(), lower as u64, upper as u64]);
        let noise = Laplace::new(epsilon_exact, cal.steps).or_raise();
        i64_datum(with_rng(|rng| cal.release_integer(&noise, rng, sum)).or_raise())
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
            errors::varying_parameter("dp_sum_laplace");
        }
        add(&mut *a, (*b).sum());
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
            pgrx::error!("dp_sum_laplace: malformed partial state");
        }
        let mut state = std::mem::MaybeUninit::<SumState>::uninit();
        std::ptr::copy_nonoverlapping(pgrx::vardata_any(raw) as *const u8, state.as_mut_ptr() as *mut u8, STATE_BYTES);
        pg_sys::Datum::from(new_state(fcinfo, state.assume_init()))
    }
});
