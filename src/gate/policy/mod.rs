//! Plain aggregates under the tables' privacy policies: what a BI tool
//! sends (`COUNT(*)`, `SUM(amount)`, `AVG(amount)`) over a protected table
//! becomes, before anything is checked, the dpnoise aggregates of the same
//! question, and the answer is cast back to the type PostgreSQL's
//! aggregate returns (a count is a bigint), so that the tool formats it as
//! it would. On a table of one row per person:
//!
//! | written    | becomes                                           |
//! |------------|---------------------------------------------------|
//! | `count(*)` | `dp_count(ε)`                                     |
//! | `count(x)` | `dp_count(x, ε)`                                  |
//! | `count(DISTINCT <privacy unit>)` | `dp_count(ε)` (also over several rows) |
//! | `sum(x)`   | `dp_sum(x::float8, ε, lower, upper)::<sum type>`  |
//! | `avg(x)`   | `dp_avg(x::float8, ε, lower, upper)::<avg type>`  |
//!
//! With `FILTER (WHERE f)`, any of them (but a count of DISTINCT persons)
//! reads its argument only where f holds (`CASE WHEN f THEN x END`, `forms::filtered`); a
//! sum's or average's argument may also be a CASE whose results are
//! columns with a domain and numbers (Metabase's "sum where"
//! `SUM(CASE WHEN f THEN amount ELSE 0.0 END)`), bounded by them all
//! (`bounded`).
//!
//! `variance`, `stddev`, `min`, `max`, `percentile_cont` and
//! `percentile_disc` of a column with a domain become `dp_var`,
//! `dp_stddev`, `dp_min`, `dp_max` and `dp_quantile` (a private estimate:
//! `min` and `max` are low and high percentiles, not the extreme values),
//! over one row per person or several (the gate's bounding reads a
//! person's own value).
//!
//! Over several rows per person (or a join), where the gate bounds each
//! person's contribution to a group to their combined value, a count
//! counts rows, R at most of a person's (`rows_per_person`):
//!
//! | written    | becomes                                                     |
//! |------------|-------------------------------------------------------------|
//! | `count(*)` | `dp_sum(1.0, ε, 0, R)::bigint`                              |
//! | `count(x)` | `dp_sum(CASE WHEN x IS NULL THEN 0 ELSE 1 END, ε, 0, R)`    |
//! | `sum(x)`   | `dp_sum(x, ε, R·min(lower, 0), R·max(upper, 0))`            |
//! | `avg(x)`   | a sum over the count of x, each at ε/2 of the share: R of a |
//! |            | person's values at most, at their mean (`RowScaled`)        |
//!
//! ε is the statement's: the smallest `dp_policy` of the protected tables
//! it reads (`dpnoise.policy_epsilon` for a table without one), split
//! evenly among the plain aggregates it has (an average over several rows
//! takes two shares); `lower` and `upper` are the column's `dp_domain`. A
//! sum or average of a column without a domain, or of an expression, is
//! left as written, and the checks refuse it with what to write. Left
//! alone too: a level grouped by the privacy unit (it answers per person,
//! with PostgreSQL's own aggregates; a `count(*)` over such a subquery is
//! the persons, `dp_count(ε)`, and its other aggregates are rewritten
//! where the policy bounds the person's value: a count in [0, R], a sum R
//! times its column's domain, an average, minimum or maximum in it:
//! `bounds::person_value`), and any level below one with
//! dpnoise aggregates (a subquery feeding them must be per person); below
//! plain aggregates of released values (a BI tool's `SELECT count(*) FROM
//! (...) AS virtual_table`) a level is rewritten.
//! The rewritten statement is then checked, bounded, charged and
//! identified as if the analyst had written the dpnoise forms: it is
//! exactly as private.
//!
//! Beside a value, `dp_error` of a count or sum becomes a constant
//! (`errors`); `dp_interval_low`, `dp_interval_high` and the error of an
//! average or a spread split the level in two first (`split`): the level
//! releases the parts the value is computed from (`parts`), the level above
//! computes the value and its interval from them (`estimate`).

use super::catalog::{Protected, Table};
use super::list_items;
use bounds::domain;
use forms::{answer, plain, Plain};
use pgrx::pg_sys;
use pgrx::prelude::*;

mod bounds;
mod errors;
mod estimate;
mod forms;
mod narrowed;
mod parts;
mod split;
mod values;
pub(super) use narrowed::define as define_narrowed_domains;
pub(super) use values::{answer_from_lists, listed_keys};

/// What the rewrite carries over the statement.
struct Context<'a> {
    protected: &'a Protected,
    /// Each share's ε (0 while counting the shares).
    epsilon: f64,
    /// The shares found, and the smallest statement ε of the protected
    /// tables of their levels.
    found: usize,
    statement: f64,
    /// The level being rewritten.
    level: Level,
    /// Whether the walk is below a level that aggregates.
    below: bool,
    /// A refusal met in a callback, raised after the walk: what, and instead.
    refusal: Option<(String, String)>,
}

/// What the rewrite needs of a level.
struct Level {
    rtable: *mut pg_sys::List,
    /// Several rows per person (or a join): counts count rows, R at most.
    several: Option<i32>,
    /// Over a per-person subquery (one row per person, its values
    /// PostgreSQL's aggregates of the person's rows): count(*) is the
    /// persons; an aggregate of a value is rewritten where the policy
    /// bounds the value (`bounds::person_value`).
    per_person: bool,
    /// Its protected tables, its FROM items, whether it groups (`errors`).
    tables: Vec<Table>,
    leaves: usize,
    grouped: bool,
    /// Its target list and HAVING as written (`errors` looks for the
    /// value an error is of).
    targets: *mut pg_sys::Node,
    having: *mut pg_sys::Node,
}

impl Level {
    fn none() -> Self {
        Level {
            rtable: std::ptr::null_mut(),
            several: None,
            per_person: false,
            tables: Vec::new(),
            leaves: 0,
            grouped: false,
            targets: std::ptr::null_mut(),
            having: std::ptr::null_mut(),
        }
    }
}

/// Rewrites the plain aggregates of every level of an analyst's `query`
/// that reads a protected table.
///
/// # Safety
/// `query` is the live Query the planner hook was given; inside a transaction.
pub(super) unsafe fn rewrite(query: *mut pg_sys::Query, protected: &Protected) {
    let policy = &protected.policy;
    if policy.count == pg_sys::InvalidOid || policy.sum == pg_sys::InvalidOid {
        // A catalog older than the policies.
        return;
    }
    let mut context = Context {
        protected,
        epsilon: 0.0,
        found: 0,
        statement: f64::INFINITY,
        level: Level::none(),
        below: false,
        refusal: None,
    };
    // SAFETY: the caller's contract; the first walk only counts.
    unsafe { levels(query.cast(), (&raw mut context).cast()) };
    if let Some((what, instead)) = context.refusal.take() {
        super::refused(&what, &instead);
    }
    if context.found != 0 {
        context.epsilon = context.statement / context.found as f64;
        // SAFETY: as above; the second walk rewrites in place.
        unsafe { levels(query.cast(), (&raw mut context).cast()) };
    }
    // An interval the walks did not answer (beside a value of a
    // per-person subquery, a CTE's or a released subquery's output) would
    // fail when it runs, after the charge: refused now.
    // SAFETY: as above.
    if unsafe { split::unanswered(query.cast(), policy) } {
        super::refused(
            "dp_error, dp_interval_low, dp_interval_high: written around a plain aggregate of a protected table, \
             in the level that aggregates it",
            "SELECT site, AVG(amount) AS mean, dp_interval_low(AVG(amount)) AS low FROM visits GROUP BY site \
             (docs/bi.md, \"Errors and intervals\").",
        );
    }
}

/// Visits every query level, rewriting (or counting) the plain aggregates
/// of those that read a protected table.
///
/// # Safety
/// Called by the tree walkers with live nodes and the `Context`.
#[pg_guard]
unsafe extern "C-unwind" fn levels(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ != pg_sys::NodeTag::T_Query {
            return pg_sys::expression_tree_walker(node, Some(levels), context);
        }
        let query = node as *mut pg_sys::Query;
        let c = &mut *(context as *mut Context);
        let below = c.below;
        let mut released_here = false;
        if (*query).hasAggs && !below {
            if let Some((epsilon, level)) = policy_of(query, c.protected) {
                // An interval that needs its releases: the level becomes
                // a subquery of the level above that shows them (`split`),
                // walked next as any level.
                if c.epsilon == 0.0 && !level.per_person && split::wanted(query, &c.protected.policy) {
                    split::split(query, &c.protected.policy);
                    let stop = pg_sys::query_tree_walker(query, Some(levels), context, 0);
                    (*(context as *mut Context)).below = below;
                    return stop;
                }
                released_here = true;
                c.statement = c.statement.min(epsilon);
                c.level = level;
                let targets = mutate((*query).targetList.cast(), context).cast();
                let having = mutate((*query).havingQual, context);
                // The counting walk's copies are dropped.
                if c.epsilon != 0.0 {
                    (*query).targetList = targets;
                    (*query).havingQual = having;
                }
            }
        }
        // A subquery feeding dpnoise aggregates must answer per person: its
        // plain aggregates stay PostgreSQL's (or are refused as they are).
        c.below = below || released_here || ((*query).hasAggs && feeds_releases(query));
        let stop = pg_sys::query_tree_walker(query, Some(levels), context, 0);
        (*(context as *mut Context)).below = below;
        stop
    }
}

/// The statement ε of a level over a per-person subquery (one reading
/// protected tables directly, grouped by their privacy unit): the smallest
/// of those tables' policies.
///
/// # Safety
/// `rtable` is a live level's range table, before planning.
unsafe fn per_person_subquery(
    rtable: &[*mut pg_sys::RangeTblEntry],
    protected: &Protected,
) -> Option<f64> {
    // SAFETY: the caller's contract; RTE casts follow their kinds.
    unsafe {
        let mut found = None;
        for rte in rtable {
            if (**rte).rtekind != pg_sys::RTEKind::RTE_SUBQUERY || (**rte).subquery.is_null() {
                continue;
            }
            let sub = (**rte).subquery;
            let inner = list_items::<pg_sys::RangeTblEntry>((*sub).rtable);
            let persons: Vec<(i32, Table)> = inner
                .iter()
                .enumerate()
                .filter(|(_, r)| (***r).rtekind == pg_sys::RTEKind::RTE_RELATION)
                .filter_map(|(i, r)| {
                    protected
                        .tables
                        .get(&(**r).relid)
                        .map(|t| (i as i32 + 1, *t))
                })
                .collect();
            // Grouped by the unit with PostgreSQL's aggregates: a person's
            // values. With dpnoise aggregates it is a release of its own
            // (each group one person), whose rows a count post-processes.
            if persons.is_empty()
                || super::persons::grouped_by_unit(sub, &inner, &persons).is_ok()
                || feeds_releases(sub)
            {
                continue;
            }
            let epsilon = persons
                .iter()
                .map(|(i, _)| {
                    *protected
                        .policy
                        .epsilon
                        .get(&(*inner[*i as usize - 1]).relid)
                        .unwrap_or(&crate::gucs::policy_epsilon())
                })
                .fold(f64::INFINITY, f64::min);
            found = Some(found.map_or(epsilon, |e: f64| e.min(epsilon)));
        }
        found
    }
}

/// Whether `level` has dpnoise aggregates (after the rewrite, those of a
/// level over a protected table): what its subqueries feed is then
/// released, not post-processed.
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn feeds_releases(level: *mut pg_sys::Query) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes; subqueries are not entered.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        _context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Aggref
                && crate::functions::releasing((*(node as *mut pg_sys::Aggref)).aggfnoid).is_some()
            {
                return true;
            }
            pg_sys::expression_tree_walker(node, Some(find), std::ptr::null_mut())
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        find((*level).targetList.cast(), std::ptr::null_mut())
            || find((*level).havingQual, std::ptr::null_mut())
    }
}

/// The policy of the protected tables `level` reads in its own FROM, if it
/// reads any and is not grouped by their privacy unit: the statement ε
/// (the smallest; the server's for a table without one), and R if the
/// level has several rows per person (a table of several, or a join).
///
/// # Safety
/// `level` is a live Query of an analyst's statement before planning.
unsafe fn policy_of(level: *mut pg_sys::Query, protected: &Protected) -> Option<(f64, Level)> {
    // SAFETY: the caller's contract; rtable is a list of RangeTblEntry.
    unsafe {
        let rtable = list_items::<pg_sys::RangeTblEntry>((*level).rtable);
        let persons: Vec<(i32, Table)> = rtable
            .iter()
            .enumerate()
            .filter(|(_, rte)| (***rte).rtekind == pg_sys::RTEKind::RTE_RELATION)
            .filter_map(|(i, rte)| {
                protected
                    .tables
                    .get(&(**rte).relid)
                    .map(|t| (i as i32 + 1, *t))
            })
            .collect();
        // A level grouped by the privacy unit answers per person, with
        // PostgreSQL's own aggregates (`persons`): not a release.
        let written = Level {
            rtable: (*level).rtable,
            targets: (*level).targetList.cast(),
            having: (*level).havingQual,
            grouped: !(*level).groupClause.is_null(),
            ..Level::none()
        };
        if persons.is_empty() {
            return per_person_subquery(&rtable, protected).map(|epsilon| {
                (
                    epsilon,
                    Level {
                        per_person: true,
                        ..written
                    },
                )
            });
        }
        if super::persons::grouped_by_unit(level, &rtable, &persons).is_err() {
            return None;
        }
        let policy = &protected.policy;
        let relids: Vec<pg_sys::Oid> = persons
            .iter()
            .map(|(i, _)| (*rtable[*i as usize - 1]).relid)
            .collect();
        let epsilon = relids
            .iter()
            .map(|r| {
                *policy
                    .epsilon
                    .get(r)
                    .unwrap_or(&crate::gucs::policy_epsilon())
            })
            .fold(f64::INFINITY, f64::min);
        // The FROM items the jointree reads (a subquery taken in by
        // `inline` leaves an entry nothing reads).
        let mut read = Vec::new();
        super::joins::jointree_indexes((*level).jointree.cast(), &mut read);
        let leaves = read
            .iter()
            .filter(|&&i| (*rtable[i as usize - 1]).rtekind != pg_sys::RTEKind::RTE_JOIN)
            .count();
        let several = (leaves > 1 || persons.iter().any(|(_, t)| !t.one_row)).then(|| {
            relids
                .iter()
                .map(|r| {
                    *policy
                        .rows
                        .get(r)
                        .unwrap_or(&crate::gucs::policy_rows_per_person())
                })
                .min()
                .unwrap_or(1)
        });
        Some((
            epsilon,
            Level {
                several,
                tables: persons.iter().map(|(_, t)| *t).collect(),
                leaves,
                ..written
            },
        ))
    }
}

/// Replaces (or counts) the plain aggregates in `node`, an expression of
/// the level (its target list or HAVING), not entering subqueries.
///
/// # Safety
/// `node` is null or a live expression; `context` the `Context`.
unsafe fn mutate(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> *mut pg_sys::Node {
    /// # Safety
    /// Called by the tree mutator with live nodes and the `Context`.
    #[pg_guard]
    unsafe extern "C-unwind" fn each(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
                return node;
            }
            if let Some(rewritten) = errors::error(node, &mut *(context as *mut Context)) {
                return rewritten;
            }
            if (*node).type_ != pg_sys::NodeTag::T_Aggref {
                return crate::versions::expression_tree_mutator(node, each, context);
            }
            let aggref = node as *mut pg_sys::Aggref;
            let c = &mut *(context as *mut Context);
            // Over a per-person subquery: the persons, and aggregates of
            // the person's values whose bounds the policy gives
            // (`bounds::person_value`).
            if c.level.per_person
                && !matches!(
                    plain(aggref),
                    Some(
                        Plain::CountStar
                            | Plain::Sum
                            | Plain::Avg
                            | Plain::Variance
                            | Plain::Stddev
                            | Plain::Min
                            | Plain::Max
                            | Plain::Quantile(_)
                    )
                )
            {
                return node;
            }
            // Left as written: the checks refuse it, naming the dpnoise
            // form (and, for a sum or average, the domain it lacks).
            let Some((kind, bounds)) =
                plain(aggref).and_then(|kind| domain(aggref, kind, c).map(|b| (kind, b)))
            else {
                return node;
            };
            if c.epsilon == 0.0 {
                c.found += forms::shares(kind, c.level.several);
                return node;
            }
            answer(
                aggref,
                kind,
                bounds,
                c.epsilon,
                c.level.several,
                &c.protected.policy,
            )
        }
    }
    // SAFETY: the caller's contract.
    unsafe { each(node, context) }
}
