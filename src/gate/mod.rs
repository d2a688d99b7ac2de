//! The analyst gate: roles marked as analysts (`dpnoise.analyst`, set per
//! role by `dp_analyst`) get only differentially private answers from
//! protected tables (`dp_protect`). docs/analysts.md has the threat model.
//!
//! Three checkpoints, each refusing with ZB003 before anything is read or
//! charged:
//! - the planner hook (`check_query`): every query level that reads a
//!   protected table directly must be an admitted aggregate (protected
//!   tables joined on their privacy unit, public tables, inner joins;
//!   dpnoise aggregates only, leakproof filters, keys and arguments, no
//!   correlation); levels above it only post-process its answers. An
//!   admitted level's protected tables are vouched for (no SELECT
//!   privilege needed), as a view's owner vouches;
//! - ExecutorStart (`check_plan`): a plan an analyst runs may read a
//!   protected table only where the gate vouched for it, whoever planned it
//!   (a cached plan from before the role became an analyst is refused);
//! - ProcessUtility (`check_utility`): COPY to or from a protected table,
//!   and EXPLAIN of a query over one (estimates come from the data), are
//!   refused.
//!
//! An admitted level may GROUP BY expressions of its protected table: the
//! gate adds private partition selection (`dp_partition_selected` in
//! HAVING, at `dpnoise.selection_epsilon` / `dpnoise.selection_delta`), so a
//! key appears only if the optimal keep test on its number of persons
//! passes. Every analyst statement pays its whole cost from its plan
//! before it runs (`cost`), whatever the data. A level over a table with
//! several rows per person, or over a join, is rewritten so that each
//! person adds one combined value to at most `max_groups_contributed`
//! groups (`bounding`).

use crate::errors::raise_sqlstate;
pub(crate) use crate::pg_list::{list_items, list_nodes};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

pub mod accuracy;
pub mod bounding;
pub mod plan;

pgrx::extension_sql_file!("schema.sql", name = "gate_sql", requires = ["budget_sql", dp_gate_changed, dp_query_accuracy]);

/// SQLSTATE of every refusal by the gate.
pub const QUERY_REFUSED: &str = "ZB003";

/// `dpnoise.analyst`: on for roles the DBA marked as analysts (`ALTER ROLE
/// … IN DATABASE … SET`, which `dp_analyst` runs). Superusers only: an
/// analyst can neither SET nor RESET it, nor pass it when connecting.
static ANALYST: GucSetting<bool> = GucSetting::<bool>::new(false);

/// Whether this session is an analyst's.
pub fn analyst() -> bool {
    ANALYST.get()
}

/// `dpnoise.selection_epsilon` and `dpnoise.selection_delta`: what private
/// partition selection spends on an analyst's GROUP BY (each query pays it
/// on top of its aggregates' ε).
pub(super) static SELECTION_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(0.5);
pub(super) static SELECTION_DELTA: GucSetting<f64> = GucSetting::<f64>::new(1e-6);

/// `dpnoise.max_epsilon_per_query`: the most one analyst's statement may
/// spend (0: no limit). Superusers set it, per role.
static MAX_EPSILON_PER_QUERY: GucSetting<f64> = GucSetting::<f64>::new(0.0);

/// `dpnoise.max_groups_contributed`: lowers, for this session, how many
/// groups of a query one person may contribute to (0: each protected
/// table's own setting, which it can never raise).
static MAX_GROUPS_CONTRIBUTED: GucSetting<i32> = GucSetting::<i32>::new(0);

/// `dpnoise.role_max_groups_contributed`: the DBA's cap for a role (0: none),
/// set with ALTER ROLE … SET; superusers only, so the analyst cannot lift it.
static ROLE_MAX_GROUPS_CONTRIBUTED: GucSetting<i32> = GucSetting::<i32>::new(0);

/// k for a level whose protected tables allow `tables` groups a person:
/// lowered by the role's cap and the session's setting, never raised.
pub(super) fn max_groups(tables: i32) -> i32 {
    [ROLE_MAX_GROUPS_CONTRIBUTED.get(), MAX_GROUPS_CONTRIBUTED.get()]
        .into_iter()
        .filter(|&k| k > 0)
        .fold(tables, i32::min)
}

pub fn max_epsilon_per_query() -> f64 {
    MAX_EPSILON_PER_QUERY.get()
}

pub fn init() {
    GucRegistry::define_bool_guc(
        c"dpnoise.analyst",
        c"Gives this session only differentially private answers from protected tables.",
        c"Set per role by dp_analyst (ALTER ROLE ... IN DATABASE ... SET); only superusers can change it.",
        &ANALYST,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.selection_epsilon",
        c"Epsilon spent on choosing which group keys from protected data an analyst's GROUP BY shows.",
        c"Added to the query's cost; with dpnoise.selection_delta.",
        &SELECTION_EPSILON,
        1e-4,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.selection_delta",
        c"Delta spent on choosing which group keys from protected data an analyst's GROUP BY shows.",
        c"Must be above 0 for GROUP BY on keys from protected data.",
        &SELECTION_DELTA,
        0.0,
        0.5,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dpnoise.max_groups_contributed",
        c"How many groups of one query a person may contribute to, at most (0: the protected tables' setting).",
        c"Can only lower the protected tables' max_groups_contributed.",
        &MAX_GROUPS_CONTRIBUTED,
        0,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dpnoise.role_max_groups_contributed",
        c"How many groups of one query a person may contribute to, at most, for this role (0: no cap).",
        c"Set per role by a superuser (ALTER ROLE ... SET); lowers the protected tables' max_groups_contributed.",
        &ROLE_MAX_GROUPS_CONTRIBUTED,
        0,
        1000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.max_epsilon_per_query",
        c"The most epsilon one statement of an analyst may spend (0: no limit).",
        c"Set per role by a superuser (ALTER ROLE ... SET).",
        &MAX_EPSILON_PER_QUERY,
        0.0,
        1e6,
        GucContext::Suset,
        GucFlags::default(),
    );
    // SAFETY: runs once, from _PG_init, on the process's only thread; the callbacks have the
    // transaction and relcache callbacks' signatures.
    unsafe {
        pg_sys::RegisterXactCallback(Some(transaction_ended), std::ptr::null_mut());
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0usize));
    }
}

/// The protected tables (with their inheritance children) and the DBA's
/// allow list. Read once, then kept until a relcache invalidation names one
/// of them or the gate's own tables (DDL on a protected table, such as a
/// dropped index, sends one; dp_protect, dp_unprotect and dp_allow_function
/// send one for dpnoise.protected through `dp_gate_changed`).
struct Protected {
    tables: HashMap<pg_sys::Oid, Table>,
    /// Functions the DBA declared safe for analysts beyond LEAKPROOF ones.
    allowed: HashSet<pg_sys::Oid>,
    /// dpnoise.protected and dpnoise.allowed_functions.
    own: [pg_sys::Oid; 2],
    /// dp_partition_selected(float8, float8), dp_share(float8, int4), dp_uniform().
    selection: pg_sys::Oid,
    share: pg_sys::Oid,
    uniform: pg_sys::Oid,
}

/// What the gate knows of one protected table.
#[derive(Clone, Copy)]
struct Table {
    /// Whether it holds one row per person (its privacy unit is UNIQUE,
    /// alone, on every row it can show).
    one_row: bool,
    /// The privacy unit's column number (0 if it was dropped).
    unit: i16,
    /// How many groups of a query one person may contribute to.
    max_groups: i32,
}

thread_local! {
    static PROTECTED: RefCell<Option<std::rc::Rc<Protected>>> = const { RefCell::new(None) };
    /// Set while the gate reads its own tables (their queries pass the planner hook too).
    static LOADING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set while an analyst's EXPLAIN runs.
    static EXPLAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// # Safety
/// Called by PostgreSQL as a transaction callback.
#[pg_guard]
unsafe extern "C-unwind" fn transaction_ended(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_ABORT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    ) {
        LOADING.with(|l| l.set(false));
        EXPLAINING.with(|e| e.set(false));
    }
}

/// # Safety
/// Called by PostgreSQL as a relcache invalidation callback.
#[pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    PROTECTED.with(|p| {
        let mut p = p.borrow_mut();
        let stale = p.as_ref().is_some_and(|known| {
            relid == pg_sys::InvalidOid || known.own.contains(&relid) || known.tables.contains_key(&relid)
        });
        if stale {
            *p = None;
        }
    });
}

/// Tells every backend that the protected tables or the allow list changed
/// (at commit): called by dp_protect, dp_unprotect and dp_allow_function.
/// Every relcache entry is invalidated, which also drops every cached
/// plan: a prepared statement is planned again, through the gate, with
/// the new settings (a lower max_groups_contributed, a table no longer
/// vouched for).
#[pg_extern(volatile, parallel_unsafe)]
fn dp_gate_changed() {
    // SAFETY: queues an invalidation of every relcache entry, sent at commit.
    unsafe { pg_sys::CacheInvalidateRelcacheAll() };
}

/// Run as the bootstrap superuser in an analyst's session, whose search_path
/// the analyst controls: every type and operator is schema-qualified, so no
/// object of the analyst's own can be picked.
const PROTECTED_QUERY: &str = "\
WITH RECURSIVE p(relid, unit, max_groups) AS (
    SELECT pr.relid::pg_catalog.oid, pr.privacy_unit, pr.max_groups_contributed FROM dpnoise.protected pr
    UNION
    SELECT i.inhrelid, p.unit, p.max_groups FROM pg_catalog.pg_inherits i JOIN p ON i.inhparent OPERATOR(pg_catalog.=) p.relid)
SELECT p.relid,
       COALESCE((SELECT a.attnum FROM pg_catalog.pg_attribute a
                 WHERE a.attrelid OPERATOR(pg_catalog.=) p.relid AND a.attname OPERATOR(pg_catalog.=) p.unit
                   AND NOT a.attisdropped), 0::pg_catalog.int2),
       p.max_groups,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index x
               JOIN pg_catalog.pg_attribute a
                 ON a.attrelid OPERATOR(pg_catalog.=) x.indrelid AND a.attnum OPERATOR(pg_catalog.=) x.indkey[0]
               WHERE x.indrelid OPERATOR(pg_catalog.=) p.relid AND x.indisunique
                 AND x.indnkeyatts OPERATOR(pg_catalog.=) 1::pg_catalog.int2
                 AND x.indpred IS NULL AND x.indexprs IS NULL AND a.attname OPERATOR(pg_catalog.=) p.unit)
       AND (c.relkind OPERATOR(pg_catalog.=) 'p'::pg_catalog.char
            OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) p.relid))
FROM p JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid";

/// The DBA's allow list, qualified as above.
const ALLOWED_QUERY: &str = "SELECT fn::pg_catalog.oid FROM dpnoise.allowed_functions";

/// A function of dpnoise by name and argument count ($1, $2), in whichever
/// schema the extension is.
const FUNCTION_QUERY: &str = "\
SELECT p.oid FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
 AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'e'
JOIN pg_catalog.pg_extension x ON x.oid OPERATOR(pg_catalog.=) d.refobjid AND x.extname OPERATOR(pg_catalog.=) 'dpnoise'
WHERE p.proname OPERATOR(pg_catalog.=) $1 AND p.pronargs OPERATOR(pg_catalog.=) $2";

/// The protected tables, read as the bootstrap superuser (an analyst cannot
/// read dpnoise's schema), once per transaction; None when the extension is
/// not installed in this database.
fn protected() -> Option<std::rc::Rc<Protected>> {
    if let Some(p) = PROTECTED.with(|p| p.borrow().clone()) {
        return Some(p);
    }
    as_superuser(load)
}

/// Runs `f` as the bootstrap superuser (in a restricted security context),
/// for dpnoise's reads of its own schema; the caller's user id is restored
/// after it, or by the (sub)transaction abort if it raises.
pub(crate) fn as_superuser<T>(f: impl FnOnce() -> T) -> T {
    let mut user = pg_sys::InvalidOid;
    let mut context = 0;
    // SAFETY: reads and sets this backend's current user id; the error path restores it too
    // (transaction abort resets the user id and security context).
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            pg_sys::BOOTSTRAP_SUPERUSERID.into(),
            context | (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION) as i32,
        );
    }
    let out = f();
    // SAFETY: restores what was read above.
    unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
    out
}

/// Runs `f` (the gate's own catalog and count queries) with JIT off: the
/// planner's estimate for the recursive read of the protected tables runs
/// to millions, and compiling it took 400 ms of an analyst's first
/// statement. The setting is restored after `f`, or by the abort if it raises.
pub(crate) fn without_jit<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: a GUC nest level of our own, as a function's SET clause makes one; the
    // setting and value are NUL-terminated literals.
    let level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"jit".as_ptr(),
            c"off".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    };
    let out = f();
    // SAFETY: pops the level pushed above.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    out
}

/// Reads the protected tables (as the bootstrap superuser: `protected`).
fn load() -> Option<std::rc::Rc<Protected>> {
    /// LOADING while it lives: cleared when dropped, also by an error
    /// unwinding through the load (in a subtransaction a PL/pgSQL
    /// EXCEPTION block catches, the flag would otherwise stay set, and the
    /// gate off, until the transaction ends).
    struct Loading;
    impl Drop for Loading {
        fn drop(&mut self) {
            LOADING.with(|l| l.set(false));
        }
    }
    LOADING.with(|l| l.set(true));
    let loading = Loading;
    let loaded = without_jit(|| Spi::connect(|client| {
        let own = client
            .select(
                "SELECT pg_catalog.to_regclass('dpnoise.protected')::pg_catalog.oid, \
                        pg_catalog.to_regclass('dpnoise.allowed_functions')::pg_catalog.oid",
                None,
                &[],
            )?
            .first()
            .get_two::<pg_sys::Oid, pg_sys::Oid>()?;
        let (Some(protected_table), Some(allowed_table)) = own else {
            return Ok::<_, pgrx::spi::Error>(None);
        };
        let mut tables = HashMap::new();
        for row in client.select(PROTECTED_QUERY, None, &[])? {
            if let Some(relid) = row.get::<pg_sys::Oid>(1)? {
                let unit = row.get::<i16>(2)?.unwrap_or(0);
                let max_groups = row.get::<i32>(3)?.unwrap_or(1);
                let one_row = row.get::<bool>(4)?.unwrap_or(false);
                tables.insert(
                    relid,
                    Table {
                        one_row,
                        unit,
                        max_groups,
                    },
                );
            }
        }
        let mut allowed = HashSet::new();
        for row in client.select(ALLOWED_QUERY, None, &[])? {
            if let Some(f) = row.get::<pg_sys::Oid>(1)? {
                allowed.insert(f);
            }
        }
        let function = |name: &str, nargs: i16| -> Result<pg_sys::Oid, pgrx::spi::Error> {
            let args = [name.into(), nargs.into()];
            Ok(client.select(FUNCTION_QUERY, None, &args)?.first().get_one::<pg_sys::Oid>()?.unwrap_or(pg_sys::InvalidOid))
        };
        let selection = function("dp_partition_selected", 2)?;
        let share = function("dp_share", 2)?;
        let uniform = function("dp_uniform", 0)?;
        Ok(Some(std::rc::Rc::new(Protected { tables, allowed, own: [protected_table, allowed_table], selection, share, uniform })))
    }));
    drop(loading);
    let loaded = loaded.unwrap_or_else(|e| pgrx::error!("dpnoise: cannot read the protected tables: {e}"));
    PROTECTED.with(|p| *p.borrow_mut() = loaded.clone());
    loaded
}

/// Whether the gate applies now: an analyst's session, outside the gate's own lookups.
pub(crate) fn gated() -> bool {
    analyst() && !LOADING.with(|l| l.get())
}

/// For an analyst's session: the schema dpnoise is installed in (that of
/// its dp_share), read without a query.
pub(crate) fn own_schema() -> Option<pg_sys::Oid> {
    let share = protected()?.share;
    // SAFETY: a catalog lookup by OID inside the caller's transaction.
    (share != pg_sys::InvalidOid).then(|| unsafe { pg_sys::get_func_namespace(share) })
}

/// For an analyst's session: the privacy unit's column of the protected
/// table `relid`, if it is one.
pub(crate) fn protected_unit(relid: pg_sys::Oid) -> Option<i16> {
    if !gated() {
        return None;
    }
    protected().and_then(|p| p.tables.get(&relid).map(|t| t.unit))
}

/// Why a query is refused, and how to write it instead. Checks return it
/// rather than raise: a custom SQLSTATE raised inside PostgreSQL's tree
/// walkers would not survive pgrx's error rethrow, so `raise` runs once the
/// walk is over.
struct Refusal {
    what: String,
    instead: String,
}

type Checked = Result<(), Refusal>;

fn refuse(what: &str, instead: &str) -> Refusal {
    Refusal { what: what.to_string(), instead: instead.to_string() }
}

/// Refuses an analyst's statement (ZB003) with what and how to write it instead.
pub(crate) fn refused(what: &str, instead: &str) -> ! {
    raise(refuse(what, instead))
}

fn raise(refusal: Refusal) -> ! {
    raise_sqlstate(
        QUERY_REFUSED,
        format!("dpnoise: analysts get only differentially private aggregates of protected tables: {}", refusal.what),
        Some(refusal.instead),
    )
}

const SHAPE: &str = "Write SELECT dp_count(epsilon), dp_sum(column, epsilon, lower, upper), ... FROM protected_table \
                     WHERE <conditions on its columns>; wrap it in a subquery or CTE to post-process the answers.";

/// What the walk over an analyst's query carries.
struct Walk {
    protected: std::rc::Rc<Protected>,
    explaining: bool,
    /// The first refusal; the walk stops there.
    refused: Option<Refusal>,
}

/// Checks an analyst's query before planning; vouches for the protected
/// tables of the levels it admits. Does nothing for other sessions.
///
/// # Safety
/// `query` is the live Query the planner hook was given.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_query(query: *mut pg_sys::Query) {
    if !gated() {
        return;
    }
    let Some(protected) = protected() else { return };
    let mut walk = Walk { protected, explaining: EXPLAINING.with(|e| e.get()), refused: None };
    // SAFETY: the caller's contract; the walker gets `walk` back as its context.
    unsafe { walker(query.cast(), (&raw mut walk).cast()) };
    if let Some(refusal) = walk.refused {
        raise(refusal);
    }
}

/// # Safety
/// Called by PostgreSQL's tree walkers, with the `Walk` of `check_query` as context.
#[pg_guard]
unsafe extern "C-unwind" fn walker(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
    // SAFETY: nodes of a live query tree; casts follow the node tags.
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Query {
            let query = node as *mut pg_sys::Query;
            let walk = &mut *(context as *mut Walk);
            return match check_level(query, walk) {
                Err(refusal) => {
                    walk.refused = Some(refusal);
                    true
                }
                Ok(false) => false,
                Ok(true) => pg_sys::query_tree_walker(query, Some(walker), context, 0),
            };
        }
        pg_sys::expression_tree_walker(node, Some(walker), context)
    }
}

/// Checks one query level: if it reads a protected table directly, it must
/// be an admitted aggregate.
///
/// # Safety
/// `query` is a live Query.
unsafe fn check_level(query: *mut pg_sys::Query, walk: &Walk) -> Result<bool, Refusal> {
    // SAFETY: the caller's contract; RTE and node casts follow their kinds and tags.
    unsafe {
        let rtable = list_items::<pg_sys::RangeTblEntry>((*query).rtable);
        let read: Vec<usize> = rtable
            .iter()
            .enumerate()
            .filter(|(_, rte)| {
                (***rte).rtekind == pg_sys::RTEKind::RTE_RELATION && walk.protected.tables.contains_key(&(***rte).relid)
            })
            .map(|(i, _)| i)
            .collect();
        if read.is_empty() {
            return Ok(true);
        }
        if walk.explaining {
            return Err(refuse("EXPLAIN shows estimates drawn from the protected data", "Run the query itself."));
        }
        if (*query).commandType != pg_sys::CmdType::CMD_SELECT || (*query).resultRelation != 0 {
            return Err(refuse("analysts cannot write protected tables", "Ask the DBA."));
        }
        if !(*query).rowMarks.is_null() {
            return Err(refuse("FOR UPDATE/SHARE locks protected rows", SHAPE));
        }
        // FROM: tables, inner joins. Protected tables are joined on their
        // privacy unit; public tables freely (bounding undoes any copies).
        // Or the public side of an outer join lists the group keys.
        let listed = public_keys(query, &rtable, &walk.protected)?;
        let mut from =
            FromItems { leaves: Vec::new(), quals: vec![(*(*query).jointree).quals], listed, protected: &walk.protected };
        for item in list_items::<pg_sys::Node>((*(*query).jointree).fromlist) {
            from.item(item, &rtable)?;
        }
        let mut persons: Vec<(i32, Table)> = Vec::new();
        for &leaf in &from.leaves {
            let rte = rtable[leaf as usize - 1];
            if let Some(table) = walk.protected.tables.get(&(*rte).relid) {
                if !(*rte).tablesample.is_null() {
                    return Err(refuse("TABLESAMPLE picks protected rows by their place on disk", SHAPE));
                }
                if table.unit == 0 {
                    return Err(refuse("this protected table's privacy unit column is gone", "Ask the DBA to protect it again."));
                }
                persons.push((leaf, *table));
            }
        }
        if persons.len() != read.len() {
            return Err(refuse("a protected table must be a FROM item of its query level", SHAPE));
        }
        let bounded = from.leaves.len() > 1 || !persons[0].1.one_row || listed.is_some();
        if persons.len() > 1 {
            joined_on_unit(&rtable, &persons, &from.quals)?;
        }
        // A join of two tables that may hold several rows per person gives
        // a person the product of their rows: one person could then make
        // the statement run as long as they like (n^k rows for k copies).
        if persons.iter().filter(|(_, table)| !table.one_row).count() > 1 {
            return Err(refuse(
                "two tables with several rows per person (or one of them twice) are joined: a person's rows would multiply",
                "Join a table with several rows per person only with tables of one row per person and public tables; query each such table apart.",
            ));
        }
        let grouped = !(*query).groupClause.is_null();
        if !(*query).hasAggs && !grouped {
            return Err(refuse("rows of a protected table cannot be read, only dpnoise aggregates of them", SHAPE));
        }
        if !(*query).groupingSets.is_null() {
            return Err(refuse(
                "GROUPING SETS, ROLLUP and CUBE are not admitted yet",
                "Run one GROUP BY query per grouping set.",
            ));
        }
        if (*query).hasWindowFuncs || (*query).hasTargetSRFs || !(*query).distinctClause.is_null() {
            return Err(refuse("window functions, set-returning functions and DISTINCT are not admitted over protected rows", SHAPE));
        }
        if (*query).hasSubLinks || !(*query).cteList.is_null() || (*query).hasRecursive || (*query).hasModifyingCTE {
            return Err(refuse("subqueries cannot be mixed with protected rows at the same query level", SHAPE));
        }
        if !(*query).setOperations.is_null() {
            return Err(refuse("UNION, INTERSECT and EXCEPT are not admitted over protected rows", SHAPE));
        }
        let mut check = Leakproof { allowed: &walk.protected.allowed, rows: true };
        for qual in &from.quals {
            check.node(*qual)?;
        }
        // HAVING is evaluated on every group, shown or not: as WHERE.
        check.node((*query).havingQual)?;
        // A group key is evaluated on every row, as WHERE is; any other
        // output holds protected values only inside dpnoise aggregates.
        let keys: HashSet<u32> = list_items::<pg_sys::SortGroupClause>((*query).groupClause)
            .iter()
            .map(|clause| (**clause).tleSortGroupRef)
            .collect();
        for entry in list_items::<pg_sys::TargetEntry>((*query).targetList) {
            check.rows = keys.contains(&(*entry).ressortgroupref);
            check.node((*entry).expr.cast())?;
        }
        if grouped && listed.is_none() {
            select_partitions(query, walk.protected.selection)?;
        }
        // Vouched for: the analyst needs no SELECT privilege on the tables.
        for (leaf, _) in &persons {
            let rte = rtable[*leaf as usize - 1];
            (*rte).requiredPerms = 0;
            (*rte).selectedCols = std::ptr::null_mut();
        }
        if !bounded {
            return Ok(true);
        }
        let max_groups = max_groups(persons.iter().map(|(_, t)| t.max_groups).min().unwrap_or(1));
        let unit = (persons[0].0, persons[0].1.unit);
        bounding::bound(
            query,
            &walk.protected,
            &bounding::Bounds { unit, max_groups, listed },
        )?;
        // The levels written above are the gate's own: not walked again.
        Ok(false)
    }
}

/// The FROM items of an admitted level.
struct FromItems<'a> {
    /// Range table indexes of its tables (and key lists).
    leaves: Vec<i32>,
    /// WHERE and every JOIN ... ON: conditions on the rows.
    quals: Vec<*mut pg_sys::Node>,
    /// The outer join whose public side lists the group keys, if any.
    listed: Option<*mut pg_sys::JoinExpr>,
    protected: &'a Protected,
}

impl FromItems<'_> {
    /// # Safety
    /// `node` is a live jointree item of the query whose range table is `rtable`.
    unsafe fn item(
        &mut self,
        node: *mut pg_sys::Node,
        rtable: &[*mut pg_sys::RangeTblEntry],
    ) -> Checked {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            match (*node).type_ {
                pg_sys::NodeTag::T_RangeTblRef => {
                    let index = (*(node as *mut pg_sys::RangeTblRef)).rtindex;
                    let rte = rtable[index as usize - 1];
                    // Public rows: a subquery (such as a VALUES list) that
                    // reads no protected table, or a function of constants
                    // (generate_series); neither may see another FROM item.
                    let admitted = match (*rte).rtekind {
                        pg_sys::RTEKind::RTE_RELATION => true,
                        pg_sys::RTEKind::RTE_SUBQUERY => {
                            !(*rte).lateral && !reads_protected((*rte).subquery.cast(), self.protected)
                        }
                        pg_sys::RTEKind::RTE_FUNCTION => {
                            !(*rte).lateral && !mentions_columns((*rte).functions.cast())
                        }
                        _ => false,
                    };
                    if !admitted {
                        return Err(refuse(
                            "beside protected tables a query level may read only tables, subqueries of public tables and functions of constants (no LATERAL)",
                            SHAPE,
                        ));
                    }
                    self.leaves.push(index);
                    Ok(())
                }
                pg_sys::NodeTag::T_JoinExpr => {
                    let join = node as *mut pg_sys::JoinExpr;
                    if (*join).jointype != pg_sys::JoinType::JOIN_INNER && self.listed != Some(join) {
                        return Err(refuse(
                            "only inner joins are admitted over protected rows, and one outer join that lists public group keys",
                            LISTED,
                        ));
                    }
                    self.item((*join).larg, rtable)?;
                    self.item((*join).rarg, rtable)?;
                    self.quals.push((*join).quals);
                    Ok(())
                }
                _ => Err(refuse(
                    "this FROM item is not admitted over protected rows",
                    SHAPE,
                )),
            }
        }
    }
}

const LISTED: &str = "To show every key of a public list, even keys without rows: SELECT k.key, dp_count(epsilon) \
                      FROM keys k LEFT JOIN protected_table t ON t.column = k.key WHERE <conditions on k> GROUP BY k.key.";

/// Whether the level's keys are listed by a public table: `public LEFT
/// JOIN protected ON …` (or RIGHT JOIN the other way round), the only FROM
/// item, grouped by columns of the public side, with WHERE on that side
/// only. Every key the public side lists is then shown, each with a noisy
/// answer (those without rows too), so the set of keys shown says nothing
/// of the protected rows and needs no partition selection.
///
/// # Safety
/// `query` is a live Query whose range table is `rtable`.
unsafe fn public_keys(
    query: *mut pg_sys::Query,
    rtable: &[*mut pg_sys::RangeTblEntry],
    protected: &Protected,
) -> Result<Option<*mut pg_sys::JoinExpr>, Refusal> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        let items = list_items::<pg_sys::Node>((*(*query).jointree).fromlist);
        let [item] = items[..] else { return Ok(None) };
        if (*item).type_ != pg_sys::NodeTag::T_JoinExpr {
            return Ok(None);
        }
        let join = item as *mut pg_sys::JoinExpr;
        let kept = match (*join).jointype {
            pg_sys::JoinType::JOIN_LEFT => (*join).larg,
            pg_sys::JoinType::JOIN_RIGHT => (*join).rarg,
            _ => return Ok(None),
        };
        let mut public = Vec::new();
        jointree_indexes(kept, &mut public);
        let is_protected = |i: &i32| {
            let rte = rtable[*i as usize - 1];
            (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && protected.tables.contains_key(&(*rte).relid)
        };
        if public.iter().any(is_protected) {
            return Ok(None);
        }
        let refs: Vec<u32> =
            list_items::<pg_sys::SortGroupClause>((*query).groupClause).iter().map(|c| (**c).tleSortGroupRef).collect();
        let keys: Vec<*mut pg_sys::Node> = list_items::<pg_sys::TargetEntry>((*query).targetList)
            .into_iter()
            .filter(|e| refs.contains(&(**e).ressortgroupref))
            .map(|e| (*e).expr.cast())
            .collect();
        let on_public_side = |node: *mut pg_sys::Node| {
            let flat = pg_sys::flatten_join_alias_vars(query, pg_sys::copyObjectImpl(node.cast()).cast());
            columns_of(flat).iter().all(|i| public.contains(i))
        };
        if keys.is_empty()
            || !keys.iter().all(|k| on_public_side(*k))
            || !on_public_side((*(*query).jointree).quals)
        {
            return Err(refuse(
                "an outer join over protected rows is admitted only to list group keys: every key, and WHERE, must be on its public side",
                LISTED,
            ));
        }
        Ok(Some(join))
    }
}

/// The range table indexes of a jointree item (its tables and joins).
///
/// # Safety
/// `node` is a live jointree node.
unsafe fn jointree_indexes(node: *mut pg_sys::Node, into: &mut Vec<i32>) {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_RangeTblRef => into.push((*(node as *mut pg_sys::RangeTblRef)).rtindex),
            pg_sys::NodeTag::T_JoinExpr => {
                let join = node as *mut pg_sys::JoinExpr;
                into.push((*join).rtindex);
                jointree_indexes((*join).larg, into);
                jointree_indexes((*join).rarg, into);
            }
            pg_sys::NodeTag::T_FromExpr => {
                for item in list_items::<pg_sys::Node>((*(node as *mut pg_sys::FromExpr)).fromlist) {
                    jointree_indexes(item, into);
                }
            }
            _ => {}
        }
    }
}

/// The range table indexes of this level's columns below `node`.
fn columns_of(node: *mut pg_sys::Node) -> Vec<i32> {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Vec.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                let var = node as *mut pg_sys::Var;
                if (*var).varlevelsup == 0 {
                    (*(context as *mut Vec<i32>)).push((*var).varno as i32);
                }
                return false;
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    let mut found = Vec::new();
    // SAFETY: `node` is null or a live expression node (callers' contract).
    unsafe { find(node, (&raw mut found).cast()) };
    found
}

/// Whether `node` (a Query or expression) or anything below it reads a
/// protected table (directly or through a view).
fn reads_protected(node: *mut pg_sys::Node, protected: &Protected) -> bool {
    /// # Safety
    /// Called by PostgreSQL's tree walkers with live nodes and the Protected.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                let query = node as *mut pg_sys::Query;
                let protected = &*(context as *const Protected);
                let direct = list_items::<pg_sys::RangeTblEntry>((*query).rtable).iter().any(|rte| {
                    (**rte).rtekind == pg_sys::RTEKind::RTE_RELATION && protected.tables.contains_key(&(**rte).relid)
                });
                return direct || pg_sys::query_tree_walker(query, Some(find), context, 0);
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    // SAFETY: `node` is null or a live Query or expression (callers' contract); the walk only reads.
    unsafe { find(node, (protected as *const Protected).cast_mut().cast()) }
}

/// Whether a column, of any query level, or a subquery lies below `node`.
fn mentions_columns(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(node: *mut pg_sys::Node, _context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            use pg_sys::NodeTag::*;
            matches!((*node).type_, T_Var | T_PlaceHolderVar | T_SubLink | T_Query)
                || pg_sys::expression_tree_walker(node, Some(find), std::ptr::null_mut())
        }
    }
    // SAFETY: `node` is null or a live expression node or List (callers' contract).
    unsafe { find(node, std::ptr::null_mut()) }
}

/// Refuses a join of protected tables unless each is equated with the
/// others on its privacy unit (a condition ANDed into WHERE or an ON): a
/// joined row must belong to one person.
///
/// # Safety
/// Live nodes of the query whose range table is `rtable`.
unsafe fn joined_on_unit(
    rtable: &[*mut pg_sys::RangeTblEntry],
    persons: &[(i32, Table)],
    quals: &[*mut pg_sys::Node],
) -> Checked {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        // A column through join aliases to its table's (index, column).
        let resolve = |mut node: *mut pg_sys::Node| -> Option<(i32, i16)> {
            loop {
                while !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_RelabelType {
                    node = (*(node as *mut pg_sys::RelabelType)).arg.cast();
                }
                if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_Var {
                    return None;
                }
                let var = node as *mut pg_sys::Var;
                if (*var).varlevelsup != 0
                    || (*var).varno < 1
                    || (*var).varno as usize > rtable.len()
                {
                    return None;
                }
                let rte = rtable[(*var).varno as usize - 1];
                if (*rte).rtekind != pg_sys::RTEKind::RTE_JOIN {
                    return Some(((*var).varno as i32, (*var).varattno));
                }
                node = *list_items::<pg_sys::Node>((*rte).joinaliasvars)
                    .get((*var).varattno as usize - 1)?;
            }
        };
        let mut conjuncts: Vec<*mut pg_sys::Node> = quals.to_vec();
        let mut group: Vec<usize> = (0..persons.len()).collect();
        fn root(group: &mut [usize], i: usize) -> usize {
            if group[i] == i {
                i
            } else {
                let r = root(group, group[i]);
                group[i] = r;
                r
            }
        }
        while let Some(node) = conjuncts.pop() {
            if node.is_null() {
                continue;
            }
            match (*node).type_ {
                pg_sys::NodeTag::T_BoolExpr
                    if (*(node as *mut pg_sys::BoolExpr)).boolop
                        == pg_sys::BoolExprType::AND_EXPR =>
                {
                    conjuncts.extend(list_items::<pg_sys::Node>(
                        (*(node as *mut pg_sys::BoolExpr)).args,
                    ));
                }
                pg_sys::NodeTag::T_List => {
                    conjuncts.extend(list_items::<pg_sys::Node>(node.cast()))
                }
                pg_sys::NodeTag::T_OpExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    let args = list_items::<pg_sys::Node>((*op).args);
                    if args.len() != 2
                        || !pg_sys::op_mergejoinable((*op).opno, pg_sys::exprType(args[0]))
                    {
                        continue;
                    }
                    let side = |n| {
                        let (index, column) = resolve(n)?;
                        persons
                            .iter()
                            .position(|(leaf, table)| *leaf == index && table.unit == column)
                    };
                    if let (Some(a), Some(b)) = (side(args[0]), side(args[1])) {
                        let (ra, rb) = (root(&mut group, a), root(&mut group, b));
                        group[ra] = rb;
                    }
                }
                _ => {}
            }
        }
        let first = root(&mut group, 0);
        if (1..persons.len()).all(|i| root(&mut group, i) == first) {
            Ok(())
        } else {
            Err(refuse(
                "protected tables must be joined on their privacy units (so that each joined row belongs to one person)",
                "Join them with ON a.person_id = b.person_id (their privacy unit columns).",
            ))
        }
    }
}

/// The dpnoise aggregates an analyst may use: those whose parameters the
/// statement's advance payment can check (`cost`).
const ADMITTED_AGGREGATES: [&str; 6] = ["dp_count", "dp_sum", "dp_avg", "dp_sum_laplace", "dp_sum_staircase", "dp_partition_selected"];

/// Adds private partition selection to a GROUP BY over protected rows:
/// `HAVING dp_partition_selected(selection ε, selection δ) AND <HAVING>`,
/// with the session's settings as constants (a prepared plan keeps them,
/// and pays what it holds).
///
/// # Safety
/// `query` is a live Query with a GROUP BY, before planning.
unsafe fn select_partitions(query: *mut pg_sys::Query, selection: pg_sys::Oid) -> Checked {
    let (epsilon, delta) = (SELECTION_EPSILON.get(), SELECTION_DELTA.get());
    if delta <= 0.0 || selection == pg_sys::InvalidOid {
        return Err(refuse(
            "group keys from protected data need private partition selection, which needs dpnoise.selection_delta > 0",
            "SET dpnoise.selection_delta to a small positive number (such as 1e-6).",
        ));
    }
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        let constant = |x: f64| -> *mut pg_sys::Node {
            pg_sys::makeConst(pg_sys::FLOAT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(x.to_bits()), false, true).cast()
        };
        let args = [(constant(epsilon), pg_sys::FLOAT8OID), (constant(delta), pg_sys::FLOAT8OID)];
        and_having(query, aggregate(selection, pg_sys::BOOLOID, &args).cast());
    }
    Ok(())
}

/// A plain call of the aggregate `funcid` on `args` (expression, type).
///
/// # Safety
/// Inside a transaction; the arguments are live expressions. The node is
/// palloc'd in the current memory context.
pub(super) unsafe fn aggregate(funcid: pg_sys::Oid, result: pg_sys::Oid, args: &[(*mut pg_sys::Node, pg_sys::Oid)]) -> *mut pg_sys::Aggref {
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
            let entry = pg_sys::makeTargetEntry((*expr).cast(), (i + 1) as i16, std::ptr::null_mut(), false);
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
            let both = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), condition.cast()), having.cast());
            pg_sys::makeBoolExpr(pg_sys::BoolExprType::AND_EXPR, both, -1).cast()
        };
        (*query).hasAggs = true;
    }
}

/// The expressions of an admitted level: protected values reach an answer
/// only through a dpnoise aggregate, and nothing evaluated on them (in
/// WHERE, in an aggregate's arguments or FILTER) can fail, or so take
/// another path, depending on their values.
struct Leakproof<'a> {
    allowed: &'a HashSet<pg_sys::Oid>,
    /// Protected columns may appear here (WHERE, inside a dpnoise
    /// aggregate); outside, in the output, only the aggregates' answers may.
    rows: bool,
}

impl Leakproof<'_> {
    fn function(&self, funcid: pg_sys::Oid, what: &str) -> Checked {
        // SAFETY: a syscache lookup by OID inside a transaction.
        if unsafe { pg_sys::get_func_leakproof(funcid) } || self.allowed.contains(&funcid) {
            return Ok(());
        }
        Err(refuse(
            &format!("{what} {} is not LEAKPROOF (it can fail, or show a value, on some rows)", function_name(funcid)),
            "Use only LEAKPROOF operators and functions on protected columns, or ask the DBA to allow one with dp_allow_function.",
        ))
    }

    /// # Safety
    /// `node` is null or a live expression node of the admitted level.
    unsafe fn node(&mut self, node: *mut pg_sys::Node) -> Checked {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return Ok(());
            }
            use pg_sys::NodeTag::*;
            match (*node).type_ {
                T_Const | T_CaseTestExpr => Ok(()),
                T_Param => {
                    if (*(node as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_EXTERN {
                        Ok(())
                    } else {
                        Err(refuse("a value computed by the executor cannot meet protected rows", SHAPE))
                    }
                }
                T_Var => {
                    if (*(node as *mut pg_sys::Var)).varlevelsup != 0 {
                        Err(refuse("a correlated subquery cannot read protected rows", SHAPE))
                    } else if !self.rows {
                        Err(refuse("a protected column can appear only in WHERE or inside a dpnoise aggregate", SHAPE))
                    } else {
                        Ok(())
                    }
                }
                T_Aggref => {
                    let aggref = node as *mut pg_sys::Aggref;
                    let types = aggregate_types(aggref);
                    let admitted = crate::parameters::releasing((*aggref).aggfnoid, &types)
                        .is_some_and(|(name, _)| ADMITTED_AGGREGATES.contains(&name.as_str()));
                    if (*aggref).agglevelsup != 0 || !admitted {
                        return Err(refuse(
                            &format!("only these dpnoise aggregates may summarise protected rows: {}", ADMITTED_AGGREGATES.join(", ")),
                            SHAPE,
                        ));
                    }
                    if !(*aggref).aggdistinct.is_null() || !(*aggref).aggorder.is_null() {
                        return Err(refuse("DISTINCT and ORDER BY inside an aggregate are not admitted", SHAPE));
                    }
                    let was = std::mem::replace(&mut self.rows, true);
                    let mut checked = Ok(());
                    for entry in list_items::<pg_sys::TargetEntry>((*aggref).args) {
                        checked = checked.and_then(|_| self.node((*entry).expr.cast()));
                    }
                    checked = checked.and_then(|_| self.node((*aggref).aggfilter.cast()));
                    self.rows = was;
                    checked
                }
                // No protected column below (outside aggregates, which are
                // still checked). In the output that is post-processing of
                // the answers. Among the rows (WHERE, an aggregate's
                // arguments) a CASE or an AND could still decide by the data
                // whether it runs, so it must be folded to a constant when
                // planned (immutable, no parameter), or be leakproof too.
                _ if !touches_rows(node) && (!self.rows || folded_when_planned(node)) => self.children(node),
                T_FuncExpr => {
                    self.function((*(node as *mut pg_sys::FuncExpr)).funcid, "function")?;
                    self.children(node)
                }
                T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
                    let op = node as *mut pg_sys::OpExpr;
                    pg_sys::set_opfuncid(op);
                    self.function((*op).opfuncid, "operator")?;
                    self.children(node)
                }
                T_ScalarArrayOpExpr => {
                    let op = node as *mut pg_sys::ScalarArrayOpExpr;
                    pg_sys::set_sa_opfuncid(op);
                    self.function((*op).opfuncid, "operator")?;
                    self.children(node)
                }
                T_BoolExpr | T_NullTest | T_BooleanTest | T_RelabelType | T_CaseExpr | T_CaseWhen | T_CoalesceExpr
                | T_List => self.children(node),
                T_SubLink => Err(refuse("subqueries cannot be mixed with protected rows at the same query level", SHAPE)),
                _ => Err(refuse(
                    "an expression on protected columns that can fail on some values (a cast, a domain, an array or row operation)",
                    "Use only LEAKPROOF operators and functions on protected columns.",
                )),
            }
        }
    }

    /// Checks each direct child of `node`.
    ///
    /// # Safety
    /// `node` is a live expression node.
    unsafe fn children(&mut self, node: *mut pg_sys::Node) -> Checked {
        // SAFETY: the caller's contract; `node` recurses into each child.
        unsafe { each_child(node, &mut |child| self.node(child)) }
    }
}

/// Runs `check` on each direct child of the expression `node`, stopping at
/// the first refusal (PostgreSQL's walker, which cannot carry a Rust error).
///
/// # Safety
/// `node` is a live expression node.
unsafe fn each_child(node: *mut pg_sys::Node, check: &mut dyn FnMut(*mut pg_sys::Node) -> Checked) -> Checked {
    struct Context<'a> {
        check: &'a mut dyn FnMut(*mut pg_sys::Node) -> Checked,
        checked: Checked,
    }
    /// # Safety
    /// Called by `expression_tree_walker` with the live children of a node and our context.
    #[pg_guard]
    unsafe extern "C-unwind" fn each(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            let context = &mut *(context as *mut Context);
            context.checked = (context.check)(node);
            context.checked.is_err()
        }
    }
    let mut context = Context { check, checked: Ok(()) };
    // SAFETY: the caller's contract; `each` sees every direct child.
    unsafe { pg_sys::expression_tree_walker(node, Some(each), (&raw mut context).cast()) };
    context.checked
}

/// Whether the planner folds `node` to a constant: immutable functions of
/// constants only (an error there is raised while planning, whatever the data).
fn folded_when_planned(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pg_guard]
    unsafe extern "C-unwind" fn param(node: *mut pg_sys::Node, _context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            (*node).type_ == pg_sys::NodeTag::T_Param || pg_sys::expression_tree_walker(node, Some(param), std::ptr::null_mut())
        }
    }
    // SAFETY: `node` is a live expression node (callers' contract); both walks only read it.
    unsafe { !pg_sys::contain_mutable_functions(node) && !param(node, std::ptr::null_mut()) }
}

/// Whether a column of this level lies below `node` outside any aggregate.
fn touches_rows(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(node: *mut pg_sys::Node, _context: *mut std::ffi::c_void) -> bool {
        // SAFETY: the caller's contract; aggregates are not entered.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Aggref {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                return true;
            }
            pg_sys::expression_tree_walker(node, Some(find), std::ptr::null_mut())
        }
    }
    // SAFETY: `node` is a live expression node (callers' contract).
    unsafe { find(node, std::ptr::null_mut()) }
}

/// # Safety
/// `aggref` is a live Aggref.
pub(crate) unsafe fn aggregate_types(aggref: *mut pg_sys::Aggref) -> Vec<pg_sys::Oid> {
    // SAFETY: the caller's contract; aggargtypes is an OID list.
    unsafe {
        let list = (*aggref).aggargtypes;
        let n = if list.is_null() { 0 } else { (*list).length as usize };
        (0..n).map(|i| (*(*list).elements.add(i)).oid_value).collect()
    }
}

/// A function's name, for messages (a catalog name, never data).
fn function_name(funcid: pg_sys::Oid) -> String {
    // SAFETY: a syscache lookup by OID; a non-null result is a palloc'd NUL-terminated string.
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() {
            format!("{}", u32::from(funcid))
        } else {
            std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
        }
    }
}

/// Refuses a plan an analyst runs if it reads a protected table the gate
/// did not vouch for (a plan made before the role became an analyst, or by
/// another role).
///
/// # Safety
/// `stmt` is null or the PlannedStmt ExecutorStart runs; `params` null or its live parameters.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_plan(stmt: *mut pg_sys::PlannedStmt, params: pg_sys::ParamListInfo) {
    if stmt.is_null() || !gated() {
        return;
    }
    let Some(protected) = protected() else { return };
    // SAFETY: the caller's contract; the flattened range table of a live plan.
    unsafe {
        for rte in list_items::<pg_sys::RangeTblEntry>((*stmt).rtable) {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && protected.tables.contains_key(&(*rte).relid)
                && (*rte).requiredPerms != 0
            {
                raise(refuse(
                    "this plan reads a protected table the gate did not admit (prepared before the role became an analyst?)",
                    SHAPE,
                ));
            }
        }
        // SAFETY: as above.
        if pg_sys::ParallelWorkerNumber < 0 {
            if let Err(refusal) = plan::check(stmt, params, &protected) {
                raise(refusal);
            }
        }
    }
}

/// The plan check's part that must also hold for what never reaches
/// ExecutorStart (a PL/pgSQL simple expression): no statistics function.
///
/// # Safety
/// `stmt` is the live PlannedStmt the planner returned.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_planned(stmt: *mut pg_sys::PlannedStmt) {
    if stmt.is_null() || !gated() {
        return;
    }
    // SAFETY: the caller's contract.
    if let Err(refusal) = unsafe { plan::planned(stmt) } {
        raise(refusal);
    }
}

/// Refuses an analyst's COPY of a protected table, and marks an EXPLAIN so
/// that the planner hook refuses one over protected tables. Returns whether
/// an EXPLAIN was marked (the caller clears it with `explained`).
///
/// # Safety
/// `statement` is null or the live utility statement ProcessUtility runs.
#[pg_guard]
pub unsafe extern "C-unwind" fn check_utility(statement: *mut pg_sys::Node) -> bool {
    if statement.is_null() || !gated() {
        return false;
    }
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*statement).type_ {
            pg_sys::NodeTag::T_CopyStmt => {
                let copy = statement as *mut pg_sys::CopyStmt;
                if (*copy).relation.is_null() {
                    return false; // COPY (query): the planner hook sees the query.
                }
                let Some(protected) = protected() else { return false };
                let relid = pg_sys::RangeVarGetRelidExtended((*copy).relation, pg_sys::NoLock as i32, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut());
                if protected.tables.contains_key(&relid) {
                    raise(refuse("COPY reads or writes the rows of a protected table", SHAPE));
                }
                false
            }
            pg_sys::NodeTag::T_ExplainStmt => {
                EXPLAINING.with(|e| e.set(true));
                true
            }
            _ => false,
        }
    }
}

/// Ends what `check_utility` marked.
pub fn explained() {
    EXPLAINING.with(|e| e.set(false));
}
