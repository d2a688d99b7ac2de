//! Cancellation for long loops. The core knows nothing of PostgreSQL: the
//! SQL layer installs, once, a function that runs PostgreSQL's
//! CHECK_FOR_INTERRUPTS, which may unwind (panic) out of the loop. Loops
//! that call `check` hold no lock and no half-updated shared state, so an
//! unwind there leaves nothing behind. Without an installed check (plain
//! `cargo test`), `check` does nothing.

use std::sync::OnceLock;

static CHECK: OnceLock<fn()> = OnceLock::new();

/// Installs the interrupt check; later calls are ignored.
pub fn set_check(check: fn()) {
    let _ = CHECK.set(check);
}

/// Runs the installed check, if any.
#[inline]
pub fn check() {
    if let Some(check) = CHECK.get() {
        check();
    }
}
