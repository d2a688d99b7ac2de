//! Public parameters as exact dyadic rationals.
//!
//! A float8 is exactly `m · 2^e`; privacy-relevant arithmetic uses that exact
//! value (MECHANISMS.md §1), never a rounded `ln` or `exp`.

use crate::Error;

/// The exact value of a finite float: `sign · mantissa · 2^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dyadic {
    pub negative: bool,
    pub mantissa: u64,
    pub exponent: i32,
}

impl Dyadic {
    /// Decomposes a finite float exactly; the mantissa is odd unless zero.
    #[inline]
    pub fn from_f64(x: f64) -> Option<Dyadic> {
        if !x.is_finite() {
            return None;
        }
        let bits = x.to_bits();
        let negative = bits >> 63 == 1;
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mut mantissa, mut exponent) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | (1u64 << 52), biased - 1075)
        };
        if mantissa == 0 {
            return Some(Dyadic {
                negative,
                mantissa: 0,
                exponent: 0,
            });
        }
        let tz = mantissa.trailing_zeros();
        mantissa >>= tz;
        exponent += tz as i32;
        Some(Dyadic {
            negative,
            mantissa,
            exponent,
        })
    }

    /// floor(log2 |x|) for a non-zero value.
    pub fn floor_log2(&self) -> i32 {
        63 - self.mantissa.leading_zeros() as i32 + self.exponent
    }

    /// ceil(log2 |x|) for a non-zero value.
    pub fn ceil_log2(&self) -> i32 {
        let f = self.floor_log2();
        if self.mantissa.is_power_of_two() {
            f
        } else {
            f + 1
        }
    }
}

/// Smallest and largest ε accepted. The bounds keep every lattice sampler's
/// integers far inside u128 (numerator < 2^53, denominator ≤ 2^83).
pub const EPSILON_MIN: f64 = 1.0 / 1_073_741_824.0; // 2^-30
pub const EPSILON_MAX: f64 = 1000.0;

/// ε as the exact rational `num / den` of its float8 value, `den` a power of two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Epsilon {
    value: f64,
    pub num: u128,
    pub den: u128,
}

impl Epsilon {
    pub fn new(epsilon: f64) -> Result<Epsilon, Error> {
        const ALLOWED: &str = "a finite number in [2^-30, 1000]";
        if !(EPSILON_MIN..=EPSILON_MAX).contains(&epsilon) {
            return Err(Error::invalid("epsilon", ALLOWED, epsilon));
        }
        let d = Dyadic::from_f64(epsilon).expect("checked finite");
        let (num, den) = if d.exponent >= 0 {
            ((d.mantissa as u128) << d.exponent, 1)
        } else {
            (d.mantissa as u128, 1u128 << (-d.exponent))
        };
        Ok(Epsilon {
            value: epsilon,
            num,
            den,
        })
    }

    pub fn value(&self) -> f64 {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dyadic_is_exact() {
        for x in [1.0, 0.1, -3.75, 1e-300, 5e-324, 2f64.powi(52) + 1.0, 123456.789] {
            let d = Dyadic::from_f64(x).unwrap();
            let back = d.mantissa as f64 * 2f64.powi(d.exponent);
            assert_eq!(if d.negative { -back } else { back }, x, "{x}");
        }
        assert_eq!(Dyadic::from_f64(f64::NAN), None);
        assert_eq!(Dyadic::from_f64(8.0).unwrap().ceil_log2(), 3);
        assert_eq!(Dyadic::from_f64(9.0).unwrap().ceil_log2(), 4);
        assert_eq!(Dyadic::from_f64(9.0).unwrap().floor_log2(), 3);
        assert_eq!(Dyadic::from_f64(0.1).unwrap().floor_log2(), -4);
    }

    #[test]
    fn epsilon_is_the_exact_float() {
        let e = Epsilon::new(0.1).unwrap();
        assert_eq!(e.num as f64 / e.den as f64, 0.1);
        assert!(e.den.is_power_of_two());
        assert_eq!(Epsilon::new(2.0).unwrap().num, 2);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-12, 1e4] {
            assert!(Epsilon::new(bad).is_err(), "{bad}");
        }
    }
}
