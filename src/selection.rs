//! `dp_partition_selected(epsilon, delta)`: whether a group whose key comes
//! from the data may be shown (`dpnoise_core::selection`). The gate adds it
//! to every analyst's GROUP BY over protected rows; a curator can write it
//! in HAVING. Its state is the row count, like dp_count's.

use crate::aggref::{aggregate_arguments, f64_parameter};
use crate::errors::OrRaise;
use crate::fmgr::{arg_datum, refuse_window, v1_function};
use dpnoise_core::selection::PartitionSelection;
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
