//! The one trait every univariate lattice noise implements: a sampler and
//! the exact law it samples. It sits below every mechanism; the modules that
//! define noises implement it, and `mechanism::Noise` dispatches over them.

use crate::accuracy::Law;
use crate::entropy::Entropy;

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
