//! dpnoise: differential privacy inside PostgreSQL.
//!
//! This crate is the SQL surface only: the mechanisms, samplers and their
//! math live in `dpnoise-core`. Hot paths (aggregate transitions, per-row
//! noise) are plain V1 C functions declared in each module's `.sql` file, so a row
//! costs what PostgreSQL's own `count` and `sum` cost.

// Every unsafe operation sits in an unsafe block that says why it is sound
// (scripts/test.sh runs clippy with these denied, and checks that every
// unsafe fn has a `# Safety` section).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

use pgrx::prelude::*;

::pgrx::pg_module_magic!(name, version);

mod aggref;
mod budget;
mod call_site;
mod charge;
mod citus;
mod count;
mod errors;
mod execution;
mod extensions;
mod fmgr;
mod functions;
mod gate;
mod gucs;
mod hints;
mod hooks;
mod moments;
mod multi;
mod output;
mod parameters;
mod per_person;
mod person_sum;
mod pg_list;
mod plans;
mod quantile;
mod refine;
mod release;
mod repeat;
mod rng;
mod row_noise;
mod seal;
mod selection;
mod shmem;
mod sum;
mod total;
mod versions;

// Each feature's hand-written SQL sits beside its module; this runs last.
pgrx::extension_sql_file!("finalize.sql", name = "finalize", finalize);

/// PostgreSQL's CHECK_FOR_INTERRUPTS: a flag read, and when a cancel or a
/// timeout is pending, its error (which unwinds out of the core's loop).
fn check_for_interrupts() {
    pgrx::check_for_interrupts!();
}

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // The core's long loops (γ searches, figure sums, samplers' retries)
    // call this: a cancel or a statement timeout ends them within a moment.
    dpnoise_core::interrupt::set_check(check_for_interrupts);
    // An error's DETAIL goes to the client: no Rust backtrace in it, even
    // when the server was started with RUST_BACKTRACE set (set
    // RUST_LIB_BACKTRACE=1 to have them). Only while the postmaster loads
    // the library, single-threaded, before anything reads the variable.
    // SAFETY: process_shared_preload_libraries_in_progress is a plain flag of this process.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress }
        && std::env::var_os("RUST_LIB_BACKTRACE").is_none()
    {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    gucs::init();
    extensions::init();
    budget::init();
    repeat::init_store();
    gate::init();
    hooks::init();
    hints::init();
}

#[cfg(any(test, feature = "pg_test"))]
mod backend_tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        // The backend tests run inside transactions that are rolled back, where
        // no grant could reach the ledger worker; the budget has its own
        // tests in tests/pg_regress (budget*.sql) and scripts/budget_crash.sh.
        vec![
            "shared_preload_libraries = 'dpnoise'",
            "dpnoise.enforce_budget = off",
        ]
    }
}
