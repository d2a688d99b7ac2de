//! Intervals that need the releases themselves: `dp_interval_low`,
//! `dp_interval_high`, and `dp_error` of an average or a spread, whose
//! noise depends on the noisy count drawn inside the release. The level
//! that releases the value is split in two before anything else reads it,
//! into what an analyst could write as a subquery:
//!
//! - the level itself becomes the subquery: its group keys, its other
//!   aggregates and columns, and for each value with an interval one array
//!   of the releases it is computed from (`errors::parts`, written when the
//!   statement's ε is known);
//! - the level above shows the same columns in the same order, sorted and
//!   limited as written, the value and its interval computed from that one
//!   array by `dp_estimate`: each release drawn and charged once.
//!
//! Refused (ZB003, before anything is charged): such a level with window
//! functions, set-returning functions, grouping sets, FOR UPDATE, a
//! subquery in its outputs, or an interval in HAVING.

use super::forms::{cast, plain};
use super::list_items;
use crate::gate::catalog::Policy;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Which interval function a call is, if any.
#[derive(Clone, Copy, PartialEq)]
enum Marker {
    Error,
    Low,
    High,
}

/// The marker `node` is, with the aggregate it names (through binary
/// casts) and its confidence as written (None: the default).
///
/// # Safety
/// `node` is a live expression.
unsafe fn marker(
    node: *mut pg_sys::Node,
    policy: &Policy,
) -> Option<(Marker, *mut pg_sys::Node, Option<*mut pg_sys::Node>)> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        if (*node).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let call = node as *mut pg_sys::FuncExpr;
        let id = (*call).funcid;
        let kind = if id == pg_sys::InvalidOid || (*call).funcresulttype != pg_sys::FLOAT8OID {
            return None;
        } else if id == policy.error {
            Marker::Error
        } else if id == policy.low {
            Marker::Low
        } else if id == policy.high {
            Marker::High
        } else {
            return None;
        };
        let args = list_items::<pg_sys::Node>((*call).args);
        let mut inner = args[0];
        while (*inner).type_ == pg_sys::NodeTag::T_RelabelType {
            inner = (*(inner as *mut pg_sys::RelabelType)).arg.cast();
        }
        Some((kind, inner, args.get(1).copied()))
    }
}

/// Whether `node` holds a marker for which the level must be split: an
/// interval's end, or the error of an aggregate other than a count or sum.
///
/// # Safety
/// `node` is null or a live expression; inside a transaction.
unsafe fn needs_split(node: *mut pg_sys::Node, policy: &Policy) -> bool {
    struct Search<'a> {
        policy: &'a Policy,
        found: bool,
    }
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the `Search`.
    #[pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            let search = &mut *(context as *mut Search);
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
                return false;
            }
            if let Some((kind, inner, _)) = marker(node, search.policy) {
                let counted = (*inner).type_ == pg_sys::NodeTag::T_Aggref
                    && matches!(
                        plain(inner.cast()),
                        Some(
                            super::Plain::CountStar
                                | super::Plain::Count
                                | super::Plain::Persons
                                | super::Plain::Sum
                        )
                    );
                if kind != Marker::Error || !counted {
                    search.found = true;
                    return true;
                }
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    let mut search = Search {
        policy,
        found: false,
    };
    // SAFETY: the caller's contract.
    unsafe { walk(node, (&raw mut search).cast()) };
    search.found
}

/// Whether a call of dp_error, dp_interval_low or dp_interval_high is
/// left anywhere in `node` (a statement the rewrite is done with).
///
/// # Safety
/// `node` is a live Query or expression.
pub(super) unsafe fn unanswered(node: *mut pg_sys::Node, policy: &Policy) -> bool {
    /// # Safety
    /// Called by the tree walkers with live nodes and the `Policy`.
    #[pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            let policy = &*(context as *const Policy);
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                return pg_sys::query_tree_walker(node.cast(), Some(walk), context, 0);
            }
            if (*node).type_ == pg_sys::NodeTag::T_FuncExpr {
                let id = (*(node as *mut pg_sys::FuncExpr)).funcid;
                if id != pg_sys::InvalidOid && (id == policy.error || id == policy.low || id == policy.high) {
                    return true;
                }
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, (policy as *const Policy).cast_mut().cast()) }
}

/// Whether the level `query` (reading protected tables under a policy)
/// shows an interval that needs its releases (`split`).
///
/// # Safety
/// `query` is a live Query before planning; inside a transaction.
pub(super) unsafe fn wanted(query: *mut pg_sys::Query, policy: &Policy) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        policy.low != pg_sys::InvalidOid
            && policy.estimate != pg_sys::InvalidOid
            && (needs_split((*query).targetList.cast(), policy)
                || needs_split((*query).havingQual, policy))
    }
}

/// The split's state: the policy, the values with intervals (each the
/// aggregate and its confidence) and the inner level's outputs (the
/// expression as the level wrote it).
struct Split<'a> {
    policy: &'a Policy,
    subjects: Vec<(*mut pg_sys::Node, f64)>,
    columns: Vec<*mut pg_sys::Node>,
    /// The first `keys` columns are the group keys.
    keys: usize,
    refusal: Option<&'static str>,
}

impl Split<'_> {
    /// The inner output `expr` is (added when new), from 1.
    ///
    /// # Safety
    /// `expr` is a live expression.
    unsafe fn column(&mut self, expr: *mut pg_sys::Node) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            if let Some(i) = self
                .columns
                .iter()
                .position(|c| pg_sys::equal((*c).cast(), expr.cast()))
            {
                return i + 1;
            }
        }
        self.columns.push(expr);
        self.columns.len()
    }

    /// The Var of the level above that reads inner output `i`.
    ///
    /// # Safety
    /// Output `i` exists.
    unsafe fn var(&self, i: usize) -> *mut pg_sys::Node {
        let expr = self.columns[i - 1];
        // SAFETY: the caller's contract.
        unsafe {
            pg_sys::makeVar(
                1,
                i as i16,
                pg_sys::exprType(expr),
                pg_sys::exprTypmod(expr),
                pg_sys::exprCollation(expr),
                0,
            )
            .cast()
        }
    }

    /// `dp_estimate(<the parts of subject s>, part)`.
    ///
    /// # Safety
    /// Subject `s` has its column.
    unsafe fn estimate(&mut self, s: usize, part: i32) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; the nodes are built as the parser builds them.
        unsafe {
            let parts = self.parts(s);
            let column = self.column(parts);
            let which = pg_sys::makeConst(
                pg_sys::INT4OID,
                -1,
                pg_sys::InvalidOid,
                4,
                pg_sys::Datum::from(part as usize),
                false,
                true,
            );
            let args = pg_sys::lappend(
                pg_sys::lappend(std::ptr::null_mut(), self.var(column).cast()),
                which.cast(),
            );
            pg_sys::makeFuncExpr(
                self.policy.estimate,
                pg_sys::FLOAT8OID,
                args,
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            )
            .cast()
        }
    }

    /// Subject `s`'s inner output: dp_error's call typed float8[] around
    /// the aggregate and its confidence, which `errors::error` replaces by
    /// the array of its releases once ε is known.
    ///
    /// # Safety
    /// Subject `s` exists; inside a transaction.
    unsafe fn parts(&self, s: usize) -> *mut pg_sys::Node {
        let (aggregate, confidence) = self.subjects[s];
        // SAFETY: the caller's contract.
        unsafe {
            let confidence = pg_sys::makeConst(
                pg_sys::FLOAT8OID,
                -1,
                pg_sys::InvalidOid,
                8,
                pg_sys::Datum::from(confidence.to_bits()),
                false,
                true,
            );
            let args = pg_sys::lappend(
                pg_sys::lappend(std::ptr::null_mut(), aggregate.cast()),
                confidence.cast(),
            );
            pg_sys::makeFuncExpr(
                self.policy.error,
                pg_sys::FLOAT8ARRAYOID,
                args,
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            )
            .cast()
        }
    }

    /// The subject `aggregate` is (added when new), with its confidence;
    /// one value has one confidence.
    ///
    /// # Safety
    /// `aggregate` is a live Aggref.
    unsafe fn subject(&mut self, aggregate: *mut pg_sys::Node, confidence: f64) -> Option<usize> {
        // SAFETY: the caller's contract.
        unsafe {
            if let Some(i) = self
                .subjects
                .iter()
                .position(|(a, _)| pg_sys::equal((*a).cast(), aggregate.cast()))
            {
                if self.subjects[i].1 != confidence {
                    self.refusal
                        .get_or_insert("one value's intervals must have one confidence");
                    return None;
                }
                return Some(i);
            }
        }
        self.subjects.push((aggregate, confidence));
        Some(self.subjects.len() - 1)
    }
}

/// A confidence as written (a constant in (0, 1)), or the default.
///
/// # Safety
/// `node` is a live expression; inside a transaction.
unsafe fn confidence(node: Option<*mut pg_sys::Node>) -> Option<f64> {
    let Some(node) = node else {
        return Some(0.95);
    };
    // SAFETY: the caller's contract; eval_const_expressions takes a null PlannerInfo.
    unsafe {
        let k = pg_sys::eval_const_expressions(std::ptr::null_mut(), node);
        if (*k).type_ != pg_sys::NodeTag::T_Const || (*(k as *mut pg_sys::Const)).constisnull {
            return None;
        }
        let c = f64::from_bits((*(k as *mut pg_sys::Const)).constvalue.value() as u64);
        (c > 0.0 && c < 1.0).then_some(c)
    }
}

/// The subject of a marker around `inner` with the confidence `written`
/// (noting a refusal where it has none).
///
/// # Safety
/// `inner` is a live expression; inside a transaction.
unsafe fn subject_of(
    split: &mut Split,
    inner: *mut pg_sys::Node,
    written: Option<*mut pg_sys::Node>,
) -> Option<usize> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        if (*inner).type_ != pg_sys::NodeTag::T_Aggref
            || (*(inner as *mut pg_sys::Aggref)).agglevelsup != 0
        {
            split
                .refusal
                .get_or_insert("an interval must be written around a plain aggregate");
            return None;
        }
        let Some(confidence) = confidence(written) else {
            split
                .refusal
                .get_or_insert("an interval's confidence must be a constant between 0 and 1");
            return None;
        };
        split.subject(inner, confidence)
    }
}

/// Notes the subject of every marker in `node` (before any output is
/// rewritten: a value shown before its interval is read from the parts).
///
/// # Safety
/// Called by `expression_tree_walker` with live nodes and the `Split`.
#[pg_guard]
unsafe extern "C-unwind" fn subjects(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let split = &mut *(context as *mut Split);
        if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
            return false;
        }
        if let Some((_, inner, written)) = marker(node, split.policy) {
            subject_of(split, inner, written);
            return false;
        }
        pg_sys::expression_tree_walker(node, Some(subjects), context)
    }
}

/// An output of the level as the level above computes it: markers and
/// their values from the parts, every other aggregate and column of the
/// level from the inner level's outputs.
///
/// # Safety
/// Called by the tree mutator with live nodes and the `Split`.
#[pg_guard]
unsafe extern "C-unwind" fn above(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        let split = &mut *(context as *mut Split);
        if node.is_null() {
            return node;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_SubLink
            | pg_sys::NodeTag::T_Query
            | pg_sys::NodeTag::T_WindowFunc
            | pg_sys::NodeTag::T_GroupingFunc => {
                split
                    .refusal
                    .get_or_insert("a subquery, window function or GROUPING beside an interval");
                return node;
            }
            _ => {}
        }
        if let Some((kind, inner, written)) = marker(node, split.policy) {
            let Some(s) = subject_of(split, inner, written) else {
                return node;
            };
            let part = match kind {
                Marker::Error => 4,
                Marker::Low => 2,
                Marker::High => 3,
            };
            return split.estimate(s, part);
        }
        // A group key (or an expression of them) is read from the inner level.
        if let Some(i) = split.columns[..split.keys]
            .iter()
            .position(|c| pg_sys::equal((*c).cast(), node.cast()))
        {
            return split.var(i + 1);
        }
        if (*node).type_ == pg_sys::NodeTag::T_Aggref {
            let aggref = node as *mut pg_sys::Aggref;
            if (*aggref).agglevelsup != 0 {
                split.refusal.get_or_insert("an outer level's aggregate beside an interval");
                return node;
            }
            if let Some(s) = split
                .subjects
                .iter()
                .position(|(a, _)| pg_sys::equal((*a).cast(), node.cast()))
            {
                return cast(split.estimate(s, 1), (*aggref).aggtype);
            }
            let i = split.column(node);
            return split.var(i);
        }
        if (*node).type_ == pg_sys::NodeTag::T_Var
            && (*(node as *mut pg_sys::Var)).varlevelsup == 0
        {
            let i = split.column(node);
            return split.var(i);
        }
        crate::versions::expression_tree_mutator(node, above, context)
    }
}

/// Splits `query` (`wanted`) in place: it becomes the level above, over a
/// subquery that is the level as it was, with the outputs `above` reads.
///
/// # Safety
/// `query` is a live Query before planning, `wanted`; inside a transaction.
pub(super) unsafe fn split(query: *mut pg_sys::Query, policy: &Policy) {
    // SAFETY: the caller's contract; the nodes are built as the parser builds them.
    unsafe {
        let q = &mut *query;
        let refuse = |what: &str| -> ! {
            super::super::refused(
                &format!("dp_error, dp_interval_low, dp_interval_high: {what}"),
                "SELECT site, AVG(amount) AS mean, dp_interval_low(AVG(amount)) AS low, \
                 dp_interval_high(AVG(amount)) AS high FROM visits GROUP BY site (docs/bi.md, \"Errors and intervals\").",
            )
        };
        if q.hasWindowFuncs || q.hasTargetSRFs || !q.groupingSets.is_null() || !q.rowMarks.is_null()
        {
            refuse("not in a level with window functions, set-returning functions, grouping sets or FOR UPDATE");
        }
        if needs_split(q.havingQual, policy) {
            refuse("an interval is shown, not tested in HAVING");
        }
        // Subjects first, in the order the outputs name them, so that each
        // value beside its interval is read from the same parts.
        let mut state = Split {
            policy,
            subjects: Vec::new(),
            columns: Vec::new(),
            keys: 0,
            refusal: None,
        };
        subjects(q.targetList.cast(), (&raw mut state).cast());
        // The group keys stay outputs of the inner level, by their sort-group references.
        let entries = list_items::<pg_sys::TargetEntry>(q.targetList);
        let grouped: Vec<*mut pg_sys::TargetEntry> = entries
            .iter()
            .copied()
            .filter(|e| {
                (**e).ressortgroupref != 0
                    && list_items::<pg_sys::SortGroupClause>(q.groupClause)
                        .iter()
                        .any(|g| (**g).tleSortGroupRef == (**e).ressortgroupref)
            })
            .collect();
        // The inner outputs: first the group keys as written (an output
        // equal to one is read from it), then what `above` adds.
        for e in &grouped {
            state.column((**e).expr.cast());
        }
        state.keys = state.columns.len();
        let keys = state.keys;
        let mut outer = std::ptr::null_mut();
        for e in &entries {
            let entry = pg_sys::flatCopyTargetEntry(*e);
            let grouped_at = grouped.iter().position(|g| *g == *e);
            (*entry).expr = match grouped_at {
                Some(i) => state.var(i + 1).cast(),
                None => above((**e).expr.cast(), (&raw mut state).cast()).cast(),
            };
            outer = pg_sys::lappend(outer, entry.cast());
        }
        if let Some(what) = state.refusal {
            refuse(what);
        }
        // The level as it was, with these outputs and without its order or limit.
        let inner = pg_sys::palloc(std::mem::size_of::<pg_sys::Query>()) as *mut pg_sys::Query;
        std::ptr::copy_nonoverlapping(query, inner, 1);
        let mut targets = std::ptr::null_mut();
        let mut names = std::ptr::null_mut();
        for (i, expr) in state.columns.iter().enumerate() {
            let name = std::ffi::CString::new(format!("c{}", i + 1)).expect("no NUL");
            let entry = pg_sys::makeTargetEntry(
                pg_sys::copyObjectImpl((*expr).cast()).cast(),
                (i + 1) as i16,
                pg_sys::pstrdup(name.as_ptr()),
                false,
            );
            if i < keys {
                (*entry).ressortgroupref = (*grouped[i]).ressortgroupref;
            }
            targets = pg_sys::lappend(targets, entry.cast());
            names = pg_sys::lappend(names, pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())).cast());
        }
        (*inner).targetList = targets;
        (*inner).sortClause = std::ptr::null_mut();
        (*inner).distinctClause = std::ptr::null_mut();
        (*inner).hasDistinctOn = false;
        (*inner).limitCount = std::ptr::null_mut();
        (*inner).limitOffset = std::ptr::null_mut();
        (*inner).limitOption = pg_sys::LimitOption::LIMIT_OPTION_COUNT;
        (*inner).utilityStmt = std::ptr::null_mut();
        (*inner).canSetTag = true;
        // Its references to levels above now cross one level more.
        crate::gate::inline::IncrementVarSublevelsUp(inner.cast(), 1, 1);

        let rte = crate::gate::bounding::subquery_entry(inner, c"dp_interval", names);
        let reference = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblRef>())
            as *mut pg_sys::RangeTblRef;
        (*reference).type_ = pg_sys::NodeTag::T_RangeTblRef;
        (*reference).rtindex = 1;
        q.rtable = pg_sys::lappend(std::ptr::null_mut(), rte.cast());
        q.jointree = pg_sys::makeFromExpr(
            pg_sys::lappend(std::ptr::null_mut(), reference.cast()),
            std::ptr::null_mut(),
        );
        q.targetList = outer;
        q.groupClause = std::ptr::null_mut();
        q.groupDistinct = false;
        q.havingQual = std::ptr::null_mut();
        q.hasAggs = false;
        q.cteList = std::ptr::null_mut();
        q.hasRecursive = false;
        q.hasModifyingCTE = false;
        q.constraintDeps = std::ptr::null_mut();
        crate::versions::no_group_entry(query);
        crate::versions::no_permissions(query);
    }
}
