//! Noise distributions on the lattice, each with its exact pmf.

use crate::accuracy::StepLaw;
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
    fn law(&self) -> StepLaw;
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

impl Laplace {
    /// Laplace noise for sensitivity `steps` lattice steps and privacy loss ε.
    pub fn new(epsilon: Epsilon, steps: u128) -> Result<Laplace, Error> {
        if steps == 0 {
            return Err(Error::invalid("sensitivity", "> 0", 0));
        }
        let t = epsilon
            .den
            .checked_mul(steps)
            .filter(|t| *t < 1u128 << 110)
            .ok_or_else(|| Error::OutOfRange("sensitivity too large for the lattice".into()))?;
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

    fn law(&self) -> StepLaw {
        StepLaw { decay: self.decay, period: 1.0, inner: 1.0 }
    }
}

/// The univariate mechanisms a query can ask for by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Laplace,
    Staircase,
}

impl Mechanism {
    /// The name `parse` reads (and the ledger records).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Laplace => "laplace",
            Mechanism::Staircase => "staircase",
        }
    }

    pub fn parse(name: &str) -> Result<Mechanism, Error> {
        match name.trim().to_ascii_lowercase().as_str() {
            "laplace" => Ok(Mechanism::Laplace),
            "staircase" => Ok(Mechanism::Staircase),
            _ => Err(Error::invalid("mechanism", "one of 'laplace', 'staircase'", format!("'{name}'"))),
        }
    }
}

/// Any univariate lattice noise: one release path serves every mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    Laplace(Laplace),
    Staircase(crate::staircase::Staircase),
}

impl Noise {
    /// `mechanism` for sensitivity `steps` at ε; `loss` picks the staircase's γ.
    pub fn new(mechanism: Mechanism, epsilon: Epsilon, steps: u128, loss: crate::staircase::Loss) -> Result<Noise, Error> {
        Ok(match mechanism {
            Mechanism::Laplace => Noise::Laplace(Laplace::new(epsilon, steps)?),
            Mechanism::Staircase => {
                Noise::Staircase(crate::staircase::Staircase::new(epsilon, steps, loss.gamma(epsilon.value()))?)
            }
        })
    }
}

impl LatticeNoise for Noise {
    #[inline]
    fn sample<E: Entropy>(&self, rng: &mut E) -> i128 {
        match self {
            Noise::Laplace(n) => n.sample(rng),
            Noise::Staircase(n) => n.sample(rng),
        }
    }

    fn law(&self) -> StepLaw {
        match self {
            Noise::Laplace(n) => n.law(),
            Noise::Staircase(n) => n.law(),
        }
    }
}
