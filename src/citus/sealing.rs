//! An analyst's level over a Citus table: its partials run sealed, as the
//! extension's owner (`dp_partials_sealed`, `crate::seal`), so what runs
//! there is checked first; and a plan may hold only the seals its own
//! planning wrote.

use super::nodes::find;
use super::{read_one, relations, sub_levels, Planning};
use crate::gate::list_items;
use crate::versions::{self, Recheck};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

/// Refuses a plan holding a call of `dp_partials_sealed` whose seal is not
/// one of `seals` (or is not a constant).
///
/// # Safety
/// As `finish`.
pub(super) unsafe fn check_sealed_calls(
    planned: *mut pg_sys::PlannedStmt,
    seals: &[[u8; crate::seal::SEAL_BYTES]],
) {
    struct Search<'a> {
        function: pg_sys::Oid,
        seals: &'a [[u8; crate::seal::SEAL_BYTES]],
    }
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Search.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags (OpExpr, DistinctExpr and
        // NullIfExpr share one struct); a bytea Const's value is a live varlena.
        unsafe {
            if node.is_null() {
                return false;
            }
            let search = &*(context as *const Search);
            let (funcid, args) = match (*node).type_ {
                pg_sys::NodeTag::T_FuncExpr => (
                    (*(node as *mut pg_sys::FuncExpr)).funcid,
                    (*(node as *mut pg_sys::FuncExpr)).args,
                ),
                pg_sys::NodeTag::T_OpExpr
                | pg_sys::NodeTag::T_DistinctExpr
                | pg_sys::NodeTag::T_NullIfExpr => (
                    (*(node as *mut pg_sys::OpExpr)).opfuncid,
                    (*(node as *mut pg_sys::OpExpr)).args,
                ),
                _ => (pg_sys::InvalidOid, std::ptr::null_mut()),
            };
            if funcid == search.function {
                let seal = list_items::<pg_sys::Node>(args)
                    .get(1)
                    .copied()
                    .filter(|a| (**a).type_ == pg_sys::NodeTag::T_Const);
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
        let Some(schema) = crate::gate::own_schema() else {
            return;
        };
        let schema = pg_sys::get_namespace_name(schema);
        if schema.is_null() {
            return;
        }
        let schema = CStr::from_ptr(schema).to_string_lossy().into_owned();
        let function = find(
            &schema,
            "dp_partials_sealed",
            &[pg_sys::TEXTOID, pg_sys::BYTEAOID],
            true,
        );
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
                    pg_sys::NodeTag::T_FunctionScan => {
                        lists.push((*(plan as *mut pg_sys::FunctionScan)).functions)
                    }
                    pg_sys::NodeTag::T_CustomScan => {
                        // Plans held by an extension's node (Citus's): walked as statements of their own.
                        for inner in list_items::<pg_sys::Plan>(
                            (*(plan as *mut pg_sys::CustomScan)).custom_plans,
                        ) {
                            let stmt = pg_sys::palloc0(std::mem::size_of::<pg_sys::PlannedStmt>())
                                as *mut pg_sys::PlannedStmt;
                            (*stmt).type_ = pg_sys::NodeTag::T_PlannedStmt;
                            (*stmt).planTree = inner;
                            plans.push(stmt);
                        }
                    }
                    _ => {}
                }
                refused |= lists
                    .into_iter()
                    .any(|list| !list.is_null() && walk(list.cast(), context));
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

/// Whether the partials of `level` must run sealed, as the extension's
/// owner: an analyst's level that reads a protected table (the gate vouched
/// for it: no SELECT privilege is needed). Then every other table it reads
/// needs the analyst's SELECT now, and each protected Citus table must be
/// distributed by its privacy unit (a person's rows on one shard, so that
/// the gate's bounding, per person, runs where the rows are).
///
/// # Safety
/// `level` is a live Query; inside a transaction.
pub(super) unsafe fn sealed(level: *mut pg_sys::Query, planning: &mut Planning) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let mut relids = Vec::new();
        relations(level, &mut relids);
        if !relids
            .iter()
            .any(|r| crate::gate::protected_unit(*r).is_some())
        {
            return false;
        }
        // Every table the level reads, in FROM, subqueries, sublinks and
        // LATERAL items alike; and what runs as the owner is checked.
        let (relids, checked) = check_sealable(level);
        planning.checked.extend(checked);
        let protected: Vec<(pg_sys::Oid, i16)> = relids
            .iter()
            .filter_map(|r| crate::gate::protected_unit(*r).map(|unit| (*r, unit)))
            .collect();
        let list = relids
            .iter()
            .map(|r| r.to_u32().to_string())
            .collect::<Vec<_>>()
            .join(",");
        if read_one::<bool>(&format!(
            "SELECT pg_catalog.bool_or(relrowsecurity) FROM pg_catalog.pg_class \
             WHERE oid OPERATOR(pg_catalog.=) ANY ('{{{list}}}'::pg_catalog.oid[])"
        ))
        .unwrap_or(false)
        {
            refuse_sealed(
                "a table with row-level security is not admitted on a distributed table",
                "Ask the DBA.",
            );
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
            let Some((Some(method), column)) = distribution else {
                continue;
            };
            if method == "n" {
                // A reference table: every node holds all of it.
                continue;
            }
            let unit_name = CStr::from_ptr(pg_sys::get_attname(relid, unit, false))
                .to_string_lossy()
                .into_owned();
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
    unsafe {
        !(*level).setOperations.is_null()
            || sub_levels(level).into_iter().any(|q| has_set_operations(q))
    }
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
    checked: Vec<Recheck>,
    refusal: Option<(&'static str, String, &'static str)>,
    /// The permission entries of the level being walked.
    permissions: *mut pg_sys::List,
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
unsafe fn check_sealable(level: *mut pg_sys::Query) -> (Vec<pg_sys::Oid>, Vec<Recheck>) {
    /// # Safety
    /// Called by `check_functions_in_node`, inside a transaction.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn foreign(
        function: pg_sys::Oid,
        _context: *mut std::ffi::c_void,
    ) -> bool {
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
            [type_, element]
                .into_iter()
                .filter(|t| *t != pg_sys::InvalidOid)
                .any(|t| {
                    let kind = pg_sys::get_typtype(t) as u8;
                    kind == b'd' || (kind == b'c' && t != pg_sys::RECORDOID)
                })
        }
    }
    /// # Safety
    /// Called by the tree walkers with live nodes and the Sealable.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            let found = &mut *(context as *mut Sealable);
            let refuse =
                |found: &mut Sealable, state: &'static str, what: String, hint: &'static str| {
                    found.refusal = Some((state, what, hint));
                    true
                };
            const BUILT_IN: &str =
                "Use built-in functions and operators only (pg_catalog's), or ask a curator.";
            match (*node).type_ {
                pg_sys::NodeTag::T_Query => {
                    let outer = std::mem::replace(
                        &mut found.permissions,
                        versions::query_permissions(node.cast()),
                    );
                    let stop = pg_sys::query_tree_walker(
                        node.cast(),
                        Some(walk),
                        context,
                        pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
                    );
                    found.permissions = outer;
                    return stop;
                }
                pg_sys::NodeTag::T_RangeTblEntry => {
                    let rte = node as *mut pg_sys::RangeTblEntry;
                    if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                        found.relids.push((*rte).relid);
                        if !(*rte).securityQuals.is_null() {
                            return refuse(found, crate::gate::QUERY_REFUSED, "a table with row-level security is not admitted on a distributed table".to_owned(), "Ask the DBA.");
                        }
                        let required = versions::required_privileges(found.permissions, rte) != 0;
                        if required && !versions::has_privileges(found.permissions, rte) {
                            let name = pg_sys::get_rel_name((*rte).relid);
                            let name = if name.is_null() {
                                "?".to_owned()
                            } else {
                                CStr::from_ptr(name).to_string_lossy().into_owned()
                            };
                            return refuse(
                                found,
                                "42501",
                                format!("permission denied for table {name}"),
                                "",
                            );
                        }
                        if required {
                            // Checked again by the executor: a plain entry, read by no node.
                            found
                                .checked
                                .push(versions::recheck_privileges(found.permissions, rte));
                        }
                    }
                    if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && (*rte).security_barrier {
                        return refuse(
                            found,
                            crate::gate::QUERY_REFUSED,
                            "a security barrier view is not admitted on a distributed table"
                                .to_owned(),
                            "Ask the DBA.",
                        );
                    }
                    // range_table_walker goes on into the entry's subquery, functions and values.
                    return false;
                }
                pg_sys::NodeTag::T_Const
                    if foreign_type((*(node as *mut pg_sys::Const)).consttype) =>
                {
                    return refuse(
                        found,
                        crate::gate::QUERY_REFUSED,
                        "a domain or composite constant is not admitted on a distributed table"
                            .to_owned(),
                        BUILT_IN,
                    );
                }
                pg_sys::NodeTag::T_CoerceToDomain => {
                    return refuse(
                        found,
                        crate::gate::QUERY_REFUSED,
                        "a domain is not admitted on a distributed table".to_owned(),
                        BUILT_IN,
                    );
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
    let mut found = Sealable {
        relids: Vec::new(),
        checked: Vec::new(),
        refusal: None,
        permissions: std::ptr::null_mut(),
    };
    // SAFETY: the caller's contract; `found` outlives the walk.
    unsafe { walk(level.cast(), (&raw mut found).cast()) };
    if let Some((state, what, hint)) = found.refusal {
        crate::errors::raise_sqlstate(state, what, (!hint.is_empty()).then(|| hint.to_owned()));
    }
    (found.relids, found.checked)
}
