//! Whether a level's answer is a function of the data it reads and
//! nothing else, which a release must be to be identified
//! (`super::identity`): its functions immutable and PostgreSQL's or
//! dpnoise's (or following the session's TimeZone alone, `zoned`), nothing
//! reading the time, a setting, a sequence or an outer row, no subquery
//! that picks among equal rows (a LIMIT, DISTINCT ON, a window other than
//! dpnoise's bounding, an order-dependent aggregate), its tables tracked,
//! its group keys of types whose equal values have equal (normalised)
//! bytes.

use crate::gate::list_items;
use crate::output::canonical::{form, Form};
use pgrx::pg_sys;
use std::ffi::c_void;

/// Whether a group key of `type_` (compared under `collation`) has bytes
/// that `group_key` can normalise so that equal keys have equal bytes: its
/// equal values are the same bytes, or dpnoise has a normal form for it
/// (`crate::output::canonical`).
pub fn key_type_supported(type_: pg_sys::Oid, collation: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups inside a transaction (every caller plans a statement).
    unsafe { form(type_, collation) != Form::Refused }
}

/// Whether values of `type_` (compared under `collation`) that are equal
/// are the same bytes, as the type's default btree operator class declares
/// (`crate::output::canonical::form`): so which of them a plan keeps
/// cannot matter.
pub fn byte_equal(type_: pg_sys::Oid, collation: pg_sys::Oid) -> bool {
    // SAFETY: as above.
    unsafe { form(type_, collation) == Form::Image }
}

/// Whether `e` is computed from dpnoise's window functions alone: one of
/// them, or dpnoise's functions (a total product) and LEAST/GREATEST of
/// them and constants (a plain average's numerator, the person's mean
/// times their values, R at most).
///
/// # Safety
/// `e` is a live expression; inside a transaction.
unsafe fn of_windows(e: *mut pg_sys::Node, ours: &dyn Fn(pg_sys::Oid) -> bool) -> bool {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*e).type_ {
            pg_sys::NodeTag::T_WindowFunc => ours((*(e as *mut pg_sys::WindowFunc)).winfnoid),
            pg_sys::NodeTag::T_FuncExpr => {
                let call = e as *mut pg_sys::FuncExpr;
                ours((*call).funcid)
                    && list_items::<pg_sys::Node>((*call).args)
                        .into_iter()
                        .all(|a| of_windows(a, ours))
            }
            pg_sys::NodeTag::T_MinMaxExpr => {
                list_items::<pg_sys::Node>((*(e as *mut pg_sys::MinMaxExpr)).args)
                    .into_iter()
                    .all(|a| of_windows(a, ours))
            }
            pg_sys::NodeTag::T_Const => true,
            _ => false,
        }
    }
}

/// Whether `q`'s window is the gate's per-person bounding (`per_person`),
/// whose rows are a function of the data: one window, partitioned by a
/// column and ordered by dpnoise's choice key of that column and others,
/// every output that is not one of dpnoise's window functions among the
/// key's parts (so every row of a run shows the same values, up to the
/// normalisation `key_type_supported` allows).
///
/// # Safety
/// `q` is a live Query; inside a transaction.
unsafe fn bounding_window(q: *mut pg_sys::Query, extension: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract; casts follow node tags; syscache lookups by OID.
    unsafe {
        let ours = |funcid: pg_sys::Oid| {
            extension != pg_sys::InvalidOid
                && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, funcid) == extension
        };
        let windows = list_items::<pg_sys::WindowClause>((*q).windowClause);
        let [window] = windows[..] else { return false };
        let (partition, order) = (
            list_items::<pg_sys::SortGroupClause>((*window).partitionClause),
            list_items::<pg_sys::SortGroupClause>((*window).orderClause),
        );
        let ([partition], [order]) = (&partition[..], &order[..]) else {
            return false;
        };
        let expr = |clause: *mut pg_sys::SortGroupClause| {
            (*pg_sys::get_sortgroupclause_tle(clause, (*q).targetList)).expr as *mut pg_sys::Node
        };
        let key = expr(*order);
        if key.is_null()
            || (*key).type_ != pg_sys::NodeTag::T_FuncExpr
            || !ours((*(key as *mut pg_sys::FuncExpr)).funcid)
        {
            return false;
        }
        let parts = list_items::<pg_sys::Node>((*(key as *mut pg_sys::FuncExpr)).args);
        let among = |node: *mut pg_sys::Node| {
            parts
                .iter()
                .any(|p| pg_sys::equal((*p).cast(), node.cast()))
        };
        if !among(expr(*partition)) {
            return false;
        }
        list_items::<pg_sys::TargetEntry>((*q).targetList)
            .into_iter()
            .all(|entry| {
                let e = (*entry).expr as *mut pg_sys::Node;
                if of_windows(e, &ours) {
                    return true;
                }
                pg_sys::equal(e.cast(), key.cast())
                    || among(e) && key_type_supported(pg_sys::exprType(e), pg_sys::exprCollation(e))
            })
    }
}

/// Whether a set operation tree keeps one of several equal rows anywhere:
/// UNION, INTERSECT and EXCEPT, with or without ALL (INTERSECT ALL and
/// EXCEPT ALL keep as many of the equal rows as the counts say, but which
/// ones follows the plan), all but UNION ALL.
///
/// # Safety
/// `node` is null or a live set operation tree.
unsafe fn picks_among_equals(node: *mut pg_sys::Node) -> bool {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_SetOperationStmt {
            return false;
        }
        let op = node as *mut pg_sys::SetOperationStmt;
        !((*op).all && (*op).op == pg_sys::SetOperation::SETOP_UNION)
            || picks_among_equals((*op).larg)
            || picks_among_equals((*op).rarg)
    }
}

/// Whether the rows a set operation tree outputs are a function of its
/// inputs: it keeps no one of several equal rows (`picks_among_equals`),
/// or every column's equal values are the same bytes.
///
/// # Safety
/// `node` is null or a live set operation tree.
unsafe fn set_operation_exact(node: *mut pg_sys::Node) -> bool {
    // SAFETY: the caller's contract; the top node's column lists are OID Lists of equal length.
    unsafe {
        if !picks_among_equals(node) {
            return true;
        }
        let op = node as *mut pg_sys::SetOperationStmt;
        let types = crate::pg_list::oid_list((*op).colTypes);
        let collations = crate::pg_list::oid_list((*op).colCollations);
        types
            .iter()
            .zip(collations.iter())
            .all(|(t, c)| byte_equal(*t, *c))
    }
}

/// Whether a GROUP BY, DISTINCT or ORDER BY item's operators are PostgreSQL's own.
///
/// # Safety
/// `clause` is a live SortGroupClause.
pub(super) unsafe fn operators_ours(clause: *mut pg_sys::SortGroupClause) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        [(*clause).eqop, (*clause).sortop]
            .iter()
            .all(|op| u32::from(*op) < pg_sys::FirstNormalObjectId)
    }
}

/// What a level's check found: whether its rows are a function of the data
/// alone, the tables it reads, the external parameters it uses.
#[derive(Clone)]
pub(super) struct Check {
    /// Query levels below the level being checked.
    pub(super) depth: u32,
    pub(super) ok: bool,
    pub(super) relations: Vec<pg_sys::Oid>,
    pub(super) params: Vec<*mut pg_sys::Param>,
    pub(super) extension: pg_sys::Oid,
    /// Whether a function in it follows the session's TimeZone (`zoned`),
    /// which then joins the identity.
    pub(super) zoned: bool,
}

/// # Safety
/// `node` is null or a live node of a query tree; inside a transaction.
pub(super) unsafe fn check_node(node: *mut pg_sys::Node, check: &mut Check) {
    // SAFETY: the caller's contract; `check` outlives the walk.
    unsafe { checker(node, (check as *mut Check).cast()) };
}

/// Clears `ok` at the first thing that makes the level's rows depend on
/// more than its data (see the module's comment); collects its tables and
/// parameters. Returns true to stop the walk.
///
/// # Safety
/// Called by the tree walkers with a live node and the `Check`; inside a transaction.
#[pgrx::pg_guard]
pub(super) unsafe extern "C-unwind" fn checker(
    node: *mut pg_sys::Node,
    context: *mut c_void,
) -> bool {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if node.is_null() {
            return false;
        }
        let check = &mut *(context as *mut Check);
        let fail = |check: &mut Check| {
            check.ok = false;
            true
        };
        use pg_sys::NodeTag::*;
        match (*node).type_ {
            T_Query => {
                let q = &*(node as *mut pg_sys::Query);
                let sorted = list_items::<pg_sys::SortGroupClause>(q.groupClause)
                    .into_iter()
                    .chain(list_items(q.distinctClause))
                    .chain(list_items(q.sortClause))
                    .all(|c| operators_ours(c));
                // A subquery's GROUP BY or DISTINCT keeps one of the values
                // that compare equal, whichever its plan meets first: only
                // keys whose equal values are the same bytes.
                let keys_exact = list_items::<pg_sys::SortGroupClause>(q.groupClause)
                    .into_iter()
                    .chain(list_items(q.distinctClause))
                    .all(|c| {
                        let expr = (*pg_sys::get_sortgroupclause_tle(c, q.targetList)).expr
                            as *mut pg_sys::Node;
                        byte_equal(pg_sys::exprType(expr), pg_sys::exprCollation(expr))
                    });
                if q.commandType != pg_sys::CmdType::CMD_SELECT
                    || !q.limitCount.is_null()
                    || !q.limitOffset.is_null()
                    || q.hasDistinctOn
                    || (q.hasWindowFuncs
                        && !bounding_window(node as *mut pg_sys::Query, check.extension))
                    || q.hasRecursive
                    || q.hasModifyingCTE
                    || !q.rowMarks.is_null()
                    || !sorted
                    || !keys_exact
                    || !q.groupingSets.is_null()
                    || !set_operation_exact(q.setOperations)
                {
                    return fail(check);
                }
                check.depth += 1;
                let stop = pg_sys::query_tree_walker(
                    node as *mut pg_sys::Query,
                    Some(checker),
                    context,
                    pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
                );
                (*(context as *mut Check)).depth -= 1;
                return stop;
            }
            T_RangeTblEntry => {
                let rte = &*(node as *mut pg_sys::RangeTblEntry);
                match rte.rtekind {
                    pg_sys::RTEKind::RTE_RELATION => {
                        if !rte.tablesample.is_null() {
                            return fail(check);
                        }
                        match rte.relkind as u8 {
                            // A view's own entry (kept for its permissions) reads nothing.
                            b'v' => {}
                            b'r' if tracked(rte.relid, rte.inh) => check.relations.push(rte.relid),
                            _ => return fail(check),
                        }
                    }
                    // A CTE from above the level being identified is not part of it.
                    pg_sys::RTEKind::RTE_CTE if rte.ctelevelsup > check.depth => {
                        return fail(check)
                    }
                    pg_sys::RTEKind::RTE_NAMEDTUPLESTORE | pg_sys::RTEKind::RTE_TABLEFUNC => {
                        return fail(check)
                    }
                    _ => {}
                }
                return false;
            }
            T_Var if (*(node as *mut pg_sys::Var)).varlevelsup > check.depth => return fail(check),
            // A whole row, or a value of a type of the user's (a composite,
            // an enum, a domain), is compared by what the catalog says of it
            // now, which DDL can change without a rewrite.
            // System columns too (xmax, cmin, ctid: a row lock or a rolled
            // back update changes them without a logged write), but tableoid.
            T_Var
                if (*(node as *mut pg_sys::Var)).varattno <= 0
                    && (*(node as *mut pg_sys::Var)).varattno
                        != pg_sys::TableOidAttributeNumber as i16
                    || u32::from((*(node as *mut pg_sys::Var)).vartype)
                        >= pg_sys::FirstNormalObjectId =>
            {
                return fail(check)
            }
            T_Const
                if u32::from((*(node as *mut pg_sys::Const)).consttype)
                    >= pg_sys::FirstNormalObjectId =>
            {
                return fail(check)
            }
            T_GroupingFunc if (*(node as *mut pg_sys::GroupingFunc)).agglevelsup > check.depth => {
                return fail(check)
            }
            T_Aggref => {
                let aggref = node as *mut pg_sys::Aggref;
                if (*aggref).agglevelsup > check.depth {
                    return fail(check);
                }
                // The level's own dpnoise aggregates (in HAVING) are releases
                // of their own: only their arguments are checked.
                if check.depth == 0 && repeatable(aggref) {
                    return pg_sys::expression_tree_walker(node, Some(checker), context);
                }
                if !order_free(aggref) {
                    return fail(check);
                }
            }
            // Conversions to text follow settings (extra_float_digits,
            // bytea_output, DateStyle, TimeZone, xmlbinary), whatever the
            // output function's volatility says.
            // XMLTABLE reads its columns with input functions, which follow DateStyle and TimeZone.
            // dpnoise's per-person window (`bounding_window` checked its level).
            T_WindowFunc
                if pg_sys::getExtensionOfObject(
                    pg_sys::ProcedureRelationId,
                    (*(node as *mut pg_sys::WindowFunc)).winfnoid,
                ) == check.extension => {}
            T_WindowFunc | T_SQLValueFunction | T_NextValueExpr | T_CurrentOfExpr
            | T_PlaceHolderVar | T_CoerceViaIO | T_XmlExpr | T_TableFunc => return fail(check),
            T_Param => {
                let param = &*(node as *mut pg_sys::Param);
                match param.paramkind {
                    pg_sys::ParamKind::PARAM_EXTERN => {
                        check.params.push(node as *mut pg_sys::Param)
                    }
                    pg_sys::ParamKind::PARAM_SUBLINK => {}
                    _ => return fail(check),
                }
            }
            T_SortGroupClause if !operators_ours(node as *mut pg_sys::SortGroupClause) => {
                return fail(check)
            }
            _ => {}
        }
        if pg_sys::check_functions_in_node(node, Some(function_not_ours), context) {
            return fail(check);
        }
        pg_sys::expression_tree_walker(node, Some(checker), context)
    }
}

/// True unless `funcid` is immutable and PostgreSQL's or dpnoise's own.
///
/// # Safety
/// Called by `check_functions_in_node` with the `Check`; inside a transaction.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn function_not_ours(funcid: pg_sys::Oid, context: *mut c_void) -> bool {
    // SAFETY: the caller's contract; syscache lookups by OID.
    unsafe {
        let check = &*(context as *mut Check);
        let own = u32::from(funcid) < pg_sys::FirstNormalObjectId
            || (check.extension != pg_sys::InvalidOid
                && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, funcid)
                    == check.extension);
        // dp_share is STABLE only to stay a call in the plan (its total is
        // charged): a function of its arguments.
        let share = own && crate::parameters::share_function(funcid);
        if own && zoned(funcid) {
            (*(context as *mut Check)).zoned = true;
            return false;
        }
        !(own
            && (share
                || pg_sys::func_volatile(funcid)
                    == pg_sys::PROVOLATILE_IMMUTABLE as std::ffi::c_char))
            || setting_dependent(funcid)
    }
}

/// STABLE functions whose result follows the session's TimeZone and
/// nothing else: date_trunc, date_part and extract of a timestamptz and a
/// date as a timestamptz (the gate's total forms of them), and the
/// comparisons between timestamptz and date or timestamp. The time zone
/// then joins the release's identity (`time_zone`): BI tools group by
/// `DATE_TRUNC('month', ts)` on timestamptz columns.
///
/// # Safety
/// Inside a transaction (a syscache lookup by OID).
unsafe fn zoned(funcid: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract; get_func_name returns a palloc'd copy or null.
    let name = unsafe { pg_sys::get_func_name(funcid) };
    if name.is_null() {
        return false;
    }
    // SAFETY: a NUL-terminated name from the catalog.
    let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    const TOTAL_FORMS: [&[u8]; 4] = [
        b"dp_total_timestamptz_trunc",
        b"dp_total_timestamptz_part",
        b"dp_total_extract_timestamptz",
        b"dp_total_date_timestamptz",
    ];
    if TOTAL_FORMS.contains(&name) {
        return true;
    }
    // date_lt_timestamptz, timestamptz_cmp_timestamp, ...: built-ins only.
    u32::from(funcid) < pg_sys::FirstNormalObjectId
        && crate::total::date_time_comparison(&String::from_utf8_lossy(name)) == Some(true)
}

/// The session's TimeZone setting, as it shows it.
pub(super) fn time_zone() -> Vec<u8> {
    // SAFETY: GetConfigOption of a built-in setting returns a live string
    // (never null for TimeZone, missing_ok false).
    unsafe {
        let value = pg_sys::GetConfigOption(c"TimeZone".as_ptr(), false, false);
        std::ffi::CStr::from_ptr(value).to_bytes().to_vec()
    }
}

/// Immutable functions whose result still follows something the query
/// does not name: type output (cstring) functions, which follow
/// extra_float_digits and bytea_output; those reading a text search
/// configuration or dictionary, which can be altered; `timezone(text, …)`,
/// which follows timezone_abbreviations.
///
/// # Safety
/// Inside a transaction (syscache lookups by OID).
unsafe fn setting_dependent(funcid: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract; a failed lookup returns zero / null, treated as dependent.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            pg_sys::Datum::from(funcid),
        );
        if tuple.is_null() {
            return true;
        }
        let proc_ = pg_sys::GETSTRUCT(tuple) as *mut pg_sys::FormData_pg_proc;
        let args = (*proc_)
            .proargtypes
            .values
            .as_slice((*proc_).pronargs as usize);
        let name = std::ffi::CStr::from_ptr((*proc_).proname.data.as_ptr()).to_bytes();
        let dependent = (*proc_).prorettype == pg_sys::CSTRINGOID
            || args.iter().any(|t| {
                [
                    pg_sys::CSTRINGOID,
                    pg_sys::REGCONFIGOID,
                    pg_sys::REGDICTIONARYOID,
                ]
                .contains(t)
            })
            || (name == b"timezone" && args.first() == Some(&pg_sys::TEXTOID));
        pg_sys::ReleaseSysCache(tuple);
        dependent
    }
}

/// Whether `aggref` is one of dpnoise's repeatable aggregates: every
/// aggregate of the table of releasing functions (their final functions
/// draw from `with_release_rng`), not the merges.
///
/// # Safety
/// `aggref` is a live Aggref; inside a transaction.
pub(super) unsafe fn repeatable(aggref: *mut pg_sys::Aggref) -> bool {
    // SAFETY: the caller's contract.
    unsafe { crate::functions::releasing((*aggref).aggfnoid) }
        .is_some_and(|f| f.kind == crate::functions::Kind::Aggregate)
}

/// Whether a subquery's aggregate gives the same result whatever the order
/// of its rows: PostgreSQL's count, min, max, boolean and bit aggregates,
/// and sums and averages of integers and numerics (exact); dpnoise's exact
/// per-person sums; not floating sums, whose rounding follows the order,
/// nor array or string aggregates.
///
/// # Safety
/// `aggref` is a live Aggref; inside a transaction.
unsafe fn order_free(aggref: *mut pg_sys::Aggref) -> bool {
    // SAFETY: the caller's contract; a syscache lookup by OID.
    unsafe {
        if (*aggref).aggkind != b'n' as std::ffi::c_char {
            return false;
        }
        if u32::from((*aggref).aggfnoid) >= pg_sys::FirstNormalObjectId {
            // dpnoise's per-person exact sums (the gate's grouped bounding).
            let extension = crate::extensions::oid(crate::extensions::Extension::Dpnoise);
            let name = pg_sys::get_func_name((*aggref).aggfnoid);
            return extension != pg_sys::InvalidOid
                && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, (*aggref).aggfnoid)
                    == extension
                && !name.is_null()
                && matches!(
                    std::ffi::CStr::from_ptr(name).to_bytes(),
                    b"dp_person_sum" | b"dp_person_avg"
                );
        }
        let name = pg_sys::get_func_name((*aggref).aggfnoid);
        if name.is_null() {
            return false;
        }
        let name = std::ffi::CStr::from_ptr(name).to_bytes();
        let types = crate::gate::aggregate_types(aggref);
        let exact = types.iter().all(|t| {
            [
                pg_sys::INT2OID,
                pg_sys::INT4OID,
                pg_sys::INT8OID,
                pg_sys::NUMERICOID,
            ]
            .contains(t)
        });
        // min and max keep one of the values that tie (-0 or 0, 1.0 or 1.00).
        let ties_identical = types.iter().all(|t| byte_equal(*t, (*aggref).inputcollid));
        match name {
            b"count" | b"bool_and" | b"bool_or" | b"every" | b"bit_and" | b"bit_or"
            | b"bit_xor" => true,
            b"min" | b"max" => ties_identical,
            b"sum" | b"avg" => exact,
            _ => false,
        }
    }
}

/// Whether `relid` carries dpnoise's write tracking (`dp_track`), enabled
/// always, and (if read with its children, `inh`) has no inheritance
/// children; the versions read at execution check the trigger again.
fn tracked(relid: pg_sys::Oid, inh: bool) -> bool {
    // SAFETY: the relation is locked by the parser; its relcache entry's trigger descriptor is
    // read and the relation closed before returning.
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return false;
        }
        let triggers = (*rel).trigdesc;
        let found = !(inh && (*(*rel).rd_rel).relhassubclass)
            && !(*(*rel).rd_rel).relispartition
            && (*(*rel).rd_rel).relpersistence
                == pg_sys::RELPERSISTENCE_PERMANENT as std::ffi::c_char
            && !triggers.is_null()
            && (0..(*triggers).numtriggers as usize).any(|i| {
                let t = &*(*triggers).triggers.add(i);
                !t.tgname.is_null()
                    && std::ffi::CStr::from_ptr(t.tgname).to_bytes() == super::TRIGGER.as_bytes()
                    && t.tgenabled == pg_sys::TRIGGER_FIRES_ALWAYS as std::ffi::c_char
            });
        pg_sys::RelationClose(rel);
        found
    }
}
