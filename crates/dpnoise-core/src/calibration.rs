//! From a query's public parameters to a lattice and a sensitivity in whole
//! lattice steps (MECHANISMS.md §1): the part every mechanism shares.

use crate::entropy::Entropy;
use crate::lattice::Lattice;
use crate::mechanism::LatticeNoise;
use crate::rational::Epsilon;
use crate::Error;

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

    /// One value of sensitivity Δ, noised as it is (per-row functions), for
    /// the Laplace family. Rounding a and b can move them ⌈|a − b|/g⌉ steps
    /// apart, so D = ⌈Δ/g⌉.
    pub fn value(epsilon: Epsilon, sensitivity: f64) -> Result<Calibration, Error> {
        Calibration::for_shape(crate::plan::Shape::Value(sensitivity), 1.0 / epsilon.value())
    }

    /// A sum of values clamped to [lower, upper], each rounded to the lattice:
    /// one individual added or removed moves the lattice sum by at most
    /// max(|round(lower)|, |round(upper)|) steps.
    pub fn sum(epsilon: Epsilon, lower: f64, upper: f64) -> Result<Calibration, Error> {
        Calibration::for_shape(crate::plan::Shape::Sum(lower, upper), 1.0 / epsilon.value())
    }

    /// As `sum`, for bigint values: the lattice is never finer than the integers.
    pub fn sum_integer(epsilon: Epsilon, lower: i64, upper: i64) -> Result<Calibration, Error> {
        Calibration::for_shape(crate::plan::Shape::SumInteger(lower, upper), 1.0 / epsilon.value())
    }

    /// The lattice and sensitivity for `shape`, with noise of scale
    /// `ratio`·Δ (Δ the shape's sensitivity).
    pub fn for_shape(shape: crate::plan::Shape, ratio: f64) -> Result<Calibration, Error> {
        use crate::plan::Shape;
        if !(ratio.is_finite() && ratio > 0.0) {
            return Err(Error::OutOfRange(format!("noise scale ratio {ratio} is not usable")));
        }
        match shape {
            Shape::Count => Ok(Calibration::COUNT),
            Shape::Value(sensitivity) => {
                check_sensitivity(sensitivity)?;
                let lattice = Lattice::for_noise(sensitivity * ratio, sensitivity)?;
                Ok(Calibration { lattice, steps: lattice.steps_ceil(sensitivity)? })
            }
            Shape::Sum(lower, upper) => {
                let width = check_bounds(lower, upper)?;
                let lattice = Lattice::for_noise(width * ratio, width)?;
                let steps = lattice.round(lower)?.unsigned_abs().max(lattice.round(upper)?.unsigned_abs());
                Ok(Calibration { lattice, steps })
            }
            Shape::SumInteger(lower, upper) => {
                let width = check_bounds(lower as f64, upper as f64)?;
                let lattice = Lattice::for_integer_noise(width * ratio, width)?;
                let steps = lattice.round_integer(lower).unsigned_abs().max(lattice.round_integer(upper).unsigned_abs());
                Ok(Calibration { lattice, steps })
            }
        }
    }

    /// The float8 release of `true_steps` plus one draw of `noise`.
    #[inline]
    pub fn release<N: LatticeNoise, E: Entropy>(&self, noise: &N, rng: &mut E, true_steps: i128) -> f64 {
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

fn check_sensitivity(sensitivity: f64) -> Result<(), Error> {
    if sensitivity.is_finite() && sensitivity > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid("sensitivity", "a finite number > 0", sensitivity))
    }
}

/// Checks lower ≤ upper, both finite and not both zero; returns max(|lower|, |upper|).
fn check_bounds(lower: f64, upper: f64) -> Result<f64, Error> {
    if !lower.is_finite() {
        return Err(Error::invalid("lower", "a finite number", lower));
    }
    if !upper.is_finite() {
        return Err(Error::invalid("upper", "a finite number", upper));
    }
    if lower > upper {
        return Err(Error::invalid("lower", "at most upper", format!("{lower} > {upper}")));
    }
    let width = lower.abs().max(upper.abs());
    if width == 0.0 {
        return Err(Error::invalid("upper", "non-zero when lower is zero", upper));
    }
    Ok(width)
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
