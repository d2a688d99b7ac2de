//! What a call site of a dpnoise function keeps for one execution of its
//! query (`flinfo->fn_extra`): what it has paid for, its last plan, and
//! whether its privacy parameters were found fixed. The budget reads and
//! writes the coverage; this module knows nothing of the budget.

use pgrx::pg_sys;

/// Grouping sets a call site remembers having paid for; past this many,
/// every further set pays again (never less than its plan paid).
const REMEMBERED_SETS: usize = 16;

/// What a call site has paid for in the current statement, and for which
/// role: a role switched mid-statement (`set_config('role', …)` in the
/// select list) pays for itself.
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Paid {
    /// The role whose payment this is (`GetOuterUserId`).
    role: pg_sys::Oid,
    /// The (ε, δ) paid at this call site; later releases of the same set
    /// are covered by it.
    epsilon: f64,
    delta: f64,
    /// The top-level statement the coverage belongs to (`execution::statement`).
    statement: u64,
    /// The grouping sets paid for in the current scan (`set_key`).
    sets: [u32; REMEMBERED_SETS],
    paid_sets: u8,
    /// A rescan callback is registered.
    watching: bool,
    /// The call site's node was rescanned in this execution.
    rescanned: bool,
}

impl Paid {
    pub fn covers(
        &self,
        role: pg_sys::Oid,
        statement: u64,
        set: u32,
        epsilon: f64,
        delta: f64,
    ) -> bool {
        self.role == role
            && self.statement == statement
            && epsilon <= self.epsilon
            && delta <= self.delta
            && self.sets[..self.paid_sets as usize].contains(&set)
    }

    pub fn record(
        &mut self,
        role: pg_sys::Oid,
        statement: u64,
        set: u32,
        epsilon: f64,
        delta: f64,
    ) {
        if self.role != role
            || self.statement != statement
            || self.epsilon != epsilon
            || self.delta != delta
        {
            self.paid_sets = 0;
        }
        (self.role, self.statement, self.epsilon, self.delta) = (role, statement, epsilon, delta);
        if (self.paid_sets as usize) < REMEMBERED_SETS {
            self.sets[self.paid_sets as usize] = set;
            self.paid_sets += 1;
        }
    }

    /// A rescan callback is registered for this coverage.
    pub fn watching(&self) -> bool {
        self.watching
    }

    pub fn set_watching(&mut self, watching: bool) {
        self.watching = watching;
    }

    /// The call site's node was rescanned: every set pays again.
    pub fn forget(&mut self) {
        self.paid_sets = 0;
        self.watching = false;
        self.rescanned = true;
    }

    /// Whether the call site's node was rescanned in this execution.
    pub fn rescanned(&self) -> bool {
        self.rescanned
    }
}

/// What `flinfo->fn_extra` holds for our functions: the call site's
/// payment state (budget) and its calibration cache. It lives in the
/// function's memory context, so exactly as long as one execution of the
/// query: a new execution starts unpaid and uncalibrated.
#[repr(C)]
pub struct CallSite {
    paid: Paid,
    cache: *mut u8,
    /// The call's privacy parameters were found fixed (`parameters`).
    pub checked: bool,
    /// The release's identity was looked up (`repeat::identity`): found
    /// (`identified`) or not.
    pub identity_known: bool,
    pub identified: bool,
    pub identity: [u8; 32],
    pub identity_paid: bool,
    /// The fingerprint of the call's text parameters (a per-row function's
    /// mechanism and loss), once read: they are fixed for the execution
    /// (`parameters`), so later rows need not detoast and hash them again.
    pub texts: Option<u64>,
}

impl CallSite {
    pub fn paid(&mut self) -> &mut Paid {
        &mut self.paid
    }
}

/// This call site's state, created on first use (zeroed: nothing paid,
/// nothing cached).
///
/// # Safety
/// `fcinfo` is a live call of a dpnoise function (whose `fn_extra` only
/// this module sets). The reference must not outlive the call, and no
/// other reference to the same call site may be held meanwhile.
#[inline]
pub unsafe fn call_site<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a mut CallSite {
    // SAFETY: the caller's contract; fn_extra is null or the CallSite made here,
    // in fn_mcxt, which lives as long as this execution of the query.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            let site =
                pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, std::mem::size_of::<CallSite>())
                    as *mut CallSite;
            (*flinfo).fn_extra = site.cast();
        }
        &mut *((*flinfo).fn_extra as *mut CallSite)
    }
}

/// Per-call-site calibration cache, keyed by the raw bits of the privacy
/// parameters (texts by `text_fingerprint`: a collision could only swap one
/// mechanism for another at the same exact ε, δ and sensitivity, which
/// costs accuracy, never privacy).
///
/// The entry is returned by reference: a per-row function's plan is 192
/// bytes, which a copy per row would move again.
///
/// # Safety
/// `fcinfo` is a live call of a dpnoise function, and every use of one call
/// site's cache is with the same `T`. The reference must not outlive the
/// call, nor be held across another `call_site_cache` of the same call
/// site (which may overwrite the entry).
#[inline]
pub unsafe fn call_site_cache<'a, T: Copy>(
    fcinfo: pg_sys::FunctionCallInfo,
    key: [u64; 5],
    build: impl FnOnce() -> T,
) -> &'a T {
    #[derive(Clone, Copy)]
    struct Entry<T> {
        key: [u64; 5],
        value: T,
    }
    // SAFETY: the caller's contract; the entry is allocated (aligned by hand) in
    // fn_mcxt on first use and only ever holds an Entry<T>.
    unsafe {
        let site = call_site(fcinfo);
        let slot = site.cache as *mut Entry<T>;
        // Compared word by word, without a call: this runs for every row.
        if !slot.is_null()
            && (*slot)
                .key
                .iter()
                .zip(&key)
                .fold(0, |d, (a, b)| d | (a ^ b))
                == 0
        {
            return &(*slot).value;
        }
        let value = build();
        let slot = if slot.is_null() {
            // palloc aligns to 8 bytes; u128 fields need 16, so over-allocate and align.
            let align = std::mem::align_of::<Entry<T>>();
            let flinfo = (*fcinfo).flinfo;
            let raw = pg_sys::MemoryContextAlloc(
                (*flinfo).fn_mcxt,
                std::mem::size_of::<Entry<T>>() + align,
            ) as *mut u8;
            let p = raw.add(raw.align_offset(align));
            site.cache = p;
            p as *mut Entry<T>
        } else {
            slot
        };
        slot.write(Entry { key, value });
        &(*slot).value
    }
}

/// FNV-1a of a text parameter, never 0 (0 means "no such argument").
pub fn text_fingerprint(text: &str) -> u64 {
    let h = text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    h.max(1)
}
