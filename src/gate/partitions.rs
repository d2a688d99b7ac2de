//! Private partition selection: the HAVING the gate adds to a GROUP BY
//! over protected rows, so that a key is shown only if the keep test on its
//! number of persons passes; and the Aggref nodes the gate writes (here and
//! in `bounding`) and reads.

use super::{refuse, Checked};
use pgrx::pg_sys;

/// Adds private partition selection to a GROUP BY over protected rows:
/// `HAVING dp_partition_selected(selection ε, selection δ) AND <HAVING>`,
/// with the session's settings as constants (a prepared plan keeps them,
/// and pays what it holds). Where the level shows a dp_count without δ
/// whose ε and mechanism are constants, and its threshold at the
/// selection δ shows a group with even odds from no more persons than the
/// separate selection does (over the person's `groups` groups), that
/// count's own noise selects instead (`dp_count_selected(its ε, its
/// mechanism, selection δ)`, `dpnoise_core::threshold`): the count then
/// spends the whole ε and selection only δ, and at least as many groups
/// are shown. A count of a tiny ε keeps the separate selection, which
/// shows its groups at the selection's ε.
///
/// # Safety
/// `query` is a live Query with a GROUP BY, before planning.
pub(super) unsafe fn select_partitions(
    query: *mut pg_sys::Query,
    selection: pg_sys::Oid,
    count_selection: pg_sys::Oid,
    groups: u32,
) -> Checked {
    let (epsilon, delta) = (
        crate::gucs::selection_epsilon(),
        crate::gucs::selection_delta(),
    );
    if delta <= 0.0 || selection == pg_sys::InvalidOid {
        return Err(refuse(
            "group keys from protected data need private partition selection, which needs dpnoise.selection_delta > 0",
            "SET dpnoise.selection_delta to a small positive number (such as 1e-6).",
        ));
    }
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        let constant = |x: f64| -> *mut pg_sys::Node {
            pg_sys::makeConst(
                pg_sys::FLOAT8OID,
                -1,
                pg_sys::InvalidOid,
                8,
                pg_sys::Datum::from(x.to_bits()),
                false,
                true,
            )
            .cast()
        };
        if let Some((count_epsilon, mechanism)) = thresholded_count(query).filter(|(e, m)| {
            count_selection != pg_sys::InvalidOid
                && crate::gucs::thresholded_counts()
                && threshold_shows_more(*e, *m, groups, epsilon, delta)
        }) {
            let args = [
                (count_epsilon, pg_sys::FLOAT8OID),
                (mechanism, pg_sys::TEXTOID),
                (constant(delta), pg_sys::FLOAT8OID),
            ];
            let selected = aggregate(count_selection, pg_sys::BOOLOID, &args);
            // Its mechanism is text (compared with nothing, but typed so).
            (*selected).inputcollid = pg_sys::DEFAULT_COLLATION_OID;
            and_having(query, selected.cast());
            return Ok(());
        }
        let args = [
            (constant(epsilon), pg_sys::FLOAT8OID),
            (constant(delta), pg_sys::FLOAT8OID),
        ];
        and_having(query, aggregate(selection, pg_sys::BOOLOID, &args).cast());
    }
    Ok(())
}

/// The first dp_count of the level's output that takes no δ (dp_count(ε),
/// dp_count(value, ε), dp_count(ε, mechanism)), without DISTINCT or ORDER
/// BY: copies of its ε and mechanism expressions (the mechanism written as
/// 'laplace' where the call names none). Its final function runs before
/// the level's HAVING in each group (`selection::count_released`).
///
/// # Safety
/// `query` is a live Query before planning; copies are palloc'd in the
/// current memory context.
unsafe fn thresholded_count(
    query: *mut pg_sys::Query,
) -> Option<(*mut pg_sys::Node, *mut pg_sys::Node)> {
    // SAFETY: the caller's contract.
    unsafe {
        for entry in crate::pg_list::list_items::<pg_sys::TargetEntry>((*query).targetList) {
            let expr = (*entry).expr;
            if (*entry).resjunk || (*expr).type_ != pg_sys::NodeTag::T_Aggref {
                continue;
            }
            let aggref = expr as *mut pg_sys::Aggref;
            let Some(function) = crate::functions::releasing((*aggref).aggfnoid) else {
                continue;
            };
            if function.name != "dp_count"
                || !(*aggref).aggdistinct.is_null()
                || !(*aggref).aggorder.is_null()
            {
                continue;
            }
            let types = aggregate_types(aggref);
            let first = function.first_parameter(&types);
            let args: Vec<*mut pg_sys::Node> =
                crate::pg_list::list_items::<pg_sys::TargetEntry>((*aggref).args)
                    .into_iter()
                    .map(|e| (*e).expr.cast())
                    .collect();
            let copy = |n: *mut pg_sys::Node| pg_sys::copyObjectImpl(n.cast()).cast();
            let mechanism = match types.len() - first {
                1 => text_constant("laplace"),
                2 if types[first + 1] == pg_sys::TEXTOID => copy(args[first + 1]),
                _ => continue,
            };
            return Some((copy(args[first]), mechanism));
        }
        None
    }
}

/// Whether the count of (ε, mechanism), both constants, thresholded at
/// `delta` over `groups` groups, shows a group with even odds from no more
/// persons than the separate selection at (`epsilon`, `delta`) does. Public
/// parameters only; false where either cannot be planned.
///
/// # Safety
/// `count_epsilon` and `mechanism` are live expressions.
unsafe fn threshold_shows_more(
    count_epsilon: *mut pg_sys::Node,
    mechanism: *mut pg_sys::Node,
    groups: u32,
    epsilon: f64,
    delta: f64,
) -> bool {
    // SAFETY: the caller's contract; the casts follow the tags.
    unsafe {
        let (Some(e), Some(m)) = (folded(count_epsilon), folded(mechanism)) else {
            return false;
        };
        let count_epsilon = f64::from_bits(e.value() as u64);
        let name = pgrx::text_to_rust_str_unchecked(m.cast_mut_ptr());
        let Ok(choice) = dpnoise_core::Choice::parse(name) else {
            return false;
        };
        let (Ok(e), Ok(d)) = (
            dpnoise_core::Epsilon::new(count_epsilon),
            dpnoise_core::Delta::new(0.0),
        ) else {
            return false;
        };
        let request = dpnoise_core::Request {
            choice,
            epsilon: e,
            delta: d,
            loss: dpnoise_core::Loss::Variance,
            shape: dpnoise_core::Shape::Count,
            groups,
        };
        let (Ok(plan), Ok(separate)) = (
            request.plan(),
            dpnoise_core::selection::PartitionSelection::new(epsilon, delta, groups),
        ) else {
            return false;
        };
        let Ok(threshold) = dpnoise_core::threshold::CountThreshold::new(&plan, groups, delta)
        else {
            return false;
        };
        let even = (1..=separate.always_kept_from())
            .find(|&n| separate.keep_probability(n) >= 0.5)
            .unwrap_or(separate.always_kept_from());
        threshold.count_kept_at(0.5) <= even
    }
}

/// The value of `expression` folded as the planner will (1.0 is a
/// numeric cast to float8), if it folds to a non-NULL constant.
///
/// # Safety
/// `expression` is a live expression; inside a transaction.
pub(super) unsafe fn folded(expression: *mut pg_sys::Node) -> Option<pg_sys::Datum> {
    // SAFETY: the caller's contract; the copy is folded, the cast follows its tag.
    unsafe {
        let n = pg_sys::eval_const_expressions(
            std::ptr::null_mut(),
            pg_sys::copyObjectImpl(expression.cast()).cast(),
        );
        ((*n).type_ == pg_sys::NodeTag::T_Const && !(*(n as *mut pg_sys::Const)).constisnull)
            .then(|| (*(n as *mut pg_sys::Const)).constvalue)
    }
}

/// A text constant.
///
/// # Safety
/// Inside a transaction; palloc'd in the current memory context.
unsafe fn text_constant(text: &str) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; cstring_to_text copies the NUL-terminated string.
    unsafe {
        let c = std::ffi::CString::new(text).expect("no NUL");
        pg_sys::makeConst(
            pg_sys::TEXTOID,
            -1,
            pg_sys::DEFAULT_COLLATION_OID,
            -1,
            pg_sys::Datum::from(pg_sys::cstring_to_text(c.as_ptr())),
            false,
            false,
        )
        .cast()
    }
}

/// A plain call of the aggregate `funcid` on `args` (expression, type).
///
/// # Safety
/// Inside a transaction; the arguments are live expressions. The node is
/// palloc'd in the current memory context.
pub(super) unsafe fn aggregate(
    funcid: pg_sys::Oid,
    result: pg_sys::Oid,
    args: &[(*mut pg_sys::Node, pg_sys::Oid)],
) -> *mut pg_sys::Aggref {
    // SAFETY: the caller's contract; the Aggref is filled as the parser fills a plain call's.
    unsafe {
        let aggref = pg_sys::palloc0(std::mem::size_of::<pg_sys::Aggref>()) as *mut pg_sys::Aggref;
        (*aggref).xpr.type_ = pg_sys::NodeTag::T_Aggref;
        (*aggref).aggfnoid = funcid;
        (*aggref).aggtype = result;
        (*aggref).aggcollid = pg_sys::InvalidOid;
        (*aggref).inputcollid = pg_sys::InvalidOid;
        (*aggref).aggtranstype = pg_sys::InvalidOid;
        let mut types = std::ptr::null_mut();
        let mut entries = std::ptr::null_mut();
        for (i, (expr, typid)) in args.iter().enumerate() {
            types = pg_sys::lappend_oid(types, *typid);
            let entry = pg_sys::makeTargetEntry(
                (*expr).cast(),
                (i + 1) as i16,
                std::ptr::null_mut(),
                false,
            );
            entries = pg_sys::lappend(entries, entry.cast());
        }
        (*aggref).aggargtypes = types;
        (*aggref).args = entries;
        (*aggref).aggkind = b'n' as std::ffi::c_char;
        (*aggref).aggsplit = pg_sys::AggSplit::AGGSPLIT_SIMPLE;
        (*aggref).aggno = -1;
        (*aggref).aggtransno = -1;
        (*aggref).location = -1;
        aggref
    }
}

/// ANDs `condition` into the level's HAVING.
///
/// # Safety
/// `query` is a live Query before planning; `condition` a live boolean expression.
pub(super) unsafe fn and_having(query: *mut pg_sys::Query, condition: *mut pg_sys::Node) {
    // SAFETY: the caller's contract.
    unsafe {
        let having = (*query).havingQual;
        (*query).havingQual = if having.is_null() {
            condition
        } else {
            let both = pg_sys::lappend(
                pg_sys::lappend(std::ptr::null_mut(), condition.cast()),
                having.cast(),
            );
            pg_sys::makeBoolExpr(pg_sys::BoolExprType::AND_EXPR, both, -1).cast()
        };
        (*query).hasAggs = true;
    }
}

/// # Safety
/// `aggref` is a live Aggref.
pub(crate) unsafe fn aggregate_types(aggref: *mut pg_sys::Aggref) -> Vec<pg_sys::Oid> {
    // SAFETY: the caller's contract; aggargtypes is an OID list.
    unsafe { crate::pg_list::oid_list((*aggref).aggargtypes) }
}
