//! Noise distributions on the lattice, each with its exact pmf.

use crate::accuracy::{Law, StepLaw};
use crate::approximate::{DiscreteGaussian, TruncatedLaplace, Uniform};
use crate::entropy::Entropy;
use crate::rational::Epsilon;
use crate::sampler::discrete_laplace;
use crate::Error;

/// Noise measured in lattice steps: what every release path adds to the
/// rounded true answer.
pub trait LatticeNoise {
    /// One draw, in lattice steps.
    fn sample<E: Entropy>(&self, rng: &mut E) -> i128;
    /// The law the sampler draws from exactly, for accuracy figures and tests.
    fn law(&self) -> Law;
    /// The probability of `n` steps (as a float, for tests).
    fn pmf(&self, n: i128) -> f64 {
        self.law().pmf(n)
    }
}

/// Two-sided geometric (discrete Laplace): P(n) ∝ e^(−ε·|n|/D) for a
/// sensitivity of D lattice steps (MECHANISMS.md §2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Laplace {
    /// P(n) ∝ e^(−|n|·s/t) with s/t = ε/D exactly.
    s: u128,
    t: u128,
    /// ε/D as a float, for accuracy figures only.
    decay: f64,
}

/// t with s/t = ε/D exactly (s = ε's numerator): the per-step decay of
/// every Laplace-shaped law, for a sensitivity of D = `steps` > 0.
pub fn decay_denominator(epsilon: Epsilon, steps: u128) -> Result<u128, Error> {
    if steps == 0 {
        return Err(Error::invalid("sensitivity", "> 0", 0));
    }
    epsilon
        .den
        .checked_mul(steps)
        .filter(|t| *t < 1u128 << 110)
        .ok_or_else(|| Error::OutOfRange("sensitivity too large for the lattice".into()))
}

impl Laplace {
    /// Laplace noise for sensitivity `steps` lattice steps and privacy loss ε.
    pub fn new(epsilon: Epsilon, steps: u128) -> Result<Laplace, Error> {
        let t = decay_denominator(epsilon, steps)?;
        Ok(Laplace {
            s: epsilon.num,
            t,
            decay: epsilon.value() / steps as f64,
        })
    }
}

impl LatticeNoise for Laplace {
    #[inline]
    fn sample<E: Entropy>(&self, rng: &mut E) -> i128 {
        discrete_laplace(rng, self.s, self.t)
    }

    fn law(&self) -> Law {
        Law::Step(StepLaw { decay: self.decay, period: 1.0, inner: 1.0 })
    }
}

/// The univariate mechanisms a query can ask for by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Laplace,
    Staircase,
    TruncatedLaplace,
    Uniform,
    Gaussian,
}

/// Every mechanism, in the order `'auto'` prefers them on a tie.
pub const MECHANISMS: [Mechanism; 5] = [
    Mechanism::Laplace,
    Mechanism::Staircase,
    Mechanism::TruncatedLaplace,
    Mechanism::Uniform,
    Mechanism::Gaussian,
];

impl Mechanism {
    /// The name `parse` reads (and the ledger records).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Laplace => "laplace",
            Mechanism::Staircase => "staircase",
            Mechanism::TruncatedLaplace => "truncated_laplace",
            Mechanism::Uniform => "uniform",
            Mechanism::Gaussian => "gaussian",
        }
    }

    pub fn parse(name: &str) -> Result<Mechanism, Error> {
        let wanted = name.trim().to_ascii_lowercase();
        MECHANISMS.into_iter().find(|m| m.name() == wanted).ok_or_else(|| {
            Error::invalid(
                "mechanism",
                "one of 'laplace', 'staircase', 'truncated_laplace', 'uniform', 'gaussian'",
                format!("'{name}'"),
            )
        })
    }

    /// Whether the mechanism needs δ > 0 (else it needs δ = 0).
    pub fn needs_delta(self) -> bool {
        matches!(self, Mechanism::TruncatedLaplace | Mechanism::Uniform | Mechanism::Gaussian)
    }

    /// Refuses a δ this mechanism cannot serve, naming the ones that can.
    pub fn check_delta(self, delta: f64) -> Result<(), Error> {
        if !(delta.is_finite() && (0.0..1.0).contains(&delta)) {
            return Err(Error::invalid("delta", "a number in [0, 1)", delta));
        }
        match (self.needs_delta(), delta > 0.0) {
            (true, false) => Err(Error::invalid(
                "delta",
                match self {
                    Mechanism::Gaussian => "in (0, 1) for 'gaussian'; with delta = 0 use 'laplace', 'staircase' or 'auto'",
                    Mechanism::Uniform => "in (0, 1) for 'uniform'; with delta = 0 use 'laplace', 'staircase' or 'auto'",
                    _ => "in (0, 1) for 'truncated_laplace'; with delta = 0 use 'laplace', 'staircase' or 'auto'",
                },
                delta,
            )),
            (false, true) => Err(Error::invalid(
                "delta",
                if self == Mechanism::Laplace {
                    "0 for 'laplace' (it is pure ε-DP); for delta > 0 use 'truncated_laplace', 'uniform', 'gaussian' or 'auto'"
                } else {
                    "0 for 'staircase' (it is pure ε-DP); for delta > 0 use 'truncated_laplace', 'uniform', 'gaussian' or 'auto'"
                },
                delta,
            )),
            _ => Ok(()),
        }
    }

    /// The noise scale per unit of sensitivity, which sets the lattice:
    /// 1/ε for the Laplace family, 1/(2δ) for uniform, σ₁ for the Gaussian.
    pub fn scale_ratio(self, epsilon: Epsilon, delta: f64) -> f64 {
        match self {
            Mechanism::Laplace | Mechanism::Staircase | Mechanism::TruncatedLaplace => 1.0 / epsilon.value(),
            Mechanism::Uniform => 0.5 / delta,
            Mechanism::Gaussian => crate::approximate::analytic_gaussian_sigma(epsilon.value(), delta),
        }
    }
}

/// What a query asks for: a named mechanism, or the least noisy one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Fixed(Mechanism),
}

impl Choice {
    pub fn parse(name: &str) -> Result<Choice, Error> {
        if name.trim().eq_ignore_ascii_case("auto") {
            return Ok(Choice::Auto);
        }
        Mechanism::parse(name).map(Choice::Fixed).map_err(|_| {
            Error::invalid(
                "mechanism",
                "one of 'auto', 'laplace', 'staircase', 'truncated_laplace', 'uniform', 'gaussian'",
                format!("'{name}'"),
            )
        })
    }
}

/// Any univariate lattice noise: one release path serves every mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    Laplace(Laplace),
    Staircase(crate::staircase::Staircase),
    TruncatedLaplace(TruncatedLaplace),
    Uniform(Uniform),
    Gaussian(DiscreteGaussian),
}

impl Noise {
    /// `mechanism` for sensitivity `steps` at (ε, δ); `loss` picks the staircase's γ.
    pub fn new(
        mechanism: Mechanism,
        epsilon: Epsilon,
        delta: f64,
        steps: u128,
        loss: crate::staircase::Loss,
    ) -> Result<Noise, Error> {
        mechanism.check_delta(delta)?;
        Ok(match mechanism {
            Mechanism::Laplace => Noise::Laplace(Laplace::new(epsilon, steps)?),
            Mechanism::Staircase => {
                Noise::Staircase(crate::staircase::Staircase::new(epsilon, steps, loss.gamma(epsilon.value()))?)
            }
            Mechanism::TruncatedLaplace => Noise::TruncatedLaplace(TruncatedLaplace::new(epsilon, steps, delta)?),
            Mechanism::Uniform => Noise::Uniform(Uniform::new(steps, delta)?),
            Mechanism::Gaussian => Noise::Gaussian(DiscreteGaussian::with_sigma(
                crate::approximate::gaussian_sigma_in_steps(epsilon.value(), delta, steps),
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
            Noise::TruncatedLaplace(n) => Law::TruncatedGeometric { decay: n.decay, limit: n.limit() as f64 },
            Noise::Uniform(n) => Law::Uniform { half: n.half() as f64 },
            Noise::Gaussian(n) => Law::Gaussian { variance: n.variance() },
        }
    }
}
