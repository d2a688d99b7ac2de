//! The two-sided geometric (discrete Laplace) noise on the lattice
//! (MECHANISMS.md §2): the geometric mechanism, and the block law the
//! staircase and the truncated Laplacian are built from.

use crate::accuracy::{Law, StepLaw};
use crate::entropy::Entropy;
use crate::noise::LatticeNoise;
use crate::rational::Epsilon;
use crate::sampler::discrete_laplace;
use crate::Error;

/// Two-sided geometric (discrete Laplace): P(n) ∝ e^(−ε·|n|/D) for a
/// sensitivity of D lattice steps.
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
        Law::Step(StepLaw {
            decay: self.decay,
            period: 1.0,
            inner: 1.0,
        })
    }
}
