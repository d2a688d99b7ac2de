//! From a query's public parameters to a lattice and a sensitivity in whole
//! lattice steps (MECHANISMS.md §1): the part every mechanism shares.

use crate::entropy::Entropy;
use crate::lattice::Lattice;
use crate::noise::LatticeNoise;
use crate::params::{Bounds, IntegerBounds, Sensitivity};
use crate::rational::Epsilon;
use crate::Error;

/// What is released: sets the sensitivity and the lattice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// A count: the unit lattice, sensitivity one.
    Count,
    /// One value of sensitivity Δ, noised as it is (per-row functions).
    Value(Sensitivity),
    /// A sum of float8 values clamped to [lower, upper].
    Sum(Bounds),
    /// A sum of int8 values clamped to [lower, upper], released as int8.
    SumInteger(IntegerBounds),
}

impl Shape {
    /// How far one individual can move the answer, in the query's units.
    pub fn sensitivity(self) -> f64 {
        match self {
            Shape::Count => 1.0,
            Shape::Value(s) => s.value(),
            Shape::Sum(b) => b.width(),
            Shape::SumInteger(b) => b.width(),
        }
    }
}

/// A lattice, and the query's sensitivity measured on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    pub lattice: Lattice,
    /// The sensitivity in lattice steps, widened to cover rounding.
    pub steps: u128,
}

impl Calibration {
    /// A count: the unit lattice, sensitivity one.
    pub const COUNT: Calibration = Calibration {
        lattice: Lattice::UNIT,
        steps: 1,
    };

    /// One value of sensitivity Δ, for the Laplace family (noise of scale Δ/ε).
    pub fn value(epsilon: Epsilon, sensitivity: f64) -> Result<Calibration, Error> {
        Calibration::for_shape(
            Shape::Value(Sensitivity::new(sensitivity)?),
            1.0 / epsilon.value(),
        )
    }

    /// A float8 sum clamped to [lower, upper], for the Laplace family.
    pub fn sum(epsilon: Epsilon, lower: f64, upper: f64) -> Result<Calibration, Error> {
        Calibration::for_shape(
            Shape::Sum(Bounds::new(lower, upper)?),
            1.0 / epsilon.value(),
        )
    }

    /// A bigint sum clamped to [lower, upper], for the Laplace family.
    pub fn sum_integer(epsilon: Epsilon, lower: i64, upper: i64) -> Result<Calibration, Error> {
        Calibration::for_shape(
            Shape::SumInteger(IntegerBounds::new(lower, upper)?),
            1.0 / epsilon.value(),
        )
    }

    /// The lattice and sensitivity in steps for `shape`, with noise of
    /// scale `ratio`·Δ (Δ the shape's sensitivity).
    ///
    /// - One value: rounding a and b can move them ⌈|a − b|/g⌉ steps apart,
    ///   so D = ⌈Δ/g⌉.
    /// - A sum of values clamped to [lower, upper], each rounded to the
    ///   lattice: one individual added or removed moves the lattice sum by at
    ///   most max(|round(lower)|, |round(upper)|) steps.
    /// - A bigint sum: the same, on a lattice never finer than the integers.
    pub fn for_shape(shape: Shape, ratio: f64) -> Result<Calibration, Error> {
        if !(ratio.is_finite() && ratio > 0.0) {
            return Err(Error::OutOfRange(format!(
                "noise scale ratio {ratio} is not usable"
            )));
        }
        let width = shape.sensitivity();
        match shape {
            Shape::Count => Ok(Calibration::COUNT),
            Shape::Value(_) => {
                let lattice = Lattice::for_noise(width * ratio, width)?;
                Ok(Calibration {
                    lattice,
                    steps: lattice.steps_ceil(width)?,
                })
            }
            Shape::Sum(b) => {
                let lattice = Lattice::for_noise(width * ratio, width)?;
                let steps = lattice
                    .round(b.lower())?
                    .unsigned_abs()
                    .max(lattice.round(b.upper())?.unsigned_abs());
                Ok(Calibration { lattice, steps })
            }
            Shape::SumInteger(b) => {
                let lattice = Lattice::for_integer_noise(width * ratio, width)?;
                let steps = lattice
                    .round_integer(b.lower())
                    .unsigned_abs()
                    .max(lattice.round_integer(b.upper()).unsigned_abs());
                Ok(Calibration { lattice, steps })
            }
        }
    }

    /// The float8 release of `true_steps` plus one draw of `noise`.
    #[inline]
    pub fn release<N: LatticeNoise, E: Entropy>(
        &self,
        noise: &N,
        rng: &mut E,
        true_steps: i128,
    ) -> f64 {
        self.lattice.release(true_steps + noise.sample(rng))
    }

    /// The int8 release of `true_steps` plus one draw of `noise`.
    pub fn release_integer<N: LatticeNoise, E: Entropy>(
        &self,
        noise: &N,
        rng: &mut E,
        true_steps: i128,
    ) -> Result<i64, Error> {
        self.lattice.release_integer(true_steps + noise.sample(rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_sensitivity_is_the_largest_rounded_bound() {
        let e = Epsilon::new(1.0).unwrap();
        let c = Calibration::sum(e, -3.0, 100.0).unwrap();
        assert_eq!(c.lattice.k, -33); // scale 100 ≤ 2^7: 2^-33 gives 2^40 steps per scale
        assert_eq!(c.steps, 100u128 << 33);
        let i = Calibration::sum_integer(e, 0, 100).unwrap();
        assert_eq!((i.lattice.k, i.steps), (0, 100));
        assert!(Calibration::sum(e, 1.0, 0.0).is_err());
        assert!(Calibration::sum(e, 0.0, 0.0).is_err());
        assert!(Calibration::sum(e, f64::NEG_INFINITY, 0.0).is_err());
        assert!(Calibration::value(e, 0.0).is_err());
        assert!(Calibration::value(e, f64::NAN).is_err());
    }
}
