//! Quantiles: `dp_quantile`, `dp_median`, `dp_min`, `dp_max` (the core's
//! `quantile::Quantile`, an exact exponential mechanism).
//!
//! The state must keep the values: each row's offset on the quantile's
//! lattice, 8 bytes a row, in an array of the aggregate's memory context
//! (a huge allocation past 1 GB), doubled as it fills. No sketch: the
//! mechanism samples over the exact ranks. Parallel workers serialise
//! their arrays; the combine appends them.

use crate::aggref::{aggregate_arguments, f64_parameter};
use crate::call_site::call_site_cache;
use crate::errors::{self, OrRaise};
use crate::fmgr::{
    arg_datum, arg_f64, arg_is_null, f64_datum, refuse_window, required_f64, v1_function,
};
use dpnoise_core::{Bounds, Epsilon, Quantile};
use pgrx::pg_sys;

pgrx::extension_sql_file!(
    "quantile.sql",
    name = "quantile_sql",
    requires = ["sum_sql"]
);

/// Which aggregate: its name and the p it fixes (dp_quantile reads p).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Quantile,
    Median,
    Min,
    Max,
}

impl Kind {
    fn named(name: &str) -> Option<Kind> {
        [Kind::Quantile, Kind::Median, Kind::Min, Kind::Max]
            .into_iter()
            .find(|k| k.name() == name)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Quantile => "dp_quantile",
            Kind::Median => "dp_median",
            Kind::Min => "dp_min",
            Kind::Max => "dp_max",
        }
    }

    /// The fixed p, or None when the call passes it (argument 4).
    fn fixed_p(self) -> Option<f64> {
        crate::functions::fixed_p(self.name())
    }
}

/// The state: the call's parameters and the values' offsets.
#[repr(C)]
#[derive(Clone, Copy)]
struct QuantileState {
    /// Raw bits of (epsilon, lower, upper, p).
    params: [u64; 4],
    len: u64,
    capacity: u64,
    values: *mut u64,
}

fn plan_written(params: [f64; 4]) -> Quantile {
    let eps = Epsilon::new(params[0]).or_raise();
    let bounds = Bounds::new(params[1], params[2]).or_raise();
    Quantile::new(eps, bounds, params[3]).or_raise()
}

/// Checks a quantile call's parameters from its evaluated arguments and
/// returns what it pays. None: not a quantile aggregate.
pub(crate) fn checked_cost(name: &str, args: &[Option<pg_sys::Datum>]) -> Option<(f64, f64)> {
    let kind = Kind::named(name)?;
    let arg = |i: usize, name: &str| f64_parameter(args.get(i).copied().flatten(), name);
    let p = kind.fixed_p().unwrap_or_else(|| arg(4, "p"));
    let epsilon = arg(1, "epsilon");
    plan_written([epsilon, arg(2, "lower"), arg(3, "upper"), p]);
    Some((epsilon, 0.0))
}

fn key(params: &[u64; 4]) -> [u64; 5] {
    [params[0], params[1], params[2], params[3], 0x7175_616e]
}

/// The call's written parameters and plan (once per call site).
///
/// # Safety
/// `fcinfo` is a live transition or final call of `kind`'s aggregate.
unsafe fn call(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> ([u64; 4], Quantile) {
    // SAFETY: the caller's contract: arguments 1..=3 (and 4 for dp_quantile) exist.
    unsafe {
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], kind.name());
        let p = match kind.fixed_p() {
            Some(p) => p,
            None => f64_parameter(aggregate_arguments(fcinfo, [4], kind.name())[0], "p"),
        };
        let written = [
            f64_parameter(e, "epsilon"),
            f64_parameter(l, "lower"),
            f64_parameter(u, "upper"),
            p,
        ];
        let params = written.map(f64::to_bits);
        (
            params,
            *call_site_cache(fcinfo, key(&params), || plan_written(written)),
        )
    }
}

/// Appends `n` values from `source` (any alignment) to the state,
/// growing its array in `context`.
///
/// # Safety
/// `state` is ours, its array in `context`; `source` holds 8·n bytes.
unsafe fn append(
    state: &mut QuantileState,
    context: pg_sys::MemoryContext,
    source: *const u8,
    n: usize,
) {
    let needed = state.len + n as u64;
    if needed > state.capacity {
        let capacity = needed.max(state.capacity * 2).max(64);
        let bytes = (capacity * 8) as usize;
        // SAFETY: a huge allocation in the aggregate's context (errors past its limits).
        state.values = unsafe {
            if state.values.is_null() {
                pg_sys::MemoryContextAllocHuge(context, bytes) as *mut u64
            } else {
                pg_sys::repalloc_huge(state.values.cast(), bytes) as *mut u64
            }
        };
        state.capacity = capacity;
    }
    // SAFETY: capacity ≥ needed; the caller's contract for `source`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            source,
            state.values.add(state.len as usize) as *mut u8,
            8 * n,
        )
    };
    state.len = needed;
}

/// The state's values.
///
/// # Safety
/// `state` is ours.
unsafe fn values(state: &QuantileState) -> &mut [u64] {
    if state.len == 0 {
        return &mut [];
    }
    // SAFETY: the array holds len values.
    unsafe { std::slice::from_raw_parts_mut(state.values, state.len as usize) }
}

/// One row: its offset appended.
///
/// # Safety
/// `fcinfo` is a live transition call of `kind`'s aggregate.
unsafe fn accumulate(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let name = kind.name();
    // SAFETY: the caller's contract; the state is ours, in the aggregate's context.
    unsafe {
        let p = kind
            .fixed_p()
            .unwrap_or_else(|| required_f64(fcinfo, 5, "p"));
        let row = [
            required_f64(fcinfo, 2, "epsilon"),
            required_f64(fcinfo, 3, "lower"),
            required_f64(fcinfo, 4, "upper"),
            p,
        ];
        let params = row.map(f64::to_bits);
        let mut state: *mut QuantileState = if arg_is_null(fcinfo, 0) {
            std::ptr::null_mut()
        } else {
            arg_datum(fcinfo, 0).cast_mut_ptr()
        };
        let (written, plan) = if state.is_null() {
            refuse_window(fcinfo, name);
            crate::aggref::require_fixed_arguments(fcinfo, 1, name);
            call(fcinfo, kind)
        } else {
            (
                params,
                *call_site_cache(fcinfo, key(&params), || plan_written(row)),
            )
        };
        if written != params || (!state.is_null() && (*state).params != params) {
            errors::varying_parameter(name);
        }
        if state.is_null() {
            let init = QuantileState {
                params,
                len: 0,
                capacity: 0,
                values: std::ptr::null_mut(),
            };
            state = crate::fmgr::new_state(fcinfo, "a dpnoise quantile", init);
        }
        if let Some(v) = arg_f64(fcinfo, 1) {
            if v.is_nan() {
                if crate::gucs::analyst() {
                    return pg_sys::Datum::from(state);
                }
                errors::nan_value(name);
            }
            let offset = plan.offset(v).or_raise();
            append(
                &mut *state,
                crate::fmgr::aggregate_context(fcinfo, name),
                (&offset as *const u64).cast(),
                1,
            );
        }
        pg_sys::Datum::from(state)
    }
}

/// The release: one payment at ε, one exact draw.
///
/// # Safety
/// `fcinfo` is a live final call of `kind`'s aggregate.
unsafe fn release(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let name = kind.name();
    // SAFETY: the caller's contract; argument 0 is NULL or our state.
    unsafe {
        refuse_window(fcinfo, name);
        let (params, plan) = call(fcinfo, kind);
        let values: &mut [u64] = if arg_is_null(fcinfo, 0) {
            &mut []
        } else {
            let state = &*arg_datum(fcinfo, 0).cast_mut_ptr::<QuantileState>();
            if state.params != params {
                errors::varying_parameter(name);
            }
            values(state)
        };
        crate::release::pay(
            fcinfo,
            name,
            "exponential mechanism",
            (f64::from_bits(params[0]), 0.0),
        );
        f64_datum(
            crate::repeat::with_release_rng(fcinfo, |rng| plan.release(rng, values)).or_raise(),
        )
    }
}

v1_function!(pg_finfo_dp_quantile_step, dp_quantile_step, |fcinfo| {
    accumulate(fcinfo, Kind::Quantile)
});
v1_function!(pg_finfo_dp_median_step, dp_median_step, |fcinfo| {
    accumulate(fcinfo, Kind::Median)
});
v1_function!(pg_finfo_dp_min_step, dp_min_step, |fcinfo| {
    accumulate(fcinfo, Kind::Min)
});
v1_function!(pg_finfo_dp_max_step, dp_max_step, |fcinfo| {
    accumulate(fcinfo, Kind::Max)
});
v1_function!(pg_finfo_dp_quantile_final, dp_quantile_final, |fcinfo| {
    release(fcinfo, Kind::Quantile)
});
v1_function!(pg_finfo_dp_median_final, dp_median_final, |fcinfo| {
    release(fcinfo, Kind::Median)
});
v1_function!(pg_finfo_dp_min_final, dp_min_final, |fcinfo| {
    release(fcinfo, Kind::Min)
});
v1_function!(pg_finfo_dp_max_final, dp_max_final, |fcinfo| {
    release(fcinfo, Kind::Max)
});

/// Combine: b's values appended to a (a NULL side takes the other's).
///
/// # Safety
/// `fcinfo` is a combine call whose arguments are NULL or our states.
unsafe fn combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    const NAME: &str = "a dpnoise quantile";
    // SAFETY: the caller's contract; a and b are distinct states.
    unsafe {
        let context = crate::fmgr::aggregate_context(fcinfo, NAME);
        let state = |i| {
            if arg_is_null(fcinfo, i) {
                std::ptr::null_mut()
            } else {
                arg_datum(fcinfo, i).cast_mut_ptr::<QuantileState>()
            }
        };
        let (mut a, b) = (state(0), state(1));
        if b.is_null() {
            return if a.is_null() {
                crate::fmgr::return_null(fcinfo)
            } else {
                pg_sys::Datum::from(a)
            };
        }
        if a.is_null() {
            let init = QuantileState {
                params: (*b).params,
                len: 0,
                capacity: 0,
                values: std::ptr::null_mut(),
            };
            a = crate::fmgr::new_state(fcinfo, NAME, init);
        } else if (*a).params != (*b).params {
            errors::varying_parameter(NAME);
        }
        let (source, n) = ((*b).values as *const u8, (*b).len as usize);
        append(&mut *a, context, source, n);
        pg_sys::Datum::from(a)
    }
}

v1_function!(
    pg_finfo_dp_quantile_combine,
    dp_quantile_combine,
    |fcinfo| { combine(fcinfo) }
);

// Serialise: the parameters, then the values (native byte order: the
// workers run the same build on the same machine).
v1_function!(
    pg_finfo_dp_quantile_serialize,
    dp_quantile_serialize,
    |fcinfo| {
        let state = &*arg_datum(fcinfo, 0).cast_mut_ptr::<QuantileState>();
        let bytes = 32 + 8 * state.len as usize;
        let total = pg_sys::VARHDRSZ + bytes;
        let out = pg_sys::palloc(total) as *mut pg_sys::varlena;
        pgrx::set_varsize_4b(out, total as i32);
        let data = pgrx::vardata_4b(out) as *mut u8;
        std::ptr::copy_nonoverlapping(state.params.as_ptr() as *const u8, data, 32);
        if state.len > 0 {
            std::ptr::copy_nonoverlapping(
                state.values as *const u8,
                data.add(32),
                8 * state.len as usize,
            );
        }
        pg_sys::Datum::from(out)
    }
);

v1_function!(
    pg_finfo_dp_quantile_deserialize,
    dp_quantile_deserialize,
    |fcinfo| {
        const NAME: &str = "a dpnoise quantile";
        let raw = pg_sys::pg_detoast_datum(arg_datum(fcinfo, 0).cast_mut_ptr());
        let bytes = pgrx::varsize_any_exhdr(raw);
        if bytes < 32 || (bytes - 32) % 8 != 0 {
            pgrx::error!("{NAME}: malformed partial state");
        }
        let data = pgrx::vardata_any(raw) as *const u8;
        let mut params = [0u64; 4];
        std::ptr::copy_nonoverlapping(data, params.as_mut_ptr() as *mut u8, 32);
        let state = crate::fmgr::new_state(
            fcinfo,
            NAME,
            QuantileState {
                params,
                len: 0,
                capacity: 0,
                values: std::ptr::null_mut(),
            },
        );
        append(
            &mut *state,
            crate::fmgr::aggregate_context(fcinfo, NAME),
            data.add(32),
            (bytes - 32) / 8,
        );
        pg_sys::Datum::from(state)
    }
);
