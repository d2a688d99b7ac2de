//! Total forms instead of refusals. A built-in function that can raise an
//! error on some value (int4mul on overflow, float8div on a zero divisor,
//! date_trunc on a date at the end of the calendar) would, on a protected
//! column, tell its value by whether the statement fails: one bit per
//! statement, at any ε. Before the gate checks an analyst's statement that
//! reads a protected table, every such call in it, at every level, is
//! replaced by dpnoise's total form of the same function (`crate::total`:
//! NULL, or IEEE's ±Infinity, where the built-in raises), which is
//! LEAKPROOF; the query-tree and plan checks then admit it as any LEAKPROOF
//! function. A few built-ins cannot fail on any input and are admitted as
//! they are (`proven_total`). docs/analysts.md lists both.

use super::catalog::Protected;
use crate::pg_list::{list_items, list_nodes};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashMap;

/// Each built-in (by its OID in pg_proc, the same in every PostgreSQL 15)
/// and the name of its total form in dpnoise (`src/total/total.sql`), which has
/// the same argument and result types (int4 operands of the mixed int4 and
/// int8 operators are read sign-extended by the int8 forms).
pub(super) const SUBSTITUTES: &[(u32, &str)] = &[
    (177, "dp_total_int4pl"),
    (181, "dp_total_int4mi"),
    (141, "dp_total_int4mul"),
    (154, "dp_total_int4div"),
    (156, "dp_total_int4mod"),
    (941, "dp_total_int4mod"), // mod(int4, int4)
    (212, "dp_total_int4um"),
    (1251, "dp_total_int4abs"),
    (1397, "dp_total_int4abs"), // abs(int4)
    (463, "dp_total_int8pl"),
    (464, "dp_total_int8mi"),
    (465, "dp_total_int8mul"),
    (466, "dp_total_int8div"),
    (945, "dp_total_int8mod"),
    (947, "dp_total_int8mod"), // mod(int8, int8)
    (462, "dp_total_int8um"),
    (1230, "dp_total_int8abs"),
    (1396, "dp_total_int8abs"),      // abs(int8)
    (1278, "dp_total_int8pl"),       // int48pl
    (1279, "dp_total_int8mi"),       // int48mi
    (1280, "dp_total_int8mul"),      // int48mul
    (1281, "dp_total_int8div"),      // int48div
    (1274, "dp_total_int8pl"),       // int84pl
    (1275, "dp_total_int8mi"),       // int84mi
    (1276, "dp_total_int8mul"),      // int84mul
    (1277, "dp_total_int8div"),      // int84div
    (480, "dp_total_int4_int8"),     // int4(bigint)
    (317, "dp_total_int4_float8"),   // int4(double precision)
    (483, "dp_total_int8_float8"),   // int8(double precision)
    (319, "dp_total_int4_float4"),   // int4(real)
    (653, "dp_total_int8_float4"),   // int8(real)
    (312, "dp_total_float4_float8"), // float4(double precision)
    (218, "dp_total_float8pl"),
    (219, "dp_total_float8mi"),
    (216, "dp_total_float8mul"),
    (217, "dp_total_float8div"),
    (204, "dp_total_float4pl"),
    (205, "dp_total_float4mi"),
    (202, "dp_total_float4mul"),
    (203, "dp_total_float4div"),
    (1724, "dp_total_numeric_add"),
    (1725, "dp_total_numeric_sub"),
    (1726, "dp_total_numeric_mul"),
    (1727, "dp_total_numeric_div"),
    (1729, "dp_total_numeric_mod"),
    (1728, "dp_total_numeric_mod"),    // mod(numeric, numeric)
    (1744, "dp_total_int4_numeric"),   // int4(numeric)
    (1779, "dp_total_int8_numeric"),   // int8(numeric)
    (1746, "dp_total_float8_numeric"), // float8(numeric)
    (1707, "dp_total_numeric_round"),  // round(numeric, int4)
    (1708, "dp_total_numeric_round0"), // round(numeric)
    (1712, "dp_total_numeric_floor"),
    (1711, "dp_total_numeric_ceil"),
    (2167, "dp_total_numeric_ceil"), // ceiling(numeric)
    (320, "dp_total_width_bucket_float8"),
    (2170, "dp_total_width_bucket_numeric"),
    (870, "dp_total_lower"),
    (871, "dp_total_upper"),
    (850, "dp_total_textlike"),
    (1569, "dp_total_textlike"), // like(text, text)
    (851, "dp_total_textnlike"),
    (1570, "dp_total_textnlike"), // notlike(text, text)
    (1633, "dp_total_texticlike"),
    (1634, "dp_total_texticnlike"),
    (877, "dp_total_text_substr"),        // substr(text, int4, int4)
    (936, "dp_total_text_substr"),        // substring(text, int4, int4)
    (2020, "dp_total_timestamp_trunc"),   // date_trunc(text, timestamp)
    (1217, "dp_total_timestamptz_trunc"), // date_trunc(text, timestamptz)
    (1159, "dp_total_timestamptz_zone"),  // timezone(text, timestamptz): AT TIME ZONE
    (2069, "dp_total_timestamp_zone"),    // timezone(text, timestamp): AT TIME ZONE
    (2021, "dp_total_timestamp_part"),    // date_part(text, timestamp)
    (1171, "dp_total_timestamptz_part"),  // date_part(text, timestamptz)
    (1384, "dp_total_date_part_date"),    // date_part(text, date)
    (6199, "dp_total_extract_date"),
    (6202, "dp_total_extract_timestamp"),
    (6203, "dp_total_extract_timestamptz"),
    (2024, "dp_total_date_timestamp"),   // timestamp(date)
    (1174, "dp_total_date_timestamptz"), // timestamptz(date)
    (3846, "dp_total_make_date"),
    (2049, "dp_total_timestamp_to_char"), // to_char(timestamp, text)
    (1770, "dp_total_timestamptz_to_char"), // to_char(timestamptz, text); dates arrive cast
    (1773, "dp_total_int4_to_char"),      // to_char(integer, text); smallint arrives cast
    (1774, "dp_total_int8_to_char"),
    (1775, "dp_total_float4_to_char"),
    (1776, "dp_total_float8_to_char"),
    (1772, "dp_total_numeric_to_char"),
    // date ± integer.
    (1141, "dp_total_date_pli"),
    (2550, "dp_total_integer_pl_date"),
    (1142, "dp_total_date_mii"),
    // date and timestamp ± interval, to_char of intervals (0.24.0).
    (2071, "dp_total_date_pl_interval"),
    (2072, "dp_total_date_mi_interval"),
    (2032, "dp_total_timestamp_pl_interval"),
    (2033, "dp_total_timestamp_mi_interval"),
    (1768, "dp_total_interval_to_char"),
];

/// Built-in functions that return for every input (NaN, the infinities,
/// the ends of each range included) though not marked LEAKPROOF, admitted
/// on protected rows as they are.
const PROVEN_TOTAL: &[u32] = &[
    // the comparisons across date, timestamp and timestamptz: since
    // PostgreSQL 13 an out-of-range conversion compares as ±infinity.
    2344, // date_cmp_timestamp
    2357, // date_cmp_timestamptz
    2340, // date_eq_timestamp
    2353, // date_eq_timestamptz
    2342, // date_ge_timestamp
    2355, // date_ge_timestamptz
    2341, // date_gt_timestamp
    2354, // date_gt_timestamptz
    2339, // date_le_timestamp
    2352, // date_le_timestamptz
    2338, // date_lt_timestamp
    2351, // date_lt_timestamptz
    2343, // date_ne_timestamp
    2356, // date_ne_timestamptz
    2370, // timestamp_cmp_date
    2526, // timestamp_cmp_timestamptz
    2366, // timestamp_eq_date
    2522, // timestamp_eq_timestamptz
    2368, // timestamp_ge_date
    2524, // timestamp_ge_timestamptz
    2367, // timestamp_gt_date
    2523, // timestamp_gt_timestamptz
    2365, // timestamp_le_date
    2521, // timestamp_le_timestamptz
    2364, // timestamp_lt_date
    2520, // timestamp_lt_timestamptz
    2369, // timestamp_ne_date
    2525, // timestamp_ne_timestamptz
    2383, // timestamptz_cmp_date
    2533, // timestamptz_cmp_timestamp
    2379, // timestamptz_eq_date
    2529, // timestamptz_eq_timestamp
    2381, // timestamptz_ge_date
    2531, // timestamptz_ge_timestamp
    2380, // timestamptz_gt_date
    2530, // timestamptz_gt_timestamp
    2378, // timestamptz_le_date
    2528, // timestamptz_le_timestamp
    2377, // timestamptz_lt_date
    2527, // timestamptz_lt_timestamp
    2382, // timestamptz_ne_date
    2532, // timestamptz_ne_timestamp
    // numeric comparisons: NaN sorts above every number, ±Infinity at the ends.
    pg_sys::F_NUMERIC_EQ,
    pg_sys::F_NUMERIC_NE,
    pg_sys::F_NUMERIC_LT,
    pg_sys::F_NUMERIC_LE,
    pg_sys::F_NUMERIC_GT,
    pg_sys::F_NUMERIC_GE,
    pg_sys::F_NUMERIC_CMP,
    // sign changes and truncations toward zero never leave the range.
    1771, // numeric_uminus
    1704, // numeric_abs
    1705, // abs(numeric)
    220,  // float8um
    221,  // float8abs
    1395, // abs(float8)
    206,  // float4um
    207,  // float4abs
    1394, // abs(float4)
    228,  // dround
    1342, // round(float8)
    229,  // dtrunc
    1343, // trunc(float8)
    2309, // floor(float8)
    2308, // ceil(float8)
    2320, // ceiling(float8)
    1710, // trunc(numeric)
    1709, // trunc(numeric, int4)
    // the length of a (verified) text, and its tail from a position.
    1257, // textlen
    1317, // length(text)
    1369, // character_length(text)
    1381, // char_length(text)
    883,  // substr(text, int4)
    937,  // substring(text, int4)
];

/// Whether a built-in function is admitted on protected rows as it is: it
/// cannot fail on any input.
pub(super) fn proven_total(funcid: pg_sys::Oid) -> bool {
    PROVEN_TOTAL.contains(&u32::from(funcid))
}

/// Built-ins analysts reach for that stay refused, with what to write
/// instead (for the refusal's hint).
const REFUSED: &[(&[u32], &str)] = &[
    (
        &[2648], // statement_timestamp()
        "statement_timestamp() changes within a transaction, so the gate cannot compute it before the statement runs. \
         Use NOW() or CURRENT_TIMESTAMP (the transaction's start), which it computes: WHERE ts >= NOW() - INTERVAL '7 days'.",
    ),
    (
        &[1254, 1256, 1238, 1239], // ~, !~, ~*, !~* on text
        "Regular expressions are not admitted on protected rows: their matching time and memory depend on the text (and can fail: \
         \"regular expression is too complex\", out of memory). Use LIKE or ILIKE: site LIKE 's0%'.",
    ),
    (
        // to_char, date and timestamp ± interval (before 0.24.0, and numbers before 0.23.0)
        &[1768, 1772, 1773, 1774, 1775, 1776, 2071, 2072, 2032, 2033],
        "to_char of numbers (formats of 9, 0, separators and one decimal point) and of intervals (numeric fields: HH24, MI, SS, DD, ...), \
         and date or timestamp ± interval, are admitted through dpnoise's total forms (ALTER EXTENSION dpnoise UPDATE if they are refused). \
         Or use round(...) or width_bucket(...) as keys and format the released keys in an outer query: \
         SELECT to_char(b, '999'), n FROM (SELECT round(amount) b, dp_count(1.0) n ... GROUP BY 1) s.",
    ),
];

/// The admitted form for a refused built-in, if the gate knows one.
pub(super) fn instead(funcid: pg_sys::Oid) -> Option<&'static str> {
    REFUSED
        .iter()
        .find(|(oids, _)| oids.contains(&u32::from(funcid)))
        .map(|(_, hint)| *hint)
}

/// Equality and inequality of text, bpchar and bytea: they compare lengths
/// first, so their work is bounded by a constant, parameter or public
/// column on the other side, and such a call reads its protected argument
/// whole (a listed-key join on text keeps every key). Between two
/// protected values it is capped like any call: the same long value
/// compared to itself is read whole each time (an attack compared a
/// person's 1 MB text to itself 100 times: 100 ms against 4 ms).
const EQUALITY: &[u32] = &[67, 157, 1048, 1053, 1948, 1953];

/// What the mutator carries: the substitutes, the capping function, and
/// the range tables of the levels it is inside (innermost last).
struct Context<'a> {
    substitutes: HashMap<pg_sys::Oid, pg_sys::Oid>,
    capped: Option<pg_sys::Oid>,
    protected: &'a Protected,
    rtables: Vec<*mut pg_sys::List>,
}

/// Whether `var` (at the innermost of `rtables`, less its levels up) is a
/// variable-length column of a protected table other than its privacy
/// unit, seen through join aliases, subquery outputs and (18) GROUP keys.
///
/// # Safety
/// `var` is a live Var of the query whose range tables are `rtables`; inside a transaction.
unsafe fn protected_varlena(
    var: *mut pg_sys::Var,
    rtables: &[*mut pg_sys::List],
    protected: &Protected,
) -> bool {
    // SAFETY: the caller's contract; casts follow the node tags and range-table kinds.
    unsafe {
        let up = (*var).varlevelsup as usize;
        if (*var).varno < 1 || up >= rtables.len() || pg_sys::get_typlen((*var).vartype) != -1 {
            return false;
        }
        let level = rtables.len() - 1 - up;
        let Some(&rte) =
            list_items::<pg_sys::RangeTblEntry>(rtables[level]).get((*var).varno as usize - 1)
        else {
            return false;
        };
        let attno = (*var).varattno;
        // A Var an alias stands for, read at the alias's level.
        let through = |node: *mut pg_sys::Node, rtables: &[*mut pg_sys::List]| {
            !node.is_null()
                && (*node).type_ == pg_sys::NodeTag::T_Var
                && protected_varlena(node.cast(), rtables, protected)
        };
        match (*rte).rtekind {
            pg_sys::RTEKind::RTE_RELATION => {
                attno > 0
                    && protected
                        .tables
                        .get(&(*rte).relid)
                        .is_some_and(|table| table.unit != attno)
            }
            pg_sys::RTEKind::RTE_JOIN => {
                let aliases = list_nodes((*rte).joinaliasvars);
                let alias = aliases
                    .get((attno as usize).wrapping_sub(1))
                    .copied()
                    .unwrap_or(std::ptr::null_mut());
                through(alias, &rtables[..=level])
            }
            pg_sys::RTEKind::RTE_SUBQUERY if !(*rte).subquery.is_null() => {
                let sub = (*rte).subquery;
                let entry = list_items::<pg_sys::TargetEntry>((*sub).targetList)
                    .into_iter()
                    .find(|e| (**e).resno == attno);
                let mut inner = rtables[..=level].to_vec();
                inner.push((*sub).rtable);
                entry.is_some_and(|e| through((*e).expr.cast(), &inner))
            }
            _ => through(
                crate::versions::group_expression(rte, attno),
                &rtables[..=level],
            ),
        }
    }
}

/// Whether an equality's argument bounds its work: it reads no protected
/// variable-length column (a constant, a parameter, a public column, an
/// expression of those; a longer value the plan check weighs as such).
///
/// # Safety
/// As `protected_varlena`, for `node` in the innermost level of `context`.
unsafe fn bounded(node: *mut pg_sys::Node, context: &Context) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Context.
    #[pg_guard]
    unsafe extern "C-unwind" fn reads(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            let context = &*(context as *const Context);
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                return protected_varlena(node.cast(), &context.rtables, context.protected);
            }
            pg_sys::expression_tree_walker(
                node,
                Some(reads),
                (context as *const Context).cast_mut().cast(),
            )
        }
    }
    // SAFETY: the caller's contract; the walk only reads.
    unsafe { !node.is_null() && !reads(node, (context as *const Context).cast_mut().cast()) }
}

/// Passes the protected variable-length columns whose value `cell` holds
/// through `dp_total_capped`: the column itself, under relabelings and
/// COLLATE, or the values a COALESCE, CASE, GREATEST/LEAST or NULLIF
/// passes on.
///
/// # Safety
/// `cell` holds a live expression node (or null) of the innermost level of `context`; nodes are
/// replaced in place by palloc'd calls.
unsafe fn cap_value(cell: *mut *mut pg_sys::Node, capped: pg_sys::Oid, context: &Context) {
    // SAFETY: the caller's contract; casts follow the node tags, list cells hold node pointers.
    unsafe {
        let node = *cell;
        if node.is_null() {
            return;
        }
        let each = |list: *mut pg_sys::List| {
            if !list.is_null() {
                for i in 0..(*list).length as usize {
                    cap_value(
                        (&raw mut (*(*list).elements.add(i)).ptr_value).cast(),
                        capped,
                        context,
                    );
                }
            }
        };
        match (*node).type_ {
            pg_sys::NodeTag::T_Var => {
                let var = node as *mut pg_sys::Var;
                if protected_varlena(var, &context.rtables, context.protected) {
                    *cell = pg_sys::makeFuncExpr(
                        capped,
                        (*var).vartype,
                        pg_sys::lappend(std::ptr::null_mut(), var.cast()),
                        (*var).varcollid,
                        (*var).varcollid,
                        pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                    )
                    .cast();
                }
            }
            pg_sys::NodeTag::T_RelabelType => cap_value(
                (&raw mut (*(node as *mut pg_sys::RelabelType)).arg).cast(),
                capped,
                context,
            ),
            pg_sys::NodeTag::T_CollateExpr => cap_value(
                (&raw mut (*(node as *mut pg_sys::CollateExpr)).arg).cast(),
                capped,
                context,
            ),
            pg_sys::NodeTag::T_CoalesceExpr => each((*(node as *mut pg_sys::CoalesceExpr)).args),
            pg_sys::NodeTag::T_MinMaxExpr => each((*(node as *mut pg_sys::MinMaxExpr)).args),
            pg_sys::NodeTag::T_NullIfExpr => {
                let args = (*(node as *mut pg_sys::NullIfExpr)).args;
                if !args.is_null() && (*args).length > 0 {
                    cap_value(
                        (&raw mut (*(*args).elements).ptr_value).cast(),
                        capped,
                        context,
                    );
                }
            }
            pg_sys::NodeTag::T_CaseExpr => {
                let case = node as *mut pg_sys::CaseExpr;
                for when in list_items::<pg_sys::CaseWhen>((*case).args) {
                    cap_value((&raw mut (*when).result).cast(), capped, context);
                }
                cap_value((&raw mut (*case).defresult).cast(), capped, context);
            }
            _ => {}
        }
    }
}

/// Passes the protected variable-length values each argument of a call of
/// `funcid` holds through `dp_total_capped` (NULL over `CAPPED_BYTES`),
/// unless the call is an `EQUALITY` with a bounded side.
///
/// # Safety
/// `args` is the live argument list of a call of `funcid` in the innermost level of `context`.
unsafe fn cap_arguments(args: *mut pg_sys::List, funcid: pg_sys::Oid, context: &Context) {
    let Some(capped) = context.capped else { return };
    if args.is_null() || funcid == capped {
        return;
    }
    // SAFETY: the caller's contract; each cell holds a node pointer, replaced in place by a palloc'd call.
    unsafe {
        let cells: Vec<*mut *mut pg_sys::Node> = (0..(*args).length as usize)
            .map(|i| (&raw mut (*(*args).elements.add(i)).ptr_value).cast())
            .collect();
        if EQUALITY.contains(&u32::from(funcid))
            && cells.iter().any(|&cell| bounded(*cell, context))
        {
            return;
        }
        for cell in cells {
            cap_value(cell, capped, context);
        }
    }
}

/// Passes a level's GROUP BY and DISTINCT keys that are protected
/// variable-length values through `dp_total_capped`: the Agg hashes and
/// compares a key once per row it meets (a public side's rows multiply
/// them), so a long value would make the statement's run time grow with
/// one person's bytes. A key over `CAPPED_BYTES` groups as NULL (and is
/// shown so); its other occurrences in the level (the select list, HAVING;
/// not inside aggregates) follow it. On 18 the keys live in the level's
/// GROUP entry, and are capped there too.
///
/// # Safety
/// `level` is a live Query, the innermost level of `context`; nodes are replaced in place.
unsafe fn cap_group_keys(level: *mut pg_sys::Query, context: &Context) {
    let Some(capped) = context.capped else { return };
    // SAFETY: the caller's contract; clauses, target entries and cells are the level's own.
    unsafe {
        for cell in crate::versions::group_expression_cells(level) {
            cap_value(cell, capped, context);
        }
        for list in [(*level).groupClause, (*level).distinctClause] {
            for clause in list_items::<pg_sys::SortGroupClause>(list) {
                let entry = pg_sys::get_sortgroupclause_tle(clause, (*level).targetList);
                let original = (*entry).expr as *mut pg_sys::Node;
                let mut key = pg_sys::copyObjectImpl(original.cast()) as *mut pg_sys::Node;
                cap_value(&raw mut key, capped, context);
                if pg_sys::equal(key.cast(), original.cast()) {
                    continue;
                }
                let mut swap = Swap {
                    from: original,
                    to: key,
                    capped,
                };
                let swap_ptr = (&raw mut swap).cast();
                for other in list_items::<pg_sys::TargetEntry>((*level).targetList) {
                    if other != entry {
                        (*other).expr = follow_key((*other).expr.cast(), swap_ptr).cast();
                    }
                }
                (*level).havingQual = follow_key((*level).havingQual, swap_ptr);
                (*entry).expr = key.cast();
            }
        }
    }
}

/// A key and its capped form (`cap_group_keys`).
struct Swap {
    from: *mut pg_sys::Node,
    to: *mut pg_sys::Node,
    capped: pg_sys::Oid,
}

/// Replaces each occurrence of a key (outside aggregates and sublevels) by its capped form.
///
/// # Safety
/// Called by the tree mutator (or `cap_group_keys`) with a live node and the `Swap`.
#[pg_guard]
unsafe extern "C-unwind" fn follow_key(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the copy is palloc'd in the planner's memory context.
    unsafe {
        if node.is_null() {
            return node;
        }
        let swap = &*(context as *const Swap);
        if pg_sys::equal(swap.from.cast(), node.cast()) {
            return pg_sys::copyObjectImpl(swap.to.cast()).cast();
        }
        // A function's argument capped already is the capped key.
        if (*node).type_ == pg_sys::NodeTag::T_FuncExpr
            && (*(node as *mut pg_sys::FuncExpr)).funcid == swap.capped
        {
            return node;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Aggref || (*node).type_ == pg_sys::NodeTag::T_Query {
            return node;
        }
        crate::versions::expression_tree_mutator(node, follow_key, context)
    }
}

/// Replaces, in an analyst's statement that reads a protected table, each
/// built-in of `SUBSTITUTES` by its total form, at every level (subqueries,
/// CTEs, the public side too: the planner may evaluate any of it among
/// protected rows). A statement that reads no protected table keeps
/// PostgreSQL's own functions. Where a call reads a protected text (or
/// other variable-length) column, the value reaches it through
/// `dp_total_capped`, so that its work is bounded whatever the row.
///
/// # Safety
/// `query` is the live Query the planner hook was given.
pub(super) unsafe fn substitute(query: *mut pg_sys::Query, protected: &Protected) {
    let substitutes = resolve(&protected.forms);
    if substitutes.is_empty() || !super::joins::reads_protected(query.cast(), protected) {
        return;
    }
    let capped = protected.forms.get("dp_total_capped").copied();
    let mut context = Context {
        substitutes,
        capped,
        protected,
        rtables: Vec::new(),
    };
    /// # Safety
    /// Called by the tree mutators with live nodes and the substitutes.
    #[pg_guard]
    unsafe extern "C-unwind" fn mutate(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            use pg_sys::NodeTag::*;
            if node.is_null() {
                return node;
            }
            if (*node).type_ == T_Query {
                let level = node as *mut pg_sys::Query;
                (*(context as *mut Context)).rtables.push((*level).rtable);
                // In place: the planner hook's Query stays the one planned.
                let done = crate::versions::query_tree_mutator(
                    level,
                    mutate,
                    context,
                    pg_sys::QTW_DONT_COPY_QUERY as i32,
                )
                .cast();
                cap_group_keys(level, &*(context as *const Context));
                (*(context as *mut Context)).rtables.pop();
                return done;
            }
            // A public constant computed now (`constants`), whole.
            if let Some(value) = super::constants::fold(node) {
                return value;
            }
            // A copy of the node over its mutated children.
            let node = crate::versions::expression_tree_mutator(node, mutate, context);
            let context = &*(context as *const Context);
            let substitutes = &context.substitutes;
            match (*node).type_ {
                T_FuncExpr => {
                    let call = node as *mut pg_sys::FuncExpr;
                    if let Some(&total) = substitutes.get(&(*call).funcid) {
                        if !zone_loaded(call, (*call).funcid) {
                            return node;
                        }
                        (*call).funcid = total;
                    } else if let Some(builtin) = ZONED
                        .iter()
                        .map(|&b| pg_sys::Oid::from(b))
                        .find(|b| substitutes.get(b) == Some(&(*call).funcid))
                    {
                        // A total form written as such: its zone too must
                        // be a constant, or it is the built-in, refused.
                        if !zone_loaded(call, builtin) {
                            (*call).funcid = builtin;
                            return node;
                        }
                    }
                    cap_arguments((*call).args, (*call).funcid, context);
                    node
                }
                // IS DISTINCT FROM and NULLIF compare as their operator does.
                T_DistinctExpr | T_NullIfExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    pg_sys::set_opfuncid(op);
                    cap_arguments((*op).args, (*op).opfuncid, context);
                    node
                }
                T_OpExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    pg_sys::set_opfuncid(op);
                    let Some(&total) = substitutes.get(&(*op).opfuncid) else {
                        cap_arguments((*op).args, (*op).opfuncid, context);
                        return node;
                    };
                    // The operator becomes a call of the total form: the
                    // planner would otherwise look its function up again
                    // from the operator.
                    let call = pg_sys::makeFuncExpr(
                        total,
                        (*op).opresulttype,
                        (*op).args,
                        (*op).opcollid,
                        (*op).inputcollid,
                        pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                    );
                    (*call).location = (*op).location;
                    cap_arguments((*call).args, total, context);
                    call.cast()
                }
                // Each element of the array compared to the column reads it again.
                T_ScalarArrayOpExpr => {
                    let op = node as *mut pg_sys::ScalarArrayOpExpr;
                    pg_sys::set_sa_opfuncid(op);
                    cap_arguments((*op).args, (*op).opfuncid, context);
                    node
                }
                // Comparisons under an ordering: GREATEST, LEAST, row comparisons.
                T_MinMaxExpr => {
                    cap_arguments(
                        (*(node as *mut pg_sys::MinMaxExpr)).args,
                        pg_sys::InvalidOid,
                        context,
                    );
                    node
                }
                T_RowCompareExpr => {
                    let row = node as *mut pg_sys::RowCompareExpr;
                    cap_arguments((*row).largs, pg_sys::InvalidOid, context);
                    cap_arguments((*row).rargs, pg_sys::InvalidOid, context);
                    node
                }
                _ => node,
            }
        }
    }
    // SAFETY: the caller's contract; the mutator rewrites `query` in place (QTW_DONT_COPY_QUERY).
    unsafe {
        mutate(query.cast(), (&raw mut context).cast());
    }
}

/// For AT TIME ZONE (`builtin` timezone(zone, timestamp[tz]), or its
/// total form): whether `call`'s zone is a constant, then loaded now,
/// before any row is read (`crate::total::load_zone`): a zone read from a
/// column, or first loaded among rows, would tell which rows reached it.
/// Any other call: true.
///
/// # Safety
/// `call` is a live FuncExpr; inside a transaction.
unsafe fn zone_loaded(call: *mut pg_sys::FuncExpr, builtin: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract; the zone is a text constant, detoasted to read its bytes.
    unsafe {
        if !ZONED.contains(&u32::from(builtin)) {
            return true;
        }
        let zone = list_nodes((*call).args)[0];
        if (*zone).type_ != pg_sys::NodeTag::T_Const
            || (*(zone as *mut pg_sys::Const)).constisnull
            || (*(zone as *mut pg_sys::Const)).consttype != pg_sys::TEXTOID
        {
            return false;
        }
        let text = pg_sys::pg_detoast_datum_packed(
            (*(zone as *mut pg_sys::Const)).constvalue.cast_mut_ptr(),
        );
        crate::total::load_zone(std::slice::from_raw_parts(
            pgrx::vardata_any(text.cast()).cast::<u8>(),
            pgrx::varsize_any_exhdr(text.cast()),
        ));
        true
    }
}

/// timezone(text, timestamptz) and timezone(text, timestamp).
const ZONED: [u32; 2] = [1159, 2069];

/// The OIDs of the total forms, by built-in: `SUBSTITUTES` with dpnoise's
/// functions found by name (`forms`: name to OID). A form missing from the
/// installed version is left out (its built-in stays refused).
pub(super) fn resolve(forms: &HashMap<String, pg_sys::Oid>) -> HashMap<pg_sys::Oid, pg_sys::Oid> {
    SUBSTITUTES
        .iter()
        .filter_map(|(builtin, name)| {
            forms
                .get(*name)
                .map(|oid| (pg_sys::Oid::from(*builtin), *oid))
        })
        .collect()
}
