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
