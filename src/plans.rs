//! The backend's one bounded cache of plans, by what they were planned
//! from. A call site keeps its own last plan (`call_site::call_site_cache`);
//! this cache serves the next execution of the same query, and other call
//! sites with the same parameters, without planning again ('auto', the
//! 'ci' loss's γ, a coarse Gaussian's σ, box noise's default z and a
//! discretised prior cost from microseconds to a few tenths of a second). It holds at most `CAPACITY`
//! plans, the least recently used going first, so a long-lived backend
//! cannot grow it without bound. The core keeps no state of its own.

use crate::errors::OrRaise;
use dpnoise_core::multivariate::{BoxPlan, L1Plan};
use dpnoise_core::refine::{Prior, Query, Refinement};
use dpnoise_core::{Average, Bounds, Epsilon, Plan, Request, Sensitivity, Variance};
use std::cell::RefCell;
use std::rc::Rc;

/// How many plans a backend keeps.
const CAPACITY: usize = 64;

/// What a plan is built from: two equal keys give equal plans.
#[derive(Clone, PartialEq)]
enum Key {
    Plan(Request),
    Average(Epsilon, Bounds),
    Variance(Epsilon, Bounds),
    /// Box noise by ε, sensitivities and inner half-widths (the sums' form
    /// has no inner: `None`).
    BoxValues(Epsilon, Vec<u64>, Option<Vec<u64>>),
    BoxSums(Epsilon, Vec<u64>),
    L1(Epsilon, Sensitivity),
    Refinement(Prior, Epsilon, Query),
}

#[derive(Clone)]
enum Value {
    Plan(Plan),
    Average(Average),
    Variance(Variance),
    Box(BoxPlan),
    L1(L1Plan),
    Refinement(Rc<Refinement>),
}

thread_local! {
    /// Most recently used last.
    static PLANS: RefCell<Vec<(Key, Value)>> = const { RefCell::new(Vec::new()) };
}

/// The cached value whose key `matches`, now the most recently used.
fn lookup(matches: impl Fn(&Key) -> bool) -> Option<Value> {
    PLANS.with(|plans| {
        let mut plans = plans.borrow_mut();
        let at = plans.iter().position(|(k, _)| matches(k))?;
        let entry = plans.remove(at);
        let value = entry.1.clone();
        plans.push(entry);
        Some(value)
    })
}

/// Keeps `value` under `key`, forgetting the least recently used past `CAPACITY`.
fn keep(key: Key, value: &Value) {
    PLANS.with(|plans| {
        let mut plans = plans.borrow_mut();
        if plans.len() >= CAPACITY {
            plans.remove(0);
        }
        plans.push((key, value.clone()));
    });
}

/// The cached value for `key`, or `build`'s (raised if it fails: nothing is kept then).
fn cached(key: Key, build: impl FnOnce() -> Result<Value, dpnoise_core::Error>) -> Value {
    if let Some(value) = lookup(|k| *k == key) {
        return value;
    }
    // Built outside the borrow: planning may raise (or be cancelled).
    let value = build().or_raise();
    keep(key, &value);
    value
}

fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|x| x.to_bits()).collect()
}

/// The plan of a univariate release.
pub fn plan(request: Request) -> Plan {
    match cached(Key::Plan(request), || request.plan().map(Value::Plan)) {
        Value::Plan(plan) => plan,
        _ => unreachable!("a plan key holds a plan"),
    }
}

/// The two plans of an average.
pub fn average(epsilon: Epsilon, bounds: Bounds) -> Average {
    match cached(Key::Average(epsilon, bounds), || {
        Average::new(epsilon, bounds).map(Value::Average)
    }) {
        Value::Average(average) => average,
        _ => unreachable!("an average key holds an average"),
    }
}

/// The three plans of a variance (its ε split is a search over 63 laws: kept).
pub fn variance(epsilon: Epsilon, bounds: Bounds) -> Variance {
    match cached(Key::Variance(epsilon, bounds), || {
        Variance::new(epsilon, bounds).map(Value::Variance)
    }) {
        Value::Variance(variance) => variance,
        _ => unreachable!("a variance key holds a variance"),
    }
}

/// Box noise for values with per-component sensitivities (and inner half-widths).
pub fn box_values(epsilon: Epsilon, sensitivities: &[f64], inner: Option<&[f64]>) -> BoxPlan {
    let key = Key::BoxValues(epsilon, bits(sensitivities), inner.map(bits));
    match cached(key, || {
        BoxPlan::new(epsilon, sensitivities, inner).map(Value::Box)
    }) {
        Value::Box(plan) => plan,
        _ => unreachable!("a box key holds a box plan"),
    }
}

/// Box noise for sums clamped to [−b_j, b_j].
pub fn box_sums(epsilon: Epsilon, bounds: &[f64]) -> BoxPlan {
    match cached(Key::BoxSums(epsilon, bits(bounds)), || {
        BoxPlan::for_sums(epsilon, bounds).map(Value::Box)
    }) {
        Value::Box(plan) => plan,
        _ => unreachable!("a box key holds a box plan"),
    }
}

/// The 2-D L1 staircase for an L1 sensitivity.
pub fn l1(epsilon: Epsilon, sensitivity: Sensitivity) -> L1Plan {
    match cached(Key::L1(epsilon, sensitivity), || {
        L1Plan::new(epsilon, sensitivity).map(Value::L1)
    }) {
        Value::L1(plan) => plan,
        _ => unreachable!("an L1 key holds an L1 plan"),
    }
}

/// Knowledge refinement of `prior` at ε for `query`. Per-row calls find it
/// by comparison alone; the prior is checked (`check`), copied and
/// discretised only when it is not kept yet.
pub fn refinement(
    prior: &Prior,
    epsilon: Epsilon,
    query: Query,
    check: impl FnOnce(),
) -> Rc<Refinement> {
    let hit = lookup(
        |k| matches!(k, Key::Refinement(p, e, q) if p == prior && *e == epsilon && *q == query),
    );
    if let Some(Value::Refinement(refinement)) = hit {
        return refinement;
    }
    check();
    let refinement = Rc::new(Refinement::new(prior.clone(), epsilon, query).or_raise());
    keep(
        Key::Refinement(prior.clone(), epsilon, query),
        &Value::Refinement(Rc::clone(&refinement)),
    );
    refinement
}

/// How many plans this backend keeps now (for tests).
#[cfg(any(test, feature = "pg_test"))]
pub fn len() -> usize {
    PLANS.with(|plans| plans.borrow().len())
}

/// The capacity (for tests).
#[cfg(any(test, feature = "pg_test"))]
pub const fn capacity() -> usize {
    CAPACITY
}
