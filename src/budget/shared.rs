//! The shared-memory mailbox between releasing processes and the ledger
//! workers: one request slot per PGPROC, and a table of running workers
//! (one per database).

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

    pub fn get(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

#[repr(C)]
pub struct Slot {
    pub state: AtomicU32,
    pub database: pg_sys::Oid,
    pub role: pg_sys::Oid,
    pub pid: i32,
    /// The worker that took it, so its exit can fail what it held.
    pub taker: i32,
    pub requester: *mut pg_sys::Latch,
    pub releases: i64,
    pub outcome: Outcome,
    pub strict: bool,
    pub epsilon: Text<40>,
    pub delta: Text<40>,
    pub mechanism: Text<48>,
    pub statement: Text<1024>,
    pub remaining_epsilon: Text<64>,
    pub remaining_delta: Text<64>,
    pub message: Text<256>,
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
        matches!(self.state, WorkerState::Starting | WorkerState::Running) && self.database == database
    }
}

#[repr(C)]
pub struct Header {
    pub lock: *mut pg_sys::LWLock,
    pub slot_count: usize,
    pub workers: [WorkerEntry; MAX_DATABASES],
}

const NAME: &CStr = c"dpnoise ledger";

static mut SHARED: *mut Header = std::ptr::null_mut();
static mut PREV_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_STARTUP: pg_sys::shmem_startup_hook_type = None;

fn size() -> usize {
    let slots = unsafe { pg_sys::MaxBackends } as usize;
    std::mem::size_of::<Header>() + slots * std::mem::size_of::<Slot>()
}

/// Installs the hooks; only from `shared_preload_libraries`.
pub fn init() {
    unsafe {
        if !pg_sys::process_shared_preload_libraries_in_progress {
            return;
        }
        PREV_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request);
        PREV_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(startup);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn request() {
    unsafe {
        if let Some(prev) = PREV_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(size());
        pg_sys::RequestNamedLWLockTranche(NAME.as_ptr(), 1);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn startup() {
    unsafe {
        if let Some(prev) = PREV_STARTUP {
            prev();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let header = pg_sys::ShmemInitStruct(NAME.as_ptr(), size(), &mut found) as *mut Header;
        if !found {
            std::ptr::write_bytes(header as *mut u8, 0, size());
            (*header).lock = &raw mut (*pg_sys::GetNamedLWLockTranche(NAME.as_ptr())).lock;
            (*header).slot_count = pg_sys::MaxBackends as usize;
        }
        SHARED = header;
        pg_sys::LWLockRelease(init_lock);
    }
}

/// The mailbox, or None when dpnoise was not preloaded.
pub fn header() -> Option<&'static mut Header> {
    unsafe { SHARED.as_mut() }
}

impl Header {
    pub fn slot(&mut self, index: usize) -> Option<&mut Slot> {
        if index >= self.slot_count {
            return None;
        }
        unsafe {
            let first = (self as *mut Header).add(1) as *mut Slot;
            Some(&mut *first.add(index))
        }
    }

    pub fn slots(&mut self) -> impl Iterator<Item = &mut Slot> {
        let first = unsafe { (self as *mut Header).add(1) as *mut Slot };
        (0..self.slot_count).map(move |i| unsafe { &mut *first.add(i) })
    }

    /// Runs `f` holding the mailbox lock exclusively.
    pub fn locked<T>(&mut self, f: impl FnOnce(&mut Header) -> T) -> T {
        unsafe {
            pg_sys::LWLockAcquire(self.lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let out = f(self);
            pg_sys::LWLockRelease(self.lock);
            out
        }
    }
}

impl Slot {
    pub fn load(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    pub fn store(&self, state: u32) {
        self.state.store(state, Ordering::Release)
    }

    /// PENDING → TAKEN, for the worker that wins it.
    pub fn take(&self) -> bool {
        self.state.compare_exchange(PENDING, TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Publishes the outcome and wakes the requester.
    pub fn finish(&mut self, outcome: Outcome) {
        self.outcome = outcome;
        self.store(DONE);
        if !self.requester.is_null() {
            unsafe { pg_sys::SetLatch(self.requester) };
        }
    }
}
