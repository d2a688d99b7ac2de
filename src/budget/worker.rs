//! The ledger worker: a background worker per database that charges
//! requests in its own transactions and answers only after they commit.

use super::shared::{self, Outcome, WorkerState, PENDING, TAKEN};
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgOid};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Requests charged per transaction at most (one commit, one WAL flush).
const BATCH: usize = 64;
/// An idle worker exits after this long, so it never holds its database
/// open for long (DROP DATABASE waits for connected processes).
const IDLE_EXIT: Duration = Duration::from_secs(2);

/// The pool was registered at server start (in the postmaster, so every
/// backend forked from it knows).
static POOL_REGISTERED: AtomicBool = AtomicBool::new(false);

pub fn pool_registered() -> bool {
    POOL_REGISTERED.load(Ordering::Relaxed)
}

/// This process is a ledger worker (set as it starts; a process's own copy).
static LEDGER_WORKER: AtomicBool = AtomicBool::new(false);

pub fn is_ledger_worker() -> bool {
    LEDGER_WORKER.load(Ordering::Relaxed)
}

/// Registers the pool's workers (entries 0..POOL); only while the server
/// starts, when their slots can be reserved.
pub fn register_pool() {
    // SAFETY: a by-value read of a bool global of this process (miscinit.c), which only the
    // library-loading code writes, on this same thread (backends and the postmaster have one).
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    for entry in 0..shared::POOL {
        BackgroundWorkerBuilder::new("dpnoise ledger pool")
            .set_type("dpnoise ledger")
            .set_library("dpnoise")
            .set_function("dpnoise_ledger_pool_main")
            .enable_spi_access()
            .set_argument(Some(pg_sys::Datum::from(entry)))
            .set_restart_time(Some(Duration::from_secs(1)))
            .load();
    }
    POOL_REGISTERED.store(true, Ordering::Relaxed);
}

/// A pool worker: waits, connected to no database, until a requester gives
/// it one; then serves that database like a dynamic worker, and when idle
/// exits with code 1 so the postmaster starts it again, unconnected.
#[pg_guard]
// SAFETY: an exported name no other symbol of the server or of dpnoise uses; the postmaster looks
// it up by this name (set_function above) and calls it with the bgw_main_arg Datum.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn dpnoise_ledger_pool_main(arg: pg_sys::Datum) {
    let entry = arg.value();
    LEDGER_WORKER.store(true, Ordering::Relaxed);
    let mailbox = shared::mailbox().expect("the ledger worker needs dpnoise preloaded");
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = loop {
        let assigned = mailbox.locked(|h| {
            let w = &mut h.workers[entry];
            if w.state == WorkerState::Starting {
                return Some(w.database);
            }
            w.state = WorkerState::Idle;
            // SAFETY: by-value reads of this process's globals, on its only thread. Before calling
            // this entry point, the worker's startup set MyProcPid and (InitProcess) pointed MyLatch
            // at its PGPROC's latch, in shared memory, so requesters may SetLatch it.
            (w.latch, w.pid) = unsafe { (pg_sys::MyLatch, pg_sys::MyProcPid) };
            None
        });
        if let Some(database) = assigned {
            break database;
        }
        if !BackgroundWorker::wait_latch(Some(Duration::from_secs(1))) {
            return;
        }
    };
    serve(entry, database);
    // SAFETY: proc_exit runs the exit callbacks (on_exit, registered in serve, frees this worker's
    // entry) and does not return; serve has left no transaction open, and nothing in this frame
    // needs dropping (`mailbox` is a Copy pointer wrapper). Exit code 1 makes the postmaster start
    // the pool worker again.
    unsafe { pg_sys::proc_exit(1) };
}

/// Starts the worker for workers[entry]; false if no worker slot is free.
pub fn launch(entry: usize) -> bool {
    BackgroundWorkerBuilder::new("dpnoise ledger")
        .set_type("dpnoise ledger")
        .set_library("dpnoise")
        .set_function("dpnoise_ledger_main")
        .enable_spi_access()
        .set_argument(Some(pg_sys::Datum::from(entry)))
        .load_dynamic()
        .is_ok()
}

const CHARGE: &str = "SELECT c.granted, c.remaining_epsilon::text, c.remaining_delta::text, c.is_free, \
     c.remaining_rho::text \
     , c.refused_by \
     FROM dpnoise.charge_batch($1::oid[], $2::numeric[], $3::numeric[], $4, $5, $6, $7, $8, $9, $10, \
     $11::numeric[], $12::numeric[], $13) c";

thread_local! {
    /// The charge query, planned once per worker.
    static PLAN: std::cell::RefCell<Option<pgrx::spi::OwnedPreparedStatement>> = const { std::cell::RefCell::new(None) };
}

struct Reply {
    granted: bool,
    free: bool,
    remaining_epsilon: String,
    remaining_delta: String,
    remaining_rho: String,
    refused_by: String,
}

#[pg_guard]
// SAFETY: an exported name no other symbol of the server or of dpnoise uses; the postmaster looks
// it up by this name (set_function in launch) and calls it with the bgw_main_arg Datum.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn dpnoise_ledger_main(arg: pg_sys::Datum) {
    let entry = arg.value();
    LEDGER_WORKER.store(true, Ordering::Relaxed);
    let mailbox = shared::mailbox().expect("the ledger worker needs dpnoise preloaded");
    let database = mailbox.locked(|h| h.workers[entry].database);
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    serve(entry, database);
}

/// Connects to `database` and charges its requests until idle.
fn serve(entry: usize, database: pg_sys::Oid) {
    let mailbox = shared::mailbox().expect("preloaded");
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(database), None);
    // SAFETY: on_exit has the pg_on_exit_callback signature (int, Datum) and lives in this library,
    // loaded until the process exits; serve runs once per process, so this takes one of the
    // MAX_ON_EXITS slots, once. Its argument is the entry index, a plain integer Datum.
    unsafe { pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(entry)) };
    mailbox.locked(|h| {
        let w = &mut h.workers[entry];
        if w.database == database && w.state != WorkerState::Empty {
            w.state = WorkerState::Running;
            // SAFETY: by-value reads of this process's globals, on its only thread. Before calling
            // this entry point, the worker's startup set MyProcPid and (InitProcess) pointed MyLatch
            // at its PGPROC's latch, in shared memory, so requesters may SetLatch it.
            (w.latch, w.pid) = unsafe { (pg_sys::MyLatch, pg_sys::MyProcPid) };
        }
    });
    // Session settings for every charge: durable commits (whatever the
    // server's default), a fixed search_path, read committed (charge_batch
    // reads what the worker before it committed, after taking its lock,
    // whatever default a database owner set), and no waiting forever on a
    // lock a superuser holds on the ledger tables. charge_batch's statements
    // keep one generic plan each: with their array parameters, PostgreSQL
    // would otherwise plan them again for every batch (a fifth of the
    // worker's time went there).
    BackgroundWorker::transaction(|| {
        Spi::run(
            "SET search_path = pg_catalog, pg_temp; SET synchronous_commit = on; \
             SET default_transaction_isolation = 'read committed'; SET default_transaction_read_only = off; \
             SET lock_timeout = '10s'; SET statement_timeout = '60s'; SET plan_cache_mode = force_generic_plan",
        )
        .expect("session settings")
    });

    let mut idle_since = std::time::Instant::now();
    let mut compacting = false;
    loop {
        // SAFETY: MyLatch, read by value on this process's only thread, is its own PGPROC latch
        // (set by InitProcess), which only its owner may reset, as here.
        unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
        let batch: Vec<usize> = take_batch(database);
        if !batch.is_empty() {
            charge_batch(&batch);
            idle_since = std::time::Instant::now();
            continue;
        }
        // The write log is merged in chunks, charges served between them.
        compacting |= take_compaction(database);
        if compacting {
            compacting = compact_chunk();
            idle_since = std::time::Instant::now();
            continue;
        }
        if idle_since.elapsed() >= IDLE_EXIT && retire(entry, database) {
            return;
        }
        if !BackgroundWorker::wait_latch(Some(Duration::from_millis(500))) {
            return;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: a background worker's usual SIGHUP handling: on this process's only thread,
            // between transactions (every charge's has ended), with PGC_SIGHUP as any process but
            // the postmaster must; it reads the files into its own temporary memory context.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
    }
}

/// Whether a compaction of this database's write log was asked for (and
/// takes the request).
fn take_compaction(database: pg_sys::Oid) -> bool {
    let mailbox = shared::mailbox().expect("preloaded");
    mailbox.locked(|h| match h.compact.iter_mut().find(|d| **d == database) {
        Some(d) => {
            *d = pg_sys::InvalidOid;
            true
        }
        None => false,
    })
}

/// Merges tracked tables' logged writes (src/repeat), the first CHUNK rows
/// in (table, transaction) order at a time: each table's rows among them
/// become one, standing for as many transactions (n) with the newest's ID.
/// What a snapshot taken afterwards sees sums to the same count with the
/// same newest transaction, so no release's identity changes; a snapshot
/// taken before sees the rows as they were (MVCC). Returns whether the
/// chunk merged anything (then there may be more).
const COMPACT: &str = "WITH old AS (
        DELETE FROM dpnoise.writes w
        WHERE (w.rel, w.xid) IN (SELECT v.rel, v.xid FROM dpnoise.writes v ORDER BY v.rel, v.xid LIMIT 10000)
        RETURNING w.rel, w.xid, w.n),
    merged AS (
        INSERT INTO dpnoise.writes (rel, xid, n)
        SELECT o.rel, pg_catalog.max(o.xid), pg_catalog.sum(o.n) FROM old o GROUP BY o.rel
        RETURNING 1)
    SELECT (SELECT pg_catalog.count(*) FROM old) OPERATOR(pg_catalog.>) (SELECT pg_catalog.count(*) FROM merged)";

fn compact_chunk() -> bool {
    // SAFETY: a plain query of the server's state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return false;
    }
    BackgroundWorker::transaction(|| {
        // A database whose dpnoise predates the write log has nothing to compact.
        if Spi::get_one::<bool>("SELECT pg_catalog.to_regclass('dpnoise.writes') IS NOT NULL")
            .ok()
            .flatten()
            != Some(true)
        {
            return false;
        }
        // Each chunk is a short statement; charges are served between chunks.
        Spi::get_one::<bool>(COMPACT)
            .expect("dpnoise: compacting the write log")
            .unwrap_or(false)
    })
}

/// Takes up to BATCH pending requests of this database.
fn take_batch(database: pg_sys::Oid) -> Vec<usize> {
    let mailbox = shared::mailbox().expect("preloaded");
    // SAFETY: a by-value read of MyProcPid, set when this process started, on its only thread.
    let me = unsafe { pg_sys::MyProcPid };
    let mut batch = Vec::new();
    for (i, slot) in mailbox.slots().enumerate() {
        if batch.len() == BATCH {
            break;
        }
        // A PENDING slot's fields are written before its state (Release) and
        // not touched again by its requester until DONE: reading them is safe.
        if slot.load() == PENDING && slot.with(|s| s.database) == database && slot.take() {
            // TAKEN by this worker: ours until it is finished.
            slot.with(|s| s.taker = me);
            batch.push(i);
        }
    }
    batch
}

/// Charges a batch in one transaction (one call of dpnoise.charge_batch,
/// one commit, one WAL flush); answers after the commit.
fn charge_batch(batch: &[usize]) {
    let mailbox = shared::mailbox().expect("preloaded");
    let mut roles = Vec::with_capacity(batch.len());
    let (mut epsilons, mut deltas, mut mechanisms, mut statements) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut releases, mut pids, mut starts, mut identities, mut repeats) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut rhos, mut rho_deltas) = (Vec::new(), Vec::new());
    let mut tables: Vec<Option<String>> = Vec::new();
    for &i in batch {
        // TAKEN by this worker (take_batch): ours until it is finished.
        mailbox.slot(i).expect("taken index").with(|slot| {
            roles.push(i64::from(u32::from(slot.role)));
            epsilons.push(slot.epsilon.get().to_owned());
            deltas.push(slot.delta.get().to_owned());
            rhos.push(slot.rho.get().to_owned());
            rho_deltas.push(slot.rho_delta.get().to_owned());
            let read = slot.tables.get();
            tables.push((!read.is_empty()).then(|| read.to_owned()));
            releases.push(slot.releases);
            mechanisms.push(slot.mechanism.get().to_owned());
            statements.push(slot.statement.get().to_owned());
            pids.push(slot.pid);
            starts.push(TimestampWithTimeZone::try_from(slot.started).ok());
            let count = slot.identity_count as usize;
            identities.push((count > 0).then(|| slot.identities[..count].concat()));
            repeats.push(slot.repeat);
        });
    }
    let replies: Vec<Reply> = BackgroundWorker::transaction(AssertUnwindSafe(|| {
        Spi::connect_mut(|client| {
            let args: [DatumWithOid; 13] = [
                roles.into(),
                epsilons.into(),
                deltas.into(),
                releases.into(),
                mechanisms.into(),
                statements.into(),
                pids.into(),
                starts.into(),
                identities.into(),
                repeats.into(),
                rhos.into(),
                rho_deltas.into(),
                tables.into(),
            ];
            let table = PLAN
                .with(|plan| {
                    let mut plan = plan.borrow_mut();
                    if plan.is_none() {
                        let types = [
                            PgBuiltInOids::INT8ARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                            PgBuiltInOids::INT8ARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                            PgBuiltInOids::INT4ARRAYOID,
                            PgBuiltInOids::TIMESTAMPTZARRAYOID,
                            PgBuiltInOids::BYTEAARRAYOID,
                            PgBuiltInOids::BOOLARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                            PgBuiltInOids::TEXTARRAYOID,
                        ]
                        .map(PgOid::BuiltIn);
                        *plan = Some(client.prepare_mut(CHARGE, &types)?.keep());
                    }
                    client.update(plan.as_ref().expect("prepared"), None, &args)
                })
                .expect("dpnoise.charge_batch");
            table
                .map(|row| Reply {
                    granted: row.get(1).ok().flatten().unwrap_or(false),
                    remaining_epsilon: row.get(2).ok().flatten().unwrap_or_default(),
                    remaining_delta: row.get(3).ok().flatten().unwrap_or_default(),
                    free: row.get(4).ok().flatten().unwrap_or(false),
                    remaining_rho: row.get(5).ok().flatten().unwrap_or_default(),
                    refused_by: row.get(6).ok().flatten().unwrap_or_default(),
                })
                .collect()
        })
    }));
    assert_eq!(replies.len(), batch.len(), "one answer per request");
    // Committed (and flushed: synchronous_commit is on): now answer.
    for (&i, reply) in batch.iter().zip(replies) {
        let slot = mailbox.slot(i).expect("taken index");
        slot.with(|s| {
            s.free = reply.free;
            s.remaining_epsilon.set(&reply.remaining_epsilon);
            s.remaining_delta.set(&reply.remaining_delta);
            s.remaining_rho.set(&reply.remaining_rho);
            s.refused_by.set(&reply.refused_by);
        });
        slot.finish(if reply.granted {
            Outcome::Granted
        } else {
            Outcome::Refused
        });
    }
}

/// Leaves if nothing of this database is pending, under the lock that
/// requesters take to find their worker: a request that arrives after this
/// sees no worker and starts a new one.
fn retire(entry: usize, database: pg_sys::Oid) -> bool {
    let mailbox = shared::mailbox().expect("preloaded");
    mailbox.locked(|h| {
        let pending = h
            .slots()
            .any(|s| s.load() == PENDING && s.with(|s| s.database) == database);
        if pending {
            return false;
        }
        let w = &mut h.workers[entry];
        // SAFETY: a by-value read of MyProcPid, set when this process started, on its only thread.
        if w.pid == unsafe { pg_sys::MyProcPid } {
            w.state = WorkerState::Empty;
        }
        true
    })
}

/// On any exit (error, SIGTERM, idle): fail what this worker took but did
/// not answer, and free its entry. Whatever it committed stays charged.
///
/// # Safety
/// Only for PostgreSQL's exit machinery: registered by `serve` with
/// before_shmem_exit, so called once, while shared memory is still attached,
/// with `arg` the index of this worker's entry in the worker table.
#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, arg: pg_sys::Datum) {
    let entry = arg.value();
    let Some(mailbox) = shared::mailbox() else {
        return;
    };
    // SAFETY: a by-value read of MyProcPid, set when this process started, on its only thread.
    let me = unsafe { pg_sys::MyProcPid };
    mailbox.locked(|h| {
        for slot in h.slots() {
            // TAKEN by this (exiting) worker: still ours.
            if slot.load() == TAKEN && slot.with(|s| s.taker) == me {
                slot.with(|s| {
                    s.message
                        .set("the ledger worker stopped before answering (see the server log)")
                });
                slot.finish(Outcome::Failed);
            }
        }
        let w = &mut h.workers[entry];
        if w.pid == me || w.state == WorkerState::Starting {
            w.state = WorkerState::Empty;
        }
    });
}
