//! Add-in shared memory, the one way dpnoise asks for it: each area (the
//! ledger's mailbox, the release store) is requested with its named LWLock
//! tranche when the postmaster sets shared memory up, and attached in every
//! process that maps it, zeroed and initialised by the first.

use pgrx::pg_sys;
use std::ffi::CStr;

/// An area: its name (also its LWLock tranche's), its size, how many locks
/// it needs, and what to do once it is mapped (`base`: its first byte;
/// `created`: this process zeroed it and must set it up; `locks`: its tranche).
#[derive(Clone, Copy)]
pub struct Area {
    pub name: &'static CStr,
    pub size: fn() -> usize,
    pub locks: i32,
    pub attach: unsafe fn(base: *mut u8, created: bool, locks: *mut pg_sys::LWLockPadded),
}

// Written only in the postmaster while it loads the library (`register`,
// from _PG_init), before any backend is forked; only read afterwards.
static mut AREAS: Vec<Area> = Vec::new();
static mut PREV_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Asks for `area`; only from `shared_preload_libraries` (without it, the
/// area is never attached). The hooks are installed with the first.
pub fn register(area: Area) {
    // SAFETY: _PG_init runs in the postmaster (single-threaded) while it loads
    // shared_preload_libraries, the only time these hooks may be set; AREAS is
    // written only here, then.
    unsafe {
        if !pg_sys::process_shared_preload_libraries_in_progress {
            return;
        }
        let areas = &mut *(&raw mut AREAS);
        if areas.is_empty() {
            PREV_REQUEST = pg_sys::shmem_request_hook;
            pg_sys::shmem_request_hook = Some(request);
            PREV_STARTUP = pg_sys::shmem_startup_hook;
            pg_sys::shmem_startup_hook = Some(startup);
        }
        areas.push(area);
    }
}

/// # Safety
/// Called by the postmaster as its shmem_request_hook.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn request() {
    // SAFETY: called at shmem_request time, the one point where add-in shared memory and LWLock
    // tranches may be requested; AREAS is only read.
    unsafe {
        if let Some(prev) = PREV_REQUEST {
            prev();
        }
        for area in (*(&raw const AREAS)).iter() {
            pg_sys::RequestAddinShmemSpace((area.size)());
            pg_sys::RequestNamedLWLockTranche(area.name.as_ptr(), area.locks);
        }
    }
}

/// # Safety
/// Called by PostgreSQL as its shmem_startup_hook, in each process that attaches shared memory.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn startup() {
    // SAFETY: AddinShmemInitLock (MainLWLockArray[21]) serialises the first initialisation; each
    // area is size() bytes as requested, zeroed and set up (attach) before the lock is released.
    unsafe {
        if let Some(prev) = PREV_STARTUP {
            prev();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        for area in (*(&raw const AREAS)).iter() {
            let mut found = false;
            let base =
                pg_sys::ShmemInitStruct(area.name.as_ptr(), (area.size)(), &mut found) as *mut u8;
            if !found {
                std::ptr::write_bytes(base, 0, (area.size)());
            }
            let locks = if found {
                std::ptr::null_mut()
            } else {
                pg_sys::GetNamedLWLockTranche(area.name.as_ptr())
            };
            (area.attach)(base, !found, locks);
        }
        pg_sys::LWLockRelease(init_lock);
    }
}
