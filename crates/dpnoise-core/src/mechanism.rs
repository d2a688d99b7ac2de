//! Dispatch over every univariate noise: one release path serves them all.
//! Each noise lives in its own module and owns its sampler and its law;
//! this module only picks one by name and sets its lattice scale.

use crate::accuracy::Law;
use crate::approximate::{
    analytic_gaussian_sigma, joint_gaussian_sigma_in_steps, DiscreteGaussian, TruncatedLaplace,
    Uniform,
};
use crate::entropy::Entropy;
use crate::laplace::Laplace;
use crate::noise::LatticeNoise;
use crate::params::{Delta, Mechanism};
use crate::rational::Epsilon;
use crate::staircase::{Loss, Staircase};
use crate::Error;

/// The noise scale per unit of sensitivity, which sets the lattice:
/// 1/ε for the Laplace family, 1/(2δ) for uniform, σ₁ for the Gaussian
/// (the analytic Gaussian's σ at sensitivity one).
pub fn scale_ratio(mechanism: Mechanism, epsilon: Epsilon, delta: Delta) -> f64 {
    match mechanism {
        Mechanism::Laplace | Mechanism::Staircase | Mechanism::TruncatedLaplace => {
            1.0 / epsilon.value()
        }
        Mechanism::Uniform => 0.5 / delta.value(),
        Mechanism::Gaussian => analytic_gaussian_sigma(epsilon.value(), delta.value()),
    }
}

/// Any univariate lattice noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    Laplace(Laplace),
    Staircase(Staircase),
    TruncatedLaplace(TruncatedLaplace),
    Uniform(Uniform),
    Gaussian(DiscreteGaussian),
}

impl Noise {
    /// `mechanism` for sensitivity `steps` at (ε, δ); `loss` picks the staircase's γ.
    pub fn new(
        mechanism: Mechanism,
        epsilon: Epsilon,
        delta: Delta,
        steps: u128,
        loss: Loss,
    ) -> Result<Noise, Error> {
        Noise::with_scale(
            mechanism,
            epsilon,
            delta,
            steps,
            loss,
            scale_ratio(mechanism, epsilon, delta),
            1,
        )
    }

    /// As `new`, given `scale_ratio(mechanism, ε, δ)` already computed (the
    /// Gaussian's σ₁ is a search: a plan computes it once). The Gaussian is
    /// calibrated for `groups` releases alike that one person moves by D
    /// steps each, at (ε, δ) together (L2 sensitivity D·√k); the other
    /// mechanisms are given their own group's share.
    pub(crate) fn with_scale(
        mechanism: Mechanism,
        epsilon: Epsilon,
        delta: Delta,
        steps: u128,
        loss: Loss,
        ratio: f64,
        groups: u32,
    ) -> Result<Noise, Error> {
        mechanism.check_delta(delta)?;
        Ok(match mechanism {
            Mechanism::Laplace => Noise::Laplace(Laplace::new(epsilon, steps)?),
            Mechanism::Staircase => {
                Noise::Staircase(Staircase::new(epsilon, steps, loss.gamma(epsilon.value()))?)
            }
            Mechanism::TruncatedLaplace => {
                Noise::TruncatedLaplace(TruncatedLaplace::new(epsilon, steps, delta)?)
            }
            Mechanism::Uniform => Noise::Uniform(Uniform::new(steps, delta)?),
            Mechanism::Gaussian => Noise::Gaussian(DiscreteGaussian::with_sigma(
                joint_gaussian_sigma_in_steps(epsilon, delta, steps, groups, ratio),
            )?),
        })
    }
}

impl LatticeNoise for Noise {
    #[inline]
    fn sample<E: Entropy>(&self, rng: &mut E) -> i128 {
        match self {
            Noise::Laplace(n) => n.sample(rng),
            Noise::Staircase(n) => n.sample(rng),
            Noise::TruncatedLaplace(n) => n.sample(rng),
            Noise::Uniform(n) => n.sample(rng),
            Noise::Gaussian(n) => n.sample(rng),
        }
    }

    fn law(&self) -> Law {
        match self {
            Noise::Laplace(n) => n.law(),
            Noise::Staircase(n) => n.law(),
            Noise::TruncatedLaplace(n) => n.law(),
            Noise::Uniform(n) => n.law(),
            Noise::Gaussian(n) => n.law(),
        }
    }
}
