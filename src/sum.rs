//! Sums and averages: `dp_sum`, `dp_sum_laplace`, `dp_sum_staircase`, `dp_avg`.
//!
//! Values are clamped, rounded to the lattice and accumulated exactly as
//! integers (i128), so the sum is the same whatever the row order or the
//! split between parallel workers (MECHANISMS.md §1). Noise is added once,
//! in the final function. All four aggregates share one state and one
//! path: the call's parameters (`SumCall`) give a plan (`SumPlan`); the
//! transition takes its lattice from it on the first row, the final
//! function checks the state against it, pays and releases.

use crate::aggref::{
    aggregate_arguments, argument_count, f64_parameter, i64_parameter, shared_totals,
    text_parameter,
};
use crate::call_site::{call_site_cache, text_fingerprint};
use crate::errors::{self, OrRaise};
use crate::fmgr::{
    arg_datum, arg_f64, arg_i64, arg_is_null, f64_datum, i64_datum, refuse_window, required_f64,
    v1_function,
};
use crate::release::Release;
use dpnoise_core::{
    Average, Bounds, Choice, Delta, Epsilon, IntegerBounds, Lattice, Loss, Mechanism, Plan,
    Request, Sensitivity, Shape,
};
use pgrx::pg_sys;

pgrx::extension_sql_file!("sum.sql", name = "sum_sql");
const _: () = assert!(crate::fmgr::every_sspace_is(
    include_str!("sum.sql"),
    std::mem::size_of::<SumState>()
));

/// The transition state: the parameters every row must share, the lattice
/// they chose, the exact lattice sum and the number of values summed.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SumState {
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
        let total = self
            .sum()
            .checked_add(steps)
            .unwrap_or_else(|| errors::sum_overflow());
        self.sum = [total as u64, (total >> 64) as u64];
        self.count += count;
    }
}

/// Which aggregate a call belongs to: where its arguments are, and what it releases.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// dp_sum(value, epsilon, lower, upper [, delta [, mechanism [, loss]]]).
    Sum,
    /// dp_sum_laplace(value, epsilon, lower, upper).
    Laplace,
    /// dp_sum_staircase(value, epsilon, sensitivity [, loss]): clamps to [−Δ, Δ].
    Staircase,
    /// dp_avg(value, epsilon, lower, upper).
    Average,
}

impl Kind {
    /// The aggregate called `name`, if it is one of this module's.
    fn named(name: &str) -> Option<Kind> {
        [Kind::Sum, Kind::Laplace, Kind::Staircase, Kind::Average]
            .into_iter()
            .find(|k| k.name() == name)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Sum => "dp_sum",
            Kind::Laplace => "dp_sum_laplace",
            Kind::Staircase => "dp_sum_staircase",
            Kind::Average => "dp_avg",
        }
    }
}

/// What differs between float8 and int8 sums: how a value is read, how its
/// bounds are checked, and how it is rounded and released.
trait SumValue: Copy {
    type Bounds: Copy;
    /// The raw bits kept in the state to check every row's parameters.
    fn bits(self) -> u64;
    /// # Safety
    /// `fcinfo` is a live call with at least `i + 1` arguments.
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<Self>;
    fn parameter(value: Option<pg_sys::Datum>, name: &str) -> Self;
    /// −x (the state keeps [−Δ, Δ]'s bits; a Δ this overflows is refused by `symmetric`).
    fn negate(self) -> Self;
    fn bounds(lower: Self, upper: Self) -> Self::Bounds;
    /// [−Δ, Δ], for `dp_sum_staircase`.
    fn symmetric(sensitivity: Self) -> Self::Bounds;
    fn shape(bounds: Self::Bounds) -> Shape;
    /// A value that adds nothing: for an analyst, a float8 NaN (an error
    /// would say whether some row holds one); a curator gets the error.
    fn skipped(self) -> bool {
        false
    }
    /// Clamps to [lower, upper] (checked when the plan was made: every row
    /// repeats the first row's) and rounds onto the lattice.
    fn lattice_steps(self, lattice: Lattice, lower: Self, upper: Self, aggregate: &str) -> i128;
    /// # Safety
    /// `fcinfo` is the live call of a final function.
    unsafe fn release(
        fcinfo: pg_sys::FunctionCallInfo,
        aggregate: &str,
        plan: &Plan,
        paid: (f64, f64),
        sum: i128,
    ) -> (pg_sys::Datum, i128);
}

impl SumValue for f64 {
    type Bounds = Bounds;
    fn bits(self) -> u64 {
        self.to_bits()
    }
    /// # Safety
    /// As `SumValue` says.
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<f64> {
        // SAFETY: the caller's contract.
        unsafe { arg_f64(fcinfo, i) }
    }
    fn parameter(value: Option<pg_sys::Datum>, name: &str) -> f64 {
        f64_parameter(value, name)
    }
    fn negate(self) -> f64 {
        -self
    }
    #[inline]
    fn skipped(self) -> bool {
        self.is_nan() && crate::gucs::analyst()
    }
    fn bounds(lower: f64, upper: f64) -> Bounds {
        Bounds::new(lower, upper).or_raise()
    }
    fn symmetric(sensitivity: f64) -> Bounds {
        Bounds::symmetric(Sensitivity::new(sensitivity).or_raise())
    }
    fn shape(bounds: Bounds) -> Shape {
        Shape::Sum(bounds)
    }
    #[inline]
    fn lattice_steps(self, lattice: Lattice, lower: f64, upper: f64, aggregate: &str) -> i128 {
        if self.is_nan() {
            errors::nan_value(aggregate);
        }
        lattice.round(self.clamp(lower, upper)).or_raise()
    }
    /// # Safety
    /// As `SumValue` says.
    unsafe fn release(
        fcinfo: pg_sys::FunctionCallInfo,
        aggregate: &str,
        plan: &Plan,
        paid: (f64, f64),
        sum: i128,
    ) -> (pg_sys::Datum, i128) {
        // SAFETY: the caller's contract.
        unsafe { crate::release::release_steps(fcinfo, aggregate, plan, paid, sum, Release::Float) }
    }
}

impl SumValue for i64 {
    type Bounds = IntegerBounds;
    fn bits(self) -> u64 {
        self as u64
    }
    /// # Safety
    /// As `SumValue` says.
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<i64> {
        // SAFETY: the caller's contract.
        unsafe { arg_i64(fcinfo, i) }
    }
    fn parameter(value: Option<pg_sys::Datum>, name: &str) -> i64 {
        i64_parameter(value, name)
    }
    fn negate(self) -> i64 {
        self.wrapping_neg()
    }
    fn bounds(lower: i64, upper: i64) -> IntegerBounds {
        IntegerBounds::new(lower, upper).or_raise()
    }
    fn symmetric(sensitivity: i64) -> IntegerBounds {
        IntegerBounds::symmetric(sensitivity).or_raise()
    }
    fn shape(bounds: IntegerBounds) -> Shape {
        Shape::SumInteger(bounds)
    }
    #[inline]
    fn lattice_steps(self, lattice: Lattice, lower: i64, upper: i64, _aggregate: &str) -> i128 {
        lattice.round_integer(self.clamp(lower, upper))
    }
    /// # Safety
    /// As `SumValue` says.
    unsafe fn release(
        fcinfo: pg_sys::FunctionCallInfo,
        aggregate: &str,
        plan: &Plan,
        paid: (f64, f64),
        sum: i128,
    ) -> (pg_sys::Datum, i128) {
        // SAFETY: the caller's contract.
        unsafe {
            crate::release::release_steps(fcinfo, aggregate, plan, paid, sum, Release::Integer)
        }
    }
}

/// A sum's plan: one release, or an average's two.
#[derive(Clone, Copy)]
enum SumPlan {
    Single(Plan),
    Average(Average),
}

impl SumPlan {
    /// The lattice the values are summed on.
    fn lattice(&self) -> Lattice {
        match self {
            SumPlan::Single(plan) => plan.calibration.lattice,
            SumPlan::Average(average) => average.lattice(),
        }
    }
}

/// A call's privacy parameters as the aggregate was written (its Aggref's
/// arguments, constants): the transition's first row and the final
/// function read the same ones, so they cannot disagree.
struct SumCall {
    /// ε and δ as written: what is charged.
    epsilon: f64,
    delta: f64,
    /// Raw bits of (ε, lower, upper): what every row must repeat.
    params: [u64; 3],
    plan: SumPlan,
    /// What its noisy steps are noted under for a thresholded selection
    /// (`Written::note_key`).
    note: [u64; 5],
}

/// A call's privacy parameters as written.
struct Written<T> {
    epsilon: f64,
    lower: T,
    upper: T,
    delta: f64,
    mechanism: Option<String>,
    loss: Option<String>,
    /// dp_sum over a person's k groups (the gate's `dp_share`): k and the
    /// whole (ε, δ) the groups share, which the plan is made from.
    shared: Option<(u32, f64, f64)>,
}

/// What tells a noted sum's key from a noted count's (`release::note_released`).
const NOTE_SALT: u64 = 0x5355_4d5f_4e4f_5445;

impl<T: SumValue> Written<T> {
    /// The call-site cache key of these parameters (`salt` tells apart the
    /// aggregates that share a cache: dp_merge_sum's kinds).
    fn key(&self, salt: u64) -> [u64; 5] {
        let fingerprint = |t: &Option<String>| t.as_deref().map_or(0, text_fingerprint);
        self.key_of(fingerprint(&self.mechanism), fingerprint(&self.loss), salt)
    }

    /// The key a dp_sum's noisy steps are noted under for its thresholded
    /// selection (`dp_sum_selected`): its parameters, with the mechanism and
    /// loss it plans with ('auto' and 'l2' where it names none), so that a
    /// selection naming them finds the sum that does not.
    fn note_key(&self) -> [u64; 5] {
        self.key_of(
            text_fingerprint(self.mechanism.as_deref().unwrap_or("auto")),
            text_fingerprint(self.loss.as_deref().unwrap_or("l2")),
            NOTE_SALT,
        )
    }

    fn key_of(&self, mechanism: u64, loss: u64, salt: u64) -> [u64; 5] {
        [
            self.epsilon.to_bits(),
            self.lower.bits(),
            self.upper.bits(),
            self.delta.to_bits(),
            mechanism.rotate_left(32)
                ^ loss
                ^ salt
                ^ self.shared.map_or(0, |(k, e, d)| {
                    (u64::from(k) << 40) ^ e.to_bits().rotate_left(7) ^ d.to_bits().rotate_left(19)
                }),
        ]
    }
}

/// Reads `kind`'s parameters from its `n` arguments (`arg(i)`: the value of
/// argument i, None for NULL).
///
/// # Safety
/// A by-reference value `arg` returns (a text) is live while this runs.
unsafe fn written<T: SumValue>(
    kind: Kind,
    n: usize,
    arg: impl Fn(usize) -> Option<pg_sys::Datum>,
) -> Written<T> {
    // SAFETY: the caller's contract: texts are live.
    let text = |i: usize, name: &str| (n > i).then(|| unsafe { text_parameter(arg(i), name) });
    if kind == Kind::Staircase {
        let s = T::parameter(arg(2), "sensitivity");
        return Written {
            epsilon: f64_parameter(arg(1), "epsilon"),
            lower: s.negate(),
            upper: s,
            delta: 0.0,
            mechanism: None,
            loss: text(3, "loss"),
            shared: None,
        };
    }
    let delta = if kind == Kind::Sum && n > 4 {
        f64_parameter(arg(4), "delta")
    } else {
        0.0
    };
    let (mechanism, loss) = if kind == Kind::Sum {
        (text(5, "mechanism"), text(6, "loss"))
    } else {
        (None, None)
    };
    Written {
        epsilon: f64_parameter(arg(1), "epsilon"),
        lower: T::parameter(arg(2), "lower"),
        upper: T::parameter(arg(3), "upper"),
        delta,
        mechanism,
        loss,
        shared: None,
    }
}

/// Plans a call from its written parameters; every check that can refuse
/// them runs here.
fn plan_written<T: SumValue>(kind: Kind, w: &Written<T>) -> SumPlan {
    let eps = Epsilon::new(w.epsilon).or_raise();
    let bounds = if kind == Kind::Staircase {
        T::symmetric(w.upper)
    } else {
        T::bounds(w.lower, w.upper)
    };
    if kind == Kind::Average {
        // dp_avg sums float8 only: its bounds are float8.
        let bounds = Bounds::new(
            f64::from_bits(w.lower.bits()),
            f64::from_bits(w.upper.bits()),
        )
        .or_raise();
        return SumPlan::Average(crate::plans::average(eps, bounds));
    }
    let choice = match kind {
        Kind::Laplace => Choice::Fixed(Mechanism::Laplace),
        Kind::Staircase => Choice::Fixed(Mechanism::Staircase),
        _ => Choice::parse(w.mechanism.as_deref().unwrap_or("auto")).or_raise(),
    };
    let loss = Loss::parse(w.loss.as_deref().unwrap_or("l2")).or_raise();
    let delta = Delta::new(w.delta).or_raise();
    let (epsilon, delta, groups) = match w.shared {
        Some((k, total, total_delta)) => (
            Epsilon::new(total).or_raise(),
            Delta::new(total_delta).or_raise(),
            k,
        ),
        None => (eps, delta, 1),
    };
    SumPlan::Single(crate::plans::plan(Request {
        choice,
        epsilon,
        delta,
        loss,
        shape: T::shape(bounds),
        groups,
    }))
}

/// Checks the parameters of a call of the sum aggregate `name` (float8 or
/// int8 values) as its final function would, and returns what it pays: its
/// (ε, δ) as written. None: not one of this module's aggregates.
///
/// # Safety
/// `args` holds the call's evaluated arguments (None: NULL); texts are live.
pub(crate) unsafe fn checked_cost(
    name: &str,
    integer: bool,
    args: &[Option<pg_sys::Datum>],
    groups: u32,
) -> Option<(f64, f64, Option<f64>)> {
    let kind = Kind::named(name)?;
    let arg = |i: usize| args.get(i).copied().flatten();
    // SAFETY: the caller's contract.
    unsafe {
        Some(if integer {
            checked_written(kind, written::<i64>(kind, args.len(), arg), groups)
        } else {
            checked_written(kind, written::<f64>(kind, args.len(), arg), groups)
        })
    }
}

/// Plans written parameters as the aggregate will: over a person's
/// `groups` groups (> 1) they are the totals the groups share, and
/// dp_sum's plan takes k (`Written::shared`). Returns them as written, and
/// the release's ρ where its noise is the Gaussian.
fn checked_written<T: SumValue>(
    kind: Kind,
    mut w: Written<T>,
    groups: u32,
) -> (f64, f64, Option<f64>) {
    if kind == Kind::Sum && groups > 1 {
        w.shared = Some((groups, w.epsilon, w.delta));
    }
    let rho = match plan_written(kind, &w) {
        SumPlan::Single(plan) => dpnoise_core::zcdp::gaussian_rho(&plan, groups),
        SumPlan::Average(_) => None,
    };
    (w.epsilon, w.delta, rho)
}

/// The float8 dp_sum a `dp_sum_selected(ε, lower, upper, mechanism, loss,
/// δ)` call thresholds, from the call's first five arguments (`arg(i)`)
/// and the groups its ε is shared over (`shared`: k and the whole ε):
/// that sum at δ = 0, its note key, its plan and k.
///
/// # Safety
/// The texts `arg` returns are live.
pub(crate) unsafe fn thresholded(
    arg: impl Fn(usize) -> Option<pg_sys::Datum>,
    shared: Option<(u32, f64)>,
) -> ([u64; 5], Plan, u32) {
    // SAFETY: the caller's contract.
    let text = |i: usize, name: &str| Some(unsafe { text_parameter(arg(i), name) });
    let w = Written::<f64> {
        epsilon: f64_parameter(arg(0), "epsilon"),
        lower: f64_parameter(arg(1), "lower"),
        upper: f64_parameter(arg(2), "upper"),
        delta: 0.0,
        mechanism: text(3, "mechanism"),
        loss: text(4, "loss"),
        shared: shared.map(|(k, epsilon)| (k, epsilon, 0.0)),
    };
    let SumPlan::Single(plan) = plan_written(Kind::Sum, &w) else {
        unreachable!("dp_sum plans one release")
    };
    (w.note_key(), plan, shared.map_or(1, |(k, _)| k))
}

/// Checks a `dp_sum_selected(ε, lower, upper, mechanism, loss, δ)` call's
/// evaluated arguments as its final function will, over `groups` groups
/// (its ε then the whole the groups share), and returns what it pays:
/// (0, δ), its ε being its sum's.
///
/// # Safety
/// The texts in `args` are live.
pub(crate) unsafe fn selection_cost(args: &[Option<pg_sys::Datum>], groups: u32) -> (f64, f64) {
    let arg = |i: usize| args.get(i).copied().flatten();
    let shared = (groups > 1).then(|| (groups, f64_parameter(arg(0), "epsilon")));
    // SAFETY: the caller's contract.
    let (_, plan, k) = unsafe { thresholded(arg, shared) };
    let delta = f64_parameter(arg(5), "delta");
    dpnoise_core::threshold::CountThreshold::new(&plan, k, delta).or_raise();
    (0.0, delta)
}

/// The arguments of `kind`'s call, planned (once per call site and parameter set).
///
/// # Safety
/// `fcinfo` is a live transition or final call of `kind`'s aggregate.
unsafe fn sum_call<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> SumCall {
    let aggregate = kind.name();
    // SAFETY: the caller's contract; every index read is below the aggregate's argument count.
    unsafe {
        let n = argument_count(fcinfo);
        let mut w = written::<T>(kind, n, |i| aggregate_arguments(fcinfo, [i], aggregate)[0]);
        if kind == Kind::Sum {
            w.shared = sum_shares(fcinfo, [1, 4], n > 4, w.delta, aggregate);
        }
        let key = w.key(0);
        let plan = *call_site_cache(fcinfo, key, || plan_written(kind, &w));
        SumCall {
            epsilon: w.epsilon,
            delta: w.delta,
            params: [w.epsilon.to_bits(), w.lower.bits(), w.upper.bits()],
            plan,
            note: w.note_key(),
        }
    }
}

/// k and the whole (ε, δ) of a dp_sum call whose ε (argument `at[0]`) or δ
/// (`at[1]`, if the call has one: else `delta`) the gate shared over a
/// person's k groups.
///
/// # Safety
/// `fcinfo` is a live transition or final call of the aggregate.
unsafe fn sum_shares(
    fcinfo: pg_sys::FunctionCallInfo,
    at: [usize; 2],
    with_delta: bool,
    delta: f64,
    aggregate: &str,
) -> Option<(u32, f64, f64)> {
    // SAFETY: the caller's contract.
    unsafe {
        if with_delta {
            shared_totals(fcinfo, at, aggregate)
                .map(|(k, [e, d])| (k, f64_parameter(e, "epsilon"), f64_parameter(d, "delta")))
        } else {
            shared_totals(fcinfo, [at[0]], aggregate)
                .map(|(k, [e])| (k, f64_parameter(e, "epsilon"), delta))
        }
    }
}

/// The state in argument `i`, or null.
///
/// # Safety
/// `fcinfo` is a live call whose argument `i` is NULL or a `SumState` this module made.
unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut SumState {
    // SAFETY: the caller's contract.
    unsafe {
        if arg_is_null(fcinfo, i) {
            std::ptr::null_mut()
        } else {
            arg_datum(fcinfo, i).cast_mut_ptr()
        }
    }
}

/// Word-by-word comparison: comparing the arrays whole compiles to a 16-byte
/// load of words just stored one by one, a store-forwarding stall per row.
#[inline(always)]
fn same_params(a: &[u64; 3], b: &[u64; 3]) -> bool {
    let x = std::hint::black_box(a[0] ^ b[0]);
    x | (a[1] ^ b[1]) | (a[2] ^ b[2]) == 0
}

/// One row: this row's (ε, lower, upper) read from the call must be the
/// state's; the first row makes the state on the plan's lattice. Then the
/// value is clamped, rounded onto the lattice and added.
///
/// # Safety
/// `fcinfo` is a live transition call of `kind`'s aggregate over `T`.
#[inline]
unsafe fn accumulate<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    let aggregate = kind.name();
    // SAFETY: the caller's contract: arguments 0 (state), 1 (value), 2 (ε) and 3 (and 4 unless
    // `kind` is the staircase's) exist; the state pointer is ours and lives in the aggregate's context.
    unsafe {
        let epsilon = required_f64(fcinfo, 2, "epsilon");
        let required = |i, name| T::arg(fcinfo, i).unwrap_or_else(|| errors::null_parameter(name));
        let (lower, upper) = if kind == Kind::Staircase {
            let s = required(3, "sensitivity");
            (s.negate(), s)
        } else {
            (required(3, "lower"), required(4, "upper"))
        };
        let params = [epsilon.to_bits(), lower.bits(), upper.bits()];
        let mut state = state_arg(fcinfo, 0);
        if state.is_null() {
            refuse_window(fcinfo, aggregate);
            crate::aggref::require_fixed_arguments(fcinfo, 1, aggregate);
            let call = sum_call::<T>(fcinfo, kind);
            if !same_params(&call.params, &params) {
                errors::varying_parameter(aggregate);
            }
            let init = SumState {
                params,
                lattice_k: call.plan.lattice().k,
                sum: [0, 0],
                count: 0,
            };
            state = crate::fmgr::new_state(fcinfo, "a dpnoise sum", init);
        } else if !same_params(&(*state).params, &params) {
            errors::varying_parameter(aggregate);
        }
        if let Some(v) = T::arg(fcinfo, 1).filter(|v| !v.skipped()) {
            let steps = v.lattice_steps(
                Lattice {
                    k: (*state).lattice_k,
                },
                lower,
                upper,
                aggregate,
            );
            (*state).add(steps, 1);
        }
        pg_sys::Datum::from(state)
    }
}

/// The release: the state (checked against the call's parameters and
/// lattice; an empty input sums to zero), one payment, the noise.
///
/// # Safety
/// `fcinfo` is a live final call of `kind`'s aggregate over `T`.
unsafe fn release<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo, kind: Kind) -> pg_sys::Datum {
    // SAFETY: the caller's contract.
    unsafe {
        refuse_window(fcinfo, kind.name());
        let call = sum_call::<T>(fcinfo, kind);
        release_state::<T>(fcinfo, kind, call)
    }
}

/// The release of the state in argument 0 with `call`'s plan.
///
/// # Safety
/// `fcinfo` is a live final call whose argument 0 is NULL or a `SumState`
/// of `T` values made for `call`.
unsafe fn release_state<T: SumValue>(
    fcinfo: pg_sys::FunctionCallInfo,
    kind: Kind,
    call: SumCall,
) -> pg_sys::Datum {
    let aggregate = kind.name();
    // SAFETY: the caller's contract; argument 0 is NULL or our state.
    unsafe {
        let state = state_arg(fcinfo, 0);
        let (sum, count) = if state.is_null() {
            (0, 0)
        } else {
            let state = &*state;
            if state.params != call.params {
                errors::varying_parameter(aggregate);
            }
            if state.lattice_k != call.plan.lattice().k {
                pgrx::error!(
                    "{aggregate}: the sum was accumulated on another lattice (internal error)"
                );
            }
            (state.sum(), state.count)
        };
        match call.plan {
            SumPlan::Single(plan) => {
                let (released, steps) =
                    T::release(fcinfo, aggregate, &plan, (call.epsilon, call.delta), sum);
                if kind == Kind::Sum {
                    crate::release::note_released(fcinfo, call.note, steps);
                }
                released
            }
            SumPlan::Average(average) => {
                crate::release::pay(
                    fcinfo,
                    aggregate,
                    "centred staircase sum, geometric count",
                    (call.epsilon, 0.0),
                );
                f64_datum(
                    crate::repeat::with_release_rng(fcinfo, |rng| average.release(rng, sum, count))
                        .or_raise(),
                )
            }
        }
    }
}

/// A sum over a Citus table (`citus`): the workers add each value's
/// lattice steps, the coordinator merges them. What the planner needs to
/// write both halves, from the call's (constant) parameters.
pub(crate) struct Distributed {
    /// The aggregate, as `dp_merge_sum`'s `kind` (0 dp_sum, 1 dp_sum_laplace,
    /// 2 dp_sum_staircase, 3 dp_avg).
    pub kind: i32,
    /// The lattice 2^k the values are rounded onto.
    pub k: i32,
    /// The clamping bounds, as datums of the value's type.
    pub lower: pg_sys::Datum,
    pub upper: pg_sys::Datum,
    /// The other parameters as written (δ 0 and no texts where the call has none).
    pub epsilon: f64,
    pub delta: f64,
    pub mechanism: Option<String>,
    pub loss: Option<String>,
}

impl Kind {
    fn code(self) -> i32 {
        match self {
            Kind::Sum => 0,
            Kind::Laplace => 1,
            Kind::Staircase => 2,
            Kind::Average => 3,
        }
    }

    fn from_code(code: i32) -> Kind {
        match code {
            0 => Kind::Sum,
            1 => Kind::Laplace,
            2 => Kind::Staircase,
            3 => Kind::Average,
            _ => pgrx::error!("dp_merge_sum: unknown aggregate kind {code} (internal error)"),
        }
    }
}

/// Plans a call of the sum aggregate `name` for a Citus table from its
/// evaluated arguments (as `checked_cost`; every refusal happens here, at
/// planning). None: not a sum aggregate.
///
/// # Safety
/// `args` holds the call's evaluated arguments (None: NULL); texts are live.
pub(crate) unsafe fn distributed(
    name: &str,
    integer: bool,
    args: &[Option<pg_sys::Datum>],
    shared: Option<(u32, f64, f64)>,
) -> Option<Distributed> {
    let kind = Kind::named(name)?;
    let arg = |i: usize| args.get(i).copied().flatten();
    // SAFETY: the caller's contract.
    unsafe {
        if integer {
            let mut w = written::<i64>(kind, args.len(), arg);
            w.shared = shared.filter(|_| kind == Kind::Sum);
            let k = plan_written(kind, &w).lattice().k;
            let (lower, upper) = (i64_datum(w.lower), i64_datum(w.upper));
            Some(Distributed {
                kind: kind.code(),
                k,
                lower,
                upper,
                epsilon: w.epsilon,
                delta: w.delta,
                mechanism: w.mechanism,
                loss: w.loss,
            })
        } else {
            let mut w = written::<f64>(kind, args.len(), arg);
            w.shared = shared.filter(|_| kind == Kind::Sum);
            let k = plan_written(kind, &w).lattice().k;
            let (lower, upper) = (f64_datum(w.lower), f64_datum(w.upper));
            Some(Distributed {
                kind: kind.code(),
                k,
                lower,
                upper,
                epsilon: w.epsilon,
                delta: w.delta,
                mechanism: w.mechanism,
                loss: w.loss,
            })
        }
    }
}

/// dp_lattice_steps: one value's steps, as a worker adds them.
///
/// # Safety
/// `fcinfo` is a live call of dp_lattice_steps over `T` (STRICT: no NULLs).
unsafe fn lattice_steps<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's contract: four non-NULL arguments, the second an int4.
    unsafe {
        let required = |i| T::arg(fcinfo, i).unwrap_or_else(|| errors::null_parameter("value"));
        let k = arg_datum(fcinfo, 1).value() as i32;
        let steps = required(0).lattice_steps(Lattice { k }, required(2), required(3), "dp_sum");
        i64_datum(i64::try_from(steps).unwrap_or_else(|_| errors::sum_overflow()))
    }
}

v1_function!(pg_finfo_dp_lattice_steps, dp_lattice_steps, |fcinfo| {
    lattice_steps::<f64>(fcinfo)
});
v1_function!(
    pg_finfo_dp_lattice_steps_int,
    dp_lattice_steps_int,
    |fcinfo| { lattice_steps::<i64>(fcinfo) }
);

/// dp_merge_sum's parameters, from its ten arguments (steps, n, kind, k, ε,
/// lower, upper, δ, mechanism, loss; None: NULL): the aggregate, its k and
/// what the original call wrote.
///
/// # Safety
/// Texts in `args` are live.
unsafe fn merged_written<T: SumValue>(args: &[Option<pg_sys::Datum>]) -> (Kind, i32, Written<T>) {
    let arg = |i: usize| args.get(i).copied().flatten();
    let kind = Kind::from_code(i64_parameter(arg(2), "kind") as i32);
    let k = i64_parameter(arg(3), "k") as i32;
    let upper = T::parameter(arg(6), "upper");
    let lower = if kind == Kind::Staircase {
        upper.negate()
    } else {
        T::parameter(arg(5), "lower")
    };
    // SAFETY: the caller's contract: texts are live.
    let text = |i: usize, name: &str| arg(i).map(|d| unsafe { text_parameter(Some(d), name) });
    let w = Written {
        epsilon: f64_parameter(arg(4), "epsilon"),
        lower,
        upper,
        delta: f64_parameter(arg(7), "delta"),
        mechanism: text(8, "mechanism"),
        loss: text(9, "loss"),
        shared: None,
    };
    (kind, k, w)
}

/// Checks a dp_merge_sum call's parameters as its final function will and
/// returns what it pays (an analyst's statement pays before it runs).
///
/// # Safety
/// As `merged_written`.
pub(crate) unsafe fn merged_cost(
    integer: bool,
    args: &[Option<pg_sys::Datum>],
    groups: u32,
) -> (f64, f64, Option<f64>) {
    // SAFETY: the caller's contract.
    unsafe {
        if integer {
            let (kind, _, w) = merged_written::<i64>(args);
            checked_written(kind, w, groups)
        } else {
            let (kind, _, w) = merged_written::<f64>(args);
            checked_written(kind, w, groups)
        }
    }
}

/// dp_merge_sum's call: (steps, n, kind, k, ε, lower, upper, δ, mechanism,
/// loss), the original aggregate's parameters in one layout; and its k.
///
/// # Safety
/// `fcinfo` is a live transition or final call of dp_merge_sum over `T`.
unsafe fn merged_call<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> (Kind, i32, SumCall) {
    const NAME: &str = "dp_merge_sum";
    // SAFETY: the caller's contract: dp_merge_sum has these ten arguments; texts are live in this call.
    unsafe {
        // The parameters: the partials (arguments 0 and 1) are values.
        let params = aggregate_arguments(fcinfo, [2, 3, 4, 5, 6, 7, 8, 9], NAME);
        let args: Vec<Option<pg_sys::Datum>> = [None, None].into_iter().chain(params).collect();
        let (kind, k, mut w) = merged_written::<T>(&args);
        if kind == Kind::Sum {
            w.shared = sum_shares(fcinfo, [4, 7], true, w.delta, NAME);
        }
        let key = w.key(kind.code() as u64);
        let plan = *call_site_cache(fcinfo, key, || plan_written(kind, &w));
        if plan.lattice().k != k {
            pgrx::error!("{NAME}: the partial sums were taken on another lattice (internal error)");
        }
        let call = SumCall {
            epsilon: w.epsilon,
            delta: w.delta,
            params: [w.epsilon.to_bits(), w.lower.bits(), w.upper.bits()],
            plan,
            note: w.note_key(),
        };
        (kind, k, call)
    }
}

/// dp_merge_sum's transition: adds a partial (exact steps as numeric, and
/// the number of values) to the state.
///
/// # Safety
/// `fcinfo` is a live transition call of dp_merge_sum over `T`.
unsafe fn merge_partial<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the state is NULL or ours, in the aggregate's context.
    unsafe {
        let mut state = state_arg(fcinfo, 0);
        if state.is_null() {
            let (_, k, call) = merged_call::<T>(fcinfo);
            let init = SumState {
                params: call.params,
                lattice_k: k,
                sum: [0, 0],
                count: 0,
            };
            state = crate::fmgr::new_state(fcinfo, "a dpnoise sum", init);
        }
        let steps = if arg_is_null(fcinfo, 1) {
            0
        } else {
            let text = pg_sys::OidFunctionCall1Coll(
                pg_sys::Oid::from(pg_sys::F_NUMERIC_OUT),
                pg_sys::InvalidOid,
                arg_datum(fcinfo, 1),
            )
            .cast_mut_ptr::<std::ffi::c_char>();
            std::ffi::CStr::from_ptr(text)
                .to_str()
                .ok()
                .and_then(|t| t.parse::<i128>().ok())
                .unwrap_or_else(|| errors::sum_overflow())
        };
        let count = arg_i64(fcinfo, 2).unwrap_or(0);
        (*state).add(steps, count);
        pg_sys::Datum::from(state)
    }
}

/// dp_merge_sum's release: the original aggregate's, on the merged state.
///
/// # Safety
/// `fcinfo` is a live final call of dp_merge_sum over `T`.
unsafe fn merge_release<T: SumValue>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the state was made by merge_partial for the same call.
    unsafe {
        refuse_window(fcinfo, "dp_merge_sum");
        let (kind, _, call) = merged_call::<T>(fcinfo);
        release_state::<T>(fcinfo, kind, call)
    }
}

v1_function!(pg_finfo_dp_merge_sum_step, dp_merge_sum_step, |fcinfo| {
    merge_partial::<f64>(fcinfo)
});
v1_function!(
    pg_finfo_dp_merge_sum_int_step,
    dp_merge_sum_int_step,
    |fcinfo| { merge_partial::<i64>(fcinfo) }
);
v1_function!(pg_finfo_dp_merge_sum_final, dp_merge_sum_final, |fcinfo| {
    merge_release::<f64>(fcinfo)
});
v1_function!(
    pg_finfo_dp_merge_sum_int_final,
    dp_merge_sum_int_final,
    |fcinfo| { merge_release::<i64>(fcinfo) }
);

// The transitions: float8 and int8 values.
v1_function!(pg_finfo_dp_sum_step, dp_sum_step, |fcinfo| {
    accumulate::<f64>(fcinfo, Kind::Sum)
});
v1_function!(pg_finfo_dp_sum_int_step, dp_sum_int_step, |fcinfo| {
    accumulate::<i64>(fcinfo, Kind::Sum)
});
v1_function!(
    pg_finfo_dp_sum_laplace_step,
    dp_sum_laplace_step,
    |fcinfo| { accumulate::<f64>(fcinfo, Kind::Laplace) }
);
v1_function!(
    pg_finfo_dp_sum_laplace_int_step,
    dp_sum_laplace_int_step,
    |fcinfo| { accumulate::<i64>(fcinfo, Kind::Laplace) }
);
v1_function!(
    pg_finfo_dp_sum_staircase_step,
    dp_sum_staircase_step,
    |fcinfo| { accumulate::<f64>(fcinfo, Kind::Staircase) }
);
v1_function!(
    pg_finfo_dp_sum_staircase_int_step,
    dp_sum_staircase_int_step,
    |fcinfo| { accumulate::<i64>(fcinfo, Kind::Staircase) }
);
v1_function!(pg_finfo_dp_avg_step, dp_avg_step, |fcinfo| {
    accumulate::<f64>(fcinfo, Kind::Average)
});

// The final functions.
v1_function!(pg_finfo_dp_sum_final, dp_sum_final, |fcinfo| {
    release::<f64>(fcinfo, Kind::Sum)
});
v1_function!(pg_finfo_dp_sum_int_final, dp_sum_int_final, |fcinfo| {
    release::<i64>(fcinfo, Kind::Sum)
});
v1_function!(
    pg_finfo_dp_sum_laplace_final,
    dp_sum_laplace_final,
    |fcinfo| { release::<f64>(fcinfo, Kind::Laplace) }
);
v1_function!(
    pg_finfo_dp_sum_laplace_int_final,
    dp_sum_laplace_int_final,
    |fcinfo| { release::<i64>(fcinfo, Kind::Laplace) }
);
v1_function!(
    pg_finfo_dp_sum_staircase_final,
    dp_sum_staircase_final,
    |fcinfo| { release::<f64>(fcinfo, Kind::Staircase) }
);
v1_function!(
    pg_finfo_dp_sum_staircase_int_final,
    dp_sum_staircase_int_final,
    |fcinfo| { release::<i64>(fcinfo, Kind::Staircase) }
);
v1_function!(pg_finfo_dp_avg_final, dp_avg_final, |fcinfo| {
    release::<f64>(fcinfo, Kind::Average)
});

// Combine two partial states (parallel workers, partitions).
v1_function!(pg_finfo_dp_sum_combine, dp_sum_combine, |fcinfo| {
    crate::fmgr::combine_states::<SumState>(fcinfo, "a dpnoise sum", |a, b| {
        if a.params != b.params || a.lattice_k != b.lattice_k {
            errors::varying_parameter("a dpnoise sum");
        }
        a.add(b.sum(), b.count);
    })
});

v1_function!(pg_finfo_dp_sum_serialize, dp_sum_serialize, |fcinfo| {
    crate::fmgr::serialize_state::<SumState>(fcinfo)
});

v1_function!(pg_finfo_dp_sum_deserialize, dp_sum_deserialize, |fcinfo| {
    crate::fmgr::deserialize_state::<SumState>(fcinfo, "a dpnoise sum")
});
