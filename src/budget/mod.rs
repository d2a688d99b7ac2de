//! The privacy budget: every release is charged before it is computed.
//!
//! One way to charge, for every role. As a statement's execution starts,
//! the charge stage (src/charge.rs) reads its plan, costs every release it
//! can make (each aggregate call site × grouping set, each per-row call
//! site) and charges the sum once ([`prepay`]): what a statement is
//! charged depends on its plan and parameters, never on its data. The
//! final and per-row functions then only check that their call site is
//! covered ([`pay`]). A call site pays again, as it releases
//! ([`pay`]'s lazy charge), only where no plan shows its releases in
//! advance: a rescan (a correlated subquery run once per outer row), a
//! PL/pgSQL simple expression or a trigger's, evaluated without an
//! executor start.
//!
//! A charge is a request to the database's ledger worker (client.rs), which
//! commits it in a transaction of its own before it answers: nothing the
//! caller does afterwards (ROLLBACK, an error, a crash) takes it back.
//! docs/budget.md has the whole argument.
//!
//! The budget imports nothing above it: callers hand it the statement, the
//! release's identity and what the plan said.

mod accountant;
mod client;
mod coverage;
mod nodes;
mod reserve;
mod session;
mod shared;
pub mod worker;

use crate::gucs;
use pgrx::pg_sys;

pub use client::request_compaction;
pub use coverage::{aborted, ended, set_cap_source, spent, Site};
pub use nodes::children as plan_children;

// The budget's schema, tables, functions and views.
pgrx::extension_sql_file!(
    "schema.sql",
    name = "budget_sql",
    requires = [
        reserve::dp_budget_changed,
        accountant::dp_zcdp_rho,
        accountant::dp_zcdp_epsilon,
        accountant::dp_zcdp_gaussian_epsilon
    ]
);

/// Registers the pool of ledger workers; only from shared_preload_libraries.
pub fn init() {
    reserve::init();
    shared::init();
    worker::register_pool();
}

/// Publishes this session's entry for dp_sessions if its role or caps
/// changed (each statement, as it is planned).
pub fn touch_session() {
    session::touch();
}

/// One charge request: `releases` releases at (ε, δ) each under the
/// additive accountant, (ρ, δ) each under zero-concentrated DP
/// (`dpnoise_core::zcdp`): the ledger charges the one the role's budget
/// keeps, and records both.
pub struct Charge<'a> {
    pub mechanism: &'a str,
    pub epsilon: f64,
    pub delta: f64,
    /// ρ, and the δ carried beside it by releases with no finite ρ.
    pub rho: f64,
    pub rho_delta: f64,
    pub releases: i64,
    /// (ε, δ, ρ, ρ's δ) as exact decimals, when the f64s above are rounded sums.
    pub exact: Option<[String; 4]>,
    /// The identities of the releases it pays for once and for all
    /// (`repeat`); the ledger records them (past `shared::IDENTITIES`, they
    /// are charged and not recorded).
    pub identities: &'a [[u8; 32]],
    /// Granted free if every one of `identities` was paid before.
    pub repeat: bool,
    /// The tables the statement reads, for the role's budgets on tables
    /// (`dpnoise.table_budgets`); None: not known, charged to every one.
    pub tables: Option<Vec<pg_sys::Oid>>,
}

/// A release that can be answered again (`repeat`): its identity, and
/// whether it was paid for before its statement started.
#[derive(Clone, Copy)]
pub struct Identified {
    pub identity: [u8; 32],
    pub paid: bool,
}

/// Charges the current role (`GetOuterUserId`: the role SET ROLE chose,
/// not a SECURITY DEFINER function's owner) and returns once the charge is
/// committed, or drawn from the session's reservation (`charge_ahead`).
/// Raises ZB001 when the budget does not cover it and ZB002 when the
/// ledger cannot be reached; either way nothing was charged (or, if the
/// worker died after committing, charged and not released).
pub fn charge(request: &Charge) {
    if request.identities.is_empty() && request.releases > 0 && reserve::draw(outer_user(), request)
    {
        return;
    }
    client::charge_ledger(request)
}

/// Charges a statement's planned releases (`sites`, each paid at its own
/// (ε, δ)) as one ledger entry of (`epsilon`, `delta`) in all, and covers
/// them for the execution `estate`. `cap`: the most ε the statement may
/// spend in all, lazy charges included (0: none); `refused` raises its
/// refusal. Nothing is charged when every site is free.
pub fn prepay(estate: *mut pg_sys::EState, sites: Vec<Site>, request: &Charge, cap: Option<Cap>) {
    if !gucs::enforce_budget() {
        return;
    }
    if request.releases > 0 {
        charge(request);
    }
    coverage::prepaid(
        estate,
        sites,
        crate::execution::statement(),
        request.epsilon,
        cap,
    );
}

/// What one statement may spend in all (an analyst's
/// `dpnoise.max_epsilon_per_query`), and how a release over it is refused.
#[derive(Clone, Copy)]
pub struct Cap {
    pub epsilon: f64,
    pub refuse: fn(spent: f64, cap: f64) -> !,
}

/// Pays for one release at a call site: covered if the statement's plan
/// paid for it (or it was paid for once and for all, `identified`), else
/// charged now. Call it after every parameter is checked and before any
/// noise is drawn.
///
/// A call site is covered once per top-level statement and per grouping
/// set, however many groups or rows it releases (parallel composition over
/// disjoint groups and rows), and again when its node is rescanned (a
/// rescan releases the same individuals again).
///
/// # Safety
/// `fcinfo` is the live call of a dpnoise final or per-row function.
#[inline(always)]
pub unsafe fn pay(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    mechanism: &str,
    (epsilon, delta): (f64, f64),
    identified: Option<Identified>,
) {
    crate::extensions::refuse_on_worker();
    if !gucs::enforce_budget() {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { coverage::pay(fcinfo, function, mechanism, (epsilon, delta), identified) }
}

/// The current role (the one charged): PostgreSQL's GetOuterUserId,
/// called directly. It returns a variable and raises nothing, so it needs
/// no error guard; pgrx's (a sigsetjmp per call) cost a tenth of a
/// per-row release with the budget enforced.
#[inline]
pub(crate) fn outer_user() -> pg_sys::Oid {
    unsafe extern "C" {
        // SAFETY: the prototype of Oid GetOuterUserId(void) in miscadmin.h.
        fn GetOuterUserId() -> pg_sys::Oid;
    }
    // SAFETY: a read of a backend variable set when the session started; no error is raised.
    unsafe { GetOuterUserId() }
}
