//! Public constants computed before the checks. BI tools write time
//! ranges as calls on literals: `TO_TIMESTAMP('2024-01-01 00:00:00',
//! 'YYYY-MM-DD HH24:MI:SS')`, `TO_DATE('2024-01-01', 'YYYY-MM-DD')`,
//! `CAST('2024-01-01'::text AS timestamptz)`. These read no row, but they
//! are STABLE (they depend on the session's time zone), so the planner
//! leaves them as calls, evaluated by the executor where the plan puts
//! them: among protected rows, after an AND or inside a CASE that the data
//! decides to run. One that can fail would then fail, or not, by the data.
//!
//! The gate evaluates each such expression once, before checking the
//! statement, and writes its value in its place, as PostgreSQL does for a
//! typed literal (`TIMESTAMPTZ '2024-01-01'`): an error is raised then,
//! from the analyst's text alone, before any charge; the checks and the
//! release's identity see a constant. The value is one the analyst could
//! ask for in a statement of its own (`SELECT TO_TIMESTAMP(...)`), which
//! reads no protected row: only built-in functions, operators and casts of
//! constants are computed, never a column, parameter or subquery, and of
//! the STABLE built-ins only those of dates and times (`STABLE_COMPUTED`):
//! a statistics function, which the plan check refuses, stays a call.
//!
//! The transaction's time (NOW(), CURRENT_DATE, CURRENT_TIMESTAMP - INTERVAL
//! '30 days', as BI tools write relative ranges) is computed the same way:
//! it is the same for every statement of a transaction. A plan holding a
//! computed value is made again in the next transaction, where a prepared
//! statement would otherwise keep it (`transaction_ended`). Left as calls:
//! statement_timestamp(), which differs within a transaction, and every
//! VOLATILE function.

use pgrx::pg_sys;
use pgrx::prelude::*;

thread_local! {
    /// Whether a value was computed in this transaction.
    static FOLDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// At the end of a transaction in which a value was computed: every cached
/// plan of the backend is made again when next used, so none keeps a value
/// of another transaction's time, or of settings since changed (a plan so
/// remade computes its values again, and so is remade after the next).
pub(crate) fn transaction_ended() {
    if FOLDED.with(|f| f.replace(false)) {
        // SAFETY: ResetPlanCache only marks this backend's cached plans
        // invalid (no catalog access), between transactions.
        unsafe { pg_sys::ResetPlanCache() };
    }
}

/// `node`'s value, if it is an expression of constants only whose value the
/// planner would not compute itself (a STABLE call) and that can be
/// computed before running (`computable`). Any error of the computation is
/// raised here.
///
/// # Safety
/// `node` is null or a live expression node, inside a transaction.
pub(super) unsafe fn fold(node: *mut pg_sys::Node) -> Option<*mut pg_sys::Node> {
    use pg_sys::NodeTag::*;
    // SAFETY: the caller's contract; the walks only read the node, and
    // evaluate_expr computes a copy in a memory context of its own.
    unsafe {
        if node.is_null()
            || !matches!(
                (*node).type_,
                T_FuncExpr
                    | T_OpExpr
                    | T_CoerceViaIO
                    | T_SQLValueFunction
                    | T_MinMaxExpr
                    | T_CoalesceExpr
            )
            || !computable(node)
            || !pg_sys::contain_mutable_functions(node)
            || pg_sys::contain_volatile_functions(node)
            || pg_sys::expression_returns_set(node)
        {
            return None;
        }
        let value = pg_sys::evaluate_expr(
            node.cast(),
            pg_sys::exprType(node),
            pg_sys::exprTypmod(node),
            pg_sys::exprCollation(node),
        );
        FOLDED.with(|f| f.set(true));
        Some(value.cast())
    }
}

/// The STABLE built-ins computed: dates, times and intervals from text
/// and from each other, which follow the session's settings (TimeZone,
/// DateStyle, lc_time) and the transaction's time, and read nothing else.
/// Any other STABLE built-in is left as a call, which the checks judge: a
/// statistics function (`pg_stat_get_numscans`) reads counters that
/// protected rows move, and one running a query (`table_to_xml`) would run
/// it, and charge its releases, while the statement is being checked.
const STABLE_COMPUTED: &[&[u8]] = &[
    b"to_timestamp",
    b"to_date",
    b"to_char",
    b"now",
    b"transaction_timestamp",
    b"date_trunc",
    b"date_part",
    b"extract",
    b"timezone",
    b"date",
    b"timestamp",
    b"timestamptz",
    b"make_timestamptz",
    b"age",
    b"timestamptz_pl_interval",
    b"timestamptz_mi_interval",
    b"date_in",
    b"date_out",
    b"time_in",
    b"timetz_in",
    b"timestamp_in",
    b"timestamp_out",
    b"timestamptz_in",
    b"timestamptz_out",
    b"interval_in",
    b"interval_out",
];

/// Whether `funcid` is computed ahead: a built-in that is IMMUTABLE (it
/// reads only its arguments), or one of `STABLE_COMPUTED`, or a comparison
/// between timestamptz and date or timestamp (which follows TimeZone).
///
/// # Safety
/// Inside a transaction (syscache lookups by OID).
unsafe fn computed(funcid: pg_sys::Oid) -> bool {
    if u32::from(funcid) >= pg_sys::FirstNormalObjectId {
        return false;
    }
    // SAFETY: the caller's contract; get_func_name returns a palloc'd copy or null.
    unsafe {
        if pg_sys::func_volatile(funcid) == pg_sys::PROVOLATILE_IMMUTABLE as std::ffi::c_char {
            return true;
        }
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() {
            return false;
        }
        let name = std::ffi::CStr::from_ptr(name).to_bytes();
        if STABLE_COMPUTED.contains(&name) {
            return true;
        }
        crate::total::date_time_comparison(&String::from_utf8_lossy(name)).is_some()
    }
}

/// Whether every node below `node` is a constant, the transaction's time,
/// or a function, operator or cast of them that is `computed`.
///
/// # Safety
/// `node` is a live node.
unsafe fn computable(node: *mut pg_sys::Node) -> bool {
    fn built_in(oid: pg_sys::Oid) -> bool {
        u32::from(oid) < pg_sys::FirstNormalObjectId
    }
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes; true stops the walk.
    #[pg_guard]
    unsafe extern "C-unwind" fn other(
        node: *mut pg_sys::Node,
        _context: *mut std::ffi::c_void,
    ) -> bool {
        use pg_sys::NodeTag::*;
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            let admitted = match (*node).type_ {
                T_FuncExpr => computed((*(node as *mut pg_sys::FuncExpr)).funcid),
                T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    pg_sys::set_opfuncid(op);
                    computed((*op).opfuncid)
                }
                // Through the types' output and input functions.
                T_CoerceViaIO => {
                    let cast = node as *mut pg_sys::CoerceViaIO;
                    let (mut output, mut input) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
                    let (mut varlena, mut ioparam) = (false, pg_sys::InvalidOid);
                    pg_sys::getTypeOutputInfo(
                        pg_sys::exprType((*cast).arg.cast()),
                        &mut output,
                        &mut varlena,
                    );
                    pg_sys::getTypeInputInfo((*cast).resulttype, &mut input, &mut ioparam);
                    computed(output) && computed(input)
                }
                // CURRENT_DATE, CURRENT_TIMESTAMP, LOCALTIMESTAMP and the
                // like (not CURRENT_USER and the other names).
                T_SQLValueFunction => {
                    (*(node as *mut pg_sys::SQLValueFunction)).op
                        <= pg_sys::SQLValueFunctionOp::SVFOP_LOCALTIMESTAMP_N
                }
                // GREATEST and LEAST through the type's ordering.
                T_MinMaxExpr => built_in((*(node as *mut pg_sys::MinMaxExpr)).minmaxtype),
                T_Const | T_RelabelType | T_CoalesceExpr | T_BoolExpr | T_NullTest | T_List => true,
                _ => false,
            };
            !admitted || pg_sys::expression_tree_walker(node, Some(other), std::ptr::null_mut())
        }
    }
    // SAFETY: the caller's contract.
    unsafe { !other(node, std::ptr::null_mut()) }
}
