//! dpnoise over Citus tables: exact partials on the workers, noise once on
//! the coordinator.
//!
//! Citus runs an aggregate either whole on the workers (GROUP BY the
//! distribution column, a query that hits one shard) or in two phases; in
//! both, a dpnoise aggregate's final function would run where Citus put it,
//! charging that node's ledger. So before Citus plans it, the planner hook
//! splits every query level whose dpnoise aggregates read a Citus table:
//!
//! - the partials: the level's FROM, WHERE and GROUP BY, with each dpnoise
//!   aggregate replaced by exact partials Citus knows how to push down,
//!   its own `count` and `sum` (of `dp_lattice_steps`, the value clamped
//!   and rounded onto the aggregate's lattice exactly as its transition
//!   does, so the distributed sum is bit-identical to the serial one);
//! - the release: the level's outputs, HAVING, ORDER BY and LIMIT over
//!   `dp_partials(<the partials as SQL>)`, a function Citus cannot ship,
//!   each dpnoise aggregate replaced by its merge (`dp_merge_count`,
//!   `dp_merge_sum`), which takes the original parameters as constants,
//!   pays once per call site on this node's ledger and draws the noise.
//!
//! The privacy parameters are folded to constants here (a refusal happens
//! before anything runs), so both halves see the same ones. A release on a
//! Citus worker node is refused (`refuse_on_worker`): budgets live on the
//! coordinator.
//!
//! An analyst's admitted level over a protected table (the gate has
//! rewritten it: bounded per person, partition selection in HAVING) is
//! split the same way, its partials run as the extension's owner in
//! `dp_partials_sealed` (`sealed`, `crate::seal`); `finish` refuses a plan
//! holding a seal its planning did not write.

use crate::gate::bounding::collect_aggregates;
use crate::gate::{aggregate_types, list_items};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashMap;
use std::ffi::{CStr, CString};

pgrx::extension_sql_file!("citus.sql", name = "citus_sql", requires = ["sum_sql", "count_sql"]);
const _: () =
    assert!(crate::fmgr::every_sspace_is(include_str!("citus.sql"), std::mem::size_of::<crate::sum::SumState>()));

fn unsupported(what: &str, hint: &str) -> ! {
    crate::errors::raise_sqlstate("0A000", format!("dpnoise over a Citus table: {what}"), Some(hint.to_owned()))
}

/// The first column of a catalog query's first row, read-only: pgrx's
/// Spi::get_one assigns a transaction ID, which a parallel query's leader
/// (where a release runs) and a standby cannot.
fn read_one<T: pgrx::FromDatum + pgrx::IntoDatum>(sql: &str) -> Option<T> {
    Spi::connect(|client| client.select(sql, Some(1), &[])?.first().get_one::<T>()).ok().flatten()
}

fn citus_installed() -> bool {
    // SAFETY: inside a transaction (every caller's).
    unsafe { crate::extensions::oid(crate::extensions::Extension::Citus) != pg_sys::InvalidOid }
}


/// What one planning split, for `finish` once the plan is made.
#[derive(Default)]
pub struct Planning {
    /// A generic plan that needed a split (parameters not known when
    /// planned): left to Citus, where its releases would be refused on the
    /// workers, and priced out of the plan cache, which then keeps making
    /// custom plans.
    generic: bool,
    /// The tables the partials read, which the plan now reads only as text:
    /// a change to one (a REVOKE, an ALTER) must invalidate it all the same.
    relations: Vec<pg_sys::Oid>,
    /// The seals this planning wrote (`dp_partials_sealed`).
    seals: Vec<[u8; crate::seal::SEAL_BYTES]>,
    /// The tables sealed partials read with the analyst's privileges:
    /// added to the plan's range table, so the executor checks them again
    /// each time the plan runs (a cached plan outlives a REVOKE of a role).
    checked: Vec<*mut pg_sys::RangeTblEntry>,
}

/// Splits every query level of `query` whose dpnoise aggregates read a
/// Citus table (see the module's comment), noting in `planning` what the
/// plan needs once made (`finish`).
///
/// # Safety
/// `query` is the live Query the planner hook was given, before planning;
/// `params` its bound parameters or null; inside a transaction.
pub unsafe fn distribute(query: *mut pg_sys::Query, params: pg_sys::ParamListInfo, planning: &mut Planning) {
    // SAFETY: the caller's contract.
    unsafe {
        if query.is_null() || (*query).commandType != pg_sys::CmdType::CMD_SELECT || !has_dp_calls(query) {
            return;
        }
        if !citus_installed() {
            return;
        }
        if unknown_params(query.cast(), params) {
            planning.generic = true;
            return;
        }
        visit(query, params, planning);
    }
}

/// Completes a plan made after `distribute`: prices a generic plan out of
/// the plan cache, makes it depend on the tables its partials read, and,
/// for an analyst, refuses any call of `dp_partials_sealed` in it that this
/// planning did not write (one the analyst wrote, or a SQL function of
/// theirs that the planner inlined, carrying a seal read from a printed plan).
///
/// # Safety
/// `planned` is the live PlannedStmt the planner made; inside a transaction.
pub unsafe fn finish(planned: *mut pg_sys::PlannedStmt, planning: &Planning) {
    // SAFETY: the caller's contract.
    unsafe {
        if planned.is_null() {
            return;
        }
        if planning.generic && !(*planned).planTree.is_null() {
            (*(*planned).planTree).total_cost = 1e100;
        }
        for relid in &planning.relations {
            (*planned).relationOids = pg_sys::lappend_oid((*planned).relationOids, *relid);
        }
        for rte in &planning.checked {
            (*planned).rtable = pg_sys::lappend((*planned).rtable, (*rte).cast());
        }
        if crate::gate::gated() {
            check_sealed_calls(planned, &planning.seals);
        }
    }
}

/// Refuses a plan holding a call of `dp_partials_sealed` whose seal is not
/// one of `seals` (or is not a constant).
///
/// # Safety
/// As `finish`.
unsafe fn check_sealed_calls(planned: *mut pg_sys::PlannedStmt, seals: &[[u8; crate::seal::SEAL_BYTES]]) {
    struct Search<'a> {
        function: pg_sys::Oid,
        seals: &'a [[u8; crate::seal::SEAL_BYTES]],
    }
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Search.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags (OpExpr, DistinctExpr and
        // NullIfExpr share one struct); a bytea Const's value is a live varlena.
        unsafe {
            if node.is_null() {
                return false;
            }
            let search = &*(context as *const Search);
            let (funcid, args) = match (*node).type_ {
                pg_sys::NodeTag::T_FuncExpr => ((*(node as *mut pg_sys::FuncExpr)).funcid, (*(node as *mut pg_sys::FuncExpr)).args),
                pg_sys::NodeTag::T_OpExpr | pg_sys::NodeTag::T_DistinctExpr | pg_sys::NodeTag::T_NullIfExpr => {
                    ((*(node as *mut pg_sys::OpExpr)).opfuncid, (*(node as *mut pg_sys::OpExpr)).args)
                }
                _ => (pg_sys::InvalidOid, std::ptr::null_mut()),
            };
            if funcid == search.function {
                let seal = list_items::<pg_sys::Node>(args).get(1).copied().filter(|a| (**a).type_ == pg_sys::NodeTag::T_Const);
                let ours = seal.is_some_and(|c| {
                    let c = c as *mut pg_sys::Const;
                    if (*c).constisnull {
                        return false;
                    }
                    let value = pg_sys::pg_detoast_datum_packed((*c).constvalue.cast_mut_ptr());
                    let bytes = std::slice::from_raw_parts(
                        pgrx::varlena::vardata_any(value) as *const u8,
                        pgrx::varlena::varsize_any_exhdr(value),
                    );
                    search.seals.iter().any(|s| s.as_slice() == bytes)
                });
                if !ours {
                    return true;
                }
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract: the plan tree, its subplans and Citus's custom plans are live;
    // each node is cast to the struct its tag names.
    unsafe {
        // Read without a query: this runs after every plan of an analyst's, its own queries' too.
        let Some(schema) = crate::gate::own_schema() else { return };
        let schema = pg_sys::get_namespace_name(schema);
        if schema.is_null() {
            return;
        }
        let schema = CStr::from_ptr(schema).to_string_lossy().into_owned();
        let function = find(&schema, "dp_partials_sealed", &[pg_sys::TEXTOID, pg_sys::BYTEAOID], true);
        if function == pg_sys::InvalidOid {
            // An older version of dpnoise, not updated yet: it has none.
            return;
        }
        let search = Search { function, seals };
        let context = (&raw const search) as *mut std::ffi::c_void;
        let mut plans = vec![planned];
        let mut refused = false;
        while let Some(stmt) = plans.pop() {
            for plan in crate::parameters::plan_nodes(stmt) {
                let mut lists = vec![(*plan).targetlist, (*plan).qual];
                match (*plan).type_ {
                    pg_sys::NodeTag::T_FunctionScan => lists.push((*(plan as *mut pg_sys::FunctionScan)).functions),
                    pg_sys::NodeTag::T_CustomScan => {
                        // Plans held by an extension's node (Citus's): walked as statements of their own.
                        for inner in list_items::<pg_sys::Plan>((*(plan as *mut pg_sys::CustomScan)).custom_plans) {
                            let stmt = pg_sys::palloc0(std::mem::size_of::<pg_sys::PlannedStmt>()) as *mut pg_sys::PlannedStmt;
                            (*stmt).type_ = pg_sys::NodeTag::T_PlannedStmt;
                            (*stmt).planTree = inner;
                            plans.push(stmt);
                        }
                    }
                    _ => {}
                }
                refused |= lists.into_iter().any(|list| !list.is_null() && walk(list.cast(), context));
            }
        }
        if refused {
            crate::errors::raise_sqlstate(
                crate::gate::QUERY_REFUSED,
                "dpnoise: dp_partials_sealed runs only the partials the planner writes, in the statement it writes them for"
                    .to_owned(),
                Some("Query the distributed table itself; dpnoise splits the query.".to_owned()),
            );
        }
    }
}

/// Whether a Query or expression tree uses an external parameter whose
/// value is not fixed for this plan (a generic plan's).
///
/// # Safety
/// `node` is null or a live Query or expression tree; `params` live or null.
unsafe fn unknown_params(node: *mut pg_sys::Node, params: pg_sys::ParamListInfo) -> bool {
    /// # Safety
    /// Called by the tree walkers with live nodes and the ParamListInfo.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            match (*node).type_ {
                pg_sys::NodeTag::T_Query => pg_sys::query_tree_walker(node.cast(), Some(walk), context, 0),
                pg_sys::NodeTag::T_Param => {
                    let p = node as *mut pg_sys::Param;
                    (*p).paramkind == pg_sys::ParamKind::PARAM_EXTERN && fixed_param(p, context as pg_sys::ParamListInfo).is_none()
                }
                _ => pg_sys::expression_tree_walker(node, Some(walk), context),
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, params.cast()) }
}

/// The value of an external parameter fixed for this plan (a custom plan's), if it is.
///
/// # Safety
/// `p` is a live PARAM_EXTERN Param; `params` live or null.
pub(crate) unsafe fn fixed_param(p: *mut pg_sys::Param, params: pg_sys::ParamListInfo) -> Option<*mut pg_sys::ParamExternData> {
    // SAFETY: the caller's contract; a ParamListInfo's params array holds numParams entries
    // (paramFetch, when set, returns one of them or its workspace, which is leaked to the planner's context).
    unsafe {
        let id = (*p).paramid;
        if params.is_null() || id < 1 || id > (*params).numParams {
            return None;
        }
        let data = match (*params).paramFetch {
            Some(fetch) => {
                let workspace = pg_sys::palloc0(std::mem::size_of::<pg_sys::ParamExternData>()) as *mut pg_sys::ParamExternData;
                fetch(params, id, false, workspace)
            }
            None => (*params).params.as_mut_ptr().add(id as usize - 1),
        };
        (!data.is_null() && (*data).pflags as u32 & pg_sys::PARAM_FLAG_CONST != 0 && (*data).ptype == (*p).paramtype).then_some(data)
    }
}

/// The dpnoise aggregates of one level (its outputs and HAVING).
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn level_calls(level: *mut pg_sys::Query) -> Vec<(*mut pg_sys::Aggref, Option<(String, usize)>)> {
    // SAFETY: the caller's contract.
    unsafe {
        let mut found = Vec::new();
        collect_aggregates((*level).targetList.cast(), &mut found);
        collect_aggregates((*level).havingQual, &mut found);
        found
            .into_iter()
            .map(|a| (a, crate::parameters::releasing((*a).aggfnoid, &aggregate_types(a))))
            .collect()
    }
}

/// Whether any level (FROM subqueries and CTEs) calls a dpnoise aggregate
/// or per-row function.
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn has_dp_calls(level: *mut pg_sys::Query) -> bool {
    // SAFETY: the caller's contract; RTEs and CTEs are read by their kinds.
    unsafe {
        if (*level).hasAggs && level_calls(level).iter().any(|(_, r)| r.is_some()) {
            return true;
        }
        if !(*level).hasAggs && row_calls((*level).targetList.cast()) {
            return true;
        }
        sub_levels(level).into_iter().any(|q| has_dp_calls(q))
    }
}

/// dpnoise's releasing function that `node` calls, if it is one: its name
/// and first privacy argument.
///
/// # Safety
/// `node` is a live node; inside a transaction.
unsafe fn releasing_call(node: *mut pg_sys::Node) -> Option<(String, usize)> {
    // SAFETY: the caller's contract; a FuncExpr's args is a List of expressions.
    unsafe {
        if (*node).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let f = node as *mut pg_sys::FuncExpr;
        let types: Vec<pg_sys::Oid> = list_items::<pg_sys::Node>((*f).args).into_iter().map(|a| pg_sys::exprType(a)).collect();
        crate::parameters::releasing((*f).funcid, &types)
    }
}

/// Whether an expression tree calls one of dpnoise's per-row releasing functions.
///
/// # Safety
/// `node` is null or a live expression tree; inside a transaction.
unsafe fn row_calls(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            releasing_call(node).is_some() || pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, std::ptr::null_mut()) }
}

/// A level's FROM subqueries (not LATERAL ones, which read the level) and CTEs.
///
/// # Safety
/// `level` is a live Query.
unsafe fn sub_levels(level: *mut pg_sys::Query) -> Vec<*mut pg_sys::Query> {
    // SAFETY: the caller's contract; a CTE's query and a subquery RTE's are Queries once analysed.
    unsafe {
        let mut levels: Vec<*mut pg_sys::Query> = list_items::<pg_sys::RangeTblEntry>((*level).rtable)
            .into_iter()
            .filter(|rte| (**rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && !(**rte).lateral)
            .map(|rte| (*rte).subquery)
            .collect();
        levels.extend(
            list_items::<pg_sys::CommonTableExpr>((*level).cteList)
                .into_iter()
                .map(|cte| (*cte).ctequery as *mut pg_sys::Query)
                .filter(|q| !q.is_null() && (**q).type_ == pg_sys::NodeTag::T_Query),
        );
        levels
    }
}

/// # Safety
/// As `distribute`, for one level.
unsafe fn visit(level: *mut pg_sys::Query, params: pg_sys::ParamListInfo, planning: &mut Planning) {
    // SAFETY: the caller's contract.
    unsafe {
        for sub in sub_levels(level) {
            visit(sub, params, planning);
        }
        if !(*level).hasAggs {
            if row_calls((*level).targetList.cast()) && reads_citus(level) {
                split_rows(level, params, planning);
            }
            return;
        }
        let calls = level_calls(level);
        if calls.iter().all(|(_, r)| r.is_none()) || !reads_citus(level) {
            return;
        }
        split(level, &calls, params, planning);
    }
}

/// The relations the level's FROM reads, its subqueries' and CTEs' included.
///
/// # Safety
/// `level` is a live Query.
unsafe fn relations(level: *mut pg_sys::Query, into: &mut Vec<pg_sys::Oid>) {
    // SAFETY: the caller's contract.
    unsafe {
        for rte in list_items::<pg_sys::RangeTblEntry>((*level).rtable) {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                into.push((*rte).relid);
            }
        }
        for sub in sub_levels(level) {
            relations(sub, into);
        }
    }
}

/// Whether the partials of `level` must run sealed, as the extension's
/// owner: an analyst's level that reads a protected table (the gate vouched
/// for it: no SELECT privilege is needed). Then every other table it reads
/// needs the analyst's SELECT now, and each protected Citus table must be
/// distributed by its privacy unit (a person's rows on one shard, so that
/// the gate's bounding, per person, runs where the rows are).
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn sealed(level: *mut pg_sys::Query, planning: &mut Planning) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let mut relids = Vec::new();
        relations(level, &mut relids);
        if !relids.iter().any(|r| crate::gate::protected_unit(*r).is_some()) {
            return false;
        }
        // Every table the level reads, in FROM, subqueries, sublinks and
        // LATERAL items alike; and what runs as the owner is checked.
        let (relids, checked) = check_sealable(level);
        planning.checked.extend(checked);
        let protected: Vec<(pg_sys::Oid, i16)> =
            relids.iter().filter_map(|r| crate::gate::protected_unit(*r).map(|unit| (*r, unit))).collect();
        let list = relids.iter().map(|r| r.to_u32().to_string()).collect::<Vec<_>>().join(",");
        if read_one::<bool>(&format!(
            "SELECT pg_catalog.bool_or(relrowsecurity) FROM pg_catalog.pg_class \
             WHERE oid OPERATOR(pg_catalog.=) ANY ('{{{list}}}'::pg_catalog.oid[])"
        ))
        .unwrap_or(false)
        {
            refuse_sealed("a table with row-level security is not admitted on a distributed table", "Ask the DBA.");
        }
        if has_set_operations(level) {
            // The gate's own UNION ALL (keys listed by a public table) is
            // not a tree the deparser can write out.
            crate::errors::raise_sqlstate(
                crate::gate::QUERY_REFUSED,
                "dpnoise over a Citus table: keys listed by a public table are not admitted on a distributed table yet".to_owned(),
                Some("GROUP BY the keys without the list: the keys are then chosen by private partition selection.".to_owned()),
            );
        }
        // Citus joins distributed tables on their shards only when they are
        // co-located; otherwise it fails when the query runs, after an
        // analyst's statement has paid: refused here, before.
        let groups = read_one::<i64>(&format!(
            "SELECT count(DISTINCT colocationid) FROM pg_catalog.pg_dist_partition \
             WHERE logicalrelid OPERATOR(pg_catalog.=) ANY ('{{{list}}}'::pg_catalog.oid[]) \
             AND partmethod OPERATOR(pg_catalog.<>) 'n'"
        ))
        .unwrap_or(0);
        if groups > 1 {
            crate::errors::raise_sqlstate(
                crate::gate::QUERY_REFUSED,
                "dpnoise over a Citus table: an analyst's query may join distributed tables only when they are co-located".to_owned(),
                Some("Ask the DBA to co-locate them (create_distributed_table(..., colocate_with => ...)), or join reference tables.".to_owned()),
            );
        }
        for (relid, unit) in protected {
            let distribution = Spi::connect(|client| {
                client.select(&format!(
                "SELECT partmethod::pg_catalog.text, pg_catalog.column_to_column_name(logicalrelid, partkey) \
                 FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) {}::pg_catalog.oid",
                relid.to_u32()
                ), Some(1), &[])?.first().get_two::<String, String>()
            })
            .ok();
            let Some((Some(method), column)) = distribution else { continue };
            if method == "n" {
                // A reference table: every node holds all of it.
                continue;
            }
            let unit_name = CStr::from_ptr(pg_sys::get_attname(relid, unit, false)).to_string_lossy().into_owned();
            if column.as_deref() != Some(unit_name.as_str()) {
                crate::errors::raise_sqlstate(
                    crate::gate::QUERY_REFUSED,
                    "dpnoise over a Citus table: an analyst's query over a protected table needs it distributed by its privacy unit".to_owned(),
                    Some(format!(
                        "Ask the DBA to distribute it by the privacy unit: SELECT alter_distributed_table('{}', distribution_column := '{unit_name}');",
                        {
                            let name = pg_sys::get_rel_name(relid);
                            if name.is_null() { "<table>".into() } else { CStr::from_ptr(name).to_string_lossy() }
                        }
                    )),
                );
            }
        }
        true
    }
}

/// Whether the level or one below it in FROM is a UNION, INTERSECT or EXCEPT.
///
/// # Safety
/// `level` is a live Query.
unsafe fn has_set_operations(level: *mut pg_sys::Query) -> bool {
    // SAFETY: the caller's contract.
    unsafe { !(*level).setOperations.is_null() || sub_levels(level).into_iter().any(|q| has_set_operations(q)) }
}

/// Refuses an analyst's level over a distributed table (ZB003).
fn refuse_sealed(what: &str, hint: &str) -> ! {
    crate::errors::raise_sqlstate(
        crate::gate::QUERY_REFUSED,
        format!("dpnoise over a Citus table: {what}"),
        Some(hint.to_owned()),
    )
}

/// What `check_sealable` found: the tables read, those read with the
/// analyst's privileges (copies of their entries), and the first refusal.
struct Sealable {
    relids: Vec<pg_sys::Oid>,
    checked: Vec<*mut pg_sys::RangeTblEntry>,
    refusal: Option<(&'static str, String, &'static str)>,
}

/// Checks a level whose partials will run sealed, as the extension's
/// owner, and returns every table it reads (its subqueries, sublinks and
/// LATERAL items included). Refused:
/// - a table the gate did not vouch for that the analyst cannot read
///   (42501), as the executor would check it for them;
/// - row-level security policies and security barriers, which the text
///   would lose (ZB003);
/// - any function, operator or aggregate outside pg_catalog and dpnoise,
///   and domains and composite values (their input runs a CHECK), which
///   would run as the owner (ZB003).
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn check_sealable(level: *mut pg_sys::Query) -> (Vec<pg_sys::Oid>, Vec<*mut pg_sys::RangeTblEntry>) {
    /// # Safety
    /// Called by `check_functions_in_node`, inside a transaction.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn foreign(function: pg_sys::Oid, _context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe { crate::parameters::untrusted(function) }
    }
    /// Whether values of `type_` are read through code a role may write.
    ///
    /// # Safety
    /// Inside a transaction.
    unsafe fn foreign_type(type_: pg_sys::Oid) -> bool {
        // SAFETY: syscache lookups by OID.
        unsafe {
            let element = pg_sys::get_element_type(type_);
            [type_, element].into_iter().filter(|t| *t != pg_sys::InvalidOid).any(|t| {
                let kind = pg_sys::get_typtype(t) as u8;
                kind == b'd' || (kind == b'c' && t != pg_sys::RECORDOID)
            })
        }
    }
    /// # Safety
    /// Called by the tree walkers with live nodes and the Sealable.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            let found = &mut *(context as *mut Sealable);
            let refuse = |found: &mut Sealable, state: &'static str, what: String, hint: &'static str| {
                found.refusal = Some((state, what, hint));
                true
            };
            const BUILT_IN: &str = "Use built-in functions and operators only (pg_catalog's), or ask a curator.";
            match (*node).type_ {
                pg_sys::NodeTag::T_Query => {
                    return pg_sys::query_tree_walker(node.cast(), Some(walk), context, pg_sys::QTW_EXAMINE_RTES_BEFORE as i32);
                }
                pg_sys::NodeTag::T_RangeTblEntry => {
                    let rte = node as *mut pg_sys::RangeTblEntry;
                    if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                        found.relids.push((*rte).relid);
                        if !(*rte).securityQuals.is_null() {
                            return refuse(found, crate::gate::QUERY_REFUSED, "a table with row-level security is not admitted on a distributed table".to_owned(), "Ask the DBA.");
                        }
                        if (*rte).requiredPerms != 0 && !pg_sys::ExecCheckRTPerms(pg_sys::lappend(std::ptr::null_mut(), rte.cast()), false) {
                            let name = pg_sys::get_rel_name((*rte).relid);
                            let name = if name.is_null() { "?".to_owned() } else { CStr::from_ptr(name).to_string_lossy().into_owned() };
                            return refuse(found, "42501", format!("permission denied for table {name}"), "");
                        }
                        if (*rte).requiredPerms != 0 {
                            // Checked again by the executor: a plain entry, read by no node.
                            let copy = pg_sys::copyObjectImpl(rte.cast()) as *mut pg_sys::RangeTblEntry;
                            (*copy).securityQuals = std::ptr::null_mut();
                            (*copy).tablesample = std::ptr::null_mut();
                            (*copy).inh = false;
                            found.checked.push(copy);
                        }
                    }
                    if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && (*rte).security_barrier {
                        return refuse(found, crate::gate::QUERY_REFUSED, "a security barrier view is not admitted on a distributed table".to_owned(), "Ask the DBA.");
                    }
                    // range_table_walker goes on into the entry's subquery, functions and values.
                    return false;
                }
                pg_sys::NodeTag::T_Const if foreign_type((*(node as *mut pg_sys::Const)).consttype) => {
                    return refuse(found, crate::gate::QUERY_REFUSED, "a domain or composite constant is not admitted on a distributed table".to_owned(), BUILT_IN);
                }
                pg_sys::NodeTag::T_CoerceToDomain => {
                    return refuse(found, crate::gate::QUERY_REFUSED, "a domain is not admitted on a distributed table".to_owned(), BUILT_IN);
                }
                _ => {}
            }
            if pg_sys::check_functions_in_node(node, Some(foreign), std::ptr::null_mut()) {
                return refuse(
                    found,
                    crate::gate::QUERY_REFUSED,
                    "an analyst's query over a distributed table may call only built-in functions (they run where the shards are, as the extension's owner)".to_owned(),
                    BUILT_IN,
                );
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    let mut found = Sealable { relids: Vec::new(), checked: Vec::new(), refusal: None };
    // SAFETY: the caller's contract; `found` outlives the walk.
    unsafe { walk(level.cast(), (&raw mut found).cast()) };
    if let Some((state, what, hint)) = found.refusal {
        crate::errors::raise_sqlstate(state, what, (!hint.is_empty()).then(|| hint.to_owned()));
    }
    (found.relids, found.checked)
}

/// Whether the level's FROM (its subqueries and CTEs included) reads a Citus table.
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn reads_citus(level: *mut pg_sys::Query) -> bool {
    let mut relids = Vec::new();
    // SAFETY: the caller's contract.
    unsafe { relations(level, &mut relids) };
    if relids.is_empty() {
        return false;
    }
    let list = relids.iter().map(|r| r.to_u32().to_string()).collect::<Vec<_>>().join(",");
    read_one::<bool>(&format!(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition \
         WHERE logicalrelid OPERATOR(pg_catalog.=) ANY ('{{{list}}}'::pg_catalog.oid[]))"
    ))
    .unwrap_or(false)
}

/// One dpnoise aggregate of a split level: its partial columns (in the
/// partials' target list) and its merge.
struct Split {
    partials: Vec<*mut pg_sys::Node>,
    merge: pg_sys::Oid,
    result: pg_sys::Oid,
    /// The merge's arguments after its partials (constants).
    constants: Vec<*mut pg_sys::Node>,
    /// dp_avg's merge reads a count; the other sums a NULL in its place.
    null_count: bool,
}

/// # Safety
/// `level` is a live Query whose dpnoise aggregates `calls` read a Citus
/// table; `params` its bound parameters or null; inside a transaction.
unsafe fn split(
    level: *mut pg_sys::Query,
    calls: &[(*mut pg_sys::Aggref, Option<(String, usize)>)],
    params: pg_sys::ParamListInfo,
    planning: &mut Planning,
) {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context, and
    // each node is cast only to the struct its tag names.
    unsafe {
        let sealed = sealed(level, planning);
        let hint = "Write it as separate queries, or over WITH t AS MATERIALIZED (SELECT ...) SELECT ... FROM t.";
        if !(*level).groupingSets.is_null() {
            unsupported("GROUPING SETS, ROLLUP and CUBE are not supported", hint);
        }
        if (*level).hasWindowFuncs || (*level).hasTargetSRFs || !(*level).rowMarks.is_null() {
            unsupported("window functions, set-returning outputs and FOR UPDATE are not supported", hint);
        }
        if has_sublink((*level).targetList.cast()) || has_sublink((*level).havingQual) {
            unsupported("a subquery in the outputs or HAVING is not supported", hint);
        }
        let schema = extension_schema();
        let mut splits: HashMap<usize, Split> = HashMap::new();
        for (aggref, releasing) in calls {
            let Some((name, first)) = releasing else {
                // Another aggregate: computed whole with the partials.
                if (**aggref).agglevelsup != 0 {
                    unsupported("an aggregate of an outer query level is not supported", hint);
                }
                let partials = vec![pg_sys::copyObjectImpl((*aggref).cast()).cast()];
                splits.insert(*aggref as usize, Split { partials, merge: pg_sys::InvalidOid, result: pg_sys::InvalidOid, constants: Vec::new(), null_count: false });
                continue;
            };
            if !crate::functions::named(&name).is_some_and(|f| f.splits) {
                unsupported(
                    &format!("{name} is not supported yet"),
                    "dp_count, dp_sum, dp_sum_laplace, dp_sum_staircase, dp_avg and dp_partition_selected are.",
                );
            }
            if !(**aggref).aggdistinct.is_null() || !(**aggref).aggorder.is_null() || (**aggref).agglevelsup != 0 {
                unsupported(&format!("{name} with DISTINCT, ORDER BY or an outer level's columns is not supported"), hint);
            }
            splits.insert(*aggref as usize, plan_split(*aggref, name, *first, &schema, params));
        }

        // The partials: FROM, WHERE and GROUP BY, the keys, then each aggregate's partials.
        let keys = group_keys(level);
        let partials = pg_sys::copyObjectImpl(level.cast()) as *mut pg_sys::Query;
        let mut target = std::ptr::null_mut();
        let mut column = 0i16;
        for (i, (expr, group)) in keys.iter().enumerate() {
            let key = pg_sys::copyObjectImpl((*expr).cast()).cast();
            push_entry(&mut target, &mut column, key, &format!("k{}", i + 1), *group);
        }
        let mut partial_columns: HashMap<usize, Vec<i16>> = HashMap::new();
        for (aggref, _) in calls {
            let mut at = Vec::new();
            for p in &splits[&(*aggref as usize)].partials {
                let name = format!("p{}", column + 1);
                push_entry(&mut target, &mut column, *p, &name, 0);
                at.push(column);
            }
            partial_columns.insert(*aggref as usize, at);
        }
        (*partials).targetList = target;
        (*partials).havingQual = std::ptr::null_mut();
        (*partials).sortClause = std::ptr::null_mut();
        (*partials).distinctClause = std::ptr::null_mut();
        (*partials).hasDistinctOn = false;
        (*partials).limitOffset = std::ptr::null_mut();
        (*partials).limitCount = std::ptr::null_mut();
        let partials = substitute_params(partials, params);

        // The release: the level over dp_partials(<text>).
        let outputs = list_items::<pg_sys::TargetEntry>((*partials).targetList);
        let var = |attno: i16| -> *mut pg_sys::Node {
            let expr = (*outputs[attno as usize - 1]).expr.cast::<pg_sys::Node>();
            pg_sys::makeVar(1, attno, pg_sys::exprType(expr), pg_sys::exprTypmod(expr), pg_sys::exprCollation(expr), 0)
                .cast()
        };
        let mut rewrite = Rewrite {
            keys: keys.iter().enumerate().map(|(i, (key, _))| (*key, var(i as i16 + 1))).collect(),
            replaced: HashMap::new(),
            leftover: false,
        };
        // Another aggregate's whole value: a column the release groups by
        // (the partials hold one row per group).
        let mut whole: Vec<i16> = Vec::new();
        for (aggref, _) in calls {
            let s = &splits[&(*aggref as usize)];
            if s.merge == pg_sys::InvalidOid {
                let column = partial_columns[&(*aggref as usize)][0];
                rewrite.replaced.insert(*aggref as usize, var(column));
                whole.push(column);
                continue;
            }
            let mut args: Vec<*mut pg_sys::Node> = partial_columns[&(*aggref as usize)].iter().map(|&c| var(c)).collect();
            if s.null_count {
                args.push(null_const(pg_sys::INT8OID));
            }
            args.extend(s.constants.iter().copied());
            rewrite.replaced.insert(*aggref as usize, aggregate(s.merge, s.result, &args, std::ptr::null_mut()).cast());
        }
        (*level).targetList = rewrite.apply((*level).targetList.cast()).cast();
        (*level).havingQual = rewrite.apply((*level).havingQual);
        if rewrite.leftover {
            unsupported("an output uses a column that is not a GROUP BY key outside the dpnoise aggregates", "List it in GROUP BY.");
        }
        for column in whole {
            group_by(level, var(column));
        }
        release_over(level, partials, &outputs, &schema, sealed, planning);
    }
}

/// Makes `level` read `dp_partials(<partials as SQL>)` alone, or
/// `dp_partials_sealed(<SQL>, <seal>)` when `sealed`.
///
/// # Safety
/// `level` is a live Query, `partials` its partials (live), `outputs` their target entries.
unsafe fn release_over(
    level: *mut pg_sys::Query,
    partials: *mut pg_sys::Query,
    outputs: &[*mut pg_sys::TargetEntry],
    schema: &str,
    sealed: bool,
    planning: &mut Planning,
) {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        relations(partials, &mut planning.relations);
        let text = deparse(partials);
        let (function, args) = if sealed {
            let seal = crate::seal::seal(text.as_bytes());
            planning.seals.push(seal);
            ("dp_partials_sealed", vec![text_const(&text), bytea_const(&seal)])
        } else {
            ("dp_partials", vec![text_const(&text)])
        };
        (*level).rtable = pg_sys::lappend(std::ptr::null_mut(), function_rte(schema, function, &args, outputs).cast());
        let from = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblRef>()) as *mut pg_sys::RangeTblRef;
        (*from).type_ = pg_sys::NodeTag::T_RangeTblRef;
        (*from).rtindex = 1;
        (*level).jointree = pg_sys::makeFromExpr(pg_sys::lappend(std::ptr::null_mut(), from.cast()), std::ptr::null_mut());
        (*level).cteList = std::ptr::null_mut();
        (*level).hasSubLinks = false;
        (*level).hasRecursive = false;
        (*level).hasModifyingCTE = false;
        (*level).constraintDeps = std::ptr::null_mut();
    }
}

/// Appends `expr` to a target list as its next column, named `name`.
///
/// # Safety
/// Inside a transaction; `expr` is live, `target` null or a live List.
unsafe fn push_entry(target: &mut *mut pg_sys::List, column: &mut i16, expr: *mut pg_sys::Node, name: &str, group: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        *column += 1;
        let name = CString::new(name).expect("no NUL");
        let e = pg_sys::makeTargetEntry(expr.cast(), *column, pg_sys::pstrdup(name.as_ptr()), false);
        (*e).ressortgroupref = group;
        *target = pg_sys::lappend(*target, e.cast());
    }
}

/// Adds `expr` to the level's GROUP BY (as a hidden output).
///
/// # Safety
/// `level` is a live Query; `expr` a live expression over its FROM.
unsafe fn group_by(level: *mut pg_sys::Query, expr: *mut pg_sys::Node) {
    // SAFETY: the caller's contract; the SortGroupClause is zeroed, then tagged and filled.
    unsafe {
        let entries = list_items::<pg_sys::TargetEntry>((*level).targetList);
        let group = entries.iter().map(|e| (**e).ressortgroupref).max().unwrap_or(0) + 1;
        let mut column = entries.len() as i16;
        let mut target = (*level).targetList;
        push_entry(&mut target, &mut column, expr, "dp_group", group);
        (*list_items::<pg_sys::TargetEntry>(target)[column as usize - 1]).resjunk = true;
        (*level).targetList = target;
        let clause = pg_sys::palloc0(std::mem::size_of::<pg_sys::SortGroupClause>()) as *mut pg_sys::SortGroupClause;
        (*clause).type_ = pg_sys::NodeTag::T_SortGroupClause;
        (*clause).tleSortGroupRef = group;
        let (mut sort, mut eq, mut hashable) = (pg_sys::InvalidOid, pg_sys::InvalidOid, false);
        pg_sys::get_sort_group_operators(pg_sys::exprType(expr), false, true, false, &mut sort, &mut eq, std::ptr::null_mut(), &mut hashable);
        (*clause).eqop = eq;
        (*clause).sortop = sort;
        (*clause).hashable = hashable;
        (*level).groupClause = pg_sys::lappend((*level).groupClause, clause.cast());
    }
}

/// Per-row functions over a Citus table: the rows (the values the calls
/// read, and every other column the outputs use) come from `dp_partials`,
/// and the functions run here, on the coordinator, charged once per call
/// site.
///
/// # Safety
/// `level` is a live Query without aggregates that calls a per-row dpnoise
/// function and reads a Citus table; `params` as `distribute`'s.
unsafe fn split_rows(level: *mut pg_sys::Query, params: pg_sys::ParamListInfo, planning: &mut Planning) {
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        // The gate admits no per-row function over protected rows: the
        // partials read what the caller may read.
        let hint = "Write it over WITH t AS MATERIALIZED (SELECT ...) SELECT ... FROM t.";
        if (*level).hasWindowFuncs || (*level).hasTargetSRFs || !(*level).rowMarks.is_null() || !(*level).groupClause.is_null() {
            unsupported("window functions, set-returning outputs, FOR UPDATE and GROUP BY are not supported with per-row functions", hint);
        }
        if has_sublink((*level).targetList.cast()) {
            unsupported("a subquery in the outputs is not supported", hint);
        }
        let schema = extension_schema();
        let mut rows = Rows { columns: Vec::new() };
        (*level).targetList = rows.apply((*level).targetList.cast()).cast();
        let partials = pg_sys::copyObjectImpl(level.cast()) as *mut pg_sys::Query;
        // The partials read the level's original FROM and WHERE (still in `level`, copied above).
        let mut target = std::ptr::null_mut();
        let mut column = 0i16;
        for expr in &rows.columns {
            let name = format!("c{}", column + 1);
            push_entry(&mut target, &mut column, *expr, &name, 0);
        }
        (*partials).targetList = target;
        (*partials).sortClause = std::ptr::null_mut();
        (*partials).distinctClause = std::ptr::null_mut();
        (*partials).hasDistinctOn = false;
        (*partials).limitOffset = std::ptr::null_mut();
        (*partials).limitCount = std::ptr::null_mut();
        let partials = substitute_params(partials, params);
        let outputs = list_items::<pg_sys::TargetEntry>((*partials).targetList);
        release_over(level, partials, &outputs, &schema, false, planning);
    }
}

/// A per-row level's outputs over dp_partials: each value a dpnoise
/// function reads, and each column used outside one, becomes a column.
struct Rows {
    columns: Vec<*mut pg_sys::Node>,
}

impl Rows {
    /// The Var of dp_partials' next column, which computes `expr`.
    ///
    /// # Safety
    /// `expr` is a live expression of the level.
    unsafe fn column(&mut self, expr: *mut pg_sys::Node) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract.
        unsafe {
            self.columns.push(pg_sys::copyObjectImpl(expr.cast()).cast());
            let n = self.columns.len() as i16;
            pg_sys::makeVar(1, n, pg_sys::exprType(expr), pg_sys::exprTypmod(expr), pg_sys::exprCollation(expr), 0).cast()
        }
    }

    /// # Safety
    /// `node` is null or a live expression tree of the level; inside a transaction.
    unsafe fn apply(&mut self, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
        /// # Safety
        /// Called by `expression_tree_mutator` with live nodes and the Rows.
        #[pgrx::pg_guard]
        unsafe extern "C-unwind" fn mutate(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> *mut pg_sys::Node {
            // SAFETY: the caller's contract.
            unsafe { (*(context as *mut Rows)).apply(node) }
        }
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return node;
            }
            if let Some((_, first)) = releasing_call(node) {
                let call = pg_sys::copyObjectImpl(node.cast()) as *mut pg_sys::FuncExpr;
                for (i, arg) in list_items::<pg_sys::Node>((*call).args).into_iter().enumerate().take(first) {
                    (*(*(*call).args).elements.add(i)).ptr_value = self.column(arg).cast();
                }
                return call.cast();
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var && (*(node as *mut pg_sys::Var)).varlevelsup == 0 {
                return self.column(node);
            }
            pg_sys::expression_tree_mutator(node, Some(mutator(mutate)), (self as *mut Rows).cast())
        }
    }
}

/// The level's GROUP BY keys: each key's expression and sort-group reference.
///
/// # Safety
/// `level` is a live Query.
unsafe fn group_keys(level: *mut pg_sys::Query) -> Vec<(*mut pg_sys::Node, u32)> {
    // SAFETY: the caller's contract.
    unsafe {
        let refs: Vec<u32> =
            list_items::<pg_sys::SortGroupClause>((*level).groupClause).iter().map(|c| (**c).tleSortGroupRef).collect();
        list_items::<pg_sys::TargetEntry>((*level).targetList)
            .into_iter()
            .filter(|e| refs.contains(&(**e).ressortgroupref))
            .map(|e| ((*e).expr.cast(), (*e).ressortgroupref))
            .collect()
    }
}

/// Plans one dpnoise aggregate's split: folds its privacy parameters to
/// constants and checks them as its final function will (a refusal here
/// runs nothing), then writes its partials and its merge's constants.
///
/// # Safety
/// `aggref` is a live Aggref of dpnoise's aggregate `name` whose privacy
/// arguments start at `first`; inside a transaction.
unsafe fn plan_split(aggref: *mut pg_sys::Aggref, name: &str, first: usize, schema: &str, params: pg_sys::ParamListInfo) -> Split {
    // SAFETY: the caller's contract; the Aggref's args are TargetEntries.
    unsafe {
        let entries = list_items::<pg_sys::TargetEntry>((*aggref).args);
        let types = aggregate_types(aggref);
        let mut constants: Vec<*mut pg_sys::Const> = Vec::new();
        // The gate's dp_share(ε, k) calls (a person's k groups share ε),
        // kept as calls in the merge: an analyst's statement is charged
        // their total (gate::cost).
        let mut shares: Vec<Option<*mut pg_sys::Node>> = Vec::new();
        for entry in &entries[first..] {
            let written: *mut pg_sys::Node = substitute_params((**entry).expr.cast(), params);
            let folded = fold(written, name);
            let share = crate::parameters::share_call(written).is_some();
            constants.push(folded);
            shares.push(share.then_some(written));
        }
        // The merge's ε or δ: the share call, else the constant.
        let budget = |i: usize, value: f64| shares.get(i).copied().flatten().unwrap_or_else(|| float8_const(value));
        let values: Vec<Option<pg_sys::Datum>> = std::iter::repeat_n(None, first)
            .chain(constants.iter().map(|c| (!(**c).constisnull).then_some((**c).constvalue)))
            .collect();
        let filter = |a: *mut pg_sys::Aggref| {
            (*a).aggfilter = pg_sys::copyObjectImpl((*aggref).aggfilter.cast()).cast();
            a.cast::<pg_sys::Node>()
        };
        let value = || pg_sys::copyObjectImpl((*entries[0]).expr.cast()).cast::<pg_sys::Node>();
        if name == "dp_partition_selected" {
            let epsilon = crate::aggref::f64_parameter(values[0], "epsilon");
            let delta = crate::aggref::f64_parameter(values[1], "delta");
            crate::selection::selection(epsilon, delta);
            let count = aggregate(lookup("pg_catalog", "count", &[]), pg_sys::INT8OID, &[], std::ptr::null_mut());
            (*count).aggstar = true;
            return Split {
                partials: vec![filter(count)],
                merge: lookup(schema, "dp_merge_selected", &[pg_sys::INT8OID, pg_sys::FLOAT8OID, pg_sys::FLOAT8OID]),
                result: pg_sys::BOOLOID,
                constants: vec![budget(0, epsilon), budget(1, delta)],
                null_count: false,
            };
        }
        if name == "dp_count" {
            crate::count::checked_cost(first == 1, &values);
            let partial = if first == 1 {
                aggregate(lookup("pg_catalog", "count", &[pg_sys::ANYOID]), pg_sys::INT8OID, &[value()], std::ptr::null_mut())
            } else {
                let a = aggregate(lookup("pg_catalog", "count", &[]), pg_sys::INT8OID, &[], std::ptr::null_mut());
                (*a).aggstar = true;
                a
            };
            let params = &values[first..];
            let text = |i: usize| params.get(i).copied().flatten().map(|d| crate::aggref::text_parameter(Some(d), "mechanism"));
            let (delta, mechanism) = match params.len() {
                1 => (0.0, "laplace".to_owned()),
                2 => (0.0, text(1).unwrap_or_default()),
                _ => (crate::aggref::f64_parameter(params[1], "delta"), text(2).unwrap_or_default()),
            };
            let epsilon = crate::aggref::f64_parameter(params[0], "epsilon");
            let delta = if params.len() == 3 { budget(1, delta) } else { float8_const(delta) };
            return Split {
                partials: vec![filter(partial)],
                merge: lookup(schema, "dp_merge_count", &[pg_sys::INT8OID, pg_sys::FLOAT8OID, pg_sys::FLOAT8OID, pg_sys::TEXTOID]),
                result: pg_sys::INT8OID,
                constants: vec![budget(0, epsilon), delta, text_const(&mechanism)],
                null_count: false,
            };
        }
        let integer = types[0] == pg_sys::INT8OID;
        let d = crate::sum::distributed(name, integer, &values).expect("a sum aggregate");
        let bound = if integer { pg_sys::INT8OID } else { pg_sys::FLOAT8OID };
        let steps = || {
            let args = [value(), int4_const(d.k), datum_const(bound, d.lower), datum_const(bound, d.upper)];
            let f = lookup(schema, "dp_lattice_steps", &[bound, pg_sys::INT4OID, bound, bound]);
            pg_sys::makeFuncExpr(f, pg_sys::INT8OID, node_list(&args), pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL)
                .cast::<pg_sys::Node>()
        };
        let sum = aggregate(lookup("pg_catalog", "sum", &[pg_sys::INT8OID]), pg_sys::NUMERICOID, &[steps()], std::ptr::null_mut());
        let mut partials = vec![filter(sum)];
        let average = d.kind == 3;
        if average {
            let count = aggregate(lookup("pg_catalog", "count", &[pg_sys::ANYOID]), pg_sys::INT8OID, &[steps()], std::ptr::null_mut());
            partials.push(filter(count));
        }
        let text_or_null = |t: &Option<String>| t.as_deref().map_or_else(|| null_const(pg_sys::TEXTOID), text_const);
        let merge_types = [
            pg_sys::NUMERICOID,
            pg_sys::INT8OID,
            pg_sys::INT4OID,
            pg_sys::INT4OID,
            pg_sys::FLOAT8OID,
            bound,
            bound,
            pg_sys::FLOAT8OID,
            pg_sys::TEXTOID,
            pg_sys::TEXTOID,
        ];
        Split {
            partials,
            merge: lookup(schema, "dp_merge_sum", &merge_types),
            result: if integer { pg_sys::INT8OID } else { pg_sys::FLOAT8OID },
            constants: vec![
                int4_const(d.kind),
                int4_const(d.k),
                budget(0, d.epsilon),
                datum_const(bound, d.lower),
                datum_const(bound, d.upper),
                // dp_sum's δ is its fifth argument (the fourth parameter).
                if name == "dp_sum" && entries.len() >= 5 { budget(3, d.delta) } else { float8_const(d.delta) },
                text_or_null(&d.mechanism),
                text_or_null(&d.loss),
            ],
            null_count: !average,
        }
    }
}

/// A privacy parameter folded to a constant, dp_share(ε, k) (STABLE, which
/// the planner would not fold) computed here as the gate's rewrite does.
///
/// # Safety
/// `expr` is a live expression without unknown parameters; inside a transaction.
unsafe fn fold(expr: *mut pg_sys::Node, name: &str) -> *mut pg_sys::Const {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        let constant = |node: *mut pg_sys::Node| -> *mut pg_sys::Const {
            let folded = pg_sys::eval_const_expressions(std::ptr::null_mut(), node);
            if (*folded).type_ != pg_sys::NodeTag::T_Const {
                unsupported(
                    &format!("the privacy parameters of {name} must be constants when the query is planned"),
                    "With a prepared statement, SET plan_cache_mode = force_custom_plan.",
                );
            }
            folded.cast()
        };
        let Some(args) = crate::parameters::share_call(expr) else { return constant(expr) };
        let args = crate::gate::list_nodes(args);
        let (total, parts) = (constant(args[0]), constant(args[1]));
        if (*total).constisnull || (*parts).constisnull {
            return null_const(pg_sys::FLOAT8OID).cast();
        }
        let parts = (*parts).constvalue.value() as i32;
        if parts < 1 {
            crate::errors::raise_sqlstate("22023", "dp_share: parts must be at least 1".to_string(), None);
        }
        let total = f64::from_bits((*total).constvalue.value() as u64);
        float8_const(dpnoise_core::rational::share(total, parts as u32)).cast()
    }
}

/// The release level's outputs and HAVING: keys become dp_partials'
/// columns, each dpnoise aggregate its merge (another aggregate its column).
struct Rewrite {
    keys: Vec<(*mut pg_sys::Node, *mut pg_sys::Node)>,
    replaced: HashMap<usize, *mut pg_sys::Node>,
    leftover: bool,
}

impl Rewrite {
    /// # Safety
    /// `node` is null or a live expression tree of the level being split.
    unsafe fn apply(&mut self, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
        /// # Safety
        /// Called by `expression_tree_mutator` with live nodes and the Rewrite.
        #[pgrx::pg_guard]
        unsafe extern "C-unwind" fn mutate(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> *mut pg_sys::Node {
            // SAFETY: the caller's contract.
            unsafe { (*(context as *mut Rewrite)).apply(node) }
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
                pg_sys::NodeTag::T_Aggref => {
                    if let Some(merge) = self.replaced.get(&(node as usize)) {
                        return pg_sys::copyObjectImpl((*merge).cast()).cast();
                    }
                }
                pg_sys::NodeTag::T_Var => {
                    self.leftover = true;
                    return node;
                }
                _ => {}
            }
            pg_sys::expression_tree_mutator(node, Some(mutator(mutate)), (self as *mut Rewrite).cast())
        }
    }
}

/// A mutator callback as `expression_tree_mutator` and `query_tree_mutator` take it.
fn mutator(
    f: unsafe extern "C-unwind" fn(*mut pg_sys::Node, *mut std::ffi::c_void) -> *mut pg_sys::Node,
) -> unsafe extern "C-unwind" fn() -> *mut pg_sys::Node {
    // SAFETY: the same function pointer ABI; PostgreSQL calls it with (node, context).
    unsafe {
        std::mem::transmute::<
            unsafe extern "C-unwind" fn(*mut pg_sys::Node, *mut std::ffi::c_void) -> *mut pg_sys::Node,
            unsafe extern "C-unwind" fn() -> *mut pg_sys::Node,
        >(f)
    }
}

/// A copy of `node` (a Query or an expression) with every external
/// parameter whose value is fixed for this plan (a custom plan's) made a
/// constant: the partials run as SQL text of their own.
///
/// # Safety
/// `node` is a live Query or expression tree; `params` live or null.
unsafe fn substitute_params<T>(node: *mut T, params: pg_sys::ParamListInfo) -> *mut T {
    /// # Safety
    /// Called by the tree mutators with live nodes and the ParamListInfo.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn mutate(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; casts follow the node tags; a ParamListInfo's params
        // array holds numParams entries (paramFetch, when set, returns one of them).
        unsafe {
            if node.is_null() {
                return node;
            }
            let params = context as pg_sys::ParamListInfo;
            match (*node).type_ {
                pg_sys::NodeTag::T_Query => {
                    return pg_sys::query_tree_mutator(node.cast(), Some(mutator(mutate)), context, 0).cast();
                }
                pg_sys::NodeTag::T_Param => {
                    let p = node as *mut pg_sys::Param;
                    if (*p).paramkind != pg_sys::ParamKind::PARAM_EXTERN {
                        return node;
                    }
                    let fixed = fixed_param(p, params);
                    let Some(data) = fixed else {
                        unsupported(
                            "a query parameter whose value is not known when the query is planned",
                            "With a prepared statement, SET plan_cache_mode = force_custom_plan.",
                        );
                    };
                    let (mut len, mut byval) = (0i16, false);
                    pg_sys::get_typlenbyval((*p).paramtype, &mut len, &mut byval);
                    let value = if (*data).isnull || byval { (*data).value } else { copy_datum((*data).value, len) };
                    return pg_sys::makeConst((*p).paramtype, (*p).paramtypmod, (*p).paramcollid, len as i32, value, (*data).isnull, byval)
                        .cast();
                }
                _ => {}
            }
            pg_sys::expression_tree_mutator(node, Some(mutator(mutate)), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { mutate(node.cast(), params.cast()).cast() }
}

/// A plain (non-split) Aggref of `funcid` over `args`.
///
/// # Safety
/// Inside a transaction; `args` are live expressions.
unsafe fn aggregate(funcid: pg_sys::Oid, result: pg_sys::Oid, args: &[*mut pg_sys::Node], filter: *mut pg_sys::Node) -> *mut pg_sys::Aggref {
    // SAFETY: the caller's contract; the Aggref is zeroed, then tagged and filled.
    unsafe {
        let a = pg_sys::palloc0(std::mem::size_of::<pg_sys::Aggref>()) as *mut pg_sys::Aggref;
        (*a).xpr.type_ = pg_sys::NodeTag::T_Aggref;
        (*a).aggfnoid = funcid;
        (*a).aggtype = result;
        let mut entries = std::ptr::null_mut();
        let mut types = std::ptr::null_mut();
        for (i, arg) in args.iter().enumerate() {
            entries = pg_sys::lappend(entries, pg_sys::makeTargetEntry((*arg).cast(), (i + 1) as i16, std::ptr::null_mut(), false).cast());
            types = pg_sys::lappend_oid(types, pg_sys::exprType(*arg));
            let collation = pg_sys::exprCollation(*arg);
            if collation != pg_sys::InvalidOid {
                (*a).inputcollid = collation;
            }
        }
        (*a).args = entries;
        (*a).aggargtypes = types;
        (*a).aggfilter = filter.cast();
        (*a).aggkind = b'n' as std::ffi::c_char;
        (*a).aggsplit = pg_sys::AggSplit::AGGSPLIT_SIMPLE;
        (*a).aggno = -1;
        (*a).aggtransno = -1;
        (*a).location = -1;
        a
    }
}

/// The FROM item `function(<args>) AS dp_partials(k1, ..., p1, ...)`.
///
/// # Safety
/// Inside a transaction; `args` are live constants; `outputs` are the partials' live target entries.
unsafe fn function_rte(
    schema: &str,
    function: &str,
    args: &[*mut pg_sys::Node],
    outputs: &[*mut pg_sys::TargetEntry],
) -> *mut pg_sys::RangeTblEntry {
    // SAFETY: the caller's contract; nodes are zeroed, then tagged and filled.
    unsafe {
        let types: Vec<pg_sys::Oid> = args.iter().map(|a| pg_sys::exprType(*a)).collect();
        let call = pg_sys::makeFuncExpr(
            lookup(schema, function, &types),
            pg_sys::RECORDOID,
            node_list(args),
            pg_sys::InvalidOid,
            pg_sys::DEFAULT_COLLATION_OID,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        );
        (*call).funcretset = true;
        let function = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblFunction>()) as *mut pg_sys::RangeTblFunction;
        (*function).type_ = pg_sys::NodeTag::T_RangeTblFunction;
        (*function).funcexpr = call.cast();
        (*function).funccolcount = outputs.len() as i32;
        let mut names = std::ptr::null_mut();
        for entry in outputs {
            let expr = (**entry).expr.cast::<pg_sys::Node>();
            names = pg_sys::lappend(names, pg_sys::makeString(pg_sys::pstrdup((**entry).resname)).cast());
            (*function).funccoltypes = pg_sys::lappend_oid((*function).funccoltypes, pg_sys::exprType(expr));
            (*function).funccoltypmods = pg_sys::lappend_int((*function).funccoltypmods, pg_sys::exprTypmod(expr));
            (*function).funccolcollations = pg_sys::lappend_oid((*function).funccolcollations, pg_sys::exprCollation(expr));
        }
        (*function).funccolnames = names;
        let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>()) as *mut pg_sys::RangeTblEntry;
        (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
        (*rte).rtekind = pg_sys::RTEKind::RTE_FUNCTION;
        (*rte).functions = pg_sys::lappend(std::ptr::null_mut(), function.cast());
        (*rte).eref = pg_sys::makeAlias(c"dp_partials".as_ptr(), pg_sys::copyObjectImpl(names.cast()).cast());
        (*rte).inFromCl = true;
        rte
    }
}

/// The OID of function `schema.name(types)`; an error if it does not exist.
///
/// # Safety
/// Inside a transaction.
unsafe fn lookup(schema: &str, name: &str, types: &[pg_sys::Oid]) -> pg_sys::Oid {
    // SAFETY: the caller's contract.
    unsafe { find(schema, name, types, false) }
}

/// The OID of function `schema.name(types)`; InvalidOid if it does not exist and `missing_ok`.
///
/// # Safety
/// Inside a transaction.
unsafe fn find(schema: &str, name: &str, types: &[pg_sys::Oid], missing_ok: bool) -> pg_sys::Oid {
    // SAFETY: the caller's contract; the name list holds palloc'd String nodes.
    unsafe {
        let part = |s: &str| pg_sys::makeString(pg_sys::pstrdup(CString::new(s).expect("no NUL").as_ptr())).cast();
        let names = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), part(schema)), part(name));
        let mut types = types.to_vec();
        pg_sys::LookupFuncName(names, types.len() as i32, types.as_mut_ptr(), missing_ok)
    }
}

/// The schema dpnoise is installed in.
fn extension_schema() -> String {
    read_one::<String>(
        "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_extension e \
         JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
         WHERE e.extname OPERATOR(pg_catalog.=) 'dpnoise'",
    )
    .unwrap_or_else(|| pgrx::error!("dpnoise: its schema is missing (internal error)"))
}

/// A copy of a by-reference datum of a type `len` long (-1: varlena, -2: C string).
///
/// # Safety
/// `value` points to a live datum of that type.
unsafe fn copy_datum(value: pg_sys::Datum, len: i16) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the copy is palloc'd as long as the original.
    unsafe {
        let source = value.cast_mut_ptr::<u8>();
        let size = match len {
            -1 => pgrx::varlena::varsize_any(source.cast()),
            -2 => CStr::from_ptr(source.cast()).to_bytes_with_nul().len(),
            n => n as usize,
        };
        let copy = pg_sys::palloc(size) as *mut u8;
        std::ptr::copy_nonoverlapping(source, copy, size);
        pg_sys::Datum::from(copy)
    }
}

/// Whether an expression tree holds a SubLink.
///
/// # Safety
/// `node` is null or a live expression tree.
unsafe fn has_sublink(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            (*node).type_ == pg_sys::NodeTag::T_SubLink || pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, std::ptr::null_mut()) }
}

/// # Safety
/// Inside a transaction; the nodes are live.
unsafe fn node_list(nodes: &[*mut pg_sys::Node]) -> *mut pg_sys::List {
    // SAFETY: the caller's contract.
    unsafe { nodes.iter().fold(std::ptr::null_mut(), |list, n| pg_sys::lappend(list, (*n).cast())) }
}

/// A by-value constant of `type_` (int4, int8 or float8).
fn datum_const(type_: pg_sys::Oid, value: pg_sys::Datum) -> *mut pg_sys::Node {
    let len = if type_ == pg_sys::INT4OID { 4 } else { 8 };
    // SAFETY: makeConst pallocs a Const node; by-value types need no copy.
    unsafe { pg_sys::makeConst(type_, -1, pg_sys::InvalidOid, len, value, false, true).cast() }
}

fn int4_const(value: i32) -> *mut pg_sys::Node {
    datum_const(pg_sys::INT4OID, pg_sys::Datum::from(value))
}

fn float8_const(value: f64) -> *mut pg_sys::Node {
    datum_const(pg_sys::FLOAT8OID, crate::fmgr::f64_datum(value))
}

fn null_const(type_: pg_sys::Oid) -> *mut pg_sys::Node {
    // SAFETY: makeNullConst pallocs a Const node of the type.
    unsafe { pg_sys::makeNullConst(type_, -1, if type_ == pg_sys::TEXTOID { pg_sys::DEFAULT_COLLATION_OID } else { pg_sys::InvalidOid }).cast() }
}

fn bytea_const(value: &[u8]) -> *mut pg_sys::Node {
    // SAFETY: the varlena is palloc'd with its header and filled; the Const points to it.
    unsafe {
        let size = pg_sys::VARHDRSZ + value.len();
        let bytes = pg_sys::palloc(size) as *mut u8;
        pgrx::set_varsize_4b(bytes.cast(), size as i32);
        std::ptr::copy_nonoverlapping(value.as_ptr(), bytes.add(pg_sys::VARHDRSZ), value.len());
        pg_sys::makeConst(pg_sys::BYTEAOID, -1, pg_sys::InvalidOid, -1, pg_sys::Datum::from(bytes), false, false).cast()
    }
}

/// The partials as SQL, every name outside pg_catalog qualified: written
/// with the search_path `dp_partials_sealed` runs with, so the text reads
/// the same objects whatever search_path the session has when it runs.
///
/// # Safety
/// `partials` is a live Query; inside a transaction.
unsafe fn deparse(partials: *mut pg_sys::Query) -> String {
    // SAFETY: the caller's contract; the setting is undone at the nest level it was made at.
    unsafe {
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            c"pg_catalog, pg_temp".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        let text = CStr::from_ptr(pg_sys::pg_get_querydef(partials, false)).to_string_lossy().into_owned();
        pg_sys::AtEOXact_GUC(true, nest);
        text
    }
}

fn text_const(value: &str) -> *mut pg_sys::Node {
    let value = CString::new(value).expect("no NUL in a parameter or SQL text");
    // SAFETY: cstring_to_text pallocs a text copy, which the Const points to.
    unsafe {
        let text = pg_sys::cstring_to_text(value.as_ptr());
        pg_sys::makeConst(pg_sys::TEXTOID, -1, pg_sys::DEFAULT_COLLATION_OID, -1, pg_sys::Datum::from(text), false, false).cast()
    }
}
