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
