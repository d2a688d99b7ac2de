//! Private partition selection: the HAVING the gate adds to a GROUP BY
//! over protected rows, so that a key is shown only if the keep test on its
//! number of persons passes; and the Aggref nodes the gate writes (here and
//! in `bounding`) and reads.

use super::{refuse, Checked};
use pgrx::pg_sys;

/// Adds private partition selection to a GROUP BY over protected rows:
/// `HAVING dp_partition_selected(selection ε, selection δ) AND <HAVING>`,
/// with the session's settings as constants (a prepared plan keeps them,
/// and pays what it holds).
///
/// # Safety
/// `query` is a live Query with a GROUP BY, before planning.
pub(super) unsafe fn select_partitions(
    query: *mut pg_sys::Query,
    selection: pg_sys::Oid,
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
        let args = [
            (constant(epsilon), pg_sys::FLOAT8OID),
            (constant(delta), pg_sys::FLOAT8OID),
        ];
        and_having(query, aggregate(selection, pg_sys::BOOLOID, &args).cast());
    }
    Ok(())
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
