//! The one table of dpnoise's releasing functions: what each is, which of
//! its arguments are privacy parameters, how its cost is read from a plan,
//! and whether the Citus split can divide it. Every stage that must know
//! "is this call a release, and what are its parameters" (parameters,
//! gate, charge, Citus, repeat) reads it here, by function OID.

use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;

/// What kind of call a releasing function is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// An aggregate whose final function releases once per group.
    Aggregate,
    /// A function that releases one value per row.
    PerRow,
    /// The merge of a Citus split (`citus`): an aggregate over partials.
    Merge,
}

/// How the charge stage reads a call's cost from its evaluated parameters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cost {
    Count,
    Sum,
    Selection,
    /// dp_count_selected: δ only, its ε is its count's.
    CountSelection,
    /// dp_sum_selected: δ only, its ε is its sum's.
    SumSelection,
    /// dp_laplace, dp_staircase, dp_noise.
    Value,
    /// dp_noise_box, dp_noise_l1_staircase, dp_sum_multi.
    Multi,
    Refine,
    MergeCount,
    MergeSelected,
    MergeSum,
    /// dp_var, dp_stddev.
    Moments,
    /// dp_quantile, dp_median, dp_min, dp_max.
    Quantile,
}

/// One releasing function.
pub struct Function {
    pub name: &'static str,
    pub kind: Kind,
    /// The index of its first privacy argument (the ones before are the
    /// data); dp_count's value form shifts it by one (`first_parameter`).
    first: usize,
    pub cost: Cost,
    /// Whether the Citus split divides it into sealed partials and a merge.
    pub splits: bool,
    /// Whether the analyst gate admits it over protected rows.
    pub analysts: bool,
    /// Whether the gate admits it on a level it bounds (several rows per
    /// person): the bounding rewrite must know how to combine a person's
    /// rows into the one value it reads.
    pub bounded: bool,
}

impl Function {
    /// The index of the first privacy argument of a call with argument
    /// types `types` (empty: not known, the table's own index).
    pub fn first_parameter(&self, types: &[pg_sys::Oid]) -> usize {
        // dp_count(value, epsilon): the value comes first.
        if self.name == "dp_count" && types.len() == 2 && types[1] == pg_sys::FLOAT8OID {
            return 1;
        }
        self.first
    }
}

const fn function(
    name: &'static str,
    kind: Kind,
    first: usize,
    cost: Cost,
    splits: bool,
) -> Function {
    // What Citus splits, the gate admits: the aggregates of the bounding rewrite.
    Function {
        name,
        kind,
        first,
        cost,
        splits,
        analysts: splits,
        bounded: splits,
    }
}

/// An aggregate the gate admits, over several rows per person too (the
/// bounding rewrite reads one value of each person: their own quantile,
/// or one of their rows), that the Citus split does not divide.
const fn unsplit(name: &'static str, cost: Cost) -> Function {
    Function {
        name,
        kind: Kind::Aggregate,
        first: 1,
        cost,
        splits: false,
        analysts: true,
        bounded: true,
    }
}

/// The p that dp_median, dp_min and dp_max fix (None: dp_quantile, which
/// reads it, or not a quantile). dp_min and dp_max are the quantiles at
/// 0.01 and 0.99 (docs: the exact extremes have no useful ε-DP release:
/// the exponential mechanism at p = 0 or 1 spreads over the whole gap to
/// the bound). Read by the aggregates and by the gate's bounding rewrite.
pub fn fixed_p(name: &str) -> Option<f64> {
    match name {
        "dp_median" => Some(0.5),
        "dp_min" => Some(0.01),
        "dp_max" => Some(0.99),
        _ => None,
    }
}

/// The names of the aggregates the analyst gate admits, for its messages.
pub fn for_analysts() -> Vec<&'static str> {
    FUNCTIONS
        .iter()
        .filter(|f| f.analysts)
        .map(|f| f.name)
        .collect()
}

/// Every releasing function of the extension.
pub static FUNCTIONS: [Function; 24] = [
    function("dp_count", Kind::Aggregate, 0, Cost::Count, true),
    function("dp_sum", Kind::Aggregate, 1, Cost::Sum, true),
    function("dp_avg", Kind::Aggregate, 1, Cost::Sum, true),
    function("dp_sum_laplace", Kind::Aggregate, 1, Cost::Sum, true),
    function("dp_sum_staircase", Kind::Aggregate, 1, Cost::Sum, true),
    function(
        "dp_partition_selected",
        Kind::Aggregate,
        0,
        Cost::Selection,
        true,
    ),
    // Written by the gate, never by an analyst (it reads its count's release).
    Function {
        name: "dp_count_selected",
        kind: Kind::Aggregate,
        first: 0,
        cost: Cost::CountSelection,
        splits: true,
        analysts: false,
        bounded: true,
    },
    // The same, beside a float8 dp_sum (a row count written dp_sum(1.0, …)).
    Function {
        name: "dp_sum_selected",
        kind: Kind::Aggregate,
        first: 0,
        cost: Cost::SumSelection,
        splits: true,
        analysts: false,
        bounded: true,
    },
    function("dp_sum_multi", Kind::Aggregate, 1, Cost::Multi, false),
    function("dp_laplace", Kind::PerRow, 1, Cost::Value, false),
    function("dp_staircase", Kind::PerRow, 1, Cost::Value, false),
    function("dp_noise", Kind::PerRow, 1, Cost::Value, false),
    function("dp_noise_box", Kind::PerRow, 1, Cost::Multi, false),
    function("dp_noise_l1_staircase", Kind::PerRow, 1, Cost::Multi, false),
    function("dp_refine", Kind::PerRow, 1, Cost::Refine, false),
    function("dp_merge_count", Kind::Merge, 1, Cost::MergeCount, false),
    function(
        "dp_merge_selected",
        Kind::Merge,
        1,
        Cost::MergeSelected,
        false,
    ),
    function("dp_merge_sum", Kind::Merge, 2, Cost::MergeSum, false),
    unsplit("dp_var", Cost::Moments),
    unsplit("dp_stddev", Cost::Moments),
    unsplit("dp_quantile", Cost::Quantile),
    unsplit("dp_median", Cost::Quantile),
    unsplit("dp_min", Cost::Quantile),
    unsplit("dp_max", Cost::Quantile),
];

/// The releasing function named `name`.
pub fn named(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

thread_local! {
    /// Function OID → its entry, for dpnoise's releasing functions (None
    /// for every other function), looked up once each.
    static BY_OID: RefCell<HashMap<pg_sys::Oid, Option<&'static Function>>> = RefCell::new(HashMap::new());
}

/// The releasing function `funcid` is, if it is one of dpnoise's own.
///
/// # Safety
/// Inside a transaction (catalog lookups).
pub unsafe fn releasing(funcid: pg_sys::Oid) -> Option<&'static Function> {
    if let Some(known) = BY_OID.with(|r| r.borrow().get(&funcid).copied()) {
        return known;
    }
    // SAFETY: inside a transaction (the caller's contract), so the catalog scans of extensions::oid
    // and getExtensionOfObject and get_func_name's syscache lookup may run; get_func_name returns
    // null (tested) or a NUL-terminated copy palloc'd in the current memory context.
    let found = unsafe {
        let extension = crate::extensions::oid(crate::extensions::Extension::Dpnoise);
        if extension == pg_sys::InvalidOid
            || pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, funcid) != extension
        {
            None
        } else {
            let name = pg_sys::get_func_name(funcid);
            if name.is_null() {
                None
            } else {
                named(&std::ffi::CStr::from_ptr(name).to_string_lossy())
            }
        }
    };
    BY_OID.with(|r| r.borrow_mut().insert(funcid, found));
    found
}

/// Whether `funcid` is one of dpnoise's per-row releasing functions.
///
/// # Safety
/// Inside a transaction.
pub unsafe fn is_per_row(funcid: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract.
    unsafe { releasing(funcid) }.is_some_and(|f| f.kind == Kind::PerRow)
}
