//! `dp_quantile`, `dp_median`, `dp_min`, `dp_max`: the exponential
//! mechanism over the points of a lattice inside [lower, upper], sampled
//! exactly with integer arithmetic.
//!
//! The output space is public: the lattice points t = lo, …, hi (the
//! bounds rounded onto 2^k, k = ⌊log2(upper − lower)⌋ − 32, so about 2^32
//! to 2^33 points). The values, clamped and rounded onto the same lattice,
//! give each point its rank c(t) = #{values < t} and its score
//! u(t) = −|c(t) − p·n|; adding or removing one person moves c(t) − p·n
//! by −p or 1 − p, so |Δu| ≤ Δ = max(p, 1 − p) (½ for the median) and
//! P(t) ∝ e^(ε·u(t)/(2Δ)) is ε-DP (McSherry & Talwar 2007; Smith 2011 for
//! the quantile; OpenDP's make_private_quantile uses the same Δ). Points
//! between two consecutive values share a rank: group i holds the m_i
//! points of rank i, and P(group i) ∝ m_i·e^(−y_i),
//! y_i = ε(|i − pn| − min_j |j − pn|)/(2Δ) over the non-empty groups, then
//! a point uniform in the group.
//!
//! Exact sampling, by rejection: with L2 = ⌈ln 2·2^32⌉/2^32 ≥ ln 2 and
//! k_i = min(40, ⌊y_i/L2⌋) (an integer division), propose group i with
//! probability ∝ m_i·2^(40 − k_i) (integers), accept it with probability
//! 2^(k_i)·e^(−y_i) = [2^(k_i)·e^(−k_i·L2)]·e^(−(y_i − k_i·L2)), two exact
//! Bernoulli trials (`exp_neg::bernoulli_times_pow2`, `exp_neg::bernoulli`)
//! of rationals y_i − k_i·L2 ≥ 0. The accepted group has probability
//! ∝ m_i·e^(−y_i) exactly; a proposal is accepted with probability at
//! least about 1/3 (uncapped groups at least 1/2; capped ones weigh at
//! most 2^34 against the best group's 2^40).
//!
//! Integer sizes: p is used as the nearest multiple of 2^−20, ε with its
//! numerator cut to 24 bits (`Epsilon::truncated_to_24_bits`, never more
//! than ε), n < 2^40: then y_i = num·d_i/(den·2·M) with d_i = |i·2^20 −
//! p_q·n| < 2^60, M = Δ·2^20 ∈ [2^19, 2^20], num < 2^24, den ≤ 2^54, and
//! every product stays below 2^120.

use crate::entropy::Entropy;
use crate::lattice::Lattice;
use crate::params::Bounds;
use crate::rational::{Dyadic, Epsilon};
use crate::sampler::uniform_below;
use crate::Error;

/// ⌈ln 2·2^32⌉: L2 = this/2^32 ≥ ln 2 (checked in the tests against a
/// rational bound of the series ln 2 = Σ 1/(k·2^k)).
pub const LN2_CEIL_Q32: u128 = 2_977_044_472;
/// Groups further than this many halvings below the best are proposed as
/// if they were this far (their acceptance falls accordingly).
const CAP: u32 = 40;
/// p as a multiple of 2^−P_BITS.
const P_BITS: u32 = 20;
/// The lattice holds about 2^POINTS_LOG2 points across [lower, upper].
const POINTS_LOG2: i32 = 32;
/// Values a release may hold (n < 2^40; a billion rows is 8 GB of state).
pub const MAX_VALUES: u64 = 1 << 40;

/// A quantile's plan, from its public parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile {
    pub epsilon: Epsilon,
    pub bounds: Bounds,
    /// p as p_q/2^20.
    pub p_q: u128,
    pub lattice: Lattice,
    pub low: i128,
    pub high: i128,
}

impl Quantile {
    /// Checks p ∈ [0, 1] and lower < upper.
    pub fn new(epsilon: Epsilon, bounds: Bounds, p: f64) -> Result<Quantile, Error> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::invalid("p", "a number in [0, 1]", p));
        }
        let width = bounds.upper() - bounds.lower();
        let d = Dyadic::from_f64(width)
            .filter(|d| d.mantissa != 0 && !d.negative)
            .ok_or_else(|| {
                Error::invalid(
                    "upper",
                    "above lower and within float8 range of it",
                    bounds.upper(),
                )
            })?;
        let lattice = Lattice {
            k: d.floor_log2() - POINTS_LOG2,
        };
        let (low, high) = (
            lattice.round(bounds.lower())?,
            lattice.round(bounds.upper())?,
        );
        let p_q = (p * f64::from(1u32 << P_BITS)).round() as u128;
        Ok(Quantile {
            epsilon: epsilon.truncated_to_24_bits(),
            bounds,
            p_q,
            lattice,
            low,
            high,
        })
    }

    /// Δ = max(p, 1 − p) as a multiple of 2^−20: the score's sensitivity.
    pub fn sensitivity_q(&self) -> u128 {
        self.p_q.max((1 << P_BITS) - self.p_q)
    }

    /// The number of output points, hi − lo + 1 (at most 2^34).
    pub fn points(&self) -> u64 {
        (self.high - self.low + 1) as u64
    }

    /// A value's offset from the lower bound on the lattice: what the state
    /// keeps (8 bytes a row). NaN is refused (the caller skips it first
    /// where it may).
    #[inline]
    pub fn offset(&self, x: f64) -> Result<u64, Error> {
        if x.is_nan() {
            return Err(Error::invalid_data("value", "a number (not NaN)"));
        }
        let r = self.lattice.round(self.bounds.clamp(x))?;
        Ok((r - self.low).clamp(0, self.high - self.low) as u64)
    }

    /// The release of the values whose offsets are `values` (in any order:
    /// they are sorted here).
    pub fn release<E: Entropy>(&self, rng: &mut E, values: &mut [u64]) -> Result<f64, Error> {
        sort(values);
        let t = self.sample_sorted(rng, values, CAP)?;
        Ok(self
            .bounds
            .clamp(self.lattice.release(self.low + t as i128)))
    }

    /// The groups (first point, points, rank distance d_i = |i·2^20 − p_q·n|).
    fn groups(&self, sorted: &[u64]) -> Vec<(u64, u64, u128)> {
        let n = sorted.len();
        let last = self.points() - 1;
        let target = self.p_q * n as u128;
        let distance = |i: usize| ((i as u128) << P_BITS).abs_diff(target);
        let mut groups = Vec::with_capacity(n + 1);
        // Group 0: points up to and including the smallest value.
        let first = sorted.first().map_or(last, |&v| v);
        groups.push((0, first + 1, distance(0)));
        for i in 1..=n {
            if i % 65_536 == 0 {
                crate::interrupt::check();
            }
            let start = sorted[i - 1] + 1;
            let end = if i < n { sorted[i] } else { last };
            groups.push((start, (end + 1).saturating_sub(start), distance(i)));
        }
        groups
    }

    /// One exact draw of a point offset, `cap` as `CAP` (tests lower it to
    /// reach the capped path).
    #[doc(hidden)]
    pub fn sample_sorted<E: Entropy>(
        &self,
        rng: &mut E,
        sorted: &[u64],
        cap: u32,
    ) -> Result<u64, Error> {
        if sorted.len() as u64 >= MAX_VALUES {
            return Err(Error::OutOfRange(
                "a quantile over 2^40 values or more is not supported".into(),
            ));
        }
        let groups = self.groups(sorted);
        let best = groups
            .iter()
            .filter(|g| g.1 > 0)
            .map(|g| g.2)
            .min()
            .expect("the points are not empty");
        let (num, b) = (
            self.epsilon.num,
            self.epsilon.den * 2 * self.sensitivity_q(),
        );
        // y_i = num·(d_i − best)/b; k_i = ⌊y_i/L2⌋ = ⌊num·(d_i − best)·2^32/(b·L2N)⌋, capped.
        let halvings = |d: u128| -> u32 {
            let a = num * (d - best);
            u32::try_from((a << 32) / (b * LN2_CEIL_Q32))
                .unwrap_or(u32::MAX)
                .min(cap)
        };
        let mut cumulative = Vec::with_capacity(groups.len());
        let mut total: u128 = 0;
        for (i, g) in groups.iter().enumerate() {
            if i % 65_536 == 65_535 {
                crate::interrupt::check();
            }
            total += u128::from(g.1) << (cap - halvings(g.2));
            cumulative.push(total);
        }
        let mut tries: u32 = 0;
        loop {
            let u = uniform_below(rng, total);
            let i = cumulative.partition_point(|&c| c <= u);
            let (start, points, d) = groups[i];
            let k = halvings(d);
            // y − k·L2 = (num·(d − best)·2^32 − k·L2N·b)/(b·2^32) ≥ 0.
            let rest = ((num * (d - best)) << 32) - u128::from(k) * LN2_CEIL_Q32 * b;
            if crate::exp_neg::bernoulli_times_pow2(rng, k, u128::from(k) * LN2_CEIL_Q32, 1 << 32)
                && crate::exp_neg::bernoulli(rng, rest, b << 32)
            {
                return Ok(start + uniform_below(rng, u128::from(points)) as u64);
            }
            tries = tries.wrapping_add(1);
            if tries % 64 == 0 {
                crate::interrupt::check();
            }
        }
    }

    /// The exact probability of each group (first point, points,
    /// probability), in floating point: for tests and accuracy figures.
    pub fn group_probabilities(&self, sorted: &[u64]) -> Vec<(u64, u64, f64)> {
        let groups = self.groups(sorted);
        let eps = self.epsilon.value();
        let weights: Vec<f64> = groups
            .iter()
            .map(|g| g.1 as f64 * (-eps * g.2 as f64 / (2.0 * self.sensitivity_q() as f64)).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        groups
            .iter()
            .zip(weights)
            .map(|(g, w)| (g.0, g.1, w / total))
            .collect()
    }

    /// The rank error's law when every group holds as many points (the
    /// data-independent part of the quantile's error): |i − pn| = j with
    /// probability ∝ e^(−εj/(2Δ)) on each side, a two-sided geometric. Its
    /// mean absolute value, standard deviation and `confidence` half-width,
    /// in ranks.
    pub fn rank_error(epsilon: f64, p: f64, confidence: f64) -> (f64, f64, f64) {
        let q = (-epsilon / (2.0 * p.max(1.0 - p))).exp();
        let mean_abs = 2.0 * q / (1.0 - q * q);
        let sd = (2.0 * q).sqrt() / (1.0 - q);
        // P(|J| ≤ h) = 1 − 2q^(h+1)/(1 + q).
        let h = ((((1.0 - confidence) * (1.0 + q) / 2.0).ln() / q.ln()) - 1.0)
            .ceil()
            .max(0.0);
        (mean_abs, sd, h)
    }
}

/// Sorts the offsets, checking for a cancel every 2^20 comparisons.
pub fn sort(values: &mut [u64]) {
    let mut compared: u32 = 0;
    values.sort_unstable_by(|a, b| {
        compared = compared.wrapping_add(1);
        if compared % (1 << 20) == 0 {
            crate::interrupt::check();
        }
        a.cmp(b)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L2 ≥ ln 2: ln 2 = Σ_{k≥1} 1/(k·2^k) ≤ Σ_{k≤K} + 1/((K+1)·2^K), each
    /// term rounded up at 2^−100.
    #[test]
    fn ln2_bound_is_above_ln2() {
        let one: u128 = 1 << 100;
        let mut upper: u128 = 0;
        for k in 1..=80u32 {
            let term = one >> k;
            upper += term.div_ceil(u128::from(k)) + 1;
        }
        upper += (one >> 80).div_ceil(81) + 1;
        assert!(LN2_CEIL_Q32 << 68 >= upper, "L2 is below ln 2");
        // And it is the ceiling: one less is below ln 2 (lower bound: the partial sum, rounded down).
        let lower: u128 = (1..=80u32).map(|k| (one >> k) / u128::from(k)).sum();
        assert!((LN2_CEIL_Q32 - 1) << 68 < lower);
    }

    #[test]
    fn refuses_bad_parameters() {
        let e = Epsilon::new(1.0).unwrap();
        let b = Bounds::new(0.0, 10.0).unwrap();
        assert!(Quantile::new(e, b, 1.5).is_err());
        assert!(Quantile::new(e, b, f64::NAN).is_err());
        assert!(Quantile::new(e, Bounds::new(2.0, 2.0).unwrap(), 0.5).is_err());
        let q = Quantile::new(e, b, 0.5).unwrap();
        assert!(q.points() > 1 << 32 && q.points() <= (1 << 34) + 1);
        assert_eq!(q.offset(-5.0).unwrap(), 0);
        assert_eq!(q.offset(50.0).unwrap(), q.points() - 1);
        assert!(q.offset(f64::NAN).is_err());
    }

    #[test]
    fn groups_cover_every_point() {
        let e = Epsilon::new(1.0).unwrap();
        let q = Quantile::new(e, Bounds::new(0.0, 10.0).unwrap(), 0.5).unwrap();
        let mut v: Vec<u64> = [3.0, 1.0, 1.0, 9.5]
            .iter()
            .map(|&x| q.offset(x).unwrap())
            .collect();
        sort(&mut v);
        let g = q.groups(&v);
        assert_eq!(g.len(), 5);
        assert_eq!(g.iter().map(|g| g.1).sum::<u64>(), q.points());
        assert_eq!(g[1].1, 0, "two equal values leave an empty group");
        assert!(q.groups(&[]).iter().map(|g| g.1).sum::<u64>() == q.points());
    }
}
