//! What differs between the PostgreSQL majors dpnoise builds for (15 to
//! 18, one per Cargo feature), each difference one small function here, so
//! the stages above call the same names on every version and no `cfg`
//! sits in them. A leaf: it imports nothing of dpnoise.
//!
//! - Permissions (16): what a table entry needs checked moved from the
//!   RangeTblEntry (`requiredPerms`, `selectedCols`, `checkAsUser`) to an
//!   RTEPermissionInfo in a list beside the range table (`Query.rteperminfos`,
//!   `PlannedStmt.permInfos`), found by the entry's `perminfoindex`
//!   (0: nothing to check). `ExecCheckRTPerms` became `ExecCheckPermissions`.
//! - Tree mutators (16): the callback is typed; `expression_tree_mutator`
//!   and `query_tree_mutator` are macros over `*_impl` functions.
//! - `flatten_join_alias_vars` (16) takes the PlannerInfo first; null is the
//!   parser's use, ours (on a Query before planning).
//! - Outer joins (16) mark the Vars they can null (`varnullingrels`): a join
//!   made inner must take its mark off them.
//! - PGPROC (17): `pgprocno` left (a process's number is its index in
//!   `ProcGlobal->allProcs`), `lxid` moved into `vxid`.
//! - Run conditions (17): a WindowFunc carries its own, as nodes of a new
//!   kind.
//! - GROUP BY (18): a grouped level's outputs read its keys through Vars
//!   of a GROUP range table entry.
//! - `ExecutorRun` (18) lost its `execute_once` argument.
//! - Range tables (16): appending one level's entries to another's carries
//!   their permission entries along (`CombineRangeTables`).
//! - `ReplaceVarsFromTargetList` (18) takes the level's result relation.
//! - Time zone abbreviations (16): `DecodeTimezoneAbbrev` reports errors
//!   as codes, with the field type in an argument.
//! - `POSIX_COLLATION_OID` (18) is no longer defined, the collation's OID
//!   (951) is unchanged.

use pgrx::pg_sys;

/// A mutator as PostgreSQL calls it: (node, context) to the new node.
pub type Mutator =
    unsafe extern "C-unwind" fn(*mut pg_sys::Node, *mut std::ffi::c_void) -> *mut pg_sys::Node;

/// `expression_tree_mutator(node, mutator, context)`.
///
/// # Safety
/// As PostgreSQL's: `node` a live expression tree (or null), `mutator` fit for `context`.
pub unsafe fn expression_tree_mutator(
    node: *mut pg_sys::Node,
    mutator: Mutator,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::expression_tree_mutator(node, Some(untyped(mutator)), context);
        #[cfg(not(feature = "pg15"))]
        return pg_sys::expression_tree_mutator_impl(node, Some(mutator), context);
    }
}

/// `query_tree_mutator(query, mutator, context, flags)`.
///
/// # Safety
/// As PostgreSQL's: `query` a live Query, `mutator` fit for `context`.
pub unsafe fn query_tree_mutator(
    query: *mut pg_sys::Query,
    mutator: Mutator,
    context: *mut std::ffi::c_void,
    flags: i32,
) -> *mut pg_sys::Query {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::query_tree_mutator(query, Some(untyped(mutator)), context, flags);
        #[cfg(not(feature = "pg15"))]
        return pg_sys::query_tree_mutator_impl(query, Some(mutator), context, flags);
    }
}

/// 15's bindings declare the mutator callback without arguments.
#[cfg(feature = "pg15")]
fn untyped(mutator: Mutator) -> unsafe extern "C-unwind" fn() -> *mut pg_sys::Node {
    // SAFETY: the same function pointer ABI; PostgreSQL calls it with (node, context).
    unsafe {
        std::mem::transmute::<Mutator, unsafe extern "C-unwind" fn() -> *mut pg_sys::Node>(mutator)
    }
}

/// `node` (a copy) with the join alias Vars of `query`'s level replaced by
/// what they stand for; `query` is not yet planned.
///
/// # Safety
/// `query` is a live Query, `node` an expression of its level.
pub unsafe fn flatten_join_alias_vars(
    query: *mut pg_sys::Query,
    node: *mut pg_sys::Node,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; a null PlannerInfo is how the parser calls it (16 and later).
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::flatten_join_alias_vars(query, node);
        #[cfg(not(feature = "pg15"))]
        return pg_sys::flatten_join_alias_vars(std::ptr::null_mut(), query, node);
    }
}

/// Takes outer join `rtindex`, made an inner join, out of the nulling
/// relations of the Vars of `level` (16 and later mark each Var with the
/// outer joins that can null it, and the planner checks the marks).
///
/// # Safety
/// `level` is a live Query not yet planned; `rtindex` one of its join entries.
pub unsafe fn forget_outer_join(level: *mut pg_sys::Query, rtindex: u32) {
    #[cfg(feature = "pg15")]
    let _ = (level, rtindex);
    // SAFETY: the caller's contract; remove_nulling_relids (rewrite/rewriteManip.h) returns the
    // Query mutated in a copy of its own, whose fields we take over.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        let copy = remove_nulling_relids(
            level.cast(),
            pg_sys::bms_make_singleton(rtindex as i32),
            std::ptr::null(),
        );
        *level = *(copy as *mut pg_sys::Query);
    }
}

// SAFETY: the prototype of rewrite/rewriteManip.h (16 and later), which pgrx does not bind.
#[cfg(not(feature = "pg15"))]
unsafe extern "C-unwind" {
    fn remove_nulling_relids(
        node: *mut pg_sys::Node,
        removable: *const pg_sys::Bitmapset,
        except: *const pg_sys::Bitmapset,
    ) -> *mut pg_sys::Node;
}

/// Gives every level of `query` its GROUP BY keys back in its target list
/// and HAVING, as PostgreSQL 15 to 17 parse them. 18 parses them as Vars of
/// a GROUP entry of the range table (`hasGroupRTE`), which its planner
/// replaces by the keys before anything else; the stages (the gate above
/// all, which must see what an output reads) do it first. Levels with
/// grouping sets are left as they are: their Vars carry grouping's nulling
/// marks, which only the planner can keep, and every stage refuses or
/// leaves alone such a level.
///
/// # Safety
/// `query` is a live Query not yet planned; inside a transaction.
pub unsafe fn flatten_grouping(query: *mut pg_sys::Query) {
    #[cfg(not(feature = "pg18"))]
    let _ = query;
    /// # Safety
    /// Called by the tree walkers with live nodes.
    #[cfg(feature = "pg18")]
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags. A level is flattened before
        // its sub-levels are walked, so they see the outer keys too.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                let level = node as *mut pg_sys::Query;
                if (*level).hasGroupRTE && (*level).groupingSets.is_null() {
                    (*level).targetList = pg_sys::flatten_group_exprs(
                        std::ptr::null_mut(),
                        level,
                        (*level).targetList.cast(),
                    )
                    .cast();
                    (*level).havingQual = pg_sys::flatten_group_exprs(
                        std::ptr::null_mut(),
                        level,
                        (*level).havingQual,
                    );
                }
                return pg_sys::query_tree_walker(level, Some(walk), context, 0);
            }
            pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    #[cfg(feature = "pg18")]
    unsafe {
        walk(query.cast(), std::ptr::null_mut());
    }
}

/// The operator of a WindowFunc's run condition (`wfunc <op> arg`, 17 and
/// later, a node of its own that the expression walkers visit; the
/// WindowAgg's own run condition is made of it), or None for any other node.
///
/// # Safety
/// `node` is a live node.
pub unsafe fn window_run_condition(node: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    {
        let _ = node;
        None
    }
    // SAFETY: the caller's contract; the cast follows the node tag.
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    unsafe {
        ((*node).type_ == pg_sys::NodeTag::T_WindowFuncRunCondition)
            .then(|| (*(node as *mut pg_sys::WindowFuncRunCondition)).opno)
    }
}

/// The permission entries of a Query level (null on 15, which keeps them in
/// the range table entries).
///
/// # Safety
/// `query` is a live Query.
pub unsafe fn query_permissions(query: *mut pg_sys::Query) -> *mut pg_sys::List {
    #[cfg(feature = "pg15")]
    {
        let _ = query;
        std::ptr::null_mut()
    }
    // SAFETY: the caller's contract.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        (*query).rteperminfos
    }
}

/// Whether `lower` (a lower-cased zone name) is an abbreviation of the
/// session's `timezone_abbreviations`. 16 and later report a broken
/// abbreviation file as an error code, read here as not an abbreviation
/// (`DecodeTimezoneAbbrev` takes the field type's and the error's places
/// as arguments); 15 raises for an abbreviation whose zone the file
/// names wrongly, a server's configuration, never a value.
///
/// # Safety
/// `lower` is a NUL-terminated string; inside a transaction.
pub unsafe fn zone_abbreviation(lower: *mut std::ffi::c_char) -> bool {
    let mut offset = 0;
    let mut tz: *mut pg_sys::pg_tz = std::ptr::null_mut();
    // SAFETY: the caller's contract; the lookup writes only to the places given.
    #[cfg(feature = "pg15")]
    unsafe {
        pg_sys::DecodeTimezoneAbbrev(0, lower, &mut offset, &mut tz) != pg_sys::UNKNOWN_FIELD as i32
    }
    // SAFETY: as above; DateTimeErrorExtra is plain data, zeroed is its empty value.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        let mut kind = 0;
        let mut extra: pg_sys::DateTimeErrorExtra = std::mem::zeroed();
        pg_sys::DecodeTimezoneAbbrev(0, lower, &mut kind, &mut offset, &mut tz, &mut extra) == 0
            && kind != pg_sys::UNKNOWN_FIELD as i32
    }
}

/// Detaches `rte`'s permission entry (16 and later) before it stops
/// being a relation's: the planner requires an entry to match its
/// relation. The entry stays in the list, with what it requires waived
/// (`waive_privileges`) first.
///
/// # Safety
/// `rte` is a live range table entry of a Query not yet planned.
pub unsafe fn forget_permissions(rte: *mut pg_sys::RangeTblEntry) {
    #[cfg(feature = "pg15")]
    let _ = rte;
    // SAFETY: the caller's contract.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        (*rte).perminfoindex = 0;
    }
}

/// Appends the range table `source` (and on 16 and later its permission
/// entries, renumbered) to `level`'s.
///
/// # Safety
/// `level` is a live Query not yet planned; `source` the range table of a
/// level whose Vars were offset past `level`'s entries.
pub unsafe fn append_range_table(level: *mut pg_sys::Query, source: *mut pg_sys::Query) {
    // SAFETY: the caller's contract; list_concat copies the cells it appends.
    #[cfg(feature = "pg15")]
    unsafe {
        (*level).rtable = pg_sys::list_concat((*level).rtable, (*source).rtable);
    }
    // SAFETY: the caller's contract; CombineRangeTables (rewrite/rewriteManip.h) appends both
    // lists and renumbers the appended entries' perminfoindex.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        CombineRangeTables(
            &raw mut (*level).rtable,
            &raw mut (*level).rteperminfos,
            (*source).rtable,
            (*source).rteperminfos,
        );
    }
}

/// `level` with every Var of its range table entry `rtindex` (at its own
/// level and, one level further down each time, below it) replaced by the
/// entry of `targets` it names: a subquery's Vars by the subquery's
/// outputs. The result is a copy of `level`.
///
/// # Safety
/// `level` is a live Query not yet planned; `rtindex` one of its entries,
/// whose columns `targets` lists by resno.
pub unsafe fn replace_vars(
    level: *mut pg_sys::Query,
    rtindex: u32,
    targets: *mut pg_sys::List,
) -> *mut pg_sys::Query {
    // SAFETY: the caller's contract; the function (rewrite/rewriteManip.h) copies the Query it
    // is given and raises an error for a Var without an entry in `targets`.
    unsafe {
        let rte = pg_sys::list_nth((*level).rtable, rtindex as i32 - 1).cast();
        #[cfg(not(feature = "pg18"))]
        let copy = ReplaceVarsFromTargetList(
            level.cast(),
            rtindex as i32,
            0,
            rte,
            targets,
            REPLACEVARS_REPORT_ERROR,
            0,
            std::ptr::null_mut(),
        );
        #[cfg(feature = "pg18")]
        let copy = ReplaceVarsFromTargetList(
            level.cast(),
            rtindex as i32,
            0,
            rte,
            targets,
            0,
            REPLACEVARS_REPORT_ERROR,
            0,
            std::ptr::null_mut(),
        );
        copy.cast()
    }
}

/// `ReplaceVarsNoMatchOption`'s first value.
const REPLACEVARS_REPORT_ERROR: i32 = 0;

// SAFETY: the prototypes of rewrite/rewriteManip.h, which pgrx does not bind.
unsafe extern "C-unwind" {
    #[cfg(not(feature = "pg18"))]
    fn ReplaceVarsFromTargetList(
        node: *mut pg_sys::Node,
        target_varno: i32,
        sublevels_up: i32,
        target_rte: *mut pg_sys::RangeTblEntry,
        targetlist: *mut pg_sys::List,
        nomatch_option: i32,
        nomatch_varno: i32,
        outer_has_sublinks: *mut bool,
    ) -> *mut pg_sys::Node;
    #[cfg(feature = "pg18")]
    fn ReplaceVarsFromTargetList(
        node: *mut pg_sys::Node,
        target_varno: i32,
        sublevels_up: i32,
        target_rte: *mut pg_sys::RangeTblEntry,
        targetlist: *mut pg_sys::List,
        result_relation: i32,
        nomatch_option: i32,
        nomatch_varno: i32,
        outer_has_sublinks: *mut bool,
    ) -> *mut pg_sys::Node;
    #[cfg(not(feature = "pg15"))]
    fn CombineRangeTables(
        dst_rtable: *mut *mut pg_sys::List,
        dst_perminfos: *mut *mut pg_sys::List,
        src_rtable: *mut pg_sys::List,
        src_perminfos: *mut pg_sys::List,
    );
}

/// The permission entries of a plan (null on 15).
///
/// # Safety
/// `stmt` is a live PlannedStmt.
pub unsafe fn plan_permissions(stmt: *mut pg_sys::PlannedStmt) -> *mut pg_sys::List {
    #[cfg(feature = "pg15")]
    {
        let _ = stmt;
        std::ptr::null_mut()
    }
    // SAFETY: the caller's contract.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        (*stmt).permInfos
    }
}

/// The privileges the executor will check on `rte` (0: none).
///
/// # Safety
/// `rte` is a live entry of the range table whose permission entries are
/// `permissions` (`query_permissions` or `plan_permissions`).
pub unsafe fn required_privileges(
    permissions: *mut pg_sys::List,
    rte: *mut pg_sys::RangeTblEntry,
) -> pg_sys::AclMode {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(feature = "pg15")]
        {
            let _ = permissions;
            (*rte).requiredPerms
        }
        #[cfg(not(feature = "pg15"))]
        {
            if (*rte).perminfoindex == 0 {
                return 0;
            }
            (*pg_sys::getRTEPermissionInfo(permissions, rte)).requiredPerms
        }
    }
}

/// Waives the executor's privilege check on `rte`: nothing required, no
/// column selected.
///
/// # Safety
/// As `required_privileges`, on a Query not yet planned.
pub unsafe fn waive_privileges(permissions: *mut pg_sys::List, rte: *mut pg_sys::RangeTblEntry) {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(feature = "pg15")]
        {
            let _ = permissions;
            (*rte).requiredPerms = 0;
            (*rte).selectedCols = std::ptr::null_mut();
        }
        #[cfg(not(feature = "pg15"))]
        {
            if (*rte).perminfoindex == 0 {
                return;
            }
            let info = pg_sys::getRTEPermissionInfo(permissions, rte);
            (*info).requiredPerms = 0;
            (*info).selectedCols = std::ptr::null_mut();
        }
    }
}

/// Whether the current user has the privileges `rte` requires (the
/// executor's check, without raising).
///
/// # Safety
/// As `required_privileges`; inside a transaction.
pub unsafe fn has_privileges(
    permissions: *mut pg_sys::List,
    rte: *mut pg_sys::RangeTblEntry,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let one = pg_sys::lappend(std::ptr::null_mut(), rte.cast());
        #[cfg(feature = "pg15")]
        {
            let _ = permissions;
            pg_sys::ExecCheckRTPerms(one, false)
        }
        #[cfg(not(feature = "pg15"))]
        {
            if (*rte).perminfoindex == 0 {
                return true;
            }
            let info = pg_sys::getRTEPermissionInfo(permissions, rte);
            pg_sys::ExecCheckPermissions(
                one,
                pg_sys::lappend(std::ptr::null_mut(), info.cast()),
                false,
            )
        }
    }
}

/// A table entry for the executor to check each time a plan runs, read by
/// no plan node (`recheck_privileges`, `add_recheck`).
pub struct Recheck {
    rte: *mut pg_sys::RangeTblEntry,
    #[cfg(not(feature = "pg15"))]
    info: *mut pg_sys::RTEPermissionInfo,
}

/// A plain copy of `rte` (no security quals, sample or inheritance) with
/// its privileges, to be checked again by the executor (`add_recheck`).
///
/// # Safety
/// As `required_privileges`; the copy is made in the current memory context.
pub unsafe fn recheck_privileges(
    permissions: *mut pg_sys::List,
    rte: *mut pg_sys::RangeTblEntry,
) -> Recheck {
    // SAFETY: the caller's contract.
    unsafe {
        let copy = pg_sys::copyObjectImpl(rte.cast()) as *mut pg_sys::RangeTblEntry;
        (*copy).securityQuals = std::ptr::null_mut();
        (*copy).tablesample = std::ptr::null_mut();
        (*copy).inh = false;
        #[cfg(feature = "pg15")]
        {
            let _ = permissions;
            Recheck { rte: copy }
        }
        #[cfg(not(feature = "pg15"))]
        {
            let info =
                pg_sys::copyObjectImpl(pg_sys::getRTEPermissionInfo(permissions, rte).cast())
                    .cast();
            Recheck { rte: copy, info }
        }
    }
}

/// Appends `recheck` to the plan's range table (and its privileges to the
/// plan's permission entries): the executor checks it at every start.
///
/// # Safety
/// `planned` is a live PlannedStmt; `recheck` made in a context that outlives it.
pub unsafe fn add_recheck(planned: *mut pg_sys::PlannedStmt, recheck: &Recheck) {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(not(feature = "pg15"))]
        {
            (*planned).permInfos = pg_sys::lappend((*planned).permInfos, recheck.info.cast());
            (*recheck.rte).perminfoindex =
                pg_sys::list_length((*planned).permInfos) as pg_sys::Index;
        }
        (*planned).rtable = pg_sys::lappend((*planned).rtable, recheck.rte.cast());
    }
}

/// This process's index among the PGPROCs of shared memory (`pgprocno`).
///
/// # Safety
/// `proc` is a live PGPROC of shared memory (MyProc, a lock group leader).
pub unsafe fn proc_number(proc: *mut pg_sys::PGPROC) -> usize {
    // SAFETY: the caller's contract; every PGPROC lies in ProcGlobal->allProcs (17 and later).
    unsafe {
        #[cfg(any(feature = "pg15", feature = "pg16"))]
        return (*proc).pgprocno as usize;
        #[cfg(not(any(feature = "pg15", feature = "pg16")))]
        return proc.offset_from((*pg_sys::ProcGlobal).allProcs) as usize;
    }
}

/// This backend's local transaction id.
///
/// # Safety
/// MyProc is set (any backend running a query).
pub unsafe fn local_transaction() -> pg_sys::LocalTransactionId {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(any(feature = "pg15", feature = "pg16"))]
        return (*pg_sys::MyProc).lxid;
        #[cfg(not(any(feature = "pg15", feature = "pg16")))]
        return (*pg_sys::MyProc).vxid.lxid;
    }
}

/// The POSIX collation, byte order as C's.
#[cfg(not(feature = "pg18"))]
pub const POSIX_COLLATION_OID: pg_sys::Oid = pg_sys::POSIX_COLLATION_OID;
#[cfg(feature = "pg18")]
pub const POSIX_COLLATION_OID: pg_sys::Oid = pg_sys::Oid::from_u32(951);

/// What ExecutorRun passes after the direction and the count: PostgreSQL
/// 15 to 17 `execute_once`, 18 nothing.
#[derive(Clone, Copy)]
pub struct RunArguments {
    #[cfg(not(feature = "pg18"))]
    execute_once: bool,
}

/// Defines `$name` as an ExecutorRun_hook of this version that calls
/// `$body(query, direction, count, RunArguments)`.
macro_rules! executor_run_hook {
    ($name:ident, $body:path) => {
        /// # Safety
        /// Only for PostgreSQL, as ExecutorRun_hook: `query` is the live QueryDesc
        /// being run, on the backend's only thread.
        #[cfg(not(feature = "pg18"))]
        unsafe extern "C-unwind" fn $name(
            query: *mut pgrx::pg_sys::QueryDesc,
            direction: pgrx::pg_sys::ScanDirection::Type,
            count: u64,
            execute_once: bool,
        ) {
            // SAFETY: the caller's contract, passed on.
            unsafe {
                $body(
                    query,
                    direction,
                    count,
                    $crate::versions::RunArguments::new(execute_once),
                )
            }
        }
        /// # Safety
        /// Only for PostgreSQL, as ExecutorRun_hook: `query` is the live QueryDesc
        /// being run, on the backend's only thread.
        #[cfg(feature = "pg18")]
        unsafe extern "C-unwind" fn $name(
            query: *mut pgrx::pg_sys::QueryDesc,
            direction: pgrx::pg_sys::ScanDirection::Type,
            count: u64,
        ) {
            // SAFETY: the caller's contract, passed on.
            unsafe {
                $body(
                    query,
                    direction,
                    count,
                    $crate::versions::RunArguments::new(false),
                )
            }
        }
    };
}
pub(crate) use executor_run_hook;

impl RunArguments {
    #[doc(hidden)]
    pub fn new(execute_once: bool) -> RunArguments {
        #[cfg(feature = "pg18")]
        let _ = execute_once;
        RunArguments {
            #[cfg(not(feature = "pg18"))]
            execute_once,
        }
    }
}

// SAFETY: standard_ExecutorRun's prototype (executor/executor.h) on each version.
unsafe extern "C-unwind" {
    #[cfg(not(feature = "pg18"))]
    #[link_name = "standard_ExecutorRun"]
    fn raw_standard_executor_run(
        query: *mut pg_sys::QueryDesc,
        direction: pg_sys::ScanDirection::Type,
        count: u64,
        once: bool,
    );
    #[cfg(feature = "pg18")]
    #[link_name = "standard_ExecutorRun"]
    fn raw_standard_executor_run(
        query: *mut pg_sys::QueryDesc,
        direction: pg_sys::ScanDirection::Type,
        count: u64,
    );
}

/// Runs `query` through `prev` (the hook installed before ours), or
/// standard_ExecutorRun when there is none, with the arguments unchanged.
/// Called directly, not through pgrx's guard: an error below reaches
/// PostgreSQL's handler as it was raised.
///
/// # Safety
/// As ExecutorRun: `query` is the live QueryDesc being run, `arguments` what the hook was given.
pub unsafe fn executor_run(
    prev: pg_sys::ExecutorRun_hook_type,
    query: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
    arguments: RunArguments,
) {
    // SAFETY: the caller's contract.
    unsafe {
        #[cfg(not(feature = "pg18"))]
        match prev {
            Some(prev) => prev(query, direction, count, arguments.execute_once),
            None => raw_standard_executor_run(query, direction, count, arguments.execute_once),
        }
        #[cfg(feature = "pg18")]
        {
            let _ = arguments;
            match prev {
                Some(prev) => prev(query, direction, count),
                None => raw_standard_executor_run(query, direction, count),
            }
        }
    }
}

/// The expression a Var of a GROUP range-table entry stands for (18 keeps
/// GROUP BY keys there until planning); null for any other entry, and
/// before 18.
///
/// # Safety
/// `rte` is a live range-table entry; `attno` one of its columns.
pub unsafe fn group_expression(rte: *mut pg_sys::RangeTblEntry, attno: i16) -> *mut pg_sys::Node {
    #[cfg(feature = "pg18")]
    // SAFETY: the caller's contract; groupexprs holds one expression per column.
    unsafe {
        if (*rte).rtekind == pg_sys::RTEKind::RTE_GROUP {
            let exprs = crate::pg_list::list_nodes((*rte).groupexprs);
            return exprs
                .get((attno as usize).wrapping_sub(1))
                .copied()
                .unwrap_or(std::ptr::null_mut());
        }
    }
    #[cfg(not(feature = "pg18"))]
    let _ = (rte, attno);
    std::ptr::null_mut()
}

/// The cells of the GROUP range-table entry's expressions of `query` (18
/// keeps GROUP BY keys there until planning: what the level groups by);
/// empty for a level without one, and before 18.
///
/// # Safety
/// `query` is a live Query.
pub unsafe fn group_expression_cells(query: *mut pg_sys::Query) -> Vec<*mut *mut pg_sys::Node> {
    #[cfg(feature = "pg18")]
    // SAFETY: the caller's contract; the range table and groupexprs are Lists of node pointers.
    unsafe {
        if (*query).hasGroupRTE {
            for rte in crate::pg_list::list_nodes((*query).rtable) {
                let rte = rte as *mut pg_sys::RangeTblEntry;
                if (*rte).rtekind == pg_sys::RTEKind::RTE_GROUP && !(*rte).groupexprs.is_null() {
                    let list = (*rte).groupexprs;
                    return (0..(*list).length as usize)
                        .map(|i| (&raw mut (*(*list).elements.add(i)).ptr_value).cast())
                        .collect();
                }
            }
        }
    }
    #[cfg(not(feature = "pg18"))]
    let _ = query;
    Vec::new()
}

/// Marks `level` as one without a GROUP range table entry (18): a level
/// made anew over a subquery of the grouped one (`gate::policy::split`).
///
/// # Safety
/// `level` is a live Query not yet planned.
pub unsafe fn no_group_entry(level: *mut pg_sys::Query) {
    #[cfg(not(feature = "pg18"))]
    let _ = level;
    // SAFETY: the caller's contract.
    #[cfg(feature = "pg18")]
    unsafe {
        (*level).hasGroupRTE = false;
    }
}

/// Clears `level`'s permission entries (16 and later): a level made anew
/// whose range table holds only a subquery.
///
/// # Safety
/// `level` is a live Query not yet planned.
pub unsafe fn no_permissions(level: *mut pg_sys::Query) {
    #[cfg(feature = "pg15")]
    let _ = level;
    // SAFETY: the caller's contract.
    #[cfg(not(feature = "pg15"))]
    unsafe {
        (*level).rteperminfos = std::ptr::null_mut();
    }
}
