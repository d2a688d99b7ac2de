//! One dpnoise aggregate of a split level: its privacy parameters folded
//! to constants and checked as its final function will check them, its
//! exact partials (`count`, `sum` of `dp_lattice_steps`) and its merge.

use super::nodes::{
    aggregate, datum_const, float8_const, int4_const, lookup, node_list, null_const,
    substitute_params, text_const,
};
use super::unsupported;
use crate::gate::{aggregate_types, list_items};
use pgrx::pg_sys;

/// One dpnoise aggregate of a split level: its partial columns (in the
/// partials' target list) and its merge.
pub(super) struct Split {
    pub(super) partials: Vec<*mut pg_sys::Node>,
    pub(super) merge: pg_sys::Oid,
    pub(super) result: pg_sys::Oid,
    /// The merge's arguments after its partials (constants).
    pub(super) constants: Vec<*mut pg_sys::Node>,
    /// dp_avg's merge reads a count; the other sums a NULL in its place.
    pub(super) null_count: bool,
}

/// Plans one dpnoise aggregate's split: folds its privacy parameters to
/// constants and checks them as its final function will (a refusal here
/// runs nothing), then writes its partials and its merge's constants.
///
/// # Safety
/// `aggref` is a live Aggref of dpnoise's aggregate `name` whose privacy
/// arguments start at `first`; inside a transaction.
pub(super) unsafe fn plan_split(
    aggref: *mut pg_sys::Aggref,
    name: &str,
    first: usize,
    schema: &str,
    params: pg_sys::ParamListInfo,
) -> Split {
    // SAFETY: the caller's contract; the Aggref's args are TargetEntries.
    unsafe {
        let entries = list_items::<pg_sys::TargetEntry>((*aggref).args);
        let types = aggregate_types(aggref);
        let mut constants: Vec<*mut pg_sys::Const> = Vec::new();
        // The gate's dp_share(ε, k) calls (a person's k groups share ε),
        // kept as calls in the merge: an analyst's statement is charged
        // their total (gate::cost).
        let mut shares: Vec<Option<*mut pg_sys::Node>> = Vec::new();
        for entry in &entries[first..] {
            let written: *mut pg_sys::Node = substitute_params((**entry).expr.cast(), params);
            let folded = fold(written, name);
            let share = crate::parameters::share_call(written).is_some();
            constants.push(folded);
            shares.push(share.then_some(written));
        }
        // The merge's ε or δ: the share call, else the constant.
        let budget = |i: usize, value: f64| {
            shares
                .get(i)
                .copied()
                .flatten()
                .unwrap_or_else(|| float8_const(value))
        };
        let values: Vec<Option<pg_sys::Datum>> = std::iter::repeat_n(None, first)
            .chain(
                constants
                    .iter()
                    .map(|c| (!(**c).constisnull).then_some((**c).constvalue)),
            )
            .collect();
        let filter = |a: *mut pg_sys::Aggref| {
            (*a).aggfilter = pg_sys::copyObjectImpl((*aggref).aggfilter.cast()).cast();
            a.cast::<pg_sys::Node>()
        };
        let value = || pg_sys::copyObjectImpl((*entries[0]).expr.cast()).cast::<pg_sys::Node>();
        // The gate's thresholded count (dp_count_selected) reads its count's
        // noise in the same Agg, which the split moves to the merge's level
        // as dp_merge_count (dp_sum_selected likewise its sum's): Citus
        // levels keep the separate selection, at dpnoise.selection_epsilon
        // and the δ the gate wrote (shared over the person's groups as that
        // δ is).
        let thresholded = match name {
            "dp_count_selected" => Some(2),
            "dp_sum_selected" => Some(5),
            _ => None,
        };
        if name == "dp_partition_selected" || thresholded.is_some() {
            let (epsilon, delta) = if let Some(at) = thresholded {
                (
                    crate::gucs::selection_epsilon(),
                    crate::aggref::f64_parameter(values[at], "delta"),
                )
            } else {
                (
                    crate::aggref::f64_parameter(values[0], "epsilon"),
                    crate::aggref::f64_parameter(values[1], "delta"),
                )
            };
            crate::selection::selection(epsilon, delta);
            let count = aggregate(
                lookup("pg_catalog", "count", &[]),
                pg_sys::INT8OID,
                &[],
                std::ptr::null_mut(),
            );
            (*count).aggstar = true;
            return Split {
                partials: vec![filter(count)],
                merge: lookup(
                    schema,
                    "dp_merge_selected",
                    &[pg_sys::INT8OID, pg_sys::FLOAT8OID, pg_sys::FLOAT8OID],
                ),
                result: pg_sys::BOOLOID,
                constants: if let Some(at) = thresholded {
                    vec![shared_like(shares[at], epsilon), budget(at, delta)]
                } else {
                    vec![budget(0, epsilon), budget(1, delta)]
                },
                null_count: false,
            };
        }
        if name == "dp_count" {
            crate::count::checked_cost(first == 1, &values, 1);
            let partial = if first == 1 {
                aggregate(
                    lookup("pg_catalog", "count", &[pg_sys::ANYOID]),
                    pg_sys::INT8OID,
                    &[value()],
                    std::ptr::null_mut(),
                )
            } else {
                let a = aggregate(
                    lookup("pg_catalog", "count", &[]),
                    pg_sys::INT8OID,
                    &[],
                    std::ptr::null_mut(),
                );
                (*a).aggstar = true;
                a
            };
            let params = &values[first..];
            let text = |i: usize| {
                params
                    .get(i)
                    .copied()
                    .flatten()
                    .map(|d| crate::aggref::text_parameter(Some(d), "mechanism"))
            };
            let (delta, mechanism) = match params.len() {
                1 => (0.0, "laplace".to_owned()),
                2 => (0.0, text(1).unwrap_or_default()),
                _ => (
                    crate::aggref::f64_parameter(params[1], "delta"),
                    text(2).unwrap_or_default(),
                ),
            };
            let epsilon = crate::aggref::f64_parameter(params[0], "epsilon");
            let delta = if params.len() == 3 {
                budget(1, delta)
            } else {
                float8_const(delta)
            };
            return Split {
                partials: vec![filter(partial)],
                merge: lookup(
                    schema,
                    "dp_merge_count",
                    &[
                        pg_sys::INT8OID,
                        pg_sys::FLOAT8OID,
                        pg_sys::FLOAT8OID,
                        pg_sys::TEXTOID,
                    ],
                ),
                result: pg_sys::INT8OID,
                constants: vec![budget(0, epsilon), delta, text_const(&mechanism)],
                null_count: false,
            };
        }
        let integer = types[0] == pg_sys::INT8OID;
        // dp_sum over a person's k groups: the merge plans (and its lattice
        // is) the jointly calibrated one, as the serial final function's.
        let shared = if name == "dp_sum" {
            let total = |i: usize, value: f64| match shares.get(i).copied().flatten() {
                Some(call) => share_total(call, name),
                None => (1, value),
            };
            let epsilon = crate::aggref::f64_parameter(values[first], "epsilon");
            let delta = if entries.len() >= 5 {
                crate::aggref::f64_parameter(values[first + 3], "delta")
            } else {
                0.0
            };
            let ((ke, e), (kd, d)) = (
                total(0, epsilon),
                if entries.len() >= 5 {
                    total(3, delta)
                } else {
                    (1, delta)
                },
            );
            (ke.max(kd) > 1).then_some((ke.max(kd), e, d))
        } else {
            None
        };
        let d = crate::sum::distributed(name, integer, &values, shared).expect("a sum aggregate");
        let bound = if integer {
            pg_sys::INT8OID
        } else {
            pg_sys::FLOAT8OID
        };
        let steps = || {
            let args = [
                value(),
                int4_const(d.k),
                datum_const(bound, d.lower),
                datum_const(bound, d.upper),
            ];
            let f = lookup(
                schema,
                "dp_lattice_steps",
                &[bound, pg_sys::INT4OID, bound, bound],
            );
            pg_sys::makeFuncExpr(
                f,
                pg_sys::INT8OID,
                node_list(&args),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            )
            .cast::<pg_sys::Node>()
        };
        let sum = aggregate(
            lookup("pg_catalog", "sum", &[pg_sys::INT8OID]),
            pg_sys::NUMERICOID,
            &[steps()],
            std::ptr::null_mut(),
        );
        let mut partials = vec![filter(sum)];
        let average = d.kind == 3;
        if average {
            let count = aggregate(
                lookup("pg_catalog", "count", &[pg_sys::ANYOID]),
                pg_sys::INT8OID,
                &[steps()],
                std::ptr::null_mut(),
            );
            partials.push(filter(count));
        }
        let text_or_null = |t: &Option<String>| {
            t.as_deref()
                .map_or_else(|| null_const(pg_sys::TEXTOID), text_const)
        };
        let merge_types = [
            pg_sys::NUMERICOID,
            pg_sys::INT8OID,
            pg_sys::INT4OID,
            pg_sys::INT4OID,
            pg_sys::FLOAT8OID,
            bound,
            bound,
            pg_sys::FLOAT8OID,
            pg_sys::TEXTOID,
            pg_sys::TEXTOID,
        ];
        Split {
            partials,
            merge: lookup(schema, "dp_merge_sum", &merge_types),
            result: if integer {
                pg_sys::INT8OID
            } else {
                pg_sys::FLOAT8OID
            },
            constants: vec![
                int4_const(d.kind),
                int4_const(d.k),
                budget(0, d.epsilon),
                datum_const(bound, d.lower),
                datum_const(bound, d.upper),
                // dp_sum's δ is its fifth argument (the fourth parameter).
                if name == "dp_sum" && entries.len() >= 5 {
                    budget(3, d.delta)
                } else {
                    float8_const(d.delta)
                },
                text_or_null(&d.mechanism),
                text_or_null(&d.loss),
            ],
            null_count: !average,
        }
    }
}

/// The parts and the total of the gate's dp_share(total, k) call, folded.
///
/// # Safety
/// `call` is a live dp_share call without unknown parameters; inside a transaction.
unsafe fn share_total(call: *mut pg_sys::Node, name: &str) -> (u32, f64) {
    // SAFETY: the caller's contract.
    unsafe {
        let args =
            crate::gate::list_nodes(crate::parameters::share_call(call).expect("a dp_share call"));
        let (total, parts) = (fold(args[0], name), fold(args[1], name));
        if (*total).constisnull || (*parts).constisnull {
            return (1, f64::NAN);
        }
        let parts = ((*parts).constvalue.value() as i32).max(1) as u32;
        (parts, f64::from_bits((*total).constvalue.value() as u64))
    }
}

/// A privacy parameter folded to a constant, dp_share(ε, k) (STABLE, which
/// the planner would not fold) computed here as the gate's rewrite does.
///
/// # Safety
/// `expr` is a live expression without unknown parameters; inside a transaction.
unsafe fn fold(expr: *mut pg_sys::Node, name: &str) -> *mut pg_sys::Const {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        let constant = |node: *mut pg_sys::Node| -> *mut pg_sys::Const {
            let folded = pg_sys::eval_const_expressions(std::ptr::null_mut(), node);
            if (*folded).type_ != pg_sys::NodeTag::T_Const {
                unsupported(
                    &format!("the privacy parameters of {name} must be constants when the query is planned"),
                    "With a prepared statement, SET plan_cache_mode = force_custom_plan.",
                );
            }
            folded.cast()
        };
        let Some(args) = crate::parameters::share_call(expr) else {
            return constant(expr);
        };
        let args = crate::gate::list_nodes(args);
        let (total, parts) = (constant(args[0]), constant(args[1]));
        if (*total).constisnull || (*parts).constisnull {
            return null_const(pg_sys::FLOAT8OID).cast();
        }
        let parts = (*parts).constvalue.value() as i32;
        if parts < 1 {
            crate::errors::raise_sqlstate(
                "22023",
                "dp_share: parts must be at least 1".to_string(),
                None,
            );
        }
        let total = f64::from_bits((*total).constvalue.value() as u64);
        float8_const(dpnoise_core::rational::share(total, parts as u32)).cast()
    }
}

/// `value` shared over a person's groups as `share` (the gate's
/// dp_share(total, k) call, if any) shares its own total: a copy of the
/// call with `value` as its total; the constant where nothing is shared.
///
/// # Safety
/// `share` is None or a live dp_share call; the copy is palloc'd in the
/// current memory context.
unsafe fn shared_like(share: Option<*mut pg_sys::Node>, value: f64) -> *mut pg_sys::Node {
    let Some(share) = share else {
        return float8_const(value);
    };
    // SAFETY: the caller's contract; a dp_share call is a FuncExpr of two arguments.
    unsafe {
        let copy = pg_sys::copyObjectImpl(share.cast()) as *mut pg_sys::FuncExpr;
        let args = (*copy).args;
        *(*args).elements = pg_sys::ListCell {
            ptr_value: float8_const(value).cast(),
        };
        copy.cast()
    }
}
