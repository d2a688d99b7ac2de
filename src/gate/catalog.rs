//! The protected-table catalog: the tables `dp_protect` protected (with
//! their inheritance children), each one's privacy unit and bound, the
//! DBA's allow list and the dpnoise functions the gate writes into
//! queries. Read once as the bootstrap superuser (an analyst cannot read
//! dpnoise's schema), kept until a relcache invalidation names one of them.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// The protected tables (with their inheritance children) and the DBA's
/// allow list. Read once, then kept until a relcache invalidation names one
/// of them or the gate's own tables (DDL on a protected table, such as a
/// dropped index, sends one; dp_protect, dp_unprotect and dp_allow_function
/// send one for dpnoise.protected through `dp_gate_changed`).
pub(super) struct Protected {
    pub(super) tables: HashMap<pg_sys::Oid, Table>,
    /// Functions the DBA declared safe for analysts beyond LEAKPROOF ones.
    pub(super) allowed: HashSet<pg_sys::Oid>,
    /// dpnoise.protected and dpnoise.allowed_functions.
    pub(super) own: [pg_sys::Oid; 2],
    /// dp_partition_selected(float8, float8), dp_count_selected(float8,
    /// text, float8), dp_sum_selected(float8, float8, float8, text, text,
    /// float8), dp_share(float8, int4).
    pub(super) selection: pg_sys::Oid,
    pub(super) count_selection: pg_sys::Oid,
    pub(super) sum_selection: pg_sys::Oid,
    pub(super) share: pg_sys::Oid,
    /// The seed of the per-person choice of groups (`per_person`): derived
    /// from the release key, so that the choice is the server's own and
    /// the same in every session.
    pub(super) seed: i64,
    /// dpnoise's window functions (the bounding's, `per_person`).
    pub(super) windows: Vec<pg_sys::Oid>,
    /// dpnoise's total forms by name (`substitute` maps built-ins to them).
    pub(super) forms: HashMap<String, pg_sys::Oid>,
    /// The tables' privacy policies (`policy`).
    pub(super) policy: Policy,
}

/// What an analyst's plain aggregates become (`policy`): each protected
/// table's statement ε if the DBA set one, its columns' domains, and the
/// dpnoise aggregates written in their place.
#[derive(Default)]
pub(super) struct Policy {
    /// dp_policy's statement ε, by table.
    pub(super) epsilon: HashMap<pg_sys::Oid, f64>,
    /// dp_policy's rows a person adds to a count or sum, by table.
    pub(super) rows: HashMap<pg_sys::Oid, i32>,
    /// dp_domain's bounds, by table and column number.
    pub(super) domains: HashMap<(pg_sys::Oid, i16), (f64, f64)>,
    /// dp_domain's public lists of values (an array's text form), by table
    /// and column number, with how many values each holds.
    pub(super) lists: HashMap<(pg_sys::Oid, i16), (String, usize)>,
    /// dp_count(float8), dp_count(anyelement, float8), dp_sum(float8,
    /// float8, float8, float8), dp_avg(float8, float8, float8, float8).
    pub(super) count: pg_sys::Oid,
    pub(super) count_value: pg_sys::Oid,
    pub(super) sum: pg_sys::Oid,
    pub(super) avg: pg_sys::Oid,
    /// dp_var, dp_stddev, dp_min, dp_max (float8 × 4) and dp_quantile (× 5).
    pub(super) variance: pg_sys::Oid,
    pub(super) stddev: pg_sys::Oid,
    pub(super) min: pg_sys::Oid,
    pub(super) max: pg_sys::Oid,
    pub(super) quantile: pg_sys::Oid,
    /// dp_error(anyelement, float8).
    pub(super) error: pg_sys::Oid,
    /// dp_interval_low and dp_interval_high (anyelement, float8), and
    /// dp_estimate(float8[], int4) that the split level computes them with.
    pub(super) low: pg_sys::Oid,
    pub(super) high: pg_sys::Oid,
    pub(super) estimate: pg_sys::Oid,
}

/// What the gate knows of one protected table.
#[derive(Clone, Copy)]
pub(super) struct Table {
    /// Whether it holds one row per person (its privacy unit is UNIQUE,
    /// alone, on every row it can show).
    pub(super) one_row: bool,
    /// The privacy unit's column number (0 if it was dropped).
    pub(super) unit: i16,
    /// How many groups of a query one person may contribute to.
    pub(super) max_groups: i32,
}

thread_local! {
    static PROTECTED: RefCell<Option<std::rc::Rc<Protected>>> = const { RefCell::new(None) };
    /// Set while the gate reads its own tables (their queries pass the planner hook too).
    static LOADING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Ends a load the transaction's end interrupted (`super::transaction_ended`).
pub(super) fn loading_ended() {
    LOADING.with(|l| l.set(false));
}

/// # Safety
/// Called by PostgreSQL as a relcache invalidation callback.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    PROTECTED.with(|p| {
        let mut p = p.borrow_mut();
        let stale = p.as_ref().is_some_and(|known| {
            relid == pg_sys::InvalidOid
                || known.own.contains(&relid)
                || known.tables.contains_key(&relid)
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

/// dpnoise's window functions, qualified as above.
const WINDOW_QUERY: &str = "\
SELECT p.oid FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
 AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'e'
JOIN pg_catalog.pg_extension x ON x.oid OPERATOR(pg_catalog.=) d.refobjid AND x.extname OPERATOR(pg_catalog.=) 'dpnoise'
WHERE p.prokind OPERATOR(pg_catalog.=) 'w'";

/// The release key (src/repeat/repeat.sql), qualified as above.
const KEY_QUERY: &str = "SELECT k.key FROM dpnoise.release_key k";

/// A function of dpnoise by name and argument count ($1, $2), in whichever
/// schema the extension is.
/// A dpnoise function by name and argument types (their OIDs, as
/// oidvector prints them), qualified as above.
const SIGNATURE_QUERY: &str = "\
SELECT p.oid FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
 AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'e'
JOIN pg_catalog.pg_extension x ON x.oid OPERATOR(pg_catalog.=) d.refobjid AND x.extname OPERATOR(pg_catalog.=) 'dpnoise'
WHERE p.proname OPERATOR(pg_catalog.=) $1 AND p.proargtypes::pg_catalog.text OPERATOR(pg_catalog.=) $2";

/// The statement ε and rows per person of each table with a policy
/// (columns added in 0.21.0: read from the row as JSON, so that an older
/// catalog reads as none).
const POLICY_QUERY: &str = "\
SELECT p.relid::pg_catalog.oid,
       (pg_catalog.to_jsonb(p) OPERATOR(pg_catalog.->>) 'statement_epsilon')::pg_catalog.float8,
       (pg_catalog.to_jsonb(p) OPERATOR(pg_catalog.->>) 'rows_per_person')::pg_catalog.int4
FROM dpnoise.protected p";

/// The columns' domains (dpnoise.domains, from 0.21.0), by column number.
const DOMAIN_QUERY: &str = "\
SELECT d.relid::pg_catalog.oid, a.attnum, d.lower, d.upper FROM dpnoise.domains d
JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.relid
 AND a.attname OPERATOR(pg_catalog.=) d.column_name AND NOT a.attisdropped";

/// The columns' lists of values (dpnoise.value_lists, from 0.22.0).
const LIST_QUERY: &str = "\
SELECT l.relid::pg_catalog.oid, a.attnum, l.vals::pg_catalog.text,
 pg_catalog.cardinality(l.vals)::pg_catalog.int4 FROM dpnoise.value_lists l
JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) l.relid
 AND a.attname OPERATOR(pg_catalog.=) l.column_name AND NOT a.attisdropped";

const FUNCTION_QUERY: &str = "\
SELECT p.oid FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
 AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'e'
JOIN pg_catalog.pg_extension x ON x.oid OPERATOR(pg_catalog.=) d.refobjid AND x.extname OPERATOR(pg_catalog.=) 'dpnoise'
WHERE p.proname OPERATOR(pg_catalog.=) $1 AND p.pronargs OPERATOR(pg_catalog.=) $2";

/// dpnoise's total forms of built-ins (`crate::total`), by name, qualified as above.
const TOTAL_QUERY: &str = "\
SELECT p.proname::pg_catalog.text, p.oid FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
 AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'e'
JOIN pg_catalog.pg_extension x ON x.oid OPERATOR(pg_catalog.=) d.refobjid AND x.extname OPERATOR(pg_catalog.=) 'dpnoise'
WHERE p.proname OPERATOR(pg_catalog.~~) 'dp\\_total\\_%'";

/// The protected tables, read as the bootstrap superuser (an analyst cannot
/// read dpnoise's schema), once per transaction; None when the extension is
/// not installed in this database.
pub(super) fn protected() -> Option<std::rc::Rc<Protected>> {
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
            context
                | (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION)
                    as i32,
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
    crate::gucs::with_settings(&[(c"jit", c"off")], f)
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
    let loaded = without_jit(|| {
        Spi::connect(|client| {
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
                Ok(client
                    .select(FUNCTION_QUERY, None, &args)?
                    .first()
                    .get_one::<pg_sys::Oid>()?
                    .unwrap_or(pg_sys::InvalidOid))
            };
            let selection = function("dp_partition_selected", 2)?;
            let count_selection = function("dp_count_selected", 3)?;
            let sum_selection = function("dp_sum_selected", 6)?;
            let share = function("dp_share", 2)?;
            let key = client
                .select(KEY_QUERY, Some(1), &[])?
                .first()
                .get_one::<Vec<u8>>()?
                .unwrap_or_default();
            let derived = crate::seal::hmac(&key, &[b"dpnoise per-person choice v1"]);
            let seed = i64::from_le_bytes(derived[..8].try_into().expect("8 bytes"));
            let mut windows = Vec::new();
            for row in client.select(WINDOW_QUERY, None, &[])? {
                windows.extend(row.get::<pg_sys::Oid>(1)?);
            }
            let mut forms = HashMap::new();
            for row in client.select(TOTAL_QUERY, None, &[])? {
                if let (Some(name), Some(oid)) = (row.get::<String>(1)?, row.get::<pg_sys::Oid>(2)?)
                {
                    forms.insert(name, oid);
                }
            }
            let signature = |name: &str, args: &str| -> Result<pg_sys::Oid, pgrx::spi::Error> {
                let args = [name.into(), args.into()];
                Ok(client
                    .select(SIGNATURE_QUERY, None, &args)?
                    .first()
                    .get_one::<pg_sys::Oid>()?
                    .unwrap_or(pg_sys::InvalidOid))
            };
            let mut policy = Policy {
                count: signature("dp_count", "701")?,
                count_value: signature("dp_count", "2283 701")?,
                sum: signature("dp_sum", "701 701 701 701")?,
                avg: signature("dp_avg", "701 701 701 701")?,
                variance: signature("dp_var", "701 701 701 701")?,
                stddev: signature("dp_stddev", "701 701 701 701")?,
                min: signature("dp_min", "701 701 701 701")?,
                max: signature("dp_max", "701 701 701 701")?,
                quantile: signature("dp_quantile", "701 701 701 701 701")?,
                error: signature("dp_error", "2283 701")?,
                low: signature("dp_interval_low", "2283 701")?,
                high: signature("dp_interval_high", "2283 701")?,
                estimate: signature("dp_estimate", "1022 23")?,
                ..Policy::default()
            };
            for row in client.select(POLICY_QUERY, None, &[])? {
                let Some(relid) = row.get::<pg_sys::Oid>(1)? else {
                    continue;
                };
                if let Some(epsilon) = row.get::<f64>(2)? {
                    policy.epsilon.insert(relid, epsilon);
                }
                if let Some(rows) = row.get::<i32>(3)? {
                    policy.rows.insert(relid, rows);
                }
            }
            let exists = |table: &str| -> Result<bool, pgrx::spi::Error> {
                let args = [table.into()];
                Ok(client
                    .select("SELECT pg_catalog.to_regclass($1) IS NOT NULL", None, &args)?
                    .first()
                    .get_one::<bool>()?
                    .unwrap_or(false))
            };
            if exists("dpnoise.value_lists")? {
                for row in client.select(LIST_QUERY, None, &[])? {
                    if let (Some(relid), Some(column), Some(values), Some(length)) = (
                        row.get::<pg_sys::Oid>(1)?,
                        row.get::<i16>(2)?,
                        row.get::<String>(3)?,
                        row.get::<i32>(4)?,
                    ) {
                        policy
                            .lists
                            .insert((relid, column), (values, length.max(0) as usize));
                    }
                }
            }
            if exists("dpnoise.domains")? {
                for row in client.select(DOMAIN_QUERY, None, &[])? {
                    if let (Some(relid), Some(column), Some(lower), Some(upper)) = (
                        row.get::<pg_sys::Oid>(1)?,
                        row.get::<i16>(2)?,
                        row.get::<f64>(3)?,
                        row.get::<f64>(4)?,
                    ) {
                        policy.domains.insert((relid, column), (lower, upper));
                    }
                }
            }
            Ok(Some(std::rc::Rc::new(Protected {
                tables,
                allowed,
                own: [protected_table, allowed_table],
                selection,
                count_selection,
                sum_selection,
                share,
                seed,
                windows,
                forms,
                policy,
            })))
        })
    });
    drop(loading);
    let loaded =
        loaded.unwrap_or_else(|e| pgrx::error!("dpnoise: cannot read the protected tables: {e}"));
    PROTECTED.with(|p| *p.borrow_mut() = loaded.clone());
    loaded
}

/// Whether the gate applies now: an analyst's session, outside the gate's own lookups.
pub(crate) fn gated() -> bool {
    crate::gucs::analyst() && !LOADING.with(|l| l.get())
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
