//! Centred averages and variances: `dp_avg`, `dp_var`, `dp_stddev`.
//!
//! Values are clamped to [lower, upper] and rounded onto a lattice 2^k as
//! a sum's are; the transition keeps Σr (steps), n and, for a variance,
//! Σq, q a value's centred square on its own lattice. Centring is done
//! at release, exactly: with lo, hi the rounded bounds, each value's
//! centred form 2r − (lo + hi) is an integer of magnitude at most
//! D = hi − lo on the half lattice 2^(k−1), and Σ(2r − lo − hi) =
//! 2·Σr − n·(lo + hi). So a sum's state serves (parallel combine, Citus
//! merge) and the noisy sum has sensitivity (upper − lower)/2, not
//! max(|lower|, |upper|).
//!
//! ε is split in sixty-fourths (`Epsilon::sixty_fourths`, exact) to
//! minimise the worst-case first-order variance of the estimate over the
//! true data (`average_split`, `variance_split`).

use crate::accuracy::Accuracy;
use crate::calibration::{Calibration, Shape};
use crate::entropy::Entropy;
use crate::lattice::Lattice;
use crate::mechanism::Noise;
use crate::noise::LatticeNoise;
use crate::params::{Bounds, Choice, Delta, Mechanism};
use crate::plan::Plan;
use crate::rational::Epsilon;
use crate::staircase::Loss;
use crate::Error;

/// Shares of ε are counted in sixty-fourths.
pub const PARTS: u32 = 64;

/// Standard deviation per unit of sensitivity of the staircase a centred
/// sum gets (on a lattice fine enough to be continuous: 2^20 steps).
fn staircase_unit_sd(epsilon: Epsilon) -> f64 {
    const STEPS: u128 = 1 << 20;
    Noise::new(
        Mechanism::Staircase,
        epsilon,
        Delta::ZERO,
        STEPS,
        Loss::Variance,
    )
    .map(|n| n.law().accuracy_in_steps(0.95).std_dev / STEPS as f64)
    .unwrap_or(f64::INFINITY)
}

/// Standard deviation of the geometric noise a count gets.
fn geometric_sd(epsilon: Epsilon) -> f64 {
    Noise::new(Mechanism::Laplace, epsilon, Delta::ZERO, 1, Loss::Variance)
        .map(|n| n.law().accuracy_in_steps(0.95).std_dev)
        .unwrap_or(f64::INFINITY)
}

/// The average's rule: the sum's share j/64 of ε minimising
/// s(εj/64)² + c(ε(64 − j)/64)², s the staircase's and c the geometric's
/// standard deviation per unit of sensitivity.
///
/// Why: with a = (upper − lower)/2, the estimate m + S̃/Ñ errs by
/// (Z_S − ȳ·Z_N)/n to first order (ȳ the true centred mean, |ȳ| ≤ a), of
/// variance (σ_S² + ȳ²σ_N²)/n²; σ_S = a·s(ε_S), σ_N = c(ε_N). Its
/// maximum over the data, a²(s² + c²)/n², is what the split minimises:
/// data-independent, and the same for every n and every bound. For small
/// ε the two laws are alike and the rule gives about half each; at larger
/// ε the staircase gains on the geometric and the sum's share shrinks.
pub fn average_split(epsilon: Epsilon) -> u32 {
    let s: Vec<f64> = (1..PARTS)
        .map(|j| staircase_unit_sd(epsilon.sixty_fourths(j)))
        .collect();
    let c: Vec<f64> = (1..PARTS)
        .map(|j| geometric_sd(epsilon.sixty_fourths(j)))
        .collect();
    (1..PARTS)
        .min_by(|&a, &b| {
            let cost = |j: u32| s[j as usize - 1].powi(2) + c[(PARTS - j) as usize - 1].powi(2);
            cost(a).total_cmp(&cost(b))
        })
        .expect("63 candidates")
}

/// The variance's rule: shares (squares, sum, count) in sixty-fourths
/// minimising s(ε_Q)²/4 + 4·s(ε_S)² + (9/4)·c(ε_N)².
///
/// Why: V = Q/n − (S/n)² with Q = Σy², S = Σy (y centred, |y| ≤ a), the
/// squares noised centred on a²/2 (sensitivity a²/2). To first order
/// n·dV = dZ − 2μ·dS + (2μ² − Z/n)·dN with μ = S/n and Z/n = Q/n − a²/2;
/// |μ| ≤ a and |2μ² − Z/n| ≤ 3a²/2, so the variance is at most
/// a⁴(s_Q²/4 + 4s_S² + 9c²/4)/n², minimised here.
pub fn variance_split(epsilon: Epsilon) -> (u32, u32, u32) {
    let s: Vec<f64> = (1..PARTS)
        .map(|j| staircase_unit_sd(epsilon.sixty_fourths(j)))
        .collect();
    let c: Vec<f64> = (1..PARTS)
        .map(|j| geometric_sd(epsilon.sixty_fourths(j)))
        .collect();
    let mut best = (f64::INFINITY, (0, 0, 0));
    for q in 1..PARTS - 1 {
        for y in 1..PARTS - q {
            let n = PARTS - q - y;
            let cost = s[q as usize - 1].powi(2) / 4.0
                + 4.0 * s[y as usize - 1].powi(2)
                + 2.25 * c[n as usize - 1].powi(2);
            if cost < best.0 {
                best = (cost, (q, y, n));
            }
        }
    }
    best.1
}

/// The clamping range on the transition's lattice: rounded bounds lo, hi.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Centring {
    /// The lattice values are rounded onto (2^k).
    pub lattice: Lattice,
    pub low: i128,
    pub high: i128,
}

impl Centring {
    /// The lattice for a centred sum of sensitivity a = (upper − lower)/2
    /// at `epsilon` (as a sum's: 2^40 steps per noise scale, 2^20 per a),
    /// doubled: its half steps are the centred sum's steps.
    fn new(bounds: Bounds, epsilon: Epsilon) -> Result<Centring, Error> {
        let a = half_width(bounds)?;
        let half = Lattice::for_noise(a / epsilon.value(), a)?;
        let lattice = Lattice { k: half.k + 1 };
        let (low, high) = (
            lattice.round(bounds.lower())?,
            lattice.round(bounds.upper())?,
        );
        if high - low >= 1 << 62 {
            return Err(Error::OutOfRange(
                "the bounds are too far apart for a centred sum".into(),
            ));
        }
        Ok(Centring { lattice, low, high })
    }

    /// D = hi − lo: the centred sum's sensitivity in half steps.
    pub fn steps(&self) -> u128 {
        (self.high - self.low) as u128
    }

    /// Σ(2r − lo − hi) = 2·Σr − n·(lo + hi), on the half lattice.
    pub fn centred(&self, sum: i128, count: i64) -> Result<i128, Error> {
        sum.checked_mul(2)
            .and_then(|s| {
                (self.low + self.high)
                    .checked_mul(i128::from(count))
                    .and_then(|c| s.checked_sub(c))
            })
            .ok_or_else(|| Error::OutOfRange("the sum is too large to centre".into()))
    }

    /// The centre (lo + hi)/2 on the lattice, as a float8.
    pub fn centre(&self) -> f64 {
        Lattice {
            k: self.lattice.k - 1,
        }
        .release(self.low + self.high)
    }

    /// A clamped value's steps r (the caller clamps).
    pub fn round(&self, clamped: f64) -> Result<i128, Error> {
        self.lattice.round(clamped)
    }
}

/// (upper − lower)/2, refusing equal bounds (nothing to estimate).
fn half_width(bounds: Bounds) -> Result<f64, Error> {
    let a = (bounds.upper() - bounds.lower()) / 2.0;
    if !(a.is_finite() && a > 0.0) {
        return Err(Error::invalid(
            "upper",
            "above lower and within float8 range of it",
            bounds.upper(),
        ));
    }
    Ok(a)
}

/// A staircase plan for a centred sum of `steps` on `lattice`.
fn centred_plan(epsilon: Epsilon, lattice: Lattice, steps: u128) -> Result<Plan, Error> {
    let noise = Noise::new(
        Mechanism::Staircase,
        epsilon,
        Delta::ZERO,
        steps,
        Loss::Variance,
    )?;
    Ok(Plan {
        mechanism: Mechanism::Staircase,
        calibration: Calibration { lattice, steps },
        noise,
    })
}

fn count_plan(epsilon: Epsilon) -> Result<Plan, Error> {
    Plan::new(
        Choice::Fixed(Mechanism::Laplace),
        epsilon,
        Delta::ZERO,
        Loss::Variance,
        Shape::Count,
    )
}

/// `dp_avg`: a staircase sum of centred values and a geometric count, ε
/// split by `average_split`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Average {
    /// The centred sum's plan (on the half lattice, sensitivity D).
    pub sum: Plan,
    pub count: Plan,
    pub bounds: Bounds,
    pub centring: Centring,
    /// The sum's share of ε, in sixty-fourths (the count has the rest).
    pub sum_share: u32,
}

impl Average {
    pub fn new(epsilon: Epsilon, bounds: Bounds) -> Result<Average, Error> {
        let sum_share = average_split(epsilon);
        let (for_sum, for_count) = (
            epsilon.sixty_fourths(sum_share),
            epsilon.sixty_fourths(PARTS - sum_share),
        );
        let centring = Centring::new(bounds, for_sum)?;
        let sum = centred_plan(
            for_sum,
            Lattice {
                k: centring.lattice.k - 1,
            },
            centring.steps(),
        )?;
        Ok(Average {
            sum,
            count: count_plan(for_count)?,
            bounds,
            centring,
            sum_share,
        })
    }

    /// The lattice the transition sums values on.
    pub fn lattice(&self) -> Lattice {
        self.centring.lattice
    }

    /// m + S̃/max(Ñ, 1), clamped to the bounds: post-processing of two
    /// releases whose ε add up to this average's.
    pub fn release<E: Entropy>(
        &self,
        rng: &mut E,
        sum_steps: i128,
        count: i64,
    ) -> Result<f64, Error> {
        let centred = self.centring.centred(sum_steps, count)?;
        let noisy_sum = self.sum.release(rng, centred);
        let noisy_count = self.count.release(rng, i128::from(count));
        Ok(self
            .bounds
            .clamp(self.centring.centre() + noisy_sum / noisy_count.max(1.0)))
    }

    /// The error for a group of `n` persons when the mean sits at a bound
    /// (the worst case): the standard deviation to first order,
    /// √(σ_S² + a²σ_N²)/n, and the mean absolute error and the interval
    /// as the bounds (E|Z_S| + a·E|Z_N|)/n and (h_S + a·h_N)/n, each h at
    /// (1 + confidence)/2 (a union bound).
    pub fn accuracy(&self, n: u64, confidence: f64) -> Accuracy {
        let a = (self.bounds.upper() - self.bounds.lower()) / 2.0;
        let each = (1.0 + confidence) / 2.0;
        let (s, c) = (self.sum.accuracy(each), self.count.accuracy(each));
        let n = n.max(1) as f64;
        Accuracy {
            mean_abs_error: (s.mean_abs_error + a * c.mean_abs_error) / n,
            std_dev: (s.std_dev.powi(2) + (a * c.std_dev).powi(2)).sqrt() / n,
            ci_half_width: (s.ci_half_width + a * c.ci_half_width) / n,
        }
    }
}

/// `dp_var` / `dp_stddev`: noisy sums of centred values (Σy) and of
/// centred squares (Σ(y² − a²/2)) and a noisy count, ε split by
/// `variance_split`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variance {
    pub sum: Plan,
    pub squares: Plan,
    pub count: Plan,
    pub bounds: Bounds,
    pub centring: Centring,
    /// A centred value h (half steps) has square h² on the lattice
    /// 2^(2k−2); it is kept as q = round(h²/2^shift) on 2^(2k−2+shift).
    pub shift: u32,
    /// q of the largest square, D²: the centred squares' sensitivity
    /// (in half steps of the squares' lattice).
    pub square_max: u128,
    /// Shares of ε (squares, sum, count), in sixty-fourths.
    pub shares: (u32, u32, u32),
}

impl Variance {
    pub fn new(epsilon: Epsilon, bounds: Bounds) -> Result<Variance, Error> {
        let shares = variance_split(epsilon);
        let (for_squares, for_sum, for_count) = (
            epsilon.sixty_fourths(shares.0),
            epsilon.sixty_fourths(shares.1),
            epsilon.sixty_fourths(shares.2),
        );
        let centring = Centring::new(bounds, for_sum)?;
        let a = half_width(bounds)?;
        let squares_half = a * a / 2.0;
        if !(squares_half.is_finite() && squares_half > 0.0) {
            return Err(Error::invalid(
                "upper",
                "within float8 range of lower when squared",
                bounds.upper(),
            ));
        }
        // The squares' lattice as a sum's of sensitivity a²/2; never finer
        // than the exact squares' 2^(2k−2).
        let target = Lattice::for_noise(squares_half / for_squares.value(), squares_half)?;
        let exact_k = 2 * (centring.lattice.k - 1);
        let shift = (target.k - exact_k).max(0) as u32;
        let square_max = round_shift(centring.steps() * centring.steps(), shift);
        let squares_lattice = Lattice {
            k: exact_k + shift as i32 - 1,
        };
        Ok(Variance {
            sum: centred_plan(
                for_sum,
                Lattice {
                    k: centring.lattice.k - 1,
                },
                centring.steps(),
            )?,
            squares: centred_plan(for_squares, squares_lattice, square_max.max(1))?,
            count: count_plan(for_count)?,
            bounds,
            centring,
            shift,
            square_max,
            shares,
        })
    }

    pub fn lattice(&self) -> Lattice {
        self.centring.lattice
    }

    /// The steps r of a clamped value and q of its centred square.
    #[inline]
    pub fn steps(&self, clamped: f64) -> Result<(i128, i128), Error> {
        let r = self.centring.round(clamped)?;
        let h = (2 * r - self.centring.low - self.centring.high).unsigned_abs();
        Ok((r, round_shift(h * h, self.shift) as i128))
    }

    /// The noisy variance from Σr, Σq and n: E[y²] − E[y]², clamped to
    /// [0, a²] (post-processing of three releases).
    pub fn release<E: Entropy>(
        &self,
        rng: &mut E,
        sum: i128,
        squares: i128,
        count: i64,
    ) -> Result<f64, Error> {
        let centred = self.centring.centred(sum, count)?;
        let centred_squares = squares
            .checked_mul(2)
            .and_then(|q| q.checked_sub((self.square_max as i128).checked_mul(i128::from(count))?))
            .ok_or_else(|| Error::OutOfRange("the sum of squares is too large to centre".into()))?;
        let noisy_sum = self.sum.release(rng, centred);
        let noisy_squares = self.squares.release(rng, centred_squares);
        let n = self.count.release(rng, i128::from(count)).max(1.0);
        let half_square_max = self
            .squares
            .calibration
            .lattice
            .release(self.square_max as i128);
        let mean = noisy_sum / n;
        let mean_square = noisy_squares / n + half_square_max;
        let a = (self.bounds.upper() - self.bounds.lower()) / 2.0;
        Ok((mean_square - mean * mean).clamp(0.0, a * a))
    }

    /// The first-order worst-case standard deviation of the variance for
    /// `n` persons, a⁴(s_Q²/4… as `variance_split` bounds it, with the
    /// plans' exact laws; mean absolute error and interval as triangle and
    /// union bounds of the three terms.
    pub fn accuracy(&self, n: u64, confidence: f64) -> Accuracy {
        let a = (self.bounds.upper() - self.bounds.lower()) / 2.0;
        let each = 1.0 - (1.0 - confidence) / 3.0;
        let (q, s, c) = (
            self.squares.accuracy(each),
            self.sum.accuracy(each),
            self.count.accuracy(each),
        );
        let weights = (1.0, 2.0 * a, 1.5 * a * a);
        let n = n.max(1) as f64;
        let combine = |x: f64, y: f64, z: f64| (weights.0 * x + weights.1 * y + weights.2 * z) / n;
        Accuracy {
            mean_abs_error: combine(q.mean_abs_error, s.mean_abs_error, c.mean_abs_error),
            std_dev: ((q.std_dev).powi(2)
                + (weights.1 * s.std_dev).powi(2)
                + (weights.2 * c.std_dev).powi(2))
            .sqrt()
                / n,
            ci_half_width: combine(q.ci_half_width, s.ci_half_width, c.ci_half_width),
        }
    }
}

/// x/2^shift rounded half up.
#[inline]
fn round_shift(x: u128, shift: u32) -> u128 {
    if shift == 0 {
        x
    } else if shift >= 128 {
        0
    } else {
        (x >> shift) + ((x >> (shift - 1)) & 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_add_up_and_are_near_even_at_small_epsilon() {
        for e in [0.01, 0.1, 1.0, 5.0] {
            let eps = Epsilon::new(e).unwrap();
            let j = average_split(eps);
            let (s, c) = (eps.sixty_fourths(j), eps.sixty_fourths(64 - j));
            // Exact: the two shares' rationals add up to ε's.
            assert_eq!(
                (s.den, c.den, s.num + c.num),
                (eps.den * 64, eps.den * 64, eps.num * 64)
            );
            assert!(s.value() + c.value() <= eps.value());
            if e <= 0.1 {
                assert!((30..=34).contains(&j), "ε = {e}: {j}");
            }
            let (q, y, n) = variance_split(eps);
            assert_eq!(q + y + n, 64);
        }
    }

    #[test]
    fn centring_is_exact() {
        let eps = Epsilon::new(1.0).unwrap();
        let avg = Average::new(eps, Bounds::new(0.0, 100.0).unwrap()).unwrap();
        let c = avg.centring;
        // Half-step sensitivity D equals (upper − lower)/2 on the half lattice.
        assert_eq!(
            Lattice { k: c.lattice.k - 1 }.release(c.steps() as i128),
            50.0
        );
        assert_eq!(c.centre(), 50.0);
        let r: Vec<i128> = [0.0, 100.0, 30.0]
            .iter()
            .map(|&x| c.round(x).unwrap())
            .collect();
        let centred = c.centred(r.iter().sum(), 3).unwrap();
        assert_eq!(
            Lattice { k: c.lattice.k - 1 }.release(centred),
            -50.0 + 50.0 - 20.0
        );
        assert!(Average::new(eps, Bounds::new(3.0, 3.0).unwrap()).is_err());
    }
}
