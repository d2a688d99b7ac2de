//! What an interval of a plain aggregate is computed from (`split`,
//! `errors::parts`): the releases its value is post-processing of, each
//! with what its half-width is computed from, as `dp_estimate` reads them.

use super::forms::{answer, cast, dp_sum, filtered, float, present, Plain};
use crate::gate::catalog::Policy;
use pgrx::pg_sys;

/// How `dp_estimate` reads an interval's parts (the first element of
/// the parts array): a count or sum, an average of one row per person
/// (a centred sum over a count), an average over several rows (a sum over
/// a count of rows), a variance and a standard deviation (a centred sum, a
/// sum of centred squares and a count).
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Code {
    Value = 1,
    Average = 2,
    Ratio = 3,
    Variance = 4,
    Stddev = 5,
    ShiftedVariance = 6,
    ShiftedStddev = 7,
}

/// One release of an interval's parts: the aggregate, and what its
/// half-width is computed from (`accuracy::half_width`'s aggregate, ε and
/// range).
pub(super) struct Part {
    pub(super) release: *mut pg_sys::Node,
    pub(super) aggregate: &'static str,
    pub(super) epsilon: f64,
    pub(super) range: Option<(f64, f64)>,
}

/// The releases an interval around a plain aggregate is computed from, at
/// the aggregate's `epsilon` (its shares), each cast to float8: the value
/// itself for a count or sum; for an average of one row per person the
/// centred sum and the count `dp_avg` draws inside, as separate releases
/// with its split of ε; over several rows the sum and count `answer`
/// writes; for a spread the centred sum, the centred squares and the
/// count of `dp_var`, with its split. Err: no interval of this aggregate.
///
/// # Safety
/// As `answer`.
pub(super) unsafe fn parts(
    aggref: *mut pg_sys::Aggref,
    kind: Plain,
    (lower, upper): (f64, f64),
    epsilon: f64,
    several: Option<i32>,
    policy: &Policy,
) -> Result<(Code, Vec<Part>), &'static str> {
    // SAFETY: the caller's contract; the nodes are built as the parser builds them.
    unsafe {
        let part = |release, aggregate, epsilon, range| Part {
            release: cast(release, pg_sys::FLOAT8OID),
            aggregate,
            epsilon,
            range,
        };
        let sum = |value, epsilon, range| {
            part(dp_sum(policy, value, float(epsilon), range), "sum", epsilon, Some(range))
        };
        let count = |value: *mut pg_sys::Node, epsilon: f64| {
            let release = super::super::partitions::aggregate(
                policy.count_value,
                pg_sys::INT8OID,
                &[
                    (value, pg_sys::exprType(value)),
                    (float(epsilon), pg_sys::FLOAT8OID),
                ],
            );
            part(release.cast(), "count", epsilon, None)
        };
        let (m, a) = ((lower + upper) / 2.0, (upper - lower) / 2.0);
        // y = x − m, as float8.
        let centred = |x: *mut pg_sys::Node| {
            operator(FLOAT8MI, cast(pg_sys::copyObjectImpl(x.cast()).cast(), pg_sys::FLOAT8OID), float(m))
        };
        let share = |sixty_fourths: u32| epsilon * f64::from(sixty_fourths) / 64.0;
        match (kind, several) {
            (Plain::CountStar | Plain::Count | Plain::Persons | Plain::Sum, _) => {
                let (aggregate, range) = accuracy_of(kind, several, (lower, upper));
                let release = answer(aggref, kind, (lower, upper), epsilon, several, policy);
                Ok((Code::Value, vec![part(release, aggregate, epsilon, range)]))
            }
            (Plain::Avg, Some(rows)) => {
                // `answer`'s sum over its count, each at the whole share.
                let (_, arg) = filtered(aggref, kind);
                let arg = arg.expect("avg(x) has an argument");
                let rows = f64::from(rows);
                let total = sum(cast(arg, pg_sys::FLOAT8OID), epsilon, (rows * lower.min(0.0), rows * upper.max(0.0)));
                // A float8 aggregate: the part is the Aggref itself.
                super::super::bounding::mark_row_scaled(total.release.cast(), rows as i32);
                Ok((Code::Ratio, vec![total, sum(present(arg), epsilon, (0.0, rows))]))
            }
            (Plain::Avg, None) => {
                let (_, arg) = filtered(aggref, kind);
                let arg = arg.expect("avg(x) has an argument");
                let j = planned(epsilon, (lower, upper), crate::plans::average)?.sum_share;
                Ok((
                    Code::Average,
                    vec![sum(centred(arg), share(j), (-a, a)), count(arg, share(64 - j))],
                ))
            }
            (Plain::Variance | Plain::Stddev, None) => {
                let (_, arg) = filtered(aggref, kind);
                let arg = arg.expect("it reads a column");
                let (q, s, n) = planned(epsilon, (lower, upper), crate::plans::variance)?.shares;
                let half = a * a / 2.0;
                let squares = operator(FLOAT8MI, operator(FLOAT8MUL, centred(arg), centred(arg)), float(half));
                let code = if kind == Plain::Variance { Code::Variance } else { Code::Stddev };
                Ok((
                    code,
                    vec![
                        sum(centred(arg), share(s), (-a, a)),
                        sum(squares, share(q), (-half, half)),
                        count(arg, share(n)),
                    ],
                ))
            }
            (Plain::Variance | Plain::Stddev, Some(_)) => {
                // One of each person's values in a group, as dp_var reads it
                // there, shifted to y = max(x, lower) − lower in [0, 2a]: y
                // and y² do not decrease with x, so both sums pick the same
                // row of a person (`bounding::mark_row_picked`).
                let (_, arg) = filtered(aggref, kind);
                let arg = arg.expect("it reads a column");
                let (q, s, n) = planned(epsilon, (lower, upper), crate::plans::variance)?.shares;
                let shifted = || {
                    let x = cast(pg_sys::copyObjectImpl(arg.cast()).cast(), pg_sys::FLOAT8OID);
                    operator(FLOAT8MI, greatest(x, float(lower)), float(lower))
                };
                let width = upper - lower;
                let picked = |part: Part| {
                    super::super::bounding::mark_row_picked(part.release.cast());
                    part
                };
                let code = if kind == Plain::Variance { Code::ShiftedVariance } else { Code::ShiftedStddev };
                Ok((
                    code,
                    vec![
                        picked(sum(shifted(), share(s), (0.0, width))),
                        picked(sum(operator(FLOAT8MUL, shifted(), shifted()), share(q), (0.0, width * width))),
                        count(arg, share(n)),
                    ],
                ))
            }
            _ => Err(no_interval(kind, several).unwrap_err()),
        }
    }
}

/// Whether `parts` gives an interval of `kind` (Err: why not).
pub(super) fn no_interval(kind: Plain, several: Option<i32>) -> Result<(), &'static str> {
    match (kind, several) {
        (Plain::Min | Plain::Max | Plain::Quantile(_), _) => Err(
            "a quantile's (or min's, max's) noise is in ranks: an interval in values would need the data",
        ),
        _ => Ok(()),
    }
}

/// What a count's or sum's half-width is computed from: `accuracy::half_width`'s
/// aggregate and range, over one row per person or several (R rows).
pub(super) fn accuracy_of(
    kind: Plain,
    several: Option<i32>,
    bounds: (f64, f64),
) -> (&'static str, Option<(f64, f64)>) {
    match (kind, several) {
        (Plain::CountStar | Plain::Count | Plain::Persons, None) | (Plain::Persons, Some(_)) => {
            ("count", None)
        }
        (Plain::CountStar, Some(rows)) => ("rows", Some((0.0, f64::from(rows)))),
        (Plain::Count, Some(rows)) => ("sum", Some((0.0, f64::from(rows)))),
        (_, None) => ("sum", Some(bounds)),
        (_, Some(rows)) => (
            "sum",
            Some((
                f64::from(rows) * bounds.0.min(0.0),
                f64::from(rows) * bounds.1.max(0.0),
            )),
        ),
    }
}

/// dp_avg's or dp_var's plan (`plan`) at `epsilon` over the bounds: its
/// split of ε, which the parts of an interval keep.
fn planned<T>(
    epsilon: f64,
    (lower, upper): (f64, f64),
    plan: fn(dpnoise_core::Epsilon, dpnoise_core::Bounds) -> T,
) -> Result<T, &'static str> {
    dpnoise_core::Epsilon::new(epsilon)
        .ok()
        .zip(dpnoise_core::Bounds::new(lower, upper).ok())
        .map(|(e, b)| plan(e, b))
        .ok_or("its bounds are equal")
}

/// GREATEST(a, b) of two float8 expressions.
///
/// # Safety
/// Both are live float8 expressions.
unsafe fn greatest(a: *mut pg_sys::Node, b: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the node is zeroed and then filled as the parser fills it.
    unsafe {
        let node = pg_sys::palloc0(std::mem::size_of::<pg_sys::MinMaxExpr>()) as *mut pg_sys::MinMaxExpr;
        (*node).xpr.type_ = pg_sys::NodeTag::T_MinMaxExpr;
        (*node).minmaxtype = pg_sys::FLOAT8OID;
        (*node).op = pg_sys::MinMaxOp::IS_GREATEST;
        (*node).args = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), a.cast()), b.cast());
        (*node).location = -1;
        node.cast()
    }
}

/// float8mi and float8mul (their pg_proc OIDs): the gate's total forms replace them.
const FLOAT8MI: pg_sys::Oid = pg_sys::Oid::from_u32(219);
const FLOAT8MUL: pg_sys::Oid = pg_sys::Oid::from_u32(216);

/// A call of a float8 operator's function on two float8 expressions.
///
/// # Safety
/// Both are live float8 expressions.
unsafe fn operator(function: pg_sys::Oid, a: *mut pg_sys::Node, b: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract.
    unsafe {
        let list = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), a.cast()), b.cast());
        pg_sys::makeFuncExpr(
            function,
            pg_sys::FLOAT8OID,
            list,
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}

