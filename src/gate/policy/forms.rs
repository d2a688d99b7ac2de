//! What each plain aggregate is (`plain`) and becomes (`answer`): the
//! dpnoise aggregate of the same question, over one row per person or
//! several, cast back to PostgreSQL's result type (`super` has the table).

use super::super::catalog::Policy;
use super::super::list_items;
use pgrx::pg_sys;

/// A plain aggregate the policy answers.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Plain {
    CountStar,
    Count,
    /// count(DISTINCT <the privacy unit>): the persons.
    Persons,
    Sum,
    Avg,
    /// The rest read a column with a domain, and become the dpnoise
    /// aggregate of the same question.
    Variance,
    Stddev,
    Min,
    Max,
    /// percentile_cont or percentile_disc at a constant fraction.
    Quantile(f64),
}

/// Which plain aggregate `aggref` is: PostgreSQL's own count, sum, avg,
/// variance, stddev, min, max (without DISTINCT, ORDER BY or FILTER), or
/// percentile_cont / percentile_disc at a constant fraction in [0, 1].
///
/// # Safety
/// `aggref` is a live Aggref; inside a transaction.
pub(super) unsafe fn plain(aggref: *mut pg_sys::Aggref) -> Option<Plain> {
    // SAFETY: the caller's contract; get_func_name returns a palloc'd copy or null.
    unsafe {
        let a = &*aggref;
        if u32::from(a.aggfnoid) >= pg_sys::FirstNormalObjectId || a.agglevelsup != 0 {
            return None;
        }
        let name = pg_sys::get_func_name(a.aggfnoid);
        if name.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(name).to_bytes();
        // FILTER (WHERE f) is folded into the argument (`filtered`): the
        // dpnoise aggregates skip NULL values, as PostgreSQL's do. Not
        // with DISTINCT (a count of persons counts rows, not values).
        if !a.aggfilter.is_null() && !a.aggdistinct.is_null() {
            return None;
        }
        if !a.aggdistinct.is_null() {
            // Which column it counts is checked against the level (`domain`).
            return (name == b"count" && a.aggkind == b'n' as std::ffi::c_char)
                .then_some(Plain::Persons);
        }
        if a.aggkind == b'o' as std::ffi::c_char {
            // WITHIN GROUP (ORDER BY x) at a constant fraction.
            // The fraction as written (0.5 is a numeric cast to float8), folded.
            let direct: Vec<*mut pg_sys::Node> = list_items::<pg_sys::Node>(a.aggdirectargs)
                .into_iter()
                .map(|d| pg_sys::eval_const_expressions(std::ptr::null_mut(), d))
                .collect();
            let fraction = match direct.as_slice() {
                [only] if (**only).type_ == pg_sys::NodeTag::T_Const => {
                    let c = *only as *mut pg_sys::Const;
                    ((*c).consttype == pg_sys::FLOAT8OID && !(*c).constisnull)
                        .then(|| f64::from_bits((*c).constvalue.value() as u64))
                }
                _ => None,
            }?;
            if !matches!(name, b"percentile_cont" | b"percentile_disc")
                || !(0.0..=1.0).contains(&fraction)
            {
                return None;
            }
            // ORDER BY x DESC (or USING >) asks for the 1 - p quantile of
            // the ascending order; an operator that is no ordering is left.
            let order = list_items::<pg_sys::SortGroupClause>(a.aggorder);
            let [clause] = order.as_slice() else {
                return None;
            };
            let mut reverse = false;
            if pg_sys::get_equality_op_for_ordering_op((**clause).sortop, &mut reverse)
                == pg_sys::InvalidOid
            {
                return None;
            }
            return Some(Plain::Quantile(if reverse {
                1.0 - fraction
            } else {
                fraction
            }));
        }
        if a.aggkind != b'n' as std::ffi::c_char || !a.aggorder.is_null() {
            return None;
        }
        match name {
            b"count" if a.aggstar => Some(Plain::CountStar),
            b"count" => Some(Plain::Count),
            b"sum" => Some(Plain::Sum),
            b"avg" => Some(Plain::Avg),
            b"variance" | b"var_samp" | b"var_pop" => Some(Plain::Variance),
            b"stddev" | b"stddev_samp" | b"stddev_pop" => Some(Plain::Stddev),
            b"min" => Some(Plain::Min),
            b"max" => Some(Plain::Max),
            _ => None,
        }
    }
}

/// # Safety
/// `aggref` is a live Aggref.
pub(super) unsafe fn first_argument(aggref: *mut pg_sys::Aggref) -> Option<*mut pg_sys::Node> {
    // SAFETY: the caller's contract; args is a TargetEntry list.
    unsafe {
        list_items::<pg_sys::TargetEntry>((*aggref).args)
            .first()
            .map(|entry| (**entry).expr.cast())
    }
}

/// A float8 constant.
pub(super) fn float(value: f64) -> *mut pg_sys::Node {
    // SAFETY: a by-value float8 constant, palloc'd in the current context.
    unsafe {
        pg_sys::makeConst(
            pg_sys::FLOAT8OID,
            -1,
            pg_sys::InvalidOid,
            8,
            pg_sys::Datum::from(value.to_bits()),
            false,
            true,
        )
        .cast()
    }
}

/// The dpnoise form of a plain aggregate, at `epsilon`, with the column's
/// bounds; over several rows per person, R = `several` of a person's rows
/// count. Cast to the aggregate's type.
///
/// # Safety
/// `aggref` is a live Aggref of a level over protected tables; inside a transaction.
pub(super) unsafe fn answer(
    aggref: *mut pg_sys::Aggref,
    kind: Plain,
    (lower, upper): (f64, f64),
    epsilon: f64,
    several: Option<i32>,
    policy: &Policy,
) -> *mut pg_sys::Node {
    let epsilon = (float(epsilon), pg_sys::FLOAT8OID);
    // SAFETY: the caller's contract; the nodes are built as the parser builds them.
    unsafe {
        let (kind, arg) = filtered(aggref, kind);
        let sum = |value, lower, upper| dp_sum(policy, value, epsilon.0, (lower, upper));
        let released: *mut pg_sys::Node = match (kind, several) {
            (Plain::Persons, _) => {
                super::super::partitions::aggregate(policy.count, pg_sys::INT8OID, &[epsilon])
                    .cast()
            }
            (Plain::CountStar, None) => {
                super::super::partitions::aggregate(policy.count, pg_sys::INT8OID, &[epsilon])
                    .cast()
            }
            (Plain::Count, None) => {
                let arg = arg.expect("count(x) has an argument");
                super::super::partitions::aggregate(
                    policy.count_value,
                    pg_sys::INT8OID,
                    &[(arg, pg_sys::exprType(arg)), epsilon],
                )
                .cast()
            }
            (Plain::Sum | Plain::Avg, None) => {
                let value = cast(arg.expect("sum(x) has an argument"), pg_sys::FLOAT8OID);
                let function = if kind == Plain::Sum {
                    policy.sum
                } else {
                    policy.avg
                };
                super::super::partitions::aggregate(
                    function,
                    pg_sys::FLOAT8OID,
                    &[
                        (value, pg_sys::FLOAT8OID),
                        epsilon,
                        (float(lower), pg_sys::FLOAT8OID),
                        (float(upper), pg_sys::FLOAT8OID),
                    ],
                )
                .cast()
            }
            (Plain::Variance | Plain::Stddev | Plain::Min | Plain::Max | Plain::Quantile(_), _) => {
                let value = cast(arg.expect("it reads a column"), pg_sys::FLOAT8OID);
                let mut args = vec![
                    (value, pg_sys::FLOAT8OID),
                    epsilon,
                    (float(lower), pg_sys::FLOAT8OID),
                    (float(upper), pg_sys::FLOAT8OID),
                ];
                let function = match kind {
                    Plain::Variance => policy.variance,
                    Plain::Stddev => policy.stddev,
                    Plain::Min => policy.min,
                    Plain::Max => policy.max,
                    Plain::Quantile(p) => {
                        args.push((float(p), pg_sys::FLOAT8OID));
                        policy.quantile
                    }
                    _ => unreachable!("matched above"),
                };
                super::super::partitions::aggregate(function, pg_sys::FLOAT8OID, &args).cast()
            }
            (Plain::CountStar, Some(rows)) => sum(float(1.0), 0.0, rows as f64),
            (Plain::Count, Some(rows)) => sum(
                present(arg.expect("count(x) has an argument")),
                0.0,
                rows as f64,
            ),
            (Plain::Sum, Some(rows)) => {
                let value = cast(arg.expect("sum(x) has an argument"), pg_sys::FLOAT8OID);
                sum(
                    value,
                    rows as f64 * lower.min(0.0),
                    rows as f64 * upper.max(0.0),
                )
            }
            (Plain::Avg, Some(rows)) => {
                let arg = arg.expect("avg(x) has an argument");
                let total = sum(
                    cast(arg, pg_sys::FLOAT8OID),
                    rows as f64 * lower.min(0.0),
                    rows as f64 * upper.max(0.0),
                );
                // It sums the rows the count counts: R of a person's at
                // most, at their mean (the bounding's RowScaled).
                super::super::bounding::mark_row_scaled(total.cast(), rows);
                let count = sum(present(arg), 0.0, rows as f64);
                let list = pg_sys::lappend(
                    pg_sys::lappend(std::ptr::null_mut(), total.cast()),
                    count.cast(),
                );
                pg_sys::makeFuncExpr(
                    FLOAT8DIV,
                    pg_sys::FLOAT8OID,
                    list,
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                )
                .cast()
            }
        };
        cast(released, (*aggref).aggtype)
    }
}

/// How many shares of the statement's ε a plain aggregate takes: an
/// average over several rows two (its sum and its count), any other one.
pub(super) fn shares(kind: Plain, several: Option<i32>) -> usize {
    if kind == Plain::Avg && several.is_some() {
        2
    } else {
        1
    }
}

/// `dp_sum(value, ε, lower, upper)`: the policy's sum of a float8 value.
///
/// # Safety
/// `value` is a live float8 expression; `epsilon` a float8 constant.
pub(super) unsafe fn dp_sum(
    policy: &Policy,
    value: *mut pg_sys::Node,
    epsilon: *mut pg_sys::Node,
    (lower, upper): (f64, f64),
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract.
    unsafe {
        super::super::partitions::aggregate(
            policy.sum,
            pg_sys::FLOAT8OID,
            &[
                (value, pg_sys::FLOAT8OID),
                (epsilon, pg_sys::FLOAT8OID),
                (float(lower), pg_sys::FLOAT8OID),
                (float(upper), pg_sys::FLOAT8OID),
            ],
        )
        .cast()
    }
}

/// The kind and argument `answer` releases: as written, or, for an
/// aggregate with FILTER (WHERE f), its argument only where f holds
/// (`CASE WHEN f THEN x END`; count(*) counts `CASE WHEN f THEN 1 END`),
/// the same question as the aggregates' FILTER and PostgreSQL's answer.
///
/// # Safety
/// `aggref` is a live Aggref that `plain` found to be `kind`.
pub(super) unsafe fn filtered(aggref: *mut pg_sys::Aggref, kind: Plain) -> (Plain, Option<*mut pg_sys::Node>) {
    // SAFETY: the caller's contract; the nodes are zeroed and then filled as the parser fills them.
    unsafe {
        let arg = first_argument(aggref);
        let filter = (*aggref).aggfilter;
        if filter.is_null() {
            return (kind, arg);
        }
        let (kind, value) = match (kind, arg) {
            (Plain::CountStar, _) => (
                Plain::Count,
                pg_sys::makeConst(
                    pg_sys::INT4OID,
                    -1,
                    pg_sys::InvalidOid,
                    4,
                    pg_sys::Datum::from(1usize),
                    false,
                    true,
                )
                .cast(),
            ),
            (kind, Some(value)) => (kind, value),
            (_, None) => unreachable!("every aggregate but count(*) has an argument"),
        };
        let when =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::CaseWhen>()) as *mut pg_sys::CaseWhen;
        (*when).xpr.type_ = pg_sys::NodeTag::T_CaseWhen;
        (*when).expr = filter.cast();
        (*when).result = value.cast();
        (*when).location = -1;
        let case =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::CaseExpr>()) as *mut pg_sys::CaseExpr;
        (*case).xpr.type_ = pg_sys::NodeTag::T_CaseExpr;
        (*case).casetype = pg_sys::exprType(value);
        (*case).casecollid = pg_sys::exprCollation(value);
        (*case).args = pg_sys::lappend(std::ptr::null_mut(), when.cast());
        (*case).defresult = pg_sys::makeNullConst(
            pg_sys::exprType(value),
            pg_sys::exprTypmod(value),
            pg_sys::exprCollation(value),
        )
        .cast();
        (*case).location = -1;
        (kind, Some(case.cast()))
    }
}

/// float8div (its pg_proc OID): the gate's total form replaces it.
const FLOAT8DIV: pg_sys::Oid = pg_sys::Oid::from_u32(217);

/// `CASE WHEN x IS NULL THEN 0 ELSE 1 END` as float8: what a row adds to count(x).
///
/// # Safety
/// `x` is a live expression.
pub(super) unsafe fn present(x: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the nodes are zeroed and then filled as the parser fills them.
    unsafe {
        let test =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::NullTest>()) as *mut pg_sys::NullTest;
        (*test).xpr.type_ = pg_sys::NodeTag::T_NullTest;
        (*test).arg = x.cast();
        (*test).nulltesttype = pg_sys::NullTestType::IS_NULL;
        (*test).location = -1;
        let when =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::CaseWhen>()) as *mut pg_sys::CaseWhen;
        (*when).xpr.type_ = pg_sys::NodeTag::T_CaseWhen;
        (*when).expr = test.cast();
        (*when).result = float(0.0).cast();
        (*when).location = -1;
        let case =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::CaseExpr>()) as *mut pg_sys::CaseExpr;
        (*case).xpr.type_ = pg_sys::NodeTag::T_CaseExpr;
        (*case).casetype = pg_sys::FLOAT8OID;
        (*case).args = pg_sys::lappend(std::ptr::null_mut(), when.cast());
        (*case).defresult = float(1.0).cast();
        (*case).location = -1;
        case.cast()
    }
}

/// `expr` as a value of `target`, by an explicit cast (the gate's total
/// forms then replace one that can fail). Numbers cast to and from float8.
///
/// # Safety
/// `expr` is a live expression of a numeric type; inside a transaction.
pub(super) unsafe fn cast(expr: *mut pg_sys::Node, target: pg_sys::Oid) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; coerce_to_target_type takes a null ParseState.
    unsafe {
        let from = pg_sys::exprType(expr);
        if from == target {
            return expr;
        }
        let cast = pg_sys::coerce_to_target_type(
            std::ptr::null_mut(),
            expr,
            from,
            target,
            -1,
            pg_sys::CoercionContext::COERCION_EXPLICIT,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CAST,
            -1,
        );
        assert!(!cast.is_null(), "a numeric type casts to and from float8");
        cast
    }
}
