//! The output lattice `g · Z`, `g = 2^k` (MECHANISMS.md §1).
//!
//! True answers are rounded onto it exactly (bit arithmetic, never a float
//! division), noise is an integer number of steps, and a release is
//! `(true + noise) · 2^k`.

use crate::rational::Dyadic;
use crate::Error;

/// Steps of the lattice per unit of noise scale (about 2^40, so outputs look continuous).
const STEPS_PER_SCALE_LOG2: i32 = 40;
/// The lattice resolves the sensitivity into at least 2^20 steps, so widening it
/// to a whole number of steps costs at most one part in a million.
const STEPS_PER_SENSITIVITY_LOG2: i32 = 20;
/// Lattice integers stay below 2^LIMIT_LOG2 so sums and noise fit in i128.
const LIMIT_LOG2: i32 = 100;
/// Granularities representable as normal float8 powers of two.
const K_MIN: i32 = -1000;
const K_MAX: i32 = 1000;

/// The lattice `2^k · Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lattice {
    pub k: i32,
}

impl Lattice {
    /// The unit lattice, for counts.
    pub const UNIT: Lattice = Lattice { k: 0 };

    /// The granularity for noise of scale `scale` on a query of sensitivity
    /// `sensitivity`: the largest 2^k with at least 2^40 steps per scale and
    /// 2^20 steps per sensitivity. Both inputs are public parameters.
    pub fn for_noise(scale: f64, sensitivity: f64) -> Result<Lattice, Error> {
        if scale == f64::INFINITY {
            return Err(Error::OutOfRange(format!(
                "the noise sensitivity {sensitivity:e} needs at this epsilon and delta is beyond float8: narrow the bounds or raise epsilon"
            )));
        }
        let s = positive_dyadic("noise scale", scale)?;
        let d = positive_dyadic("sensitivity", sensitivity)?;
        let k =
            (s.ceil_log2() - STEPS_PER_SCALE_LOG2).min(d.floor_log2() - STEPS_PER_SENSITIVITY_LOG2);
        if !(K_MIN..=K_MAX).contains(&k) {
            return Err(Error::OutOfRange(format!(
                "the noise scale {scale} and sensitivity {sensitivity} are too extreme for a float8 lattice"
            )));
        }
        Ok(Lattice { k })
    }

    /// As `for_noise`, but never finer than the integers: for int8 queries.
    pub fn for_integer_noise(scale: f64, sensitivity: f64) -> Result<Lattice, Error> {
        let l = Lattice::for_noise(scale, sensitivity)?;
        Ok(Lattice { k: l.k.max(0) })
    }

    /// `x / g` rounded half up, `floor(x/g + 1/2)`, exactly. Half-up (not half
    /// away from zero) commutes with integer shifts, so rounding never widens
    /// a difference by more than `ceil(|a − b| / g)` steps.
    #[inline]
    pub fn round(&self, x: f64) -> Result<i128, Error> {
        // Fast path, the same arithmetic as `round_exact` in 64 bits: a
        // normal float is ±m·2^e with m < 2^53; m·2^(e−k) rounded half up is
        // m shifted left, or (m + half) shifted right arithmetically (floor
        // for either sign), exact while the shift is in [−62, 9] (|m·2^9| <
        // 2^62). No float conversions: they cost a row's sum a third.
        let bits = x.to_bits();
        let biased = (bits >> 52 & 0x7ff) as i32;
        if biased != 0 && biased != 0x7ff {
            let shift = biased - 1075 - self.k;
            if (-62..=9).contains(&shift) {
                let magnitude = (bits & ((1 << 52) - 1) | 1 << 52) as i64;
                let m = if bits >> 63 == 1 {
                    -magnitude
                } else {
                    magnitude
                };
                let n = if shift >= 0 {
                    m << shift
                } else {
                    (m + (1 << (-shift - 1))) >> -shift
                };
                return Ok(n as i128);
            }
        }
        self.round_exact(x)
    }

    /// The same rounding from the float's bits, for every finite input.
    fn round_exact(&self, x: f64) -> Result<i128, Error> {
        let d =
            Dyadic::from_f64(x).ok_or_else(|| Error::invalid_data("value", "a finite number"))?;
        if d.mantissa == 0 {
            return Ok(0);
        }
        let m = if d.negative {
            -(d.mantissa as i128)
        } else {
            d.mantissa as i128
        };
        let shift = d.exponent - self.k;
        if shift >= 0 {
            if d.floor_log2() - self.k >= LIMIT_LOG2 {
                return Err(self.too_large());
            }
            Ok(m << shift)
        } else {
            let right = -shift;
            if right >= 120 {
                return Ok(0);
            }
            Ok((m + (1i128 << (right - 1))) >> right)
        }
    }

    /// An integer rounded half up to the lattice (the identity when k ≤ 0).
    pub fn round_integer(&self, v: i64) -> i128 {
        if self.k <= 0 {
            return (v as i128) << (-self.k).min(LIMIT_LOG2 - 64);
        }
        let right = self.k.min(100);
        ((v as i128) + (1i128 << (right - 1))) >> right
    }

    /// `ceil(|x| / g)`: a sensitivity in whole steps, widened never narrowed.
    pub fn steps_ceil(&self, x: f64) -> Result<u128, Error> {
        let d = Dyadic::from_f64(x).ok_or_else(|| Error::invalid("sensitivity", "finite", x))?;
        if d.mantissa == 0 {
            return Ok(0);
        }
        let shift = d.exponent - self.k;
        if shift >= 0 {
            if d.floor_log2() - self.k >= LIMIT_LOG2 {
                return Err(self.too_large());
            }
            Ok((d.mantissa as u128) << shift)
        } else {
            let right = -shift;
            if right >= 64 {
                return Ok(1);
            }
            let m = d.mantissa as u128;
            Ok((m >> right) + u128::from(m & ((1u128 << right) - 1) != 0))
        }
    }

    /// The float8 nearest to `n · 2^k`; exact whenever |n| < 2^53. Rounding a
    /// lattice value to float8 is deterministic post-processing of the
    /// private integer, so it costs no privacy.
    #[inline]
    pub fn release(&self, n: i128) -> f64 {
        // i64 → f64 is one instruction; i128 → f64 is a library call. Both
        // round the same way, so the compiler would merge the two arms into
        // the call: the opaque value keeps the fast arm.
        let x = match i64::try_from(n) {
            Ok(small) => small as f64,
            Err(_) => std::hint::black_box(n) as f64,
        };
        let half = self.k / 2;
        x * pow2(half) * pow2(self.k - half)
    }

    /// `n · 2^k` as an int8, for lattices no finer than the integers.
    pub fn release_integer(&self, n: i128) -> Result<i64, Error> {
        debug_assert!(self.k >= 0);
        n.checked_mul(1i128 << self.k.min(126))
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| Error::OutOfRange("the noisy answer does not fit in bigint".into()))
    }

    /// The granularity `2^k` as a float8.
    pub fn granularity(&self) -> f64 {
        self.release(1)
    }

    /// The value is not shown: it may come from the data.
    fn too_large(&self) -> Error {
        Error::OutOfRange(format!(
            "a value is too large for the lattice of granularity 2^{} (its magnitude must be below 2^{})",
            self.k,
            self.k + LIMIT_LOG2
        ))
    }
}

fn positive_dyadic(name: &'static str, x: f64) -> Result<Dyadic, Error> {
    match Dyadic::from_f64(x) {
        Some(d) if d.mantissa != 0 && !d.negative => Ok(d),
        _ => Err(Error::invalid(name, "a finite number > 0", x)),
    }
}

/// 2^e as a float8 for |e| ≤ 1022, built from its bits.
#[inline]
fn pow2(e: i32) -> f64 {
    let e = e.clamp(-1022, 1023);
    f64::from_bits(((e + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granularity_follows_scale_and_sensitivity() {
        assert_eq!(Lattice::for_noise(1.0, 1.0).unwrap().k, -40);
        assert_eq!(Lattice::for_noise(10.0, 1.0).unwrap().k, -36);
        // A tiny scale relative to Δ: 2^40 steps per scale governs.
        assert_eq!(Lattice::for_noise(0.001, 1.0).unwrap().k, -49);
        // A huge scale relative to Δ: 2^20 steps per Δ governs.
        assert_eq!(Lattice::for_noise(1e9, 1.0).unwrap().k, -20);
        assert_eq!(Lattice::for_integer_noise(1.0, 1.0).unwrap().k, 0);
        assert!(Lattice::for_noise(0.0, 1.0).is_err());
        assert!(Lattice::for_noise(1.0, f64::NAN).is_err());
    }

    #[test]
    fn rounding_is_half_up_and_exact() {
        let l = Lattice { k: -1 }; // g = 1/2
        assert_eq!(l.round(0.25).unwrap(), 1);
        assert_eq!(l.round(-0.25).unwrap(), 0);
        assert_eq!(l.round(0.74).unwrap(), 1);
        assert_eq!(l.round(0.75).unwrap(), 2);
        assert_eq!(l.round(-0.75).unwrap(), -1);
        let unit = Lattice::UNIT;
        assert_eq!(unit.round(-0.5).unwrap(), 0);
        assert_eq!(unit.round(0.5).unwrap(), 1);
        // Half-up commutes with shifts: the tie −½ and ½ end up one step apart.
        assert_eq!(unit.round(0.5).unwrap() - unit.round(-0.5).unwrap(), 1);
        let big = 2f64.powi(52) + 1.0;
        assert_eq!(
            Lattice { k: -40 }.round(big).unwrap(),
            ((1i128 << 52) + 1) << 40
        );
        assert!(Lattice { k: -40 }.round(1e30).is_err());
        assert_eq!(Lattice { k: 3 }.round_integer(12), 2);
        assert_eq!(Lattice { k: 3 }.round_integer(11), 1);
        assert_eq!(Lattice { k: 3 }.round_integer(-12), -1);
        assert_eq!(Lattice { k: 0 }.round_integer(-7), -7);
    }

    #[test]
    fn fast_rounding_agrees_with_the_exact_one() {
        let mut v = 0x9e3779b97f4a7c15u64;
        for k in [-60, -40, -1, 0, 3, 30] {
            let l = Lattice { k };
            for i in 0..20_000 {
                v ^= v << 13;
                v ^= v >> 7;
                v ^= v << 17;
                // Random floats over many magnitudes, plus exact ties.
                let x = f64::from_bits(v >> 2 | (if i % 2 == 0 { 0 } else { 1 << 63 }));
                let tie = (i as f64 - 10_000.5) * 2f64.powi(k);
                for t in [x, tie, 0.5 * 2f64.powi(k) - f64::EPSILON] {
                    if t.is_finite() {
                        assert_eq!(l.round(t).ok(), l.round_exact(t).ok(), "x = {t:e}, k = {k}");
                    }
                }
            }
        }
    }

    #[test]
    fn rounding_never_widens_beyond_ceil_steps() {
        let l = Lattice { k: -2 };
        let values: Vec<f64> = (-200..200).map(|i| i as f64 * 0.0371).collect();
        for &a in &values {
            for &b in &values {
                let gap = l.steps_ceil((a - b).abs()).unwrap() as i128;
                let diff = (l.round(a).unwrap() - l.round(b).unwrap()).abs();
                assert!(diff <= gap, "{a} {b}");
            }
        }
    }

    #[test]
    fn steps_ceil_rounds_up() {
        let l = Lattice { k: -2 };
        assert_eq!(l.steps_ceil(1.0).unwrap(), 4);
        assert_eq!(l.steps_ceil(1.1).unwrap(), 5);
        assert_eq!(l.steps_ceil(1e-30).unwrap(), 1);
    }

    #[test]
    fn release_is_exact_on_the_lattice() {
        let l = Lattice { k: -40 };
        assert_eq!(l.release(3), 3.0 * 2f64.powi(-40));
        assert_eq!(l.release(-(1i128 << 52)), -(2f64.powi(12)));
        assert_eq!(Lattice { k: 2 }.release_integer(-5).unwrap(), -20);
        assert!(Lattice { k: 2 }.release_integer(1i128 << 62).is_err());
        assert_eq!(Lattice { k: -1074 + 60 }.granularity(), 2f64.powi(-1014));
    }
}
