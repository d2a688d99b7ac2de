//! The OIDs of dpnoise's own extension and of Citus, which planning asks
//! for on every query (the gate's and the repeat marker's "is this one of
//! ours", the Citus split's "is Citus here"). pg_extension has no syscache:
//! each `get_extension_oid` opens and scans it, a tenth of a small query's
//! planning. A backend keeps the answers until a pg_proc invalidation:
//! CREATE and DROP EXTENSION create and drop functions, and every change
//! to pg_proc, in this backend or any other, reaches this backend's
//! syscache callbacks before its next catalog read (as a catcache entry
//! would be). A cache reset (an overflowed invalidation queue) calls them too.

use pgrx::pg_sys;
use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy)]
pub enum Extension {
    Dpnoise = 0,
    Citus = 1,
}

impl Extension {
    fn name(self) -> &'static CStr {
        match self {
            Extension::Dpnoise => c"dpnoise",
            Extension::Citus => c"citus",
        }
    }
}

thread_local! {
    /// Bumped by every pg_proc invalidation.
    static GENERATION: Cell<u64> = const { Cell::new(1) };
    /// Each extension's OID (InvalidOid: not installed) and the generation
    /// it was read in; 0: never read.
    static KNOWN: Cell<[(u64, pg_sys::Oid); 2]> = const { Cell::new([(0, pg_sys::InvalidOid); 2]) };
}

/// Registers the invalidation callback; once per process, from _PG_init.
pub fn init() {
    // SAFETY: from _PG_init, on the process's only thread, once; the callback has the syscache
    // callback's signature and lives in this library, which is never unloaded.
    unsafe {
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            Some(procs_changed),
            pg_sys::Datum::from(0usize),
        )
    };
}

/// # Safety
/// Called by PostgreSQL's invalidation processing as a syscache callback; it reads no catalog.
unsafe extern "C-unwind" fn procs_changed(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    GENERATION.with(|g| g.set(g.get() + 1));
}

/// The extension's OID in this database, InvalidOid when it is not installed.
///
/// # Safety
/// Inside a transaction (a first read scans pg_extension).
pub unsafe fn oid(extension: Extension) -> pg_sys::Oid {
    let generation = GENERATION.with(Cell::get);
    let (read_in, known) = KNOWN.with(Cell::get)[extension as usize];
    if read_in == generation {
        return known;
    }
    // SAFETY: a catalog lookup by a NUL-terminated name inside a transaction (the caller's
    // contract); missing_ok answers InvalidOid instead of raising.
    let found = unsafe { pg_sys::get_extension_oid(extension.name().as_ptr(), true) };
    // Stamped with the generation before the lookup: an invalidation the
    // lookup itself processed leaves the answer stale-marked, to be read again.
    KNOWN.with(|k| {
        let mut all = k.get();
        all[extension as usize] = (generation, found);
        k.set(all);
    });
    found
}

/// Refuses a release on a Citus worker node (its group is not 0, the
/// coordinator's): the budgets live on the coordinator, which runs every
/// dpnoise aggregate's release itself. A worker would charge its own ledger.
#[inline(always)]
pub fn refuse_on_worker() {
    // SAFETY: MyProc is this backend's PGPROC, set before any query runs; lxid is its own.
    let transaction = unsafe { crate::versions::local_transaction() };
    let known = WORKER.load(Ordering::Relaxed);
    // Known for this transaction and not a worker: the usual case, a load
    // and a compare (this runs for every row).
    if known == (u64::from(transaction) << 32 | 2) {
        return;
    }
    check_worker(transaction, known)
}

/// The local transaction the node's role was read in (high 32 bits),
/// whether it was read (bit 1) and whether this node is a Citus worker (bit
/// 0): read once per transaction, not once per release. A plain static
/// (this process's own copy) costs a load per row; a thread-local, a lookup
/// through the dynamic linker.
static WORKER: AtomicU64 = AtomicU64::new(0);

/// `refuse_on_worker` past its fast path: reads the node's role once per
/// transaction, and refuses on a worker.
#[inline(never)]
fn check_worker(transaction: u32, known: u64) {
    let worker = if known & 2 != 0 && (known >> 32) as u32 == transaction {
        known & 1 == 1
    } else {
        // SAFETY: inside a transaction (every release runs in one): a catalog scan.
        let citus = unsafe { oid(Extension::Citus) } != pg_sys::InvalidOid;
        let worker = citus && local_group().unwrap_or(0) > 0;
        WORKER.store(
            u64::from(transaction) << 32 | 2 | u64::from(worker),
            Ordering::Relaxed,
        );
        worker
    };
    if worker {
        crate::errors::raise_sqlstate(
            crate::errors::LEDGER_UNAVAILABLE,
            "dpnoise: the release could not be charged, so nothing was released: this node is a Citus worker, \
             and budgets live on the coordinator"
                .to_owned(),
            Some("Run the query on the coordinator; dpnoise's aggregates over distributed tables release there.".to_owned()),
        );
    }
}

/// Citus's group of this node (0: the coordinator), read-only: pgrx's
/// Spi::get_one assigns a transaction ID, which a parallel query's leader
/// (where a release runs) and a standby cannot.
fn local_group() -> Option<i32> {
    use pgrx::spi::Spi;
    Spi::connect(|client| {
        client
            .select(
                "SELECT groupid FROM pg_catalog.pg_dist_local_group",
                Some(1),
                &[],
            )?
            .first()
            .get_one::<i32>()
    })
    .ok()
    .flatten()
}
