//! From a query's privacy parameters to the noise it gets, and the release:
//! the one path every univariate release takes (aggregate or per row).
//! The plan fixes the mechanism (the named one, or for `'auto'` the one
//! whose exact expected loss is smallest), the lattice, the sensitivity in
//! steps and the noise; `release` adds one draw to the exact answer.

use crate::accuracy::Accuracy;
use crate::calibration::{Calibration, Shape};
use crate::entropy::Entropy;
use crate::mechanism::{scale_ratio, Noise};
use crate::noise::LatticeNoise;
use crate::params::{Choice, Delta, Mechanism, MECHANISMS};
use crate::rational::Epsilon;
use crate::staircase::Loss;
use crate::Error;

/// Everything a univariate release is planned from, each part already
/// checked: two equal requests give the same plan (the SQL layer keeps
/// plans by request).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub choice: Choice,
    pub epsilon: Epsilon,
    pub delta: Delta,
    pub loss: Loss,
    pub shape: Shape,
    /// How many groups one person may add to, each released with this
    /// request (the gate's bounding, `max_groups_contributed`); ε and δ
    /// are what the k releases spend together. 1: one release.
    pub groups: u32,
}

impl Request {
    pub fn plan(&self) -> Result<Plan, Error> {
        Plan::shared(
            self.choice,
            self.epsilon,
            self.delta,
            self.loss,
            self.shape,
            self.groups,
        )
    }
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
    pub fn new(
        choice: Choice,
        epsilon: Epsilon,
        delta: Delta,
        loss: Loss,
        shape: Shape,
    ) -> Result<Plan, Error> {
        Plan::shared(choice, epsilon, delta, loss, shape, 1)
    }

    /// The plan of each of `groups` releases that one person may each move
    /// by the shape's sensitivity, at (ε, δ) for all of them together. The
    /// Gaussian is calibrated jointly, to the L2 sensitivity Δ·√k with the
    /// whole (ε, δ); the other mechanisms compose linearly, each group
    /// getting `rational::share` of ε and δ (what `dp_share` gives).
    /// `'auto'` ranks them all by each group's error.
    pub fn shared(
        choice: Choice,
        epsilon: Epsilon,
        delta: Delta,
        loss: Loss,
        shape: Shape,
        groups: u32,
    ) -> Result<Plan, Error> {
        let groups = groups.max(1);
        match choice {
            Choice::Fixed(mechanism) => Plan::fixed(mechanism, epsilon, delta, loss, shape, groups),
            Choice::Auto => Plan::least_noisy(epsilon, delta, loss, shape, groups),
        }
    }

    fn fixed(
        mechanism: Mechanism,
        epsilon: Epsilon,
        delta: Delta,
        loss: Loss,
        shape: Shape,
        groups: u32,
    ) -> Result<Plan, Error> {
        mechanism.check_delta(delta)?;
        let (epsilon, delta, groups) = if mechanism == Mechanism::Gaussian || groups == 1 {
            (epsilon, delta, groups)
        } else {
            let share = |total: f64| crate::rational::share(total, groups);
            (
                Epsilon::new(share(epsilon.value()))?,
                Delta::new(share(delta.value()))?,
                1,
            )
        };
        let unit = scale_ratio(mechanism, epsilon, delta);
        let ratio = unit * (groups as f64).sqrt();
        check_integer_noise(shape, ratio, epsilon)?;
        let calibration = Calibration::for_shape(shape, ratio)?;
        let noise = Noise::with_scale(
            mechanism,
            epsilon,
            delta,
            calibration.steps,
            loss,
            unit,
            groups,
        )?;
        Ok(Plan {
            mechanism,
            calibration,
            noise,
        })
    }

    /// Every mechanism that can serve (ε, δ) (pure ones at δ = 0), ranked by
    /// the exact loss of the law each would sample; ties go to the earlier.
    fn least_noisy(
        epsilon: Epsilon,
        delta: Delta,
        loss: Loss,
        shape: Shape,
        groups: u32,
    ) -> Result<Plan, Error> {
        let mut best: Option<(f64, Plan)> = None;
        let mut first_error = None;
        for mechanism in MECHANISMS {
            if mechanism.needs_delta() && delta.is_zero() {
                continue;
            }
            let own_delta = if mechanism.needs_delta() {
                delta
            } else {
                Delta::ZERO
            };
            match Plan::fixed(mechanism, epsilon, own_delta, loss, shape, groups) {
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
        best.map(|(_, plan)| plan)
            .ok_or_else(|| first_error.expect("some mechanism was tried"))
    }

    /// The exact error of this plan's noise, in the query's units.
    pub fn accuracy(&self, confidence: f64) -> Accuracy {
        self.noise
            .law()
            .accuracy_in_steps(confidence)
            .scaled(self.calibration.lattice.granularity())
    }

    /// The float8 release of an exact answer of `true_steps` lattice steps.
    #[inline]
    pub fn release<E: Entropy>(&self, rng: &mut E, true_steps: i128) -> f64 {
        self.calibration.release(&self.noise, rng, true_steps)
    }

    /// The int8 release of an exact answer of `true_steps` lattice steps.
    #[inline]
    pub fn release_integer<E: Entropy>(&self, rng: &mut E, true_steps: i128) -> Result<i64, Error> {
        self.calibration
            .release_integer(&self.noise, rng, true_steps)
    }
}

/// Noise of scale s exceeds 2^63 in magnitude with probability about
/// e^(−2^63/s) for the Laplace family: at s ≥ 2^62 more than one bigint
/// release in eight would not fit, whatever the data. Refused up front.
fn check_integer_noise(shape: Shape, ratio: f64, epsilon: Epsilon) -> Result<(), Error> {
    if let Shape::SumInteger(b) = shape {
        if b.width() * ratio >= 2f64.powi(62) {
            return Err(Error::NoiseTooLarge(format!(
                "a bigint sum with bounds [{}, {}] at epsilon = {} has noise too large for bigint",
                b.lower(),
                b.upper(),
                epsilon.value()
            )));
        }
    }
    Ok(())
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
