//! A cap on what one connection spends: `dpnoise.max_epsilon_per_session`
//! and `dpnoise.max_delta_per_session`, superuser-only settings a DBA sets
//! per role or database (`ALTER ROLE ... SET`), so every connection of a
//! shared role (a BI service account, a pool) starts with it and cannot
//! raise it: SET, RESET and connection options of a superuser-only setting
//! are refused to other roles.
//!
//! The session's spending is added up exactly, in decimal (as the ledger
//! does): a cap of 0.3 admits three releases of 0.1. It counts what was
//! charged (a ROLLBACK refunds nothing), and a release the cap would pass
//! is refused with ZB001 before anything is charged.

use crate::errors::{raise_sqlstate, BUDGET_EXHAUSTED};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::AnyNumeric;
use std::cell::RefCell;

static MAX_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static MAX_DELTA: GucSetting<f64> = GucSetting::<f64>::new(0.0);

thread_local! {
    /// (ε, δ) this session was charged, as exact decimals.
    static SPENT: RefCell<(String, String)> = RefCell::new(("0".to_owned(), "0".to_owned()));
}

pub fn init() {
    GucRegistry::define_float_guc(
        c"dpnoise.max_epsilon_per_session",
        c"The most epsilon one connection may spend (0: no cap).",
        c"Set by a superuser, per role or database (ALTER ROLE ... SET); a session cannot raise it.",
        &MAX_EPSILON,
        0.0,
        1e9,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.max_delta_per_session",
        c"The most delta one connection may spend (0: no cap).",
        c"Set by a superuser, per role or database (ALTER ROLE ... SET); a session cannot raise it.",
        &MAX_DELTA,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );
}

fn numeric(decimal: &str) -> AnyNumeric {
    AnyNumeric::try_from(decimal).unwrap_or_else(|_| pgrx::error!("dpnoise: {decimal} is not a decimal (internal error)"))
}

/// What the session will have spent after a charge of (ε, δ) each for
/// `releases` releases (decimals), refused with ZB001 if that passes a cap.
/// Nothing is recorded: `spent` does, once the charge is granted.
pub fn check(epsilon: &str, delta: &str, releases: i64) -> (String, String) {
    let (spent_epsilon, spent_delta) = SPENT.with(|s| s.borrow().clone());
    let times = AnyNumeric::from(releases);
    let after_epsilon = numeric(&spent_epsilon) + numeric(epsilon) * times.clone();
    let after_delta = numeric(&spent_delta) + numeric(delta) * times;
    for (name, cap, spent, after) in
        [("epsilon", MAX_EPSILON.get(), &spent_epsilon, &after_epsilon), ("delta", MAX_DELTA.get(), &spent_delta, &after_delta)]
    {
        let cap_decimal = dpnoise_core::rational::decimal(cap);
        if cap > 0.0 && *after > numeric(&cap_decimal) {
            raise_sqlstate(
                BUDGET_EXHAUSTED,
                format!(
                    "dpnoise: this session's cap is reached: the release asks {name} = {}{}; this session has spent {spent} of its cap of {cap_decimal} (dpnoise.max_{name}_per_session)",
                    if name == "epsilon" { epsilon } else { delta },
                    if releases == 1 { String::new() } else { format!(" for each of {releases} releases") },
                ),
                Some("Nothing was released or charged. The cap is per connection, set by the DBA; the role's budget may still have more.".to_owned()),
            );
        }
    }
    (after_epsilon.to_string(), after_delta.to_string())
}

/// Records what the session has spent, once a charge is granted.
pub fn spent(after: (String, String)) {
    SPENT.with(|s| *s.borrow_mut() = after);
}
