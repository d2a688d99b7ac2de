//! Per-person contribution bounding: how the gate admits an aggregate over
//! a table with several rows per person, or over a join (of protected
//! tables on their privacy unit, and of public tables).
//!
//! Such a level is rewritten in three steps, each a query level:
//! - the rows, as the analyst wrote them (FROM, joins, WHERE), giving for
//!   each row its person (the privacy unit), its group keys and the values
//!   its dpnoise aggregates read;
//! - one pass over them, a window partitioned by person and ordered by a
//!   keyed hash of the person and the group (`per_person`): the first row
//!   of each of the person's first `max_groups_contributed` groups carries
//!   the person's combined values (their count, exact sum or average), the
//!   other rows are dropped;
//! - the analyst's own aggregates, over those rows, grouped by the keys.
//!
//! A person then adds one value to each of at most k groups, whatever the
//! joins copied: their count is at most 1 and their sum one clamped value,
//! as on a table with one row per person. Each group's aggregate spends
//! `dp_share(ε, k)` (and δ likewise), so a person's k groups together
//! spend at most the ε written, which is what the statement is charged
//! (`cost`). Private partition selection is shared the same way. The
//! choice is a function of the person's rows, so the release repeats.
//!
//! The middle step's SQL text is `sql`; the rest (the driver `bound`, the
//! mutator of the analyst's aggregates, the listed keys) shares its types
//! here.

use super::catalog::Protected;
use super::{list_items, refuse, Checked, SHAPE};
use crate::fmgr::{arg_f64, arg_i64, v1_function};
use pgrx::pg_sys;
pub(in crate::gate) use sql::subquery_entry;
use sql::{by_person_sql, pass_through_sql, per_person_sql};
pub(super) use sql::{column_types, parse};
use std::collections::HashMap;
use std::ffi::CString;

mod sql;

// dp_share(total float8, parts int4): the largest double whose parts-fold
// multiple is at most total.
// The gate writes it into an aggregate's arguments, evaluated for each
// row: the last answer is kept in the call's fn_extra.
v1_function!(pg_finfo_dp_share, dp_share, |fcinfo| {
    // STRICT: neither argument is NULL. int4 arrives as a Datum like int8's.
    let total = arg_f64(fcinfo, 0).unwrap_or(f64::NAN);
    let parts = arg_i64(fcinfo, 1).unwrap_or(0) as i32;
    let flinfo = (*fcinfo).flinfo;
    let last = (*flinfo).fn_extra as *mut [u64; 3];
    if !last.is_null() && (*last)[0] == total.to_bits() && (*last)[1] == parts as u64 {
        return pg_sys::Datum::from((*last)[2]);
    }
    if parts < 1 {
        crate::errors::raise_sqlstate(
            "22023",
            "dp_share: parts must be at least 1".to_string(),
            None,
        );
    }
    let share = dpnoise_core::rational::share(total, parts as u32).to_bits();
    let last = if last.is_null() {
        pg_sys::MemoryContextAlloc((*flinfo).fn_mcxt, std::mem::size_of::<[u64; 3]>())
            as *mut [u64; 3]
    } else {
        last
    };
    *last = [total.to_bits(), parts as u64, share];
    (*flinfo).fn_extra = last.cast();
    pg_sys::Datum::from(share)
});

// dp_uniform(): a uniform double in [0, 1), 53 random bits (kept for the
// SQL function of earlier versions; the gate no longer writes it).
v1_function!(pg_finfo_dp_uniform, dp_uniform, |_fcinfo| {
    use dpnoise_core::Entropy;
    let bits = crate::rng::with_rng(|rng| rng.next_u64()) >> 11;
    pg_sys::Datum::from((bits as f64 * (-53f64).exp2()).to_bits())
});

/// Which bounding plan the gate wrote into the statement being planned
/// (`take_bounding`): the planner hook plans it with settings of its own.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Bounding {
    /// No bounded level.
    None,
    /// A level bounded by the window (`per_person_sql`).
    Window,
    /// A level bounded by person (`by_person_sql`), and no windowed one.
    ByPerson,
}

thread_local! {
    /// The bounding plans the gate wrote into the statement being planned.
    static BOUNDING: std::cell::Cell<Bounding> = const { std::cell::Cell::new(Bounding::None) };
}

/// Which bounding plan the statement the gate just checked has; clears it.
/// The planner hook then plans a by-person statement sorting, not
/// hashing, by person: a hash table of a state per person spills at any
/// work_mem for millions of persons (measured 1.9 times plain
/// `count(DISTINCT)`, sorted 1.4). Either plan sorts every row by person,
/// which workers can share (`hooks`).
pub(crate) fn take_bounding() -> Bounding {
    BOUNDING.with(|b| b.replace(Bounding::None))
}

/// Puts back what a planner call found on entry (`take_bounding`): the
/// gate's own catalog queries are planned while it checks a statement,
/// between its note of a bounded level and the outer call's take.
pub(crate) fn restore_bounding(plan: Bounding) {
    BOUNDING.with(|b| b.set(plan));
}

/// Notes a bounded level of the statement being checked: a window wins.
fn note_bounding(plan: Bounding) {
    BOUNDING.with(|b| {
        if b.get() != Bounding::Window {
            b.set(plan);
        }
    });
}

/// How a person's values of one aggregate argument are combined in a group.
#[derive(Clone, Copy, PartialEq)]
enum Combine {
    /// dp_count(value, ε): 1 if the person has a non-NULL value.
    Present,
    /// dp_sum of float8: the person's sum.
    SumFloat,
    /// dp_sum of bigint: the person's sum, saturated to bigint.
    SumInteger,
    /// dp_avg: the person's average.
    Average,
    /// The numerator of a plain average over several rows per person
    /// (`mark_row_scaled`): the person's average times the number of their
    /// non-NULL values, at most R, so that it sums the same rows the
    /// denominator counts (R of them at most, at the person's mean).
    RowScaled(i32),
    /// dp_quantile, dp_median, dp_min, dp_max: the person's own quantile
    /// at the aggregate's p (nearest rank).
    Quantile(f64),
    /// dp_var, dp_stddev: one of the person's rows, drawn by the choice key.
    Row,
}

/// One dpnoise aggregate of the level: where its rewritten arguments come from.
struct Call {
    /// Arguments before this index are the values it reads.
    first: usize,
    /// The arguments that are ε or δ: each group spends `dp_share` of them.
    shared: Vec<usize>,
    /// The column of the combined value (0-based among the values), if any.
    value: Option<(usize, Combine)>,
}

/// The arguments of a dpnoise aggregate that are ε or δ.
fn budget_arguments(name: &str, nargs: usize, first: usize) -> Vec<usize> {
    match name {
        "dp_count" if first == 1 => vec![1],
        "dp_count" if nargs == 3 => vec![0, 1],
        "dp_count" => vec![0],
        "dp_partition_selected" => vec![0, 1],
        "dp_count_selected" => vec![0, 2],
        "dp_sum_selected" => vec![0, 5],
        "dp_sum" if nargs >= 5 => vec![1, 4],
        _ => vec![1],
    }
}

/// What the rewrite needs to know about the level.
pub(super) struct Bounds {
    /// The range table index and column of the privacy unit (of one of the
    /// protected tables, all joined on it).
    pub(super) unit: (i32, i16),
    /// How many groups one person may contribute to.
    pub(super) max_groups: i32,
    /// Where the level's keys are listed, if they are.
    pub(super) listed: Option<Listing>,
    /// A level of one row per person, bounded only to show listed keys:
    /// its rows pass as they are (`pass_through_sql`).
    pub(super) pass: bool,
}

/// Where a level's group keys come from when they are public, not read
/// from the rows (then shown all, without partition selection).
pub(super) enum Listing {
    /// The outer join whose public side lists them (`public_keys`).
    Join(*mut pg_sys::JoinExpr),
    /// The policy's lists of the key columns: the SQL of their
    /// combinations (`policy::listed_keys`).
    Values(String),
}

/// Rewrites an admitted level (already checked, with partition selection
/// added when grouped) into bounded per-person contributions.
///
/// # Safety
/// `query` is a live Query of an analyst's statement, before planning; the
/// gate has checked it (no sublinks, window functions, correlation, FILTER
/// is checked here).
pub(super) unsafe fn bound(
    query: *mut pg_sys::Query,
    protected: &Protected,
    bounds: &Bounds,
) -> Checked {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context, and
    // each node is cast only to the struct its tag names.
    unsafe {
        let keys: Vec<*mut pg_sys::Node> = {
            let refs: Vec<u32> = list_items::<pg_sys::SortGroupClause>((*query).groupClause)
                .iter()
                .map(|c| (**c).tleSortGroupRef)
                .collect();
            list_items::<pg_sys::TargetEntry>((*query).targetList)
                .into_iter()
                .filter(|e| refs.contains(&(**e).ressortgroupref))
                .map(|e| (*e).expr.cast())
                .collect()
        };
        let grouped = !keys.is_empty();
        let k = if grouped { bounds.max_groups } else { 1 };

        // The level's aggregates, and the values they read.
        let mut aggregates: Vec<*mut pg_sys::Aggref> = Vec::new();
        collect_aggregates((*query).targetList.cast(), &mut aggregates);
        collect_aggregates((*query).havingQual, &mut aggregates);
        let mut calls: HashMap<usize, Call> = HashMap::new();
        let mut values: Vec<(*mut pg_sys::Node, Combine)> = Vec::new();
        for &aggref in &aggregates {
            if !(*aggref).aggfilter.is_null() {
                return Err(refuse(
                    "FILTER is not admitted when a person may have several rows (or a join can copy them)",
                    "Put the condition in WHERE, or in a CASE inside the aggregate's argument.",
                ));
            }
            let types = super::partitions::aggregate_types(aggref);
            let Some((name, first)) = crate::parameters::releasing((*aggref).aggfnoid, &types)
            else {
                return Err(refuse(
                    "only dpnoise aggregates may summarise protected rows",
                    SHAPE,
                ));
            };
            // A privacy argument that reads a column of the level is not
            // fixed, which the plan check refuses on any other level. Here
            // the level's FROM moves into the per-person rows below, where
            // that column would be a stranger's: the planner then failed
            // ("could not find attribute 3 in subquery targetlist").
            let arguments = list_items::<pg_sys::TargetEntry>((*aggref).args);
            if arguments
                .iter()
                .skip(first)
                .any(|e| pg_sys::contain_var_clause((**e).expr.cast()))
            {
                return Err(super::varying_parameter(&name));
            }
            let value = if first == 0 {
                None
            } else {
                let combine = match name.as_str() {
                    "dp_count" => Combine::Present,
                    "dp_avg" => Combine::Average,
                    "dp_var" | "dp_stddev" => Combine::Row,
                    "dp_quantile" | "dp_median" | "dp_min" | "dp_max" => {
                        let p = crate::functions::fixed_p(&name).or_else(|| {
                            arguments
                                .get(4)
                                .and_then(|e| super::partitions::folded((**e).expr.cast()))
                                .map(|d| f64::from_bits(d.value() as u64))
                        });
                        match p {
                            Some(p) if (0.0..=1.0).contains(&p) => Combine::Quantile(p),
                            _ => {
                                return Err(refuse(
                                    "dp_quantile's p is not a constant between 0 and 1",
                                    "Write p as a number, for example dp_quantile(x, 1.0, 0, 100, 0.9): each person's rows are summarised by their own quantile at that p.",
                                ))
                            }
                        }
                    }
                    _ if types[0] == pg_sys::INT8OID => Combine::SumInteger,
                    _ if (*aggref).location == ROW_PICKED => Combine::Row,
                    _ => match row_scaled(aggref) {
                        Some(rows) => Combine::RowScaled(rows),
                        None => Combine::SumFloat,
                    },
                };
                let entry = list_items::<pg_sys::TargetEntry>((*aggref).args)[0];
                values.push(((*entry).expr.cast(), combine));
                Some((values.len() - 1, combine))
            };
            let shared = if k > 1 {
                budget_arguments(&name, types.len(), first)
            } else {
                Vec::new()
            };
            calls.insert(
                aggref as usize,
                Call {
                    first,
                    shared,
                    value,
                },
            );
        }

        // The rows: the analyst's FROM and WHERE, with the person, keys and values.
        let rows = pg_sys::copyObjectImpl(query.cast()) as *mut pg_sys::Query;
        let unit = {
            let rte =
                list_items::<pg_sys::RangeTblEntry>((*rows).rtable)[bounds.unit.0 as usize - 1];
            let (mut typid, mut typmod, mut collid) = (pg_sys::InvalidOid, -1, pg_sys::InvalidOid);
            pg_sys::get_atttypetypmodcoll(
                (*rte).relid,
                bounds.unit.1,
                &mut typid,
                &mut typmod,
                &mut collid,
            );
            pg_sys::makeVar(bounds.unit.0, bounds.unit.1, typid, typmod, collid, 0)
                .cast::<pg_sys::Node>()
        };
        let columns: Vec<*mut pg_sys::Node> = std::iter::once(unit)
            .chain(keys.iter().copied())
            .chain(values.iter().map(|v| v.0))
            .map(|e| pg_sys::copyObjectImpl(e.cast()).cast())
            .collect();
        let mut target = std::ptr::null_mut();
        for (i, column) in columns.iter().enumerate() {
            let name = CString::new(format!("c{}", i + 1)).expect("no NUL");
            let entry = pg_sys::makeTargetEntry(
                (*column).cast(),
                (i + 1) as i16,
                pg_sys::pstrdup(name.as_ptr()),
                false,
            );
            target = pg_sys::lappend(target, entry.cast());
        }
        (*rows).targetList = target;
        (*rows).groupClause = std::ptr::null_mut();
        rows_only(rows);
        // With listed keys: the rows that meet a key (an inner join), and
        // the list's keys apart.
        let listing = match &bounds.listed {
            Some(Listing::Join(join)) => Some(listed_keys(query, rows, *join, &keys)),
            Some(Listing::Values(text)) => Some(parse(text)),
            None => None,
        };

        // One row per person and group, at most k groups per person: parsed
        // from text over a stand-in for the rows, then given the rows.
        // Without keys a person has one group: nothing to choose, only
        // their rows to combine, by the person (`by_person`), where the
        // combine is a plain aggregate and equal units are equal bytes
        // (the repeat identity then holds as for the window). Decided from
        // the statement and the schema, never the data.
        let by_person = !grouped
            && listing.is_none()
            && crate::gucs::bounding_by_person()
            && values.iter().all(|(_, c)| {
                matches!(
                    c,
                    Combine::Present
                        | Combine::SumFloat
                        | Combine::SumInteger
                        | Combine::Average
                        | Combine::RowScaled(_)
                )
            })
            && crate::output::canonical::form(pg_sys::exprType(unit), pg_sys::exprCollation(unit))
                == crate::output::canonical::Form::Image;
        let text = if bounds.pass {
            pass_through_sql(&columns, values.len())?
        } else if by_person {
            note_bounding(Bounding::ByPerson);
            by_person_sql(&columns, &values, protected)?
        } else {
            note_bounding(Bounding::Window);
            per_person_sql(&columns, &values, k, protected, listing.is_some())?
        };
        let per_person = parse(&text);
        // The stand-ins: p of the combined persons' level, and with listed
        // keys k of the UNION ALL's second branch.
        let first =
            |q: *mut pg_sys::Query| (*list_items::<pg_sys::RangeTblEntry>((*q).rtable)[0]).subquery;
        let persons = match listing {
            Some(list) => {
                let branches = list_items::<pg_sys::RangeTblEntry>((*per_person).rtable);
                (*list_items::<pg_sys::RangeTblEntry>((*(*branches[1]).subquery).rtable)[0])
                    .subquery = list;
                (*branches[0]).subquery
            }
            None => per_person,
        };
        (*list_items::<pg_sys::RangeTblEntry>((*first(persons)).rtable)[0]).subquery = rows;

        // The analyst's level, now over the per-person rows.
        let outputs = list_items::<pg_sys::TargetEntry>((*per_person).targetList);
        let width = outputs.len();
        let mut names = std::ptr::null_mut();
        for i in 0..width {
            let name = CString::new(format!("c{}", i + 1)).expect("no NUL");
            names = pg_sys::lappend(
                names,
                pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())).cast(),
            );
        }
        let rte = sql::subquery_entry(per_person, c"dp_per_person", names);
        let column_var = |i: usize| -> *mut pg_sys::Node {
            let expr = (*outputs[i]).expr.cast::<pg_sys::Node>();
            pg_sys::makeVar(
                1,
                (i + 1) as i16,
                pg_sys::exprType(expr),
                pg_sys::exprTypmod(expr),
                pg_sys::exprCollation(expr),
                0,
            )
            .cast()
        };
        let mut rewrite = Rewrite {
            keys: keys
                .iter()
                .enumerate()
                .map(|(i, key)| (*key, column_var(1 + i)))
                .collect(),
            values: (0..values.len())
                .map(|j| column_var(1 + keys.len() + j))
                .collect(),
            calls,
            share: protected.share,
            k,
            pass: bounds.pass,
            leftover: false,
            real: listing.map(|_| column_var(width - 1)),
        };
        (*query).targetList = rewrite.apply((*query).targetList.cast()).cast();
        (*query).havingQual = rewrite.apply((*query).havingQual);
        // With listed keys, a group is shown only if the list holds its key.
        // The list and the rows come from two evaluations of the public
        // side; were they to differ (a public side read twice need not give
        // the same rows), a key met only by persons would be shown without
        // partition selection.
        if let Some(real) = rewrite.real {
            let test =
                pg_sys::palloc0(std::mem::size_of::<pg_sys::NullTest>()) as *mut pg_sys::NullTest;
            (*test).xpr.type_ = pg_sys::NodeTag::T_NullTest;
            (*test).arg = pg_sys::copyObjectImpl(real.cast()).cast();
            (*test).nulltesttype = pg_sys::NullTestType::IS_NULL;
            (*test).location = -1;
            let listed = super::partitions::aggregate(
                pg_sys::Oid::from(pg_sys::F_BOOL_OR),
                pg_sys::BOOLOID,
                &[(test.cast(), pg_sys::BOOLOID)],
            );
            super::partitions::and_having(query, listed.cast());
        }
        if rewrite.leftover {
            return Err(refuse(
                "an output uses a column that is not a GROUP BY key outside the dpnoise aggregates",
                "List every column you show in GROUP BY.",
            ));
        }
        (*query).rtable = pg_sys::lappend(std::ptr::null_mut(), rte.cast());
        let from =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblRef>()) as *mut pg_sys::RangeTblRef;
        (*from).type_ = pg_sys::NodeTag::T_RangeTblRef;
        (*from).rtindex = 1;
        (*query).jointree = pg_sys::makeFromExpr(
            pg_sys::lappend(std::ptr::null_mut(), from.cast()),
            std::ptr::null_mut(),
        );
        (*query).constraintDeps = std::ptr::null_mut();
        Ok(())
    }
}

/// With keys listed by the public side of an outer join (`public_keys`):
/// turns the rows' copy of that join into an inner join (a key without
/// rows has no person to add), and returns the list's keys alone: `SELECT
/// <keys> FROM <public side> WHERE <conditions> GROUP BY <keys>`.
///
/// # Safety
/// `query` is the analyst's level, `rows` its copy, `join` the outer join
/// of `query` that `public_keys` found, `keys` the level's key expressions.
unsafe fn listed_keys(
    query: *mut pg_sys::Query,
    rows: *mut pg_sys::Query,
    join: *mut pg_sys::JoinExpr,
    keys: &[*mut pg_sys::Node],
) -> *mut pg_sys::Query {
    // SAFETY: the caller's contract; the join is the only FROM item of both levels.
    unsafe {
        let inner = list_items::<pg_sys::JoinExpr>((*(*rows).jointree).fromlist)[0];
        (*inner).jointype = pg_sys::JoinType::JOIN_INNER;
        let rtable = list_items::<pg_sys::RangeTblEntry>((*rows).rtable);
        let rte = rtable[(*inner).rtindex as usize - 1];
        (*rte).jointype = pg_sys::JoinType::JOIN_INNER;
        crate::versions::forget_outer_join(rows, (*inner).rtindex as u32);

        let list = pg_sys::copyObjectImpl(query.cast()) as *mut pg_sys::Query;
        // The join is left out of the list's level: no outer join remains.
        let rte = list_items::<pg_sys::RangeTblEntry>((*list).rtable)[(*join).rtindex as usize - 1];
        (*rte).jointype = pg_sys::JoinType::JOIN_INNER;
        let kept = if (*join).jointype == pg_sys::JoinType::JOIN_LEFT {
            (*join).larg
        } else {
            (*join).rarg
        };
        let flat = move |node: *mut pg_sys::Node| {
            crate::versions::flatten_join_alias_vars(
                list,
                pg_sys::copyObjectImpl(node.cast()).cast(),
            )
        };
        let quals = flat((*(*query).jointree).quals);
        (*list).jointree = pg_sys::makeFromExpr(
            pg_sys::lappend(std::ptr::null_mut(), pg_sys::copyObjectImpl(kept.cast())),
            quals,
        );
        let refs: Vec<u32> = list_items::<pg_sys::TargetEntry>((*query).targetList)
            .iter()
            .filter(|e| keys.iter().any(|k| std::ptr::eq(*k, (***e).expr.cast())))
            .map(|e| (**e).ressortgroupref)
            .collect();
        let mut target = std::ptr::null_mut();
        for (i, (key, sortgroupref)) in keys.iter().zip(refs).enumerate() {
            let name = CString::new(format!("c{}", i + 1)).expect("no NUL");
            let entry = pg_sys::makeTargetEntry(
                flat(*key).cast(),
                (i + 1) as i16,
                pg_sys::pstrdup(name.as_ptr()),
                false,
            );
            (*entry).ressortgroupref = sortgroupref;
            target = pg_sys::lappend(target, entry.cast());
        }
        (*list).targetList = target;
        rows_only(list);
        crate::versions::forget_outer_join(list, (*join).rtindex as u32);
        list
    }
}

/// Leaves a copy of the analyst's level its FROM, WHERE (and GROUP BY):
/// no aggregates, HAVING, ORDER BY, LIMIT or DISTINCT.
///
/// # Safety
/// `level` is a live Query the gate copied.
unsafe fn rows_only(level: *mut pg_sys::Query) {
    // SAFETY: the caller's contract.
    unsafe {
        (*level).hasAggs = false;
        (*level).havingQual = std::ptr::null_mut();
        (*level).sortClause = std::ptr::null_mut();
        (*level).limitOffset = std::ptr::null_mut();
        (*level).limitCount = std::ptr::null_mut();
        (*level).distinctClause = std::ptr::null_mut();
        (*level).constraintDeps = std::ptr::null_mut();
    }
}

/// Aggref locations at and below this, down to `ROW_SCALED - MAX_SCALED_ROWS`,
/// mark a plain average's numerator and its R (`mark_row_scaled`). A
/// location is only read for parse errors, which are over; the repeat
/// identity leaves locations out, and its own marks (`repeat::MARK`, from
/// -1 000 000 down) are written after the gate.
const ROW_SCALED: i32 = -2;
/// The largest R a mark holds: above, a person's rows are summed as they
/// are (R that large bounds nothing a person has).
const MAX_SCALED_ROWS: i32 = 100_000;

/// Marks `aggref`, a dp_sum of float8 that the policy wrote as the
/// numerator of a plain average over several rows per person (R =
/// `rows`), to sum each person's rows scaled to the R the denominator
/// counts (`Combine::RowScaled`).
///
/// # Safety
/// `aggref` is a live Aggref the policy rewrite made.
pub(crate) unsafe fn mark_row_scaled(aggref: *mut pg_sys::Aggref, rows: i32) {
    if (1..=MAX_SCALED_ROWS).contains(&rows) {
        // SAFETY: the caller's contract.
        unsafe { (*aggref).location = ROW_SCALED - rows };
    }
}

/// The Aggref location marking a dp_sum of float8 the policy wrote over
/// one of each person's values in a group (`mark_row_picked`).
const ROW_PICKED: i32 = ROW_SCALED - MAX_SCALED_ROWS - 1;

/// Marks `aggref`, a dp_sum of float8 that the policy wrote for the
/// interval of a spread over several rows per person, to sum one of each
/// person's values in a group, as dp_var reads it (`Combine::Row`): at the
/// rank the group's choice key draws among the values in order, so that
/// sums of non-decreasing functions of one value pick the same row.
///
/// # Safety
/// `aggref` is a live Aggref.
pub(crate) unsafe fn mark_row_picked(aggref: *mut pg_sys::Aggref) {
    // SAFETY: the caller's contract.
    unsafe { (*aggref).location = ROW_PICKED };
}

/// The R of a marked numerator (`mark_row_scaled`).
///
/// # Safety
/// `aggref` is a live Aggref.
unsafe fn row_scaled(aggref: *mut pg_sys::Aggref) -> Option<i32> {
    // SAFETY: the caller's contract.
    let location = unsafe { (*aggref).location };
    let rows = ROW_SCALED - location;
    (1..=MAX_SCALED_ROWS).contains(&rows).then_some(rows)
}

/// Collects the Aggrefs below `node` (not those inside their arguments).
///
/// # Safety
/// `node` is null or a live expression tree (or List of them).
pub(crate) unsafe fn collect_aggregates(
    node: *mut pg_sys::Node,
    into: &mut Vec<*mut pg_sys::Aggref>,
) {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Vec.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Aggref {
                (*(context as *mut Vec<*mut pg_sys::Aggref>)).push(node.cast());
                return false;
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, (into as *mut Vec<_>).cast()) };
}

/// The analyst's outputs and HAVING over the per-person rows: keys become
/// their columns, each aggregate reads its combined value and spends its
/// share of ε and δ.
struct Rewrite {
    keys: Vec<(*mut pg_sys::Node, *mut pg_sys::Node)>,
    values: Vec<*mut pg_sys::Node>,
    calls: HashMap<usize, Call>,
    share: pg_sys::Oid,
    k: i32,
    /// The values are the rows' own (`Bounds::pass`), of their own types.
    pass: bool,
    /// A column of the old FROM is left (not a key, not in an aggregate).
    leftover: bool,
    /// With listed keys: true for a person's row, NULL for a key's own row
    /// (which makes the key's group, and which no aggregate reads).
    real: Option<*mut pg_sys::Node>,
}

impl Rewrite {
    /// # Safety
    /// `node` is null or a live expression tree of the level being rewritten.
    unsafe fn apply(&mut self, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract.
        unsafe { self.node(node) }
    }

    /// # Safety
    /// As `apply`.
    unsafe fn node(&mut self, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
        /// # Safety
        /// Called by `expression_tree_mutator` with live nodes and the Rewrite.
        #[pgrx::pg_guard]
        unsafe extern "C-unwind" fn mutate(
            node: *mut pg_sys::Node,
            context: *mut std::ffi::c_void,
        ) -> *mut pg_sys::Node {
            // SAFETY: the caller's contract.
            unsafe { (*(context as *mut Rewrite)).node(node) }
        }
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return node;
            }
            for (key, column) in &self.keys {
                if pg_sys::equal(node.cast(), (*key).cast()) {
                    return pg_sys::copyObjectImpl((*column).cast()).cast();
                }
            }
            match (*node).type_ {
                pg_sys::NodeTag::T_Aggref => return self.aggregate(node.cast()).cast(),
                pg_sys::NodeTag::T_Var if (*(node as *mut pg_sys::Var)).varlevelsup == 0 => {
                    self.leftover = true;
                    return node;
                }
                _ => {}
            }
            crate::versions::expression_tree_mutator(node, mutate, (self as *mut Rewrite).cast())
        }
    }

    /// # Safety
    /// `aggref` is one of the level's live Aggrefs.
    unsafe fn aggregate(&mut self, aggref: *mut pg_sys::Aggref) -> *mut pg_sys::Aggref {
        // SAFETY: the caller's contract; the copy's lists are its own.
        unsafe {
            let copy = pg_sys::copyObjectImpl(aggref.cast()) as *mut pg_sys::Aggref;
            if let Some(real) = self.real {
                (*copy).aggfilter = pg_sys::copyObjectImpl(real.cast()).cast();
            }
            let Some(call) = self.calls.get(&(aggref as usize)) else {
                return copy;
            };
            for (i, entry) in list_items::<pg_sys::TargetEntry>((*copy).args)
                .into_iter()
                .enumerate()
            {
                if i < call.first {
                    if let Some((j, combine)) = call.value {
                        (*entry).expr = pg_sys::copyObjectImpl(self.values[j].cast()).cast();
                        if combine == Combine::Present && !self.pass {
                            (*(*(*copy).aggargtypes).elements).oid_value = pg_sys::INT8OID;
                        }
                    }
                } else if call.shared.contains(&i) {
                    let parts = pg_sys::makeConst(
                        pg_sys::INT4OID,
                        -1,
                        pg_sys::InvalidOid,
                        4,
                        pg_sys::Datum::from(self.k),
                        false,
                        true,
                    );
                    let args = pg_sys::lappend(
                        pg_sys::lappend(std::ptr::null_mut(), (*entry).expr.cast()),
                        parts.cast(),
                    );
                    (*entry).expr = pg_sys::makeFuncExpr(
                        self.share,
                        pg_sys::FLOAT8OID,
                        args,
                        pg_sys::InvalidOid,
                        pg_sys::InvalidOid,
                        pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                    )
                    .cast();
                }
            }
            copy
        }
    }
}
