//! From a query's privacy parameters to the noise it gets: the named
//! mechanism, or for `'auto'` the one whose exact expected loss (the same
//! figures `dp_accuracy` reports) is smallest.

use crate::accuracy::Accuracy;
use crate::calibration::Calibration;
use crate::mechanism::{Choice, LatticeNoise, Mechanism, Noise, MECHANISMS};
use crate::rational::Epsilon;
use crate::staircase::Loss;
use crate::Error;

/// What is released: sets the sensitivity and the lattice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// A count: the unit lattice, sensitivity one.
    Count,
    /// One value of sensitivity Δ.
    Value(f64),
    /// A sum of float8 values clamped to [lower, upper].
    Sum(f64, f64),
    /// A sum of int8 values clamped to [lower, upper], released as int8.
    SumInteger(i64, i64),
}

/// A release's mechanism, lattice and noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub mechanism: Mechanism,
    pub calibration: Calibration,
    pub noise: Noise,
}

impl Plan {
    /// The plan for `choice` at (ε, δ); `loss` is what `'auto'` minimises
    /// (and the staircase's γ).
    pub fn new(choice: Choice, epsilon: Epsilon, delta: f64, loss: Loss, shape: Shape) -> Result<Plan, Error> {
        if !(delta.is_finite() && (0.0..1.0).contains(&delta)) {
            return Err(Error::invalid("delta", "a number in [0, 1)", delta));
        }
        match choice {
            Choice::Fixed(mechanism) => Plan::fixed(mechanism, epsilon, delta, loss, shape),
            Choice::Auto => Plan::least_noisy(epsilon, delta, loss, shape),
        }
    }

    fn fixed(mechanism: Mechanism, epsilon: Epsilon, delta: f64, loss: Loss, shape: Shape) -> Result<Plan, Error> {
        mechanism.check_delta(delta)?;
        let calibration = Calibration::for_shape(shape, mechanism.scale_ratio(epsilon, delta))?;
        let noise = Noise::new(mechanism, epsilon, delta, calibration.steps, loss)?;
        Ok(Plan { mechanism, calibration, noise })
    }

    /// Every mechanism that can serve (ε, δ) (pure ones at δ = 0), ranked by
    /// the exact loss of the law each would sample; ties go to the earlier.
    fn least_noisy(epsilon: Epsilon, delta: f64, loss: Loss, shape: Shape) -> Result<Plan, Error> {
        let mut best: Option<(f64, Plan)> = None;
        let mut first_error = None;
        for mechanism in MECHANISMS {
            if mechanism.needs_delta() && delta == 0.0 {
                continue;
            }
            let own_delta = if mechanism.needs_delta() { delta } else { 0.0 };
            match Plan::fixed(mechanism, epsilon, own_delta, loss, shape) {
                Ok(plan) => {
                    let score = objective(loss, &plan.accuracy(confidence_of(loss)));
                    if best.as_ref().is_none_or(|(s, _)| score < *s) {
                        best = Some((score, plan));
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        best.map(|(_, plan)| plan).ok_or_else(|| first_error.expect("some mechanism was tried"))
    }

    /// An average's two releases, each at exactly ε/2 (`Epsilon::half`):
    /// a staircase sum clamped to [lower, upper] and a geometric count.
    /// The transition (which picks the sum's lattice on the first row) and
    /// the final function both derive it here, so they cannot disagree.
    pub fn average(epsilon: Epsilon, lower: f64, upper: f64) -> Result<(Plan, Plan), Error> {
        let half = epsilon.half();
        let sum = Plan::fixed(Mechanism::Staircase, half, 0.0, Loss::Variance, Shape::Sum(lower, upper))?;
        let count = Plan::fixed(Mechanism::Laplace, half, 0.0, Loss::Variance, Shape::Count)?;
        Ok((sum, count))
    }

    /// The exact error of this plan's noise, in the query's units.
    pub fn accuracy(&self, confidence: f64) -> Accuracy {
        self.noise.law().accuracy_in_steps(confidence).scaled(self.calibration.lattice.granularity())
    }
}

/// The confidence a loss is judged at (0.95 unless it names one).
pub fn confidence_of(loss: Loss) -> f64 {
    match loss {
        Loss::Interval(c) => c,
        _ => 0.95,
    }
}

/// The figure `loss` asks to minimise.
pub fn objective(loss: Loss, accuracy: &Accuracy) -> f64 {
    match loss {
        Loss::MeanAbsolute => accuracy.mean_abs_error,
        Loss::Variance | Loss::Gamma(_) => accuracy.std_dev,
        Loss::Interval(_) => accuracy.ci_half_width,
    }
}
