//! Private partition selection: whether a group whose key comes from the
//! data may appear in an answer at all.
//!
//! A group with n persons is kept with probability π(n), the optimal rule of
//! Desfontaines, Voss, Gipson & Mandayam, "Differentially private partition
//! selection" (PoPETs 2022), Theorem 1, for a person in at most one group:
//! π(0) = 0 and
//!
//! ```text
//! π(n) = min( e^ε·π(n−1) + δ,  1 − e^(−ε)·(1 − π(n−1) − δ),  1 )
//! ```
//!
//! the largest keep probability such that adding one person to a group
//! changes the law of "kept" by at most (ε, δ) in both directions. A person
//! in up to k groups spends ε/k and δ/k in each (the paper's §4 split).
//!
//! Exactness: every operation rounds towards the side that keeps π(n)
//! within both bounds of π(n−1), so the computed table satisfies the
//! (ε, δ) conditions exactly, as dyadic rationals, and `keep` draws a
//! Bernoulli of that exact dyadic probability from uniform bits.

use crate::entropy::Entropy;
use crate::Error;

/// The longest table kept: groups up to this many persons get their own
/// π(n); π must reach 1 before it (ε / k not too small for δ / k).
pub const MAX_TABLE: usize = 1 << 16;

/// π(n) for one (ε, δ, k).
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSelection {
    /// π(1), π(2), … up to the first that is 1.
    table: Vec<f64>,
}

/// `x` rounded down by `ulps` steps (never below 0).
fn down(x: f64, ulps: u32) -> f64 {
    (0..ulps).fold(x, |x, _| if x > 0.0 { x.next_down() } else { 0.0 })
}

/// `x` rounded up by `ulps` steps.
fn up(x: f64, ulps: u32) -> f64 {
    (0..ulps).fold(x, |x, _| x.next_up())
}

impl PartitionSelection {
    /// Per-group (ε, δ) is (ε / k, δ / k) for a person in at most
    /// `max_groups` = k groups. δ must be > 0: with δ = 0 no group with a
    /// key from the data can ever be shown.
    pub fn new(epsilon: f64, delta: f64, max_groups: u32) -> Result<PartitionSelection, Error> {
        if !(epsilon.is_finite() && (1e-4..=100.0).contains(&epsilon)) {
            return Err(Error::invalid(
                "selection epsilon",
                "a number in [1e-4, 100]",
                epsilon,
            ));
        }
        if !(delta.is_finite() && delta > 0.0 && delta < 1.0) {
            return Err(Error::invalid(
                "selection delta",
                "a number in (0, 1) (with delta = 0 group keys must be public)",
                delta,
            ));
        }
        if max_groups == 0 {
            return Err(Error::invalid(
                "max_groups_contributed",
                "at least 1",
                max_groups,
            ));
        }
        let k = max_groups as f64;
        let (epsilon, delta) = (epsilon / k, down(delta / k, 1));
        // e^ε rounded down, e^(−ε) rounded up (exp is within one ulp).
        let grow = down(epsilon.exp(), 2).max(1.0);
        let shrink = up((-epsilon).exp(), 2).min(1.0);
        let mut table = Vec::new();
        let mut previous = 0.0f64;
        loop {
            crate::interrupt::check();
            // e^ε·π + δ, rounded down.
            let first = down(down(grow * previous, 1) + delta, 1);
            // 1 − e^(−ε)·(1 − π − δ): the subtracted part rounded up.
            let rest = up(up(1.0 - previous, 1) - delta, 1).max(0.0);
            // rest = 0: 1 − π − δ ≤ 0 exactly, and the bound is 1.
            let second = if rest == 0.0 {
                1.0
            } else {
                down(1.0 - up(shrink * rest, 1), 1)
            };
            let next = first.min(second).min(1.0).max(previous);
            // max(previous) can only raise π(n) when rounding made it fall
            // below π(n−1); then π(n) = π(n−1), which meets both bounds.
            if next >= 1.0 {
                table.push(1.0);
                return Ok(PartitionSelection { table });
            }
            table.push(next);
            previous = next;
            if table.len() >= MAX_TABLE {
                return Err(Error::invalid(
                    "selection epsilon",
                    "large enough for groups to be kept at all (raise epsilon or delta, or lower max_groups_contributed)",
                    epsilon * k,
                ));
            }
        }
    }

    /// π(n): the probability that a group of n persons is kept.
    pub fn keep_probability(&self, persons: u64) -> f64 {
        match persons {
            0 => 0.0,
            n => self.table.get((n - 1) as usize).copied().unwrap_or(1.0),
        }
    }

    /// The smallest group that is always kept.
    pub fn always_kept_from(&self) -> u64 {
        self.table.len() as u64
    }

    /// The smallest number of persons whose group is kept with
    /// probability at least 1/2.
    pub fn even_odds(&self) -> u64 {
        (1..=self.always_kept_from())
            .find(|&n| self.keep_probability(n) >= 0.5)
            .unwrap_or(self.always_kept_from())
    }

    /// Draws whether a group of `persons` persons is kept: a Bernoulli of
    /// the exact dyadic π(n).
    pub fn keep<E: Entropy>(&self, rng: &mut E, persons: u64) -> bool {
        bernoulli_dyadic(rng, self.keep_probability(persons))
    }
}

/// Bernoulli(p) for a float p, exactly: p = m·2^(−z−53) with m < 2^53, so
/// U < p iff U's first z bits are 0 and its next 53 bits, read as an
/// integer, are below m.
pub fn bernoulli_dyadic<E: Entropy>(rng: &mut E, p: f64) -> bool {
    if p.is_nan() || p <= 0.0 {
        return false;
    }
    if p >= 1.0 {
        return true;
    }
    // p = mantissa · 2^exponent exactly, mantissa < 2^53.
    let bits = p.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let (mantissa, exponent) = if biased == 0 {
        (bits & ((1 << 52) - 1), -1074)
    } else {
        ((bits & ((1 << 52) - 1)) | (1 << 52), biased - 1075)
    };
    // p < 1, so exponent ≤ −53: z = −exponent − 53 leading bits must be 0.
    let mut zeros = (-exponent - 53) as u32;
    while zeros >= 64 {
        if rng.next_u64() != 0 {
            return false;
        }
        zeros -= 64;
    }
    if zeros > 0 && rng.next_u64() >> (64 - zeros) != 0 {
        return false;
    }
    (rng.next_u64() >> 11) < mantissa
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four (ε, δ) conditions between neighbouring counts, checked in
    /// exact rational arithmetic is not needed: each side is evaluated with
    /// rounding against the claim, so a pass is a proof for the table.
    fn check_table(epsilon: f64, delta: f64, k: u32) {
        let s = PartitionSelection::new(epsilon, delta, k).unwrap();
        let (e, d) = (epsilon / k as f64, delta / k as f64);
        let grow = up(e.exp(), 2);
        let mut previous = 0.0;
        for n in 1..=s.always_kept_from() + 2 {
            let p = s.keep_probability(n);
            assert!(p >= previous, "π not increasing at {n}");
            // kept: P(n) ≤ e^ε P(n−1) + δ;   dropped: 1 − P(n−1) ≤ e^ε (1 − P(n)) + δ
            assert!(
                p <= up(up(grow * previous, 1) + d, 1),
                "kept bound at n = {n} (ε {epsilon}, δ {delta})"
            );
            assert!(
                down(1.0 - previous, 1) <= up(up(grow * up(1.0 - p, 1), 1) + d, 1),
                "dropped bound at n = {n}"
            );
            previous = p;
        }
        assert_eq!(s.keep_probability(s.always_kept_from()), 1.0);
    }

    #[test]
    fn the_table_meets_both_bounds_and_reaches_one() {
        for &epsilon in &[1e-3, 0.01, 0.1, 0.5, 1.0, 3.0, 20.0] {
            for &delta in &[1e-12, 1e-9, 1e-6, 1e-3, 0.1] {
                for k in [1, 3] {
                    // Only the smallest ε with the smallest δ needs a longer table than kept.
                    match PartitionSelection::new(epsilon, delta, k) {
                        Ok(_) => check_table(epsilon, delta, k),
                        Err(_) => assert!(
                            epsilon / (k as f64) < 2e-3 && delta < 1e-6,
                            "ε {epsilon}, δ {delta}, k {k}"
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn it_is_the_optimal_rule() {
        // Small values by hand: ε = ln 2, δ = 0.1: π(1) = 0.1, π(2) = 0.3,
        // π(3) = min(0.7, 1 − (0.7 − 0.1)/2 = 0.7) = 0.7, π(4) = min(1.5, 1 − 0.1) = 0.9, π(5) = 1.
        let s = PartitionSelection::new(std::f64::consts::LN_2, 0.1, 1).unwrap();
        let want = [0.1, 0.3, 0.7, 0.9, 1.0];
        for (n, w) in want.iter().enumerate() {
            let p = s.keep_probability(n as u64 + 1);
            assert!(
                (p - w).abs() < 1e-12 && p <= *w,
                "π({}) = {p}, want {w}",
                n + 1
            );
        }
        // The Laplace threshold rule keeps less at the same (ε, δ): at the
        // count where it keeps with probability 1/2, π is higher.
        let s = PartitionSelection::new(1.0, 1e-6, 1).unwrap();
        let threshold = 1.0 + (1.0f64 / (2.0 * 1e-6)).ln(); // keep iff n + Lap(1) > threshold
        let laplace_keep = |n: f64| {
            let t = threshold - n;
            if t >= 0.0 {
                0.5 * (-t).exp()
            } else {
                1.0 - 0.5 * t.exp()
            }
        };
        for n in 1..s.always_kept_from() {
            assert!(
                s.keep_probability(n) + 1e-15 >= laplace_keep(n as f64),
                "n = {n}"
            );
        }
        assert!(s.always_kept_from() < 2 * threshold.ceil() as u64 + 5);
    }

    #[test]
    fn refuses_what_cannot_select() {
        assert!(PartitionSelection::new(1.0, 0.0, 1).is_err());
        assert!(PartitionSelection::new(0.0, 1e-6, 1).is_err());
        assert!(PartitionSelection::new(1.0, 1e-6, 0).is_err());
        assert!(PartitionSelection::new(1e-4, 1e-300, 1).is_err());
    }
}
