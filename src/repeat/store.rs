//! The release store: what an identified release answered, kept in shared
//! memory so that a repeat is answered from it without reading a protected
//! row (`serve`).
//!
//! An answer is the whole output of one Agg node (its groups' keys and
//! releases, after its HAVING), under a key made of its releases'
//! identities (which already name the data's versions) and the node's
//! output shape. The store is a ring of `DATA` bytes with an index of
//! `ENTRIES` answers: a new answer overwrites the oldest, and answers of
//! tables that changed are never asked for again (their identities
//! changed) and age out. It lives as long as the server: after a restart,
//! or once an answer has aged out, a repeat of a paid release is charged
//! again (with the same noise: its answer is the same). Only dpnoise's own
//! code reads it; nothing in SQL does.

use pgrx::pg_sys;
use std::ffi::CStr;

/// Bytes of answers kept.
const DATA: usize = 8 << 20;
/// Answers indexed.
const ENTRIES: usize = 4096;
/// The largest answer kept (a bigger one is not stored: its repeats are charged).
pub const MOST_BYTES: usize = 1 << 20;

#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    key: [u8; 32],
    offset: u32,
    len: u32,
    valid: bool,
}

#[repr(C)]
struct Header {
    lock: *mut pg_sys::LWLock,
    /// Where the next answer is written in the data area.
    head: usize,
    /// The index entry the next answer takes.
    next: usize,
    entries: [Entry; ENTRIES],
}

const NAME: &CStr = c"dpnoise release store";

// Written only in the postmaster while it sets up shared memory (`attach`),
// before any backend is forked; only read afterwards.
static mut STORE: *mut Header = std::ptr::null_mut();

fn size() -> usize {
    std::mem::size_of::<Header>() + DATA
}

/// Asks for the store's shared memory; only from `shared_preload_libraries`
/// (without it, nothing is stored and every repeat is charged).
pub fn init() {
    crate::shmem::register(crate::shmem::Area {
        name: NAME,
        size,
        locks: 1,
        attach,
    });
}

/// # Safety
/// Called by `shmem` with the store's mapped area (zeroed when `created`) and, then, its tranche.
unsafe fn attach(base: *mut u8, created: bool, locks: *mut pg_sys::LWLockPadded) {
    // SAFETY: the caller's contract; the area holds a Header.
    unsafe {
        let header = base as *mut Header;
        if created {
            (*header).lock = &raw mut (*locks).lock;
        }
        STORE = header;
    }
}

/// The store, if this server has one.
fn store() -> Option<*mut Header> {
    // SAFETY: a by-value read of a pointer written before this process was forked.
    let store = unsafe { STORE };
    (!store.is_null()).then_some(store)
}

/// # Safety
/// `header` is the live store.
unsafe fn data(header: *mut Header) -> *mut u8 {
    // SAFETY: the data area follows the header (size()).
    unsafe { (header as *mut u8).add(std::mem::size_of::<Header>()) }
}

/// The answer stored under `key`, if any.
pub fn lookup(key: &[u8; 32]) -> Option<Vec<u8>> {
    let header = store()?;
    // SAFETY: the store is live shared memory; entries and data are read under its lock (shared),
    // within the data area (an entry's range was checked when written); an error cannot occur
    // while the lock is held (only copies), and PostgreSQL releases LWLocks on error anyway.
    unsafe {
        pg_sys::LWLockAcquire((*header).lock, pg_sys::LWLockMode::LW_SHARED);
        let found = (*header)
            .entries
            .iter()
            .find(|e| e.valid && e.key == *key)
            .map(|e| {
                std::slice::from_raw_parts(data(header).add(e.offset as usize), e.len as usize)
                    .to_vec()
            });
        pg_sys::LWLockRelease((*header).lock);
        found
    }
}

/// Keeps `answer` under `key` (nothing if it is over `MOST_BYTES` or the
/// server has no store), overwriting the oldest answers it needs room of.
pub fn keep(key: &[u8; 32], answer: &[u8]) {
    let Some(header) = store() else { return };
    if answer.len() > MOST_BYTES {
        return;
    }
    // SAFETY: as in lookup, under the exclusive lock; the written range lies in the data area.
    unsafe {
        pg_sys::LWLockAcquire((*header).lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let h = &mut *header;
        if h.entries.iter().any(|e| e.valid && e.key == *key) {
            pg_sys::LWLockRelease(h.lock);
            return;
        }
        if h.head + answer.len() > DATA {
            h.head = 0;
        }
        let (start, end) = (h.head, h.head + answer.len());
        for e in h.entries.iter_mut() {
            let (s, t) = (e.offset as usize, e.offset as usize + e.len as usize);
            if e.valid && s < end && start < t {
                e.valid = false;
            }
        }
        std::ptr::copy_nonoverlapping(answer.as_ptr(), data(header).add(start), answer.len());
        h.entries[h.next] = Entry {
            key: *key,
            offset: start as u32,
            len: answer.len() as u32,
            valid: true,
        };
        h.next = (h.next + 1) % ENTRIES;
        h.head = end;
        pg_sys::LWLockRelease(h.lock);
    }
}

/// What the store holds: each answer's key, size in bytes and rows.
pub fn entries() -> Vec<([u8; 32], u32, u32)> {
    let Some(header) = store() else {
        return Vec::new();
    };
    // SAFETY: as in lookup, under the shared lock; an answer's first 8 bytes are its column and
    // row counts (`serve::finish`), within its range.
    unsafe {
        pg_sys::LWLockAcquire((*header).lock, pg_sys::LWLockMode::LW_SHARED);
        let found = (*header)
            .entries
            .iter()
            .filter(|e| e.valid)
            .map(|e| {
                let at = data(header).add(e.offset as usize);
                let rows = if e.len >= 8 {
                    u32::from_le_bytes(*(at.add(4) as *const [u8; 4]))
                } else {
                    0
                };
                (e.key, e.len, rows)
            })
            .collect();
        pg_sys::LWLockRelease((*header).lock);
        found
    }
}

/// Forgets every answer: their repeats are charged, with fresh noise.
pub fn reset() -> usize {
    let Some(header) = store() else { return 0 };
    // SAFETY: as in keep, under the exclusive lock.
    unsafe {
        pg_sys::LWLockAcquire((*header).lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let h = &mut *header;
        let n = h.entries.iter().filter(|e| e.valid).count();
        for e in h.entries.iter_mut() {
            e.valid = false;
        }
        h.head = 0;
        h.next = 0;
        pg_sys::LWLockRelease(h.lock);
        n
    }
}

/// The release store's answers, for superusers (dp_release_store).
#[pgrx::pg_extern(volatile, parallel_restricted, sql = false)]
fn dp_release_store_entries() -> pgrx::iter::TableIterator<
    'static,
    (
        pgrx::name!(answer, Vec<u8>),
        pgrx::name!(bytes, i32),
        pgrx::name!(rows, i64),
    ),
> {
    superuser_only("dp_release_store");
    pgrx::iter::TableIterator::new(
        entries()
            .into_iter()
            .map(|(key, len, rows)| (key.to_vec(), len as i32, i64::from(rows))),
    )
}

/// Empties the release store (dp_release_store_reset); superusers only.
#[pgrx::pg_extern(volatile, parallel_unsafe, sql = false)]
fn dp_release_store_reset() -> i64 {
    superuser_only("dp_release_store_reset");
    reset() as i64
}

/// Refuses a caller who is not a superuser (the functions are revoked from
/// PUBLIC too; a GRANT does not open the answers to another role).
fn superuser_only(what: &str) {
    // SAFETY: superuser() reads the current role's catalog row, inside a transaction.
    if !unsafe { pg_sys::superuser() } {
        crate::errors::raise_sqlstate(
            "42501",
            format!("dpnoise: only a superuser may use {what}"),
            None,
        );
    }
}
