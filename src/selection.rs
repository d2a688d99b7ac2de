//! `dp_partition_selected(epsilon, delta)`: whether a group whose key comes
//! from the data may be shown (`dpnoise_core::selection`). The gate adds it
//! to every analyst's GROUP BY over protected rows; a curator can write it
//! in HAVING. Its state is the row count, like dp_count's.
//!
//! `dp_count_selected(epsilon, mechanism, delta)`: the same question
//! answered by the level's own noisy count (`dpnoise_core::threshold`):
//! the group is shown when the count released beside it reaches a
//! threshold, so that the count spends the whole ε and selection only δ.
//! The gate writes it instead of dp_partition_selected where the level
//! shows a pure-ε dp_count. `dp_sum_selected` does the same with a float8
//! dp_sum of a constant value (a row count written `dp_sum(1.0, …)`).

use crate::aggref::{aggregate_arguments, f64_parameter, shared_totals, text_parameter};
use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, refuse_window, v1_function};
use dpnoise_core::plan::Plan;
use dpnoise_core::selection::PartitionSelection;
use dpnoise_core::threshold::CountThreshold;
use dpnoise_core::Choice;
use std::cell::RefCell;
use std::rc::Rc;

pgrx::extension_sql_file!(
    "selection.sql",
    name = "selection_sql",
    requires = ["count_sql"]
);

thread_local! {
    /// The last table of keep probabilities, by (ε, δ) bits: a query keeps
    /// one for all its groups.
    static LAST: RefCell<Option<([u64; 2], Rc<PartitionSelection>)>> = const { RefCell::new(None) };
}

/// The keep probabilities at (ε, δ), built once per parameter set.
pub fn selection(epsilon: f64, delta: f64) -> Rc<PartitionSelection> {
    let key = [epsilon.to_bits(), delta.to_bits()];
    if let Some(found) = LAST.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, s)| s.clone())
    }) {
        return found;
    }
    let built = Rc::new(PartitionSelection::new(epsilon, delta, 1).or_raise());
    LAST.with(|l| *l.borrow_mut() = Some((key, built.clone())));
    built
}

// The state counts rows: on a table with one row per person, the persons
// in the group.
v1_function!(
    pg_finfo_dp_partition_selected_final,
    dp_partition_selected_final,
    |fcinfo| { selected(fcinfo, 0) }
);

// dp_merge_selected(partial, epsilon, delta): dp_partition_selected over
// exact partial counts (a Citus table's shards); see src/citus/merge.rs.
v1_function!(
    pg_finfo_dp_merge_selected_final,
    dp_merge_selected_final,
    |fcinfo| { selected(fcinfo, 1) }
);

/// The release of dp_partition_selected, or of its merge, whose (ε, δ) are
/// the aggregate's arguments `first` and `first + 1`.
///
/// # Safety
/// `fcinfo` is a live final call of either, whose state is the int8 count.
unsafe fn selected(fcinfo: pgrx::pg_sys::FunctionCallInfo, first: usize) -> pgrx::pg_sys::Datum {
    // SAFETY: the caller's contract: a live final call with the int8 state; every parameter is
    // checked before anything is paid.
    unsafe {
        refuse_window(fcinfo, "dp_partition_selected");
        let [epsilon, delta] =
            aggregate_arguments(fcinfo, [first, first + 1], "dp_partition_selected");
        let (epsilon, delta) = (
            f64_parameter(epsilon, "epsilon"),
            f64_parameter(delta, "delta"),
        );
        // Argument 0 of the final function is the int8 state (SQL: STYPE = bigint, INITCOND 0), never NULL.
        let persons = arg_datum(fcinfo, 0).value() as i64;
        let selection = selection(epsilon, delta);
        // The live final call; every parameter is checked above.
        crate::release::pay(
            fcinfo,
            "dp_partition_selected",
            "optimal thresholding",
            (epsilon, delta),
        );
        let kept = crate::repeat::with_release_rng(fcinfo, |rng| {
            selection.keep(rng, persons.max(0) as u64)
        });
        pgrx::pg_sys::Datum::from(kept)
    }
}

thread_local! {
    /// The last threshold, by the count's plan key, k and δ.
    static THRESHOLD: RefCell<Option<([u64; 7], CountThreshold)>> = const { RefCell::new(None) };
}

// dp_count_selected(epsilon, mechanism, delta): whether the group's count,
// released by the dp_count of the same (epsilon, mechanism) in the level's
// output, reached the threshold that (epsilon, delta) and k give
// (dpnoise_core::threshold). The gate writes it in HAVING in place of
// dp_partition_selected when the level shows such a count; it pays delta.
v1_function!(
    pg_finfo_dp_count_selected_final,
    dp_count_selected_final,
    |fcinfo| { count_selected(fcinfo) }
);

/// The release of dp_count_selected.
///
/// # Safety
/// `fcinfo` is a live final call of dp_count_selected.
unsafe fn count_selected(fcinfo: pgrx::pg_sys::FunctionCallInfo) -> pgrx::pg_sys::Datum {
    // SAFETY: the caller's contract; every parameter is checked before anything is paid.
    unsafe {
        refuse_window(fcinfo, "dp_count_selected");
        let [epsilon, mechanism, delta] =
            aggregate_arguments(fcinfo, [0, 1, 2], "dp_count_selected");
        let choice = Choice::parse(&text_parameter(mechanism, "mechanism")).or_raise();
        let written = f64_parameter(delta, "delta");
        let (key, plan, groups, _) = crate::count::count_plan(fcinfo, epsilon, 0.0, choice, &[0]);
        let total = shared_totals(fcinfo, [2], "dp_count_selected")
            .map_or(written, |(_, [d])| f64_parameter(d, "delta"));
        let threshold = count_threshold(key, plan, groups, total);
        let agg = (*fcinfo).context as usize;
        let noisy = crate::release::noted(agg, key)
            .unwrap_or_else(|| {
                crate::errors::raise_sqlstate(
                    "0A000",
                    "dp_count_selected reads the dp_count of the same epsilon and mechanism released beside it in the same query level, and there is none".to_string(),
                    Some("The analyst gate writes it; in your own HAVING use dp_partition_selected(epsilon, delta).".to_string()),
                )
            });
        crate::release::pay(
            fcinfo,
            "dp_count_selected",
            "thresholded count",
            (0.0, written),
        );
        let shown =
            crate::repeat::with_release_rng(fcinfo, |rng| threshold.shown_steps(rng, noisy));
        pgrx::pg_sys::Datum::from(shown)
    }
}

// dp_sum_selected(epsilon, lower, upper, mechanism, loss, delta): the same
// for the float8 dp_sum(value, epsilon, lower, upper) of those parameters
// released beside it (a row count written dp_sum(1.0, ...)): the group is
// shown when that sum's noisy lattice steps reach the threshold, one
// person's largest value above the count's (dpnoise_core::threshold).
v1_function!(
    pg_finfo_dp_sum_selected_final,
    dp_sum_selected_final,
    |fcinfo| { sum_selected(fcinfo) }
);

/// The release of dp_sum_selected.
///
/// # Safety
/// `fcinfo` is a live final call of dp_sum_selected.
unsafe fn sum_selected(fcinfo: pgrx::pg_sys::FunctionCallInfo) -> pgrx::pg_sys::Datum {
    const NAME: &str = "dp_sum_selected";
    // SAFETY: the caller's contract; every parameter is checked before anything is paid.
    unsafe {
        refuse_window(fcinfo, NAME);
        let args = aggregate_arguments(fcinfo, [0, 1, 2, 3, 4, 5], NAME);
        let shared =
            shared_totals(fcinfo, [0], NAME).map(|(k, [e])| (k, f64_parameter(e, "epsilon")));
        let (key, plan, groups) = crate::sum::thresholded(|i| args[i], shared);
        let written = f64_parameter(args[5], "delta");
        let total =
            shared_totals(fcinfo, [5], NAME).map_or(written, |(_, [d])| f64_parameter(d, "delta"));
        let threshold = count_threshold(key, &plan, groups, total);
        let agg = (*fcinfo).context as usize;
        let noisy = crate::release::noted(agg, key).unwrap_or_else(|| {
            crate::errors::raise_sqlstate(
                "0A000",
                "dp_sum_selected reads the dp_sum of the same epsilon, bounds, mechanism and loss released beside it in the same query level, and there is none".to_string(),
                Some("The analyst gate writes it; in your own HAVING use dp_partition_selected(epsilon, delta).".to_string()),
            )
        });
        crate::release::pay(fcinfo, NAME, "thresholded sum", (0.0, written));
        let shown =
            crate::repeat::with_release_rng(fcinfo, |rng| threshold.shown_steps(rng, noisy));
        pgrx::pg_sys::Datum::from(shown)
    }
}

/// The threshold of a count planned with `plan` (its cache `key`) over
/// `groups` groups at `delta` in all, built once per parameter set.
pub fn count_threshold(key: [u64; 5], plan: &Plan, groups: u32, delta: f64) -> CountThreshold {
    let full = [
        key[0],
        key[1],
        key[2],
        key[3],
        key[4],
        u64::from(groups),
        delta.to_bits(),
    ];
    if let Some(found) = THRESHOLD.with(|t| {
        t.borrow()
            .as_ref()
            .filter(|(k, _)| *k == full)
            .map(|(_, t)| *t)
    }) {
        return found;
    }
    let built = CountThreshold::new(plan, groups, delta).or_raise();
    THRESHOLD.with(|t| *t.borrow_mut() = Some((full, built)));
    built
}
