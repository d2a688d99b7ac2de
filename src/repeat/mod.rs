//! Repeated releases: a release asked again is answered identically and
//! costs nothing (docs/budget.md, "Repeated releases").
//!
//! A dpnoise aggregate call is identified by what determines its true
//! values: its query level and call, as the planner gets them
//! (`identity`), and the version of every table the level reads, read when
//! the statement starts, under its snapshot: the count and the newest of
//! the transactions that wrote the table (logged by dp_track's trigger in
//! the writer's own transaction, so visible exactly when its rows are),
//! its file (TRUNCATE and rewrites), its catalog row and its trigger's
//! (any DDL, a trigger disabled to write unlogged). The identity is an
//! HMAC-SHA256 of those under a secret key that only superusers can read
//! (dpnoise.release_key).
//!
//! A repeat is answered from what was released (`serve`, `store`): the
//! Agg nodes whose answers are kept are replaced by scans of them before
//! the statement starts, so it reads none of their rows, its run time
//! depends only on the answer, and it costs nothing. A release that runs
//! is charged, paid before or not, and its noise is fresh: ChaCha20 seeded
//! with an HMAC of the identity, a nonce drawn for the execution and the
//! group's key, so that one release made twice in one execution (both
//! arms of a UNION ALL, charged once) has one noise.
//!
//! What cannot be identified is a fresh release: charged, with fresh
//! noise from the backend's generator.

mod atoms;
mod determined;
mod identity;
mod order;
mod record;
mod serve;
mod store;
mod versions;

pub use store::init as init_store;

// The secret key, the write log, dp_track and dp_untrack.
pgrx::extension_sql_file!("repeat.sql", name = "repeat_sql", requires = ["budget_sql"]);
// The release store's functions, for superusers.
pgrx::extension_sql_file!("store.sql", name = "store_sql", requires = ["repeat_sql"]);

use crate::rng::BackendRng;
use dpnoise_core::BitPool;
use identity::Marked;
use identity::MARK;
use pgrx::pg_sys;
use rand_chacha::rand_core::SeedableRng;
use std::cell::{Cell, RefCell};

/// What every identity starts with (fixed length).
const VERSION: &[u8; 16] = &{
    let mut v = [b' '; 16];
    let name = concat!("dpnoise ", env!("CARGO_PKG_VERSION")).as_bytes();
    let mut i = 0;
    while i < name.len() && i < 16 {
        v[i] = name[i];
        i += 1;
    }
    v
};

/// dp_track's trigger on a tracked table.
pub const TRIGGER: &str = "dpnoise_track";

/// The name of the range table entry that carries a plan's identified calls.
const MARKER: &str = "dpnoise releases";

/// The identities of one running execution's calls, by marker number.
struct Execution {
    estate: *mut pg_sys::EState,
    identities: Vec<Option<[u8; 32]>>,
    /// Whether each identity was paid for before the execution started.
    paid: Vec<bool>,
    /// Each call's GROUP BY items, in the canonical order of its keys.
    items: Vec<Vec<u32>>,
    /// Drawn for this execution: one release made twice in it (both arms
    /// of a UNION ALL) has one noise, a release made again in another
    /// execution (not answered from the store) has fresh noise.
    nonce: [u8; 32],
}

/// The identities of a starting query's calls, read before its plan
/// state is built (`identify`), registered once it is (`start`).
struct Pending {
    query: *mut pg_sys::QueryDesc,
    identities: Vec<Option<[u8; 32]>>,
    items: Vec<Vec<u32>>,
}

thread_local! {
    static EXECUTIONS: RefCell<Vec<Execution>> = const { RefCell::new(Vec::new()) };
    /// The secret key, read once per backend (a backend serves one database).
    static KEY: RefCell<Option<[u8; 32]>> = const { RefCell::new(None) };
    /// Set while dpnoise reads its own tables here (their queries pass the hooks too).
    static READING: Cell<bool> = const { Cell::new(false) };
    /// What `identify` found for a query between its two halves of ExecutorStart.
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

/// Whether dpnoise is reading versions now: the hooks leave that query alone.
pub fn reading() -> bool {
    READING.with(|r| r.get())
}

/// `READING` for as long as it lives: cleared when dropped, also by an
/// error unwinding through the read (a flag left set would turn the gate
/// and the executor checks off for the rest of the session).
struct Reading;

impl Reading {
    fn start() -> Reading {
        READING.with(|r| r.set(true));
        Reading
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        READING.with(|r| r.set(false));
    }
}

/// Clears `READING` when a (sub)transaction aborts, whatever ended the read.
pub fn aborted() {
    READING.with(|r| r.set(false));
    PENDING.with(|p| p.borrow_mut().clear());
    record::aborted();
}

/// An execution ran to its end: the recorded nodes its plan never called
/// run now (`record::complete`).
///
/// # Safety
/// `estate` is the live EState of an execution whose run just ended, inside it.
pub unsafe fn complete(estate: *mut pg_sys::EState) {
    // SAFETY: the caller's contract.
    unsafe { record::complete(estate) }
}

/// Holds the releases of a started analyst's query (`record::hold`).
///
/// # Safety
/// `query` is the live QueryDesc just started; inside a transaction.
pub unsafe fn hold(query: *mut pg_sys::QueryDesc) {
    // SAFETY: the caller's contract.
    unsafe { record::hold(query) }
}

/// An execution ended: its answers were kept, or will not be.
pub fn ended(estate: *mut pg_sys::EState) {
    record::ended(estate);
}

/// Identifies the repeatable releases of `parse` (`identity::mark`: their
/// Aggrefs are marked) and returns what the execution needs of them, as
/// the column names of the plan's marker entry (palloc'd: nothing for the
/// planner hook to drop if planning fails).
///
/// # Safety
/// `parse` is the live Query the planner hook was given and `params` its
/// bound parameters (or null); inside a transaction.
pub unsafe fn mark(parse: *mut pg_sys::Query, params: pg_sys::ParamListInfo) -> *mut pg_sys::List {
    // SAFETY: the caller's contract; the list is made in the current (planner's) memory context.
    unsafe {
        let mut names: *mut pg_sys::List = std::ptr::null_mut();
        for m in identity::mark(parse, params) {
            let relations = m
                .relations
                .iter()
                .map(|r| u32::from(*r).to_string())
                .collect::<Vec<_>>()
                .join(",");
            let items = m
                .group_items
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let entry = format!("{}:{}:{}", hex(&m.digest), items, relations);
            let text = std::ffi::CString::new(entry).expect("no NUL");
            names = pg_sys::lappend(
                names,
                pg_sys::makeString(pg_sys::pstrdup(text.as_ptr())).cast(),
            );
        }
        names
    }
}

/// Appends the marker entry that carries `names` (`mark`) to the plan's
/// range table (nothing if no call was identified), and splits its
/// identified Agg nodes into their atoms (`atoms`).
///
/// # Safety
/// `planned` is the live PlannedStmt the planner just made; `names` is
/// null or what `mark` returned for its query.
pub unsafe fn attach(planned: *mut pg_sys::PlannedStmt, names: *mut pg_sys::List) {
    if names.is_null() {
        return;
    }
    // SAFETY: the caller's contract; the nodes are made in the planner's memory context.
    unsafe {
        let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>())
            as *mut pg_sys::RangeTblEntry;
        (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
        (*rte).rtekind = pg_sys::RTEKind::RTE_RESULT;
        let name = std::ffi::CString::new(MARKER).expect("no NUL");
        (*rte).eref = pg_sys::makeAlias(name.as_ptr(), names);
        (*planned).rtable = pg_sys::lappend((*planned).rtable, rte.cast());
        // Its Agg nodes output the same atoms under every plan.
        atoms::split(planned, &marked(planned));
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The identified calls a plan carries (`attach`).
///
/// # Safety
/// `stmt` is null or a live PlannedStmt.
unsafe fn marked(stmt: *mut pg_sys::PlannedStmt) -> Vec<Marked> {
    // SAFETY: the caller's contract; the marker's column names are String nodes.
    unsafe {
        if stmt.is_null() {
            return Vec::new();
        }
        let Some(rte) = crate::gate::list_items::<pg_sys::RangeTblEntry>((*stmt).rtable)
            .into_iter()
            .next_back()
        else {
            return Vec::new();
        };
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RESULT
            || (*rte).eref.is_null()
            || std::ffi::CStr::from_ptr((*(*rte).eref).aliasname).to_bytes() != MARKER.as_bytes()
        {
            return Vec::new();
        }
        crate::gate::list_items::<pg_sys::String>((*(*rte).eref).colnames)
            .into_iter()
            .filter_map(|s| {
                let text = std::ffi::CStr::from_ptr((*s).sval).to_str().ok()?;
                let mut parts = text.split(':');
                let digest = unhex(parts.next()?)?;
                let group_items = parts
                    .next()?
                    .split(',')
                    .filter(|r| !r.is_empty())
                    .map(|r| r.parse::<u32>().ok())
                    .collect::<Option<Vec<_>>>()?;
                let relations = parts
                    .next()?
                    .split(',')
                    .filter(|r| !r.is_empty())
                    .map(|r| r.parse::<u32>().ok().map(pg_sys::Oid::from))
                    .collect::<Option<Vec<_>>>()?;
                Some(Marked {
                    digest,
                    relations,
                    group_items,
                })
            })
            .collect()
    }
}

/// Completes the identities of a starting execution's identified calls
/// with the versions of the tables they read, under its snapshot, and
/// answers from the store every Agg node whose answer is kept
/// (`serve::serve`: the query then runs a copy of its plan that reads
/// none of their rows). Before ExecutorStart builds the plan's state;
/// `start` finishes after it. An execution with no identified call costs
/// nothing here.
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given, not yet started;
/// inside a transaction.
pub unsafe fn identify(query: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: the caller's contract; by-value reads of this process's state.
    unsafe {
        let marked = marked((*query).plannedstmt);
        // A transaction that has written anything (it has an xid) may have
        // written a table this reads, perhaps in this very statement, before
        // its trigger logs it: fresh. (It also keeps the versions' read
        // below read-only, so under the execution's own snapshot.)
        if marked.is_empty()
            || pg_sys::GetCurrentTransactionIdIfAny() != pg_sys::InvalidTransactionId
            || pg_sys::ParallelWorkerNumber >= 0
            || eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 != 0
            || crate::gucs::seed().0.is_some()
        {
            return;
        }
        let mut relations: Vec<pg_sys::Oid> = marked
            .iter()
            .flat_map(|m| m.relations.iter().copied())
            .collect();
        relations.sort_unstable_by_key(|r| u32::from(*r));
        relations.dedup();
        let shapes = agg_shapes((*query).plannedstmt, &marked);
        let identities = versions::read(&relations, (*query).snapshot, |key, versions| {
            marked
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    // The library's version too: another version may draw other noise from one seed.
                    let mut parts: Vec<Vec<u8>> = vec![VERSION.to_vec(), m.digest.to_vec()];
                    for r in &m.relations {
                        let version = versions.iter().find(|(rel, _)| rel == r)?.1.as_ref()?;
                        parts.push(u32::from(*r).to_le_bytes().to_vec());
                        parts.push((version.len() as u64).to_le_bytes().to_vec());
                        parts.push(version.clone());
                    }
                    shapes[i].then(|| {
                        crate::seal::hmac(key, &parts.iter().map(Vec::as_slice).collect::<Vec<_>>())
                    })
                })
                .collect()
        });
        let secret = KEY.with(|k| *k.borrow()).expect("read with the identities");
        let items: Vec<Vec<u32>> = marked.into_iter().map(|m| m.group_items).collect();
        serve::serve(
            query,
            &serve::Calls {
                identities: &identities,
                items: &items,
                secret: &secret,
            },
        );
        PENDING.with(|p| {
            p.borrow_mut().push(Pending {
                query,
                identities,
                items,
            })
        });
    }
}

/// Registers the identities `identify` read for the query just started,
/// and records the answers its Agg nodes give (`record::record`). Every
/// identified call left in the plan it runs is charged, paid before or
/// not: a repeat is free only when answered from the store.
///
/// # Safety
/// `query` is the live QueryDesc ExecutorStart was given, just started;
/// inside a transaction.
pub unsafe fn start(query: *mut pg_sys::QueryDesc, _eflags: i32) {
    let Some(pending) = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let at = p.iter().rposition(|x| x.query == query)?;
        Some(p.remove(at))
    }) else {
        return;
    };
    // SAFETY: the caller's contract; the EState exists (ExecutorStart ran).
    unsafe {
        let estate = (*query).estate;
        let paid = vec![false; pending.identities.len()];
        if let Some(secret) = KEY.with(|k| *k.borrow()) {
            record::record(
                query,
                &serve::Calls {
                    identities: &pending.identities,
                    items: &pending.items,
                    secret: &secret,
                },
            );
        }
        // Forgotten when the execution's memory goes, however it ends
        // (registered first: an entry is never left without its callback).
        let callback = pg_sys::MemoryContextAlloc(
            (*estate).es_query_cxt,
            std::mem::size_of::<pg_sys::MemoryContextCallback>(),
        ) as *mut pg_sys::MemoryContextCallback;
        (*callback).func = Some(forget);
        (*callback).arg = estate.cast();
        pg_sys::MemoryContextRegisterResetCallback((*estate).es_query_cxt, callback);
        let nonce = crate::rng::with_rng(|rng| {
            let mut nonce = [0u8; 32];
            for chunk in nonce.chunks_mut(8) {
                chunk.copy_from_slice(&dpnoise_core::Entropy::next_u64(rng).to_le_bytes());
            }
            nonce
        });
        EXECUTIONS.with(|e| {
            e.borrow_mut().push(Execution {
                estate,
                identities: pending.identities,
                paid,
                items: pending.items,
                nonce,
            })
        });
    }
}

/// # Safety
/// Called by PostgreSQL as a memory context reset callback with the EState `start` registered.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forget(arg: *mut std::ffi::c_void) {
    let estate = arg as *mut pg_sys::EState;
    EXECUTIONS.with(|e| e.borrow_mut().retain(|x| x.estate != estate));
}

/// For each identified call, whether every Agg node that finalizes it groups
/// by all its level's GROUP BY items, each labelled with its item and of a
/// type `group_key` can read (else its noise could not follow its groups).
///
/// # Safety
/// `stmt` is the live PlannedStmt being started.
unsafe fn agg_shapes(stmt: *mut pg_sys::PlannedStmt, marked: &[Marked]) -> Vec<bool> {
    let mut ok = vec![true; marked.len()];
    // SAFETY: the caller's contract; nodes are read through their tags.
    unsafe {
        for plan in crate::parameters::plan_nodes(stmt) {
            if (*plan).type_ != pg_sys::NodeTag::T_Agg {
                continue;
            }
            let agg = plan as *mut pg_sys::Agg;
            let mut found = Vec::new();
            for list in [(*plan).targetlist, (*plan).qual] {
                crate::gate::bounding::collect_aggregates(list.cast(), &mut found);
            }
            for aggref in found {
                let Some(i) = marker_index(aggref).filter(|&i| i < marked.len()) else {
                    continue;
                };
                if (*aggref).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0 {
                    continue;
                }
                let shape = (*agg).aggstrategy != pg_sys::AggStrategy::AGG_MIXED
                    && (*agg).groupingSets.is_null()
                    && (*agg).chain.is_null()
                    && (*agg).numCols as usize == marked[i].group_items.len()
                    && (0..(*agg).numCols as usize).all(|c| {
                        let column = *(*agg).grpColIdx.add(c);
                        let collation = *(*agg).grpCollations.add(c);
                        let entry = input_entry(plan, column);
                        !entry.is_null()
                            && marked[i].group_items.contains(&(*entry).ressortgroupref)
                            && determined::key_type_supported(
                                pg_sys::exprType((*entry).expr.cast()),
                                collation,
                            )
                    });
                ok[i] &= shape;
            }
        }
    }
    ok
}

/// The input's target entry for column `column` (1-based) of an Agg.
///
/// # Safety
/// `plan` is a live Agg plan node.
unsafe fn input_entry(
    plan: *mut pg_sys::Plan,
    column: pg_sys::AttrNumber,
) -> *mut pg_sys::TargetEntry {
    // SAFETY: the caller's contract; the input's target list is a List of TargetEntry.
    unsafe {
        let input = (*plan).lefttree;
        if input.is_null() || column < 1 {
            return std::ptr::null_mut();
        }
        crate::gate::list_items::<pg_sys::TargetEntry>((*input).targetlist)
            .get(column as usize - 1)
            .copied()
            .unwrap_or(std::ptr::null_mut())
    }
}

/// The marker number of an identified call.
///
/// # Safety
/// `aggref` is a live Aggref.
pub(super) unsafe fn marker_index(aggref: *mut pg_sys::Aggref) -> Option<usize> {
    // SAFETY: the caller's contract.
    let location = unsafe { (*aggref).location };
    (location <= MARK).then(|| (MARK - location) as usize)
}

pub use crate::budget::Identified;

/// The identity of the release an aggregate's final function is making
/// (None: a fresh release), found once per call site and execution.
///
/// # Safety
/// `fcinfo` is a live call of a dpnoise final or per-row function.
#[inline(always)]
pub unsafe fn identity(fcinfo: pg_sys::FunctionCallInfo) -> Option<Identified> {
    // SAFETY: the caller's contract; the context, when an AggState, is the node running the call.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null()
            || (*(context as *const pg_sys::Node)).type_ != pg_sys::NodeTag::T_AggState
        {
            // A per-row function: no identity, and no call (this runs for every row).
            return None;
        }
        aggregate_identity(fcinfo)
    }
}

/// `identity` for a call from an Agg node.
///
/// # Safety
/// As `identity`, whose caller `fcinfo.context` is an AggState.
#[inline(never)]
unsafe fn aggregate_identity(fcinfo: pg_sys::FunctionCallInfo) -> Option<Identified> {
    // SAFETY: the caller's contract.
    unsafe {
        let context = (*fcinfo).context;
        let site = crate::call_site::call_site(fcinfo);
        if site.identity_known {
            return site.identified.then_some(Identified {
                identity: site.identity,
                paid: site.identity_paid,
            });
        }
        let agg = context as *mut pg_sys::AggState;
        let aggref = pg_sys::AggGetAggref(fcinfo);
        let found = if aggref.is_null() {
            None
        } else {
            planned_identity((*agg).ss.ps.state, aggref)
        };
        let site = crate::call_site::call_site(fcinfo);
        site.identity_known = true;
        site.identified = found.is_some();
        site.identity = found.map(|i| i.identity).unwrap_or_default();
        site.identity_paid = found.is_some_and(|i| i.paid);
        found
    }
}

/// The identity of an identified call in a plan being run, by its Aggref
/// in the plan (for the analyst's prepayment, and the final function's).
///
/// # Safety
/// `estate` is the execution's; `aggref` a live Aggref of its plan.
pub unsafe fn planned_identity(
    estate: *mut pg_sys::EState,
    aggref: *mut pg_sys::Aggref,
) -> Option<Identified> {
    // SAFETY: the caller's contract.
    let i = unsafe { marker_index(aggref) }?;
    running(estate, |x| {
        Some(Identified {
            identity: x.identities.get(i).copied().flatten()?,
            paid: *x.paid.get(i)?,
        })
    })
}

/// `f` of the running execution whose EState is `estate`, if `start` saw it.
fn running<T>(estate: *mut pg_sys::EState, f: impl FnOnce(&Execution) -> Option<T>) -> Option<T> {
    EXECUTIONS.with(|e| {
        e.borrow()
            .iter()
            .rev()
            .find(|x| x.estate == estate)
            .and_then(f)
    })
}

/// Runs `f` with the generator for this release: for an identified one,
/// ChaCha20 seeded with the HMAC of its identity and its group's key (the
/// same release, the same noise); otherwise the backend's.
///
/// # Safety
/// `fcinfo` is a live call of a dpnoise final or per-row function.
#[inline]
pub unsafe fn with_release_rng<T>(
    fcinfo: pg_sys::FunctionCallInfo,
    f: impl FnOnce(&mut BackendRng) -> T,
) -> T {
    // SAFETY: the caller's contract.
    let Some(Identified { identity, .. }) = (unsafe { identity(fcinfo) }) else {
        return crate::rng::with_rng(f);
    };
    // SAFETY: identity() found an AggState context running this final call, and its Aggref marked.
    let key = unsafe {
        let agg = (*fcinfo).context as *mut pg_sys::AggState;
        let estate = (*agg).ss.ps.state;
        let index = marker_index(pg_sys::AggGetAggref(fcinfo)).expect("identified");
        let (items, nonce) = running(estate, |x| {
            Some((x.items.get(index).cloned().unwrap_or_default(), x.nonce))
        })
        .unwrap_or_default();
        (group_key(agg, &items), nonce)
    };
    let (key, nonce) = key;
    let secret = KEY.with(|k| *k.borrow()).expect("read with the identity");
    let seed = crate::seal::hmac(&secret, &[b"noise", &identity, &nonce, &key]);
    let mut pool = BitPool::new(rand_chacha::ChaCha20Rng::from_seed(seed));
    f(&mut pool)
}

/// The key of the group an Agg is finalizing: each grouping column's type
/// and normalised bytes, in the canonical order of `items` (the call's
/// GROUP BY items), whatever order the plan or the query put them in.
///
/// # Safety
/// `agg` is the live AggState running a final function, whose shape
/// `agg_shapes` accepted for a call with `items`.
unsafe fn group_key(agg: *mut pg_sys::AggState, items: &[u32]) -> Vec<u8> {
    // SAFETY: the caller's contract. While a final function runs, the Agg's expression context's
    // outer tuple is the group's representative input row (nodeAgg.c), holding every grouping column.
    unsafe {
        let plan = (*agg).ss.ps.plan;
        let node = plan as *mut pg_sys::Agg;
        let slot = (*(*agg).ss.ps.ps_ExprContext).ecxt_outertuple;
        let mut columns = Vec::new();
        for c in 0..(*node).numCols as usize {
            let column = *(*node).grpColIdx.add(c);
            let entry = input_entry(plan, column);
            let item = items
                .iter()
                .position(|&r| r == (*entry).ressortgroupref)
                .expect("checked by agg_shapes") as u32;
            let type_ = pg_sys::exprType((*entry).expr.cast());
            pg_sys::slot_getsomeattrs(slot, column as i32);
            let i = column as usize - 1;
            let bytes = if *(*slot).tts_isnull.add(i) {
                None
            } else {
                Some(key_bytes(type_, *(*slot).tts_values.add(i)))
            };
            columns.push((item, type_, bytes));
        }
        columns.sort_by_key(|c| c.0);
        let mut out = Vec::new();
        for (item, type_, bytes) in columns {
            out.extend_from_slice(&item.to_le_bytes());
            out.extend_from_slice(&u32::from(type_).to_le_bytes());
            match bytes {
                None => out.push(0),
                Some(b) => {
                    out.push(1);
                    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                    out.extend_from_slice(&b);
                }
            }
        }
        out
    }
}

/// A group key's bytes, normalised so that keys the type's equality calls
/// equal have equal bytes (`crate::output::canonical::normal_datum`: ±0 and
/// every NaN for floats, numeric scale, interval fields, trailing blanks
/// for char(n)); the bytes as the type stores them otherwise.
///
/// # Safety
/// `value` is a live non-null datum of `type_`, one `key_type_supported` accepts.
unsafe fn key_bytes(type_: pg_sys::Oid, value: pg_sys::Datum) -> Vec<u8> {
    // SAFETY: the caller's contract; by-reference values are read within their length.
    unsafe {
        let Some(value) = crate::output::canonical::normal_datum(type_, value) else {
            // The normal form is NULL (an interval whose months overflow): one class.
            return b"\xff normal form NULL".to_vec();
        };
        let mut len: i16 = 0;
        let mut byval = false;
        pg_sys::get_typlenbyval(type_, &mut len, &mut byval);
        if byval {
            return (value.value() as u64).to_le_bytes().to_vec();
        }
        if type_ == pg_sys::NAMEOID || len == -2 {
            return std::ffi::CStr::from_ptr(value.cast_mut_ptr())
                .to_bytes()
                .to_vec();
        }
        if len == -1 {
            let v = pg_sys::pg_detoast_datum_packed(value.cast_mut_ptr());
            return std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(v) as *const u8,
                pgrx::varlena::varsize_any_exhdr(v),
            )
            .to_vec();
        }
        std::slice::from_raw_parts(value.cast_mut_ptr::<u8>(), len.max(0) as usize).to_vec()
    }
}
