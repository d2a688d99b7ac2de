//! The shared-memory mailbox between releasing processes and the ledger
//! workers: one request slot per PGPROC, and a table of running workers
//! (one per database). Beside it, one session entry per PGPROC: what that
//! connection has spent and its caps, read by the dp_sessions view.

use pgrx::pg_sys;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};

pub const MAX_DATABASES: usize = 16;
/// Ledger workers registered when the server starts (entries 0..POOL of
/// the worker table): their slots are reserved then, so a release never
/// depends on a free background-worker slot at the moment it is charged.
pub const POOL: usize = 2;

/// A slot's life: FREE → PENDING (requester) → TAKEN (worker) → DONE
/// (worker, after its commit) → the requester reads it and may reuse it.
pub const FREE: u32 = 0;
pub const PENDING: u32 = 1;
pub const TAKEN: u32 = 2;
pub const DONE: u32 = 3;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum Outcome {
    Granted = 1,
    Refused = 2,
    Failed = 3,
}

/// Fixed-capacity text in shared memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Text<const N: usize> {
    len: u32,
    bytes: [u8; N],
}

impl<const N: usize> Text<N> {
    /// Stores `s`, cut at a character boundary to fit.
    pub fn set(&mut self, s: &str) {
        let mut n = s.len().min(N);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        self.len = n as u32;
    }

    /// Whether `s` fits whole.
    pub fn fits(s: &str) -> bool {
        s.len() <= N
    }

    pub fn get(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

/// The room for an amount asked in a request slot.
pub const AMOUNT: usize = 512;

/// How many release identities one charge can record.
pub const IDENTITIES: usize = 16;

#[repr(C)]
pub struct Slot {
    pub state: AtomicU32,
    pub database: pg_sys::Oid,
    pub role: pg_sys::Oid,
    pub pid: i32,
    /// The session that asked (the connection's pid, above, and start;
    /// its leader's for a parallel worker), which the ledger records, and
    /// its entry (`Mailbox::session`), refunded if the charge is refused.
    pub started: pg_sys::TimestampTz,
    pub session: u32,
    /// The worker that took it, so its exit can fail what it held.
    pub taker: i32,
    pub requester: *mut pg_sys::Latch,
    pub releases: i64,
    pub outcome: Outcome,
    /// The identities of the releases this charge pays for once and for
    /// all (src/repeat), the first `identity_count`; with `repeat`, the
    /// charge is free if all were paid before. The answer: it was free.
    pub identities: [[u8; 32]; IDENTITIES],
    pub identity_count: u8,
    pub repeat: bool,
    pub free: bool,
    /// Exact decimals: room for any f64's (up to about 330 characters)
    /// and the exact sums charged for an analyst's statement.
    pub epsilon: Text<AMOUNT>,
    pub delta: Text<AMOUNT>,
    /// What it costs under zero-concentrated DP (`budget::Charge`).
    pub rho: Text<AMOUNT>,
    pub rho_delta: Text<AMOUNT>,
    pub mechanism: Text<48>,
    pub statement: Text<1024>,
    pub remaining_epsilon: Text<64>,
    pub remaining_delta: Text<64>,
    /// A zCDP budget's ρ left; empty for an additive one.
    pub remaining_rho: Text<64>,
    /// The tables the statement reads, as an oid[] literal; empty: not
    /// known (every budget on tables of the role is charged).
    pub tables: Text<1024>,
    /// The budget on tables that refused the charge, if one did.
    pub refused_by: Text<256>,
    pub message: Text<256>,
}

/// What one connection has spent and may spend, as exact decimals: the one
/// record of it, which the connection and its parallel workers read and
/// write under the session lock only.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Session {
    /// The connection (its leader's, for a parallel worker): a new process
    /// in the same PGPROC finds another pid or start and starts afresh.
    pub pid: i32,
    pub started: pg_sys::TimestampTz,
    pub database: pg_sys::Oid,
    /// The role the connection logged in as (who may see the entry).
    pub login: pg_sys::Oid,
    /// The role its releases are charged to, as of its last statement.
    pub role: pg_sys::Oid,
    pub spent_epsilon: Text<256>,
    pub spent_delta: Text<256>,
    /// Caps the connection set itself (dp_session_budget); empty: none.
    pub own_epsilon: Text<64>,
    pub own_delta: Text<64>,
    /// The cap in force as of its last statement, for dp_sessions; empty: none.
    pub cap_epsilon: Text<64>,
    pub cap_delta: Text<64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum WorkerState {
    Empty = 0,
    Starting = 1,
    Running = 2,
    /// A pool worker waiting, connected to no database, to be given one.
    Idle = 3,
}

#[repr(C)]
pub struct WorkerEntry {
    pub database: pg_sys::Oid,
    pub state: WorkerState,
    pub latch: *mut pg_sys::Latch,
    pub pid: i32,
    /// When a Starting entry was claimed; a worker that never comes up is
    /// replaced after a while.
    pub since: pg_sys::TimestampTz,
}

impl WorkerEntry {
    /// Serves (or is starting to serve) `database`.
    pub fn serves(&self, database: pg_sys::Oid) -> bool {
        matches!(self.state, WorkerState::Starting | WorkerState::Running)
            && self.database == database
    }
}

#[repr(C)]
pub struct Header {
    pub lock: *mut pg_sys::LWLock,
    /// Guards the session entries (not the slots or the worker table).
    pub sessions_lock: *mut pg_sys::LWLock,
    pub slot_count: usize,
    pub workers: [WorkerEntry; MAX_DATABASES],
    /// Databases whose write log (src/repeat) wants compacting by their
    /// ledger worker; InvalidOid: a free entry.
    pub compact: [pg_sys::Oid; MAX_DATABASES],
}

const NAME: &CStr = c"dpnoise ledger";

// Written only in the postmaster while it sets up shared memory (`attach`),
// before any backend or worker is forked; only read afterwards. Each
// process has its own copy.
static mut SHARED: *mut Header = std::ptr::null_mut();

fn size() -> usize {
    // SAFETY: MaxBackends is set before shmem_request_hook runs and never changes afterwards.
    let slots = unsafe { pg_sys::MaxBackends } as usize;
    std::mem::size_of::<Header>()
        + slots * (std::mem::size_of::<Slot>() + std::mem::size_of::<Session>())
}

/// Asks for the mailbox's shared memory; only from `shared_preload_libraries`.
pub fn init() {
    crate::shmem::register(crate::shmem::Area {
        name: NAME,
        size,
        locks: 2,
        attach,
    });
}

/// # Safety
/// Called by `shmem` with the mailbox's mapped area (zeroed when `created`) and, then, its tranche.
unsafe fn attach(base: *mut u8, created: bool, locks: *mut pg_sys::LWLockPadded) {
    // SAFETY: the caller's contract; the area is size() bytes, a Header then the slots.
    unsafe {
        let header = base as *mut Header;
        if created {
            (*header).lock = &raw mut (*locks).lock;
            (*header).sessions_lock = &raw mut (*locks.add(1)).lock;
            (*header).slot_count = pg_sys::MaxBackends as usize;
        }
        SHARED = header;
    }
}

/// The one way to the mailbox in shared memory, which other processes
/// write at the same time. The worker table is reached only under the
/// mailbox's lock (`locked`, after pgrx's `PgLwLock`); a slot only through
/// `SlotRef`, whose state is atomic and whose other fields are lent for
/// the length of one closure to the process that owns the slot by the
/// protocol (FREE/DONE: its requester; TAKEN: the worker that took it).
/// Nothing hands out a `&mut` that outlives its closure.
#[derive(Clone, Copy)]
pub struct Mailbox {
    header: *mut Header,
}

/// The mailbox, or None when dpnoise was not preloaded.
pub fn mailbox() -> Option<Mailbox> {
    // SAFETY: SHARED is written only before this process runs queries (see above).
    let header = unsafe { SHARED };
    (!header.is_null()).then_some(Mailbox { header })
}

/// What `Mailbox::locked` lends: the worker table, and the slots.
pub struct Locked<'a> {
    pub workers: &'a mut [WorkerEntry; MAX_DATABASES],
    pub compact: &'a mut [pg_sys::Oid; MAX_DATABASES],
    mailbox: Mailbox,
}

impl Locked<'_> {
    pub fn slots(&self) -> impl Iterator<Item = SlotRef> {
        self.mailbox.slots()
    }

    /// Gives `database` an idle pool worker, if one is idle, and wakes it.
    pub fn assign_idle_pool_worker(
        &mut self,
        database: pg_sys::Oid,
        now: pg_sys::TimestampTz,
    ) -> bool {
        let Some(w) = self.workers[..POOL]
            .iter_mut()
            .find(|w| w.state == WorkerState::Idle)
        else {
            return false;
        };
        w.database = database;
        w.state = WorkerState::Starting;
        w.since = now;
        // SAFETY: an Idle pool worker's latch is its PGPROC latch, in shared memory for the
        // server's life; read under the mailbox lock, which the caller holds.
        unsafe { pg_sys::SetLatch(w.latch) };
        true
    }
}

impl Mailbox {
    fn slot_count(&self) -> usize {
        // SAFETY: slot_count is written once, before the mailbox is published, then only read.
        unsafe { (*self.header).slot_count }
    }

    /// The request slot of PGPROC number `index`.
    pub fn slot(&self, index: usize) -> Option<SlotRef> {
        (index < self.slot_count()).then(|| SlotRef {
            // SAFETY: the slots follow the header, slot_count of them (see size()).
            slot: unsafe { (self.header.add(1) as *mut Slot).add(index) },
        })
    }

    pub fn slots(&self) -> impl Iterator<Item = SlotRef> {
        let mailbox = *self;
        (0..self.slot_count()).filter_map(move |i| mailbox.slot(i))
    }

    fn sessions(&self) -> *mut Session {
        // SAFETY: the session entries follow the slots, slot_count of them (see size()).
        unsafe { (self.header.add(1) as *mut Slot).add(self.slot_count()) as *mut Session }
    }

    /// Runs `f` on the session entry of PGPROC number `index` holding the
    /// session lock exclusively: no other process reads or writes any entry
    /// meanwhile. None if there is no such entry. An error raised in `f`
    /// releases the lock (PostgreSQL releases every LWLock on error recovery).
    pub fn session<T>(&self, index: usize, f: impl FnOnce(&mut Session) -> T) -> Option<T> {
        if index >= self.slot_count() {
            return None;
        }
        // SAFETY: the entry lies within the session array; the exclusive lock
        // makes this the only reference to any entry in any process while `f` runs.
        unsafe {
            pg_sys::LWLockAcquire(
                (*self.header).sessions_lock,
                pg_sys::LWLockMode::LW_EXCLUSIVE,
            );
            let out = f(&mut *self.sessions().add(index));
            pg_sys::LWLockRelease((*self.header).sessions_lock);
            Some(out)
        }
    }

    /// A copy of every session entry that was ever written (pid not 0),
    /// taken under the session lock; entries of exited backends included.
    pub fn session_entries(&self) -> Vec<Session> {
        // SAFETY: reads the session array under the shared lock, so no entry
        // is half-written; the copies outlive the lock.
        unsafe {
            pg_sys::LWLockAcquire((*self.header).sessions_lock, pg_sys::LWLockMode::LW_SHARED);
            let all = std::slice::from_raw_parts(self.sessions(), self.slot_count());
            let written = all.iter().filter(|s| s.pid != 0).copied().collect();
            pg_sys::LWLockRelease((*self.header).sessions_lock);
            written
        }
    }

    /// Runs `f` holding the mailbox's lock exclusively: the worker table is
    /// lent to it, and to no one else in any process meanwhile. An error
    /// raised in `f` releases the lock (PostgreSQL releases every LWLock on
    /// error recovery).
    pub fn locked<T>(&self, f: impl FnOnce(&mut Locked) -> T) -> T {
        // SAFETY: the lock is the tranche's LWLock set up in startup(); while it
        // is held exclusively no other process reads or writes the worker table,
        // and this process lends it to `f` only.
        unsafe {
            pg_sys::LWLockAcquire((*self.header).lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let mut locked = Locked {
                workers: &mut (*self.header).workers,
                compact: &mut (*self.header).compact,
                mailbox: *self,
            };
            let out = f(&mut locked);
            pg_sys::LWLockRelease((*self.header).lock);
            out
        }
    }
}

/// One request slot in shared memory.
#[derive(Clone, Copy)]
pub struct SlotRef {
    slot: *mut Slot,
}

impl SlotRef {
    fn state(&self) -> &AtomicU32 {
        // SAFETY: the slot lies in shared memory mapped for the life of the
        // process; the state is an atomic, safe to share between processes.
        unsafe { &(*self.slot).state }
    }

    pub fn load(&self) -> u32 {
        self.state().load(Ordering::Acquire)
    }

    /// The database of the request in this slot, which any process may
    /// read while it is PENDING or TAKEN: its requester wrote it before
    /// publishing PENDING (Release, read here after an Acquire load) and
    /// nothing writes it again until the slot is refilled after DONE.
    pub fn database(&self) -> pg_sys::Oid {
        let _ = self.load();
        // SAFETY: as above: a plain read of a field no process writes while the
        // slot is PENDING or TAKEN, ordered after the state's Acquire load.
        unsafe { std::ptr::read_volatile(&raw const (*self.slot).database) }
    }

    pub fn store(&self, state: u32) {
        self.state().store(state, Ordering::Release)
    }

    /// PENDING → TAKEN, for the worker that wins it.
    pub fn take(&self) -> bool {
        self.state()
            .compare_exchange(PENDING, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Lends the slot's fields to `f`. The caller owns the slot by the
    /// protocol: its requester while it is FREE or DONE, the worker that
    /// took it while it is TAKEN (or any process under the mailbox's lock
    /// failing a dead worker's slots, which no one else then touches), and
    /// `f` does not reach the same slot again.
    pub fn with<T>(&self, f: impl FnOnce(&mut Slot) -> T) -> T {
        // SAFETY: the ownership above makes this the only reference to the
        // slot's fields in any process for the length of `f`.
        f(unsafe { &mut *self.slot })
    }

    /// Publishes the outcome and wakes the requester.
    pub fn finish(&self, outcome: Outcome) {
        let requester = self.with(|s| {
            s.outcome = outcome;
            s.requester
        });
        self.store(DONE);
        if !requester.is_null() {
            // SAFETY: the requester's latch is its PGPROC's, which lives as long
            // as shared memory; setting a latch of an exited process is harmless.
            unsafe { pg_sys::SetLatch(requester) };
        }
    }
}
