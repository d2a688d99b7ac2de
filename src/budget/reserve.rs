//! `dpnoise.charge_ahead`: a session's reservation of budget.
//!
//! A session whose `dpnoise.charge_ahead` is N > 1 reserves N times the
//! (ε, δ) of its first charge in one ledger entry, and draws its later
//! charges of any amount from what is left, exactly (in decimal, as the
//! ledger adds up), without asking the ledger: one round trip and one
//! commit per N statements. A charge the reservation cannot cover gives
//! back what is left and reserves again. The reservation is one role's:
//! another role's charge goes to the ledger. What is left is given back
//! when the session ends (posted to the ledger worker as the backend
//! exits, not waited for); a crash keeps it charged, which is safe. A
//! change to any budget (a grant, a revoke, the global cap) makes every
//! session's reservation stale at its next charge: it is given back and
//! the ledger is asked again, under the budget as it now is.
//!
//! Releases that carry identities (`repeat`) always go to the ledger,
//! which records them.

use super::client::{ask, decimals, post_on_exit};
use super::session::{self, numeric};
use super::shared::Outcome;
use super::Charge;
use crate::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::AnyNumeric;
use std::cell::{Cell, RefCell};

/// What a session reserved and has not drawn yet: `units` times the
/// amounts (ε, δ, ρ, ρ's δ: `Charge`) of the charge that made it (`unit`,
/// exact decimals; drawn by a compare and a decrement, the usual case of a
/// statement run again), plus `rest`.
struct Reservation {
    role: pg_sys::Oid,
    unit: [String; 4],
    units: u64,
    rest: [String; 4],
    /// dpnoise.budget, whose invalidation (`dp_budget_changed`) makes it stale.
    budget_table: pg_sys::Oid,
    stale: bool,
}

thread_local! {
    static RESERVED: RefCell<Option<Reservation>> = const { RefCell::new(None) };
    static EXIT_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// The mechanism named on a reservation and on what is given back of it.
const RESERVED_NAME: &str = "reserved by the session (dpnoise.charge_ahead)";
const GIVEN_BACK: &str = "reserved by the session, given back";

/// Draws `request` (positive, without identities) from `role`'s
/// reservation, reserving first if the session charges ahead and has none
/// that covers it. False: the request must go to the ledger itself.
pub(super) fn draw(role: pg_sys::Oid, request: &Charge) -> bool {
    let ahead = gucs::charge_ahead();
    // SAFETY: a by-value read of ParallelWorkerNumber, -1 outside a parallel worker.
    if ahead <= 1 || unsafe { pg_sys::ParallelWorkerNumber } >= 0 {
        give_back(role);
        return false;
    }
    let amounts = decimals(request);
    let unit = (request.releases == 1).then(|| amounts.clone());
    // This charge in all: each amount times its releases.
    let releases = AnyNumeric::from(request.releases);
    let cost: [AnyNumeric; 4] = std::array::from_fn(|i| numeric(&amounts[i]) * releases.clone());
    let drawn = RESERVED.with(|r| {
        let mut r = r.borrow_mut();
        let Some(held) = r.as_mut().filter(|h| !h.stale && h.role == role) else {
            return false;
        };
        if held.units > 0 && unit.as_ref() == Some(&held.unit) {
            held.units -= 1;
            return true;
        }
        let left = held.left().map(|a| numeric(&a));
        if cost.iter().zip(&left).any(|(c, l)| c > l) {
            return false;
        }
        held.units = 0;
        held.rest = std::array::from_fn(|i| (left[i].clone() - cost[i].clone()).to_string());
        true
    });
    if drawn {
        return true;
    }
    give_back(role);
    // N times this charge, as far as the session's caps have room.
    let n = AnyNumeric::from(ahead as i64);
    let whole: [String; 4] = std::array::from_fn(|i| (cost[i].clone() * n.clone()).to_string());
    if !session::has_room(&whole[0], &whole[1], 1) {
        return false;
    }
    let times = request.releases as f64 * ahead as f64;
    let reservation = Charge {
        mechanism: RESERVED_NAME,
        epsilon: request.epsilon * times,
        delta: request.delta * times,
        rho: request.rho * times,
        rho_delta: request.rho_delta * times,
        releases: 1,
        exact: Some(whole.clone()),
        identities: &[],
        repeat: false,
        // Drawn on later whatever the tables: charged to all of them.
        tables: None,
    };
    // SAFETY: called while a release is charged, inside its transaction.
    let budget_table = unsafe { budget_table() };
    let answer = ask(&reservation);
    if answer.outcome != Outcome::Granted {
        // Refused: the budget may cover this charge alone. Failed: asking
        // again says so.
        return false;
    }
    on_exit_give_back();
    let held = match unit {
        Some(unit) => Reservation {
            role,
            unit,
            units: ahead - 1,
            rest: std::array::from_fn(|_| "0".into()),
            budget_table,
            stale: false,
        },
        None => Reservation {
            role,
            unit: amounts,
            units: 0,
            rest: std::array::from_fn(|i| (numeric(&whole[i]) - cost[i].clone()).to_string()),
            budget_table,
            stale: false,
        },
    };
    RESERVED.with(|r| *r.borrow_mut() = Some(held));
    true
}

impl Reservation {
    /// What is left in all, as exact decimals.
    fn left(&self) -> [String; 4] {
        if self.units == 0 {
            return self.rest.clone();
        }
        let units = AnyNumeric::from(self.units as i64);
        std::array::from_fn(|i| {
            (numeric(&self.unit[i]) * units.clone() + numeric(&self.rest[i])).to_string()
        })
    }

    /// The charge that gives back what is left: `units` releases at the
    /// unit, or (units being 0) the rest in one.
    fn returned(&self) -> Charge<'static> {
        let (amounts, releases) = if self.units > 0 {
            (self.unit.clone(), -(self.units as i64))
        } else {
            (self.rest.clone(), -1)
        };
        let float = |i: usize| amounts[i].parse().unwrap_or(0.0);
        Charge {
            mechanism: GIVEN_BACK,
            epsilon: float(0),
            delta: float(1),
            rho: float(2),
            rho_delta: float(3),
            releases,
            exact: Some(amounts),
            identities: &[],
            repeat: false,
            tables: None,
        }
    }

    /// Whether nothing is left to give back.
    fn empty(&self) -> bool {
        let zero = AnyNumeric::from(0);
        self.units == 0 && self.rest.iter().all(|a| numeric(a) == zero)
    }
}

/// Gives back what is left of the session's reservation, waiting for the
/// ledger, if it is `role`'s (the role that pays now); another role's is
/// dropped, charged.
fn give_back(role: pg_sys::Oid) {
    let Some(held) = RESERVED.with(|r| r.borrow_mut().take()) else {
        return;
    };
    if held.role != role || held.empty() {
        return;
    }
    // Refused (the budget was revoked meanwhile): it stays charged.
    ask(&held.returned());
}

/// Registers the relcache callback that makes reservations stale; once per process, from _PG_init.
pub(super) fn init() {
    // SAFETY: from _PG_init, on the process's only thread, once; the callback has the relcache
    // callback's signature and lives in this library, which is never unloaded.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(budget_invalidated), pg_sys::Datum::from(0usize))
    };
}

/// # Safety
/// Called by PostgreSQL's invalidation processing as a relcache callback; it reads no catalog.
unsafe extern "C-unwind" fn budget_invalidated(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    RESERVED.with(|r| {
        // try_borrow_mut: an invalidation processed while a draw holds it
        // (none reads the catalog then) finds it borrowed; never panic here.
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(held) = r.as_mut() {
                // InvalidOid: every entry (a cache reset), this one among them.
                if relid == pg_sys::InvalidOid
                    || relid == held.budget_table
                    || held.budget_table == pg_sys::InvalidOid
                {
                    held.stale = true;
                }
            }
        }
    });
}

/// Tells every session, at commit, that a budget changed: sessions holding
/// a reservation give it back and ask the ledger again. Called by
/// dp_budget_grant, dp_budget_revoke and dp_budget_set_global.
#[pg_extern(volatile, parallel_unsafe)]
fn dp_budget_changed() {
    // SAFETY: a catalog lookup by name inside the caller's transaction, then a queued
    // invalidation of that one relcache entry, sent to every backend at commit.
    unsafe {
        let table = budget_table();
        if table != pg_sys::InvalidOid {
            pg_sys::CacheInvalidateRelcacheByRelid(table);
        }
    }
}

/// dpnoise.budget's OID (InvalidOid if there is none).
///
/// # Safety
/// Inside a transaction.
unsafe fn budget_table() -> pg_sys::Oid {
    // SAFETY: syscache lookups by name inside a transaction (the caller's contract); missing_ok.
    unsafe {
        let schema = pg_sys::get_namespace_oid(c"dpnoise".as_ptr(), true);
        if schema == pg_sys::InvalidOid {
            return pg_sys::InvalidOid;
        }
        pg_sys::get_relname_relid(c"budget".as_ptr(), schema)
    }
}

/// # Safety
/// Only for PostgreSQL's exit machinery (registered with before_shmem_exit): shared memory is
/// still attached; `_arg` is never read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn give_back_on_exit(_code: i32, _arg: pg_sys::Datum) {
    if let Some(held) = RESERVED.with(|r| r.try_borrow_mut().ok().and_then(|mut r| r.take())) {
        post_on_exit(held.role, &held.returned());
    }
}

/// Registers `give_back_on_exit`, once per process.
fn on_exit_give_back() {
    if !EXIT_REGISTERED.with(|r| r.replace(true)) {
        // SAFETY: once per process, from a backend running a query; the callback has the
        // pg_on_exit_callback signature and lives in this library, loaded until the process exits.
        unsafe { pg_sys::before_shmem_exit(Some(give_back_on_exit), pg_sys::Datum::from(0usize)) };
    }
}
