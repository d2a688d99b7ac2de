//! `dp_query_accuracy`: the error an analyst's query would have, before it
//! spends anything, with the contribution bounds the gate would apply
//! (each group's share of ε when a person may add to k groups) and the
//! group sizes partition selection needs to show a key.

use super::catalog::protected;
use crate::errors::{null_parameter, raise_sqlstate, OrRaise};
use dpnoise_core::selection::PartitionSelection;
use dpnoise_core::{Bounds, Choice, Delta, Epsilon, Loss, Mechanism, Request, Shape};
use pgrx::prelude::*;

pgrx::extension_sql_file!(
    "split.sql",
    name = "split_sql",
    requires = [dp_query_accuracy, dp_aggregate_accuracy]
);

/// The expected error of one dpnoise aggregate (`'count'` as dp_count(ε),
/// `'sum'` as dp_sum(value, ε, lower, upper), `'rows'` as the row count
/// dp_sum(1.0, ε, lower, upper)) in a query over `tables`
/// (its FROM list: protected tables and public ones), grouped or not, with
/// the bounds in force for this session. For a GROUP BY on keys from the
/// data, the smallest number of persons a group needs to be shown with
/// even odds, and to be always shown, at `dpnoise.selection_epsilon` and
/// `dpnoise.selection_delta`; for a count without δ, which selects its
/// groups by its own noise (`dpnoise.thresholded_counts`), at the count's
/// ε and the selection's δ, "always" meaning with probability at least
/// 1 − δ (a row count likewise, where its threshold shows as many groups,
/// counting each person at one row). With δ > 0 (and a mechanism, else `'auto'`),
/// the (ε, δ) release's: a Gaussian over k groups is calibrated to the L2
/// sensitivity across them. Draws nothing and spends nothing. PARALLEL
/// RESTRICTED: it reads the protected tables' settings as the gate does.
#[pg_extern(stable, parallel_restricted)]
fn dp_query_accuracy(
    aggregate: Option<&str>,
    epsilon: Option<f64>,
    tables: Option<Vec<Option<String>>>,
    lower: default!(Option<f64>, "NULL"),
    upper: default!(Option<f64>, "NULL"),
    grouped: default!(Option<bool>, true),
    confidence: default!(Option<f64>, 0.95),
    delta: default!(Option<f64>, 0.0),
    mechanism: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(max_groups_contributed, i32),
        name!(epsilon_per_group, f64),
        name!(mechanism, String),
        name!(mean_abs_error, f64),
        name!(std_dev, f64),
        name!(ci_half_width, f64),
        name!(selection_even_odds, Option<i64>),
        name!(selection_always_kept, Option<i64>),
    ),
> {
    let confidence = confidence.unwrap_or_else(|| null_parameter("confidence"));
    dpnoise_core::staircase::check_confidence(confidence).or_raise();
    let planned_query = planned(
        "dp_query_accuracy",
        aggregate,
        epsilon,
        tables,
        lower,
        upper,
        grouped,
        delta,
        mechanism,
    );
    let Planned {
        k, share, ref plan, ..
    } = planned_query;
    let accuracy = plan.accuracy(confidence);
    let selection_delta = crate::gucs::selection_delta();
    let (separate, thresholded) = selection(&planned_query);
    let figure = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let (even, always) = match (thresholded, separate) {
        (Some((t, each)), _) => (
            Some(figure(t.persons_kept_at(0.5, each))),
            Some(figure(t.persons_kept_at(1.0 - selection_delta, each))),
        ),
        (None, Some(s)) => (
            Some(figure(s.even_odds())),
            Some(figure(s.always_kept_from())),
        ),
        (None, None) => (None, None),
    };
    TableIterator::once((
        k,
        share,
        plan.mechanism.name().to_string(),
        accuracy.mean_abs_error,
        accuracy.std_dev,
        accuracy.ci_half_width,
        even,
        always,
    ))
}

/// The partition selection a GROUP BY on keys from the data would get:
/// the separate selection (None where δ_s = 0 or the query is not
/// grouped), and, where the aggregate selects its groups by its own noise
/// (a count without δ, a row count: the gate's rule,
/// `partitions::select_partitions`), its threshold and each person's least
/// value in lattice steps.
fn selection(
    planned: &Planned,
) -> (
    Option<PartitionSelection>,
    Option<(dpnoise_core::threshold::CountThreshold, u128)>,
) {
    let Planned {
        k,
        shape,
        least,
        grouped,
        delta,
        ref plan,
        ..
    } = *planned;
    // With dpnoise.selection_delta = 0 keys from the data are refused: only listed keys.
    let selection_delta = crate::gucs::selection_delta();
    let separate = (grouped && selection_delta > 0.0).then(|| {
        PartitionSelection::new(crate::gucs::selection_epsilon(), selection_delta, k as u32)
            .or_raise()
    });
    let each = match (shape, least) {
        (Shape::Count, _) => Some(1),
        (_, Some(v)) => plan
            .calibration
            .lattice
            .round(v)
            .ok()
            .filter(|&s| s > 0)
            .map(|s| s as u128),
        _ => None,
    };
    let thresholded = separate
        .as_ref()
        .filter(|_| delta == 0.0 && crate::gucs::thresholded_counts())
        .zip(each)
        .and_then(|(separate, each)| {
            dpnoise_core::threshold::CountThreshold::if_better(
                plan,
                k as u32,
                selection_delta,
                separate,
                each,
            )
            .map(|t| (t, each))
        });
    (separate, thresholded)
}

/// What one aggregate of a query over `tables` will be charged, before it
/// spends anything, under each accountant (src/budget/accountant.rs):
/// (ε, δ) added up, and under zCDP its ρ and the δ beside it (a Gaussian
/// its exact ρ and no δ; any other release ε²/(2k) and its δ:
/// `dpnoise_core::zcdp`). One row per part: the aggregate, the partition
/// selection a GROUP BY on keys from the data pays (δ only where the
/// aggregate selects by its own noise), the run time held as a release
/// (`dpnoise.timing_epsilon`), and the total. Spends and draws nothing.
#[pg_extern(stable, parallel_restricted)]
#[allow(clippy::too_many_arguments)]
fn dp_query_cost(
    aggregate: Option<&str>,
    epsilon: Option<f64>,
    tables: Option<Vec<Option<String>>>,
    lower: default!(Option<f64>, "NULL"),
    upper: default!(Option<f64>, "NULL"),
    grouped: default!(Option<bool>, true),
    delta: default!(Option<f64>, 0.0),
    mechanism: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(part, String),
        name!(epsilon_added_up, f64),
        name!(delta_added_up, f64),
        name!(rho, f64),
        name!(rho_delta, f64),
    ),
> {
    use dpnoise_core::zcdp::{approximate_cost, gaussian_rho};
    let planned_query = planned(
        "dp_query_cost",
        aggregate,
        epsilon,
        tables,
        lower,
        upper,
        grouped,
        delta,
        mechanism,
    );
    let Planned {
        k, delta, ref plan, ..
    } = planned_query;
    let epsilon = epsilon.unwrap_or(0.0);
    let groups = k as u32;
    let (rho, rho_delta) = gaussian_rho(plan, groups).map_or_else(
        || approximate_cost(epsilon, delta, groups),
        |rho| (rho, 0.0),
    );
    let mut parts = vec![("aggregate".to_string(), epsilon, delta, rho, rho_delta)];
    let (separate, thresholded) = selection(&planned_query);
    if separate.is_some() {
        let selection_delta = crate::gucs::selection_delta();
        let selection_epsilon = if thresholded.is_some() {
            0.0
        } else {
            crate::gucs::selection_epsilon()
        };
        let (rho, rho_delta) = approximate_cost(selection_epsilon, selection_delta, groups);
        parts.push((
            "partition selection".to_string(),
            selection_epsilon,
            selection_delta,
            rho,
            rho_delta,
        ));
    }
    if let Some((timing_epsilon, timing_delta, _)) = crate::gucs::timing() {
        let (rho, rho_delta) = approximate_cost(timing_epsilon, timing_delta, 1);
        parts.push((
            "run time".to_string(),
            timing_epsilon,
            timing_delta,
            rho,
            rho_delta,
        ));
    }
    let total = parts.iter().fold((0.0, 0.0, 0.0, 0.0), |t, p| {
        (t.0 + p.1, t.1 + p.2, t.2 + p.3, t.3 + p.4)
    });
    parts.push(("total".to_string(), total.0, total.1, total.2, total.3));
    TableIterator::new(parts)
}

/// One aggregate of a query over `tables` as the gate would plan it: the
/// groups k a person may add to, ε's share per group, its shape (and a
/// row count's least value per person), and the plan over the k groups.
struct Planned {
    k: i32,
    share: f64,
    shape: Shape,
    least: Option<f64>,
    grouped: bool,
    delta: f64,
    plan: dpnoise_core::Plan,
}

/// `dp_query_accuracy`'s and `dp_query_cost`'s arguments (`function`,
/// which refusals name), checked and planned.
#[allow(clippy::too_many_arguments)]
fn planned(
    function: &str,
    aggregate: Option<&str>,
    epsilon: Option<f64>,
    tables: Option<Vec<Option<String>>>,
    lower: Option<f64>,
    upper: Option<f64>,
    grouped: Option<bool>,
    delta: Option<f64>,
    mechanism: Option<&str>,
) -> Planned {
    let aggregate = aggregate.unwrap_or_else(|| null_parameter("aggregate"));
    let epsilon = epsilon.unwrap_or_else(|| null_parameter("epsilon"));
    let tables = tables.unwrap_or_else(|| null_parameter("tables"));
    let grouped = grouped.unwrap_or_else(|| null_parameter("grouped"));
    let delta = delta.unwrap_or_else(|| null_parameter("delta"));
    // The aggregate and its bounds are checked before the tables are looked up.
    shape_of(function, aggregate, lower, upper);
    let Some(known) = protected() else {
        raise_sqlstate(
            "55000",
            format!("{function}: dpnoise is not installed in this database"),
            None,
        )
    };
    // The FROM list as the gate sees it: how many items, and the protected ones.
    let mut found = Vec::new();
    for name in &tables {
        let name = name.as_deref().unwrap_or_else(|| null_parameter("tables"));
        let relid = relation(name);
        found.extend(known.tables.get(&relid).copied());
    }
    plan_for(
        function,
        aggregate,
        epsilon,
        lower,
        upper,
        &found,
        tables.len(),
        grouped,
        delta,
        mechanism,
    )
}

/// The shape `aggregate` names (`'count'`, `'sum'`, `'rows'` with its
/// bounds), and for a row count the least value a person adds.
fn shape_of(
    function: &str,
    aggregate: &str,
    lower: Option<f64>,
    upper: Option<f64>,
) -> (Shape, Option<f64>) {
    // A row count written dp_sum(1.0, ε, lower, upper): each person adds
    // at least 1 clamped to the bounds, which its own noise can select by.
    let mut least = None;
    let shape = match aggregate {
        "count" => Shape::Count,
        "sum" | "rows" => {
            let (Some(lower), Some(upper)) = (lower, upper) else {
                raise_sqlstate(
                    "22023",
                    format!("{function}: '{aggregate}' needs lower and upper, the bounds dp_sum clamps to"),
                    None,
                )
            };
            let bounds = Bounds::new(lower, upper).or_raise();
            if aggregate == "rows" {
                least = Some(1f64.clamp(lower.min(upper), upper.max(lower)));
            }
            Shape::Sum(bounds)
        }
        other => raise_sqlstate(
            "22023",
            format!("{function}: aggregate must be 'count', 'sum' or 'rows', not '{other}'"),
            Some("dp_aggregate_accuracy gives the error of dp_avg, dp_var and the quantiles for a group of n persons.".to_string()),
        ),
    };
    (shape, least)
}

/// The half-width of the interval that holds a release's noiseless value
/// with `confidence`: one dpnoise aggregate (`'count'`, `'sum'`, `'rows'`
/// with its bounds) over a level's protected tables `found`, of `leaves`
/// FROM items, grouped or not, as `dp_query_accuracy` gives it.
#[allow(clippy::too_many_arguments)]
pub(super) fn half_width(
    aggregate: &str,
    epsilon: f64,
    bounds: Option<(f64, f64)>,
    found: &[super::catalog::Table],
    leaves: usize,
    grouped: bool,
    confidence: f64,
) -> f64 {
    let (lower, upper) = bounds.unzip();
    let planned = plan_for(
        "dp_interval",
        aggregate,
        epsilon,
        lower,
        upper,
        found,
        leaves,
        grouped,
        0.0,
        None,
    );
    planned.plan.accuracy(confidence).ci_half_width
}

/// `planned` once the FROM list is read: its protected tables `found`, of
/// `leaves` items.
#[allow(clippy::too_many_arguments)]
fn plan_for(
    function: &str,
    aggregate: &str,
    epsilon: f64,
    lower: Option<f64>,
    upper: Option<f64>,
    found: &[super::catalog::Table],
    leaves: usize,
    grouped: bool,
    delta: f64,
    mechanism: Option<&str>,
) -> Planned {
    let (shape, least) = shape_of(function, aggregate, lower, upper);
    if found.is_empty() {
        raise_sqlstate(
            "22023",
            format!("{function}: none of these tables is protected"),
            Some("List the tables of the query's FROM, at least one of them protected (dp_protected_tables).".to_string()),
        );
    }
    let bounded = leaves > 1 || !found[0].one_row;
    let k = if bounded && grouped {
        super::max_groups(found.iter().map(|t| t.max_groups).min().unwrap_or(1))
    } else {
        1
    };
    Epsilon::new(epsilon).or_raise();
    let share = dpnoise_core::rational::share(epsilon, k as u32);
    // As dp_count(ε) and dp_sum(value, ε, lower, upper [, δ [, mechanism]]) choose.
    let choice = match (mechanism, shape) {
        (Some(name), _) => Choice::parse(name).or_raise(),
        (None, Shape::Count) if delta == 0.0 => Choice::Fixed(Mechanism::Laplace),
        _ => Choice::Auto,
    };
    // The whole (ε, δ) over the k groups: a Gaussian is calibrated to the
    // L2 sensitivity across them, the other mechanisms get each group's share.
    let plan = crate::plans::plan(Request {
        choice,
        epsilon: Epsilon::new(epsilon).or_raise(),
        delta: Delta::new(delta).or_raise(),
        loss: Loss::Variance,
        shape,
        groups: k as u32,
    });
    Planned {
        k,
        share,
        shape,
        least,
        grouped,
        delta,
        plan,
    }
}

/// A table by name, as the analyst's own query would find it (42P01 if none).
fn relation(name: &str) -> pg_sys::Oid {
    let name = std::ffi::CString::new(name).unwrap_or_else(|_| null_parameter("tables"));
    // SAFETY: regclassin takes a cstring Datum and returns an Oid or raises (42P01).
    unsafe {
        pgrx::direct_function_call::<pg_sys::Oid>(
            pg_sys::regclassin,
            &[name.as_c_str().into_datum()],
        )
    }
    .unwrap_or(pg_sys::InvalidOid)
}
