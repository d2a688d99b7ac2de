//! Variances: `dp_var`, `dp_stddev` (the core's `moments::Variance`).
//!
//! The state keeps the call's parameters, the lattice, the exact sums of
//! the values' steps and of their centred squares' steps, and the count:
//! plain data, combined by addition (parallel workers, partitions).

use crate::aggref::{aggregate_arguments, f64_parameter};
use crate::call_site::call_site_cache;
use crate::errors::{self, OrRaise};
use crate::fmgr::{
    arg_datum, arg_f64, arg_is_null, f64_datum, refuse_window, required_f64, v1_function,
};
use dpnoise_core::{Bounds, Epsilon, Quantile, Variance};
use pgrx::pg_sys;

pgrx::extension_sql_file!("moments.sql", name = "moments_sql", requires = ["sum_sql"]);
pgrx::extension_sql_file!(
    "moments_accuracy.sql",
    name = "moments_accuracy_sql",
    requires = [dp_aggregate_accuracy]
);
const _: () = assert!(crate::fmgr::every_sspace_is(
    include_str!("moments.sql"),
    std::mem::size_of::<VarState>()
));

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct VarState {
    /// Raw bits of (epsilon, lower, upper).
    params: [u64; 3],
    lattice_k: i32,
    /// i128 sums as two words each (palloc aligns to 8).
    sum: [u64; 2],
    squares: [u64; 2],
    count: i64,
}

fn join(words: [u64; 2]) -> i128 {
    ((words[1] as i128) << 64) | words[0] as i128
}

fn split(x: i128) -> [u64; 2] {
    [x as u64, (x >> 64) as u64]
}

impl VarState {
    fn add(&mut self, sum: i128, squares: i128, count: i64) {
        let s = join(self.sum)
            .checked_add(sum)
            .unwrap_or_else(|| errors::sum_overflow());
        let q = join(self.squares)
            .checked_add(squares)
            .unwrap_or_else(|| errors::sum_overflow());
        self.sum = split(s);
        self.squares = split(q);
        self.count += count;
    }
}

/// The variance, or its square root.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Variance,
    StdDev,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Variance => "dp_var",
            Kind::StdDev => "dp_stddev",
        }
    }
}

/// The plan for (ε, lower, upper) as written; every refusal happens here.
fn plan_written(epsilon: f64, lower: f64, upper: f64) -> Variance {
    let eps = Epsilon::new(epsilon).or_raise();
    let bounds = Bounds::new(lower, upper).or_raise();
    crate::plans::variance(eps, bounds)
}

/// Checks a dp_var or dp_stddev call's parameters from its evaluated
/// arguments (value, ε, lower, upper) and returns what it pays.
pub(crate) fn checked_cost(args: &[Option<pg_sys::Datum>]) -> (f64, f64) {
    let arg = |i: usize, name: &str| f64_parameter(args.get(i).copied().flatten(), name);
    let epsilon = arg(1, "epsilon");
    plan_written(epsilon, arg(2, "lower"), arg(3, "upper"));
    (epsilon, 0.0)
}

/// The call's written parameters and plan (once per call site).
///
/// # Safety
/// `fcinfo` is a live transition or final call of `kind`'s aggregate.
unsafe fn call(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> ([u64; 3], Variance) {
    // SAFETY: the caller's contract: the aggregate has arguments 1..=3.
    unsafe {
        let [e, l, u] = aggregate_arguments(fcinfo, [1, 2, 3], kind.name());
        let (e, l, u) = (
            f64_parameter(e, "epsilon"),
            f64_parameter(l, "lower"),
            f64_parameter(u, "upper"),
        );
        let params = [e.to_bits(), l.to_bits(), u.to_bits()];
        let plan = *call_site_cache(
            fcinfo,
            [params[0], params[1], params[2], 0, 0x7661_7269],
            || plan_written(e, l, u),
        );
        (params, plan)
    }
}

/// One row: clamped, rounded, its steps and its centred square's added.
///
/// # Safety
/// `fcinfo` is a live transition call of `kind`'s aggregate.
unsafe fn accumulate(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let name = kind.name();
    // SAFETY: the caller's contract: arguments 0 (state), 1 (value), 2..=4 exist; the state is ours.
    unsafe {
        let (epsilon, lower, upper) = (
            required_f64(fcinfo, 2, "epsilon"),
            required_f64(fcinfo, 3, "lower"),
            required_f64(fcinfo, 4, "upper"),
        );
        let params = [epsilon.to_bits(), lower.to_bits(), upper.to_bits()];
        let mut state: *mut VarState = if arg_is_null(fcinfo, 0) {
            std::ptr::null_mut()
        } else {
            arg_datum(fcinfo, 0).cast_mut_ptr()
        };
        let (written, plan) = if state.is_null() {
            refuse_window(fcinfo, name);
            crate::aggref::require_fixed_arguments(fcinfo, 1, name);
            call(fcinfo, kind)
        } else {
            let key = [params[0], params[1], params[2], 0, 0x7661_7269];
            (
                params,
                *call_site_cache(fcinfo, key, || plan_written(epsilon, lower, upper)),
            )
        };
        if written != params || (!state.is_null() && (*state).params != params) {
            errors::varying_parameter(name);
        }
        if state.is_null() {
            let init = VarState {
                params,
                lattice_k: plan.lattice().k,
                sum: [0, 0],
                squares: [0, 0],
                count: 0,
            };
            state = crate::fmgr::new_state(fcinfo, "a dpnoise variance", init);
        }
        if let Some(v) = arg_f64(fcinfo, 1) {
            if v.is_nan() {
                if crate::gucs::analyst() {
                    return pg_sys::Datum::from(state);
                }
                errors::nan_value(name);
            }
            let (r, q) = plan.steps(v.clamp(lower, upper)).or_raise();
            (*state).add(r, q, 1);
        }
        pg_sys::Datum::from(state)
    }
}

/// The release: one payment at ε, three noisy sums, post-processing.
///
/// # Safety
/// `fcinfo` is a live final call of `kind`'s aggregate.
unsafe fn release(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let name = kind.name();
    // SAFETY: the caller's contract; argument 0 is NULL or our state.
    unsafe {
        refuse_window(fcinfo, name);
        let (params, plan) = call(fcinfo, kind);
        let (sum, squares, count) = if arg_is_null(fcinfo, 0) {
            (0, 0, 0)
        } else {
            let state = &*arg_datum(fcinfo, 0).cast_mut_ptr::<VarState>();
            if state.params != params {
                errors::varying_parameter(name);
            }
            if state.lattice_k != plan.lattice().k {
                pgrx::error!(
                    "{name}: the sums were accumulated on another lattice (internal error)"
                );
            }
            (join(state.sum), join(state.squares), state.count)
        };
        crate::release::pay(
            fcinfo,
            name,
            "centred staircase sums, geometric count",
            (f64::from_bits(params[0]), 0.0),
        );
        let variance =
            crate::repeat::with_release_rng(fcinfo, |rng| plan.release(rng, sum, squares, count))
                .or_raise();
        f64_datum(if kind == Kind::StdDev {
            variance.sqrt()
        } else {
            variance
        })
    }
}

v1_function!(pg_finfo_dp_var_step, dp_var_step, |fcinfo| {
    accumulate(fcinfo, Kind::Variance)
});
v1_function!(pg_finfo_dp_stddev_step, dp_stddev_step, |fcinfo| {
    accumulate(fcinfo, Kind::StdDev)
});
v1_function!(pg_finfo_dp_var_final, dp_var_final, |fcinfo| {
    release(fcinfo, Kind::Variance)
});
v1_function!(pg_finfo_dp_stddev_final, dp_stddev_final, |fcinfo| {
    release(fcinfo, Kind::StdDev)
});

v1_function!(pg_finfo_dp_var_combine, dp_var_combine, |fcinfo| {
    crate::fmgr::combine_states::<VarState>(fcinfo, "a dpnoise variance", |a, b| {
        if a.params != b.params || a.lattice_k != b.lattice_k {
            errors::varying_parameter("a dpnoise variance");
        }
        a.add(join(b.sum), join(b.squares), b.count);
    })
});

v1_function!(pg_finfo_dp_var_serialize, dp_var_serialize, |fcinfo| {
    crate::fmgr::serialize_state::<VarState>(fcinfo)
});

v1_function!(pg_finfo_dp_var_deserialize, dp_var_deserialize, |fcinfo| {
    crate::fmgr::deserialize_state::<VarState>(fcinfo, "a dpnoise variance")
});

/// The error of dp_avg, dp_var or a quantile before spending anything:
/// how its ε is split, and its error for a group of `persons` persons.
/// For 'avg' and 'var', in the value's units (squared for 'var'), with
/// the mean at a bound (the worst case): the first-order standard
/// deviation, and the mean absolute error and the interval as triangle
/// and union bounds of the noisy parts. For 'quantile' (at `p`), in ranks:
/// the exponential mechanism's rank error when the values are evenly
/// spread (a two-sided geometric, ratio e^(−ε/(2·max(p, 1 − p)))).
#[pgrx::pg_extern(immutable, parallel_safe)]
fn dp_aggregate_accuracy(
    aggregate: Option<&str>,
    epsilon: Option<f64>,
    lower: Option<f64>,
    upper: Option<f64>,
    persons: Option<i64>,
    p: pgrx::default!(Option<f64>, 0.5),
    confidence: pgrx::default!(Option<f64>, 0.95),
) -> pgrx::iter::TableIterator<
    'static,
    (
        pgrx::name!(units, String),
        pgrx::name!(epsilon_split, String),
        pgrx::name!(mean_abs_error, f64),
        pgrx::name!(std_dev, f64),
        pgrx::name!(ci_half_width, f64),
    ),
> {
    use crate::errors::null_parameter;
    let aggregate = aggregate.unwrap_or_else(|| null_parameter("aggregate"));
    let eps = Epsilon::new(epsilon.unwrap_or_else(|| null_parameter("epsilon"))).or_raise();
    let bounds = Bounds::new(
        lower.unwrap_or_else(|| null_parameter("lower")),
        upper.unwrap_or_else(|| null_parameter("upper")),
    )
    .or_raise();
    let persons = persons.unwrap_or_else(|| null_parameter("persons"));
    let confidence = confidence.unwrap_or_else(|| null_parameter("confidence"));
    dpnoise_core::staircase::check_confidence(confidence).or_raise();
    if persons < 1 {
        crate::errors::raise_sqlstate(
            "22023",
            format!("persons must be at least 1, got {persons}"),
            None,
        );
    }
    let part = |j: u32| eps.sixty_fourths(j).value();
    let (units, split, a) = match aggregate {
        "avg" => {
            let avg = crate::plans::average(eps, bounds);
            let j = avg.sum_share;
            let split = format!("centred sum {} ({}/64), count {} ({}/64)", part(j), j, part(64 - j), 64 - j);
            ("value", split, avg.accuracy(persons as u64, confidence))
        }
        "var" => {
            let var = crate::plans::variance(eps, bounds);
            let (q, y, n) = var.shares;
            let split = format!("centred squares {} ({q}/64), centred sum {} ({y}/64), count {} ({n}/64)", part(q), part(y), part(n));
            ("value squared", split, var.accuracy(persons as u64, confidence))
        }
        "quantile" => {
            let p = p.unwrap_or_else(|| null_parameter("p"));
            Quantile::new(eps, bounds, p).or_raise();
            let (mean_abs_error, std_dev, ci_half_width) = Quantile::rank_error(eps.value(), p, confidence);
            ("ranks", format!("exponential mechanism {}", eps.value()), dpnoise_core::Accuracy { mean_abs_error, std_dev, ci_half_width })
        }
        other => crate::errors::raise_sqlstate(
            "22023",
            format!("dp_aggregate_accuracy: aggregate must be 'avg', 'var' or 'quantile', not '{other}'"),
            Some("dp_accuracy gives a sum's or a count's error; dp_stddev's is about dp_var's divided by twice the deviation.".to_string()),
        ),
    };
    pgrx::iter::TableIterator::once((
        units.to_string(),
        split,
        a.mean_abs_error,
        a.std_dev,
        a.ci_half_width,
    ))
}
