//! Long loops call the installed interrupt check, so a cancel (which the SQL
//! layer raises from it) stops them: with a check that panics, as
//! PostgreSQL's error unwinds, each long computation below stops.
//! Negative control: with no pending interrupt they all finish.

use dpnoise_core::multivariate::{l1_staircase_gamma, BoxPlan};
use dpnoise_core::{Choice, Delta, Epsilon, Loss, Plan, Sensitivity, Shape};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static PENDING: AtomicBool = AtomicBool::new(false);
static CHECKS: AtomicUsize = AtomicUsize::new(0);

fn check() {
    CHECKS.fetch_add(1, Ordering::Relaxed);
    if PENDING.load(Ordering::Relaxed) {
        panic!("cancelled");
    }
}

fn long_computations() -> Vec<(&'static str, Box<dyn Fn()>)> {
    vec![
        (
            "box noise's default inner half-widths and figures",
            Box::new(|| {
                let plan = BoxPlan::new(Epsilon::new(0.01).unwrap(), &[1.0; 8], None).unwrap();
                plan.accuracy(&[0.95]).unwrap();
            }),
        ),
        (
            "the staircase's γ for the shortest interval",
            Box::new(|| {
                let plan = Plan::new(
                    Choice::parse("staircase").unwrap(),
                    Epsilon::new(0.3).unwrap(),
                    Delta::ZERO,
                    Loss::Interval(0.97),
                    Shape::Value(Sensitivity::new(1.0).unwrap()),
                );
                plan.unwrap().accuracy(0.97);
            }),
        ),
        (
            "the 2-D staircase's γ",
            Box::new(|| {
                l1_staircase_gamma(0.7);
            }),
        ),
    ]
}

#[test]
fn long_loops_stop_on_a_pending_interrupt() {
    dpnoise_core::interrupt::set_check(check);
    // Nothing pending: every computation finishes, having checked.
    for (name, run) in long_computations() {
        let before = CHECKS.load(Ordering::Relaxed);
        run();
        assert!(
            CHECKS.load(Ordering::Relaxed) > before,
            "{name} never checked for interrupts"
        );
    }
    // Pending: every computation stops at its first check.
    PENDING.store(true, Ordering::Relaxed);
    for (name, run) in long_computations() {
        let stopped = catch_unwind(AssertUnwindSafe(|| run())).is_err();
        assert!(stopped, "{name} ran to the end with an interrupt pending");
    }
    PENDING.store(false, Ordering::Relaxed);
}
