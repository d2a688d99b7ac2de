//! Exact accuracy of the noise a mechanism really samples on the lattice.
//!
//! Every lattice noise here is a symmetric "step" law on Z: magnitudes m ≥ 0
//! in blocks of `period` steps, block k weighing b^k on its first `inner`
//! steps and b^(k+1) on the rest (the discrete staircase; Laplace is the
//! case period = inner = 1). Sums over the blocks have closed forms, so the
//! figures are exact up to float rounding, even at 2^40 steps per unit.

/// Expected error of a noise, in the units of the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accuracy {
    /// E|X|.
    pub mean_abs_error: f64,
    /// √E[X²] (the noise has mean zero).
    pub std_dev: f64,
    /// The smallest h with P(|X| ≤ h) ≥ the confidence asked for.
    pub ci_half_width: f64,
}

/// A symmetric step law on the lattice, in lattice steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLaw {
    /// −ln b: the log-ratio between consecutive blocks.
    pub decay: f64,
    /// Steps per block (D ≥ 1).
    pub period: f64,
    /// Steps at the block's higher level (0 ≤ r ≤ D).
    pub inner: f64,
}

impl StepLaw {
    fn b(&self) -> f64 {
        (-self.decay).exp()
    }

    /// 1 − b, without cancellation when b is close to 1.
    fn one_minus_b(&self) -> f64 {
        -(-self.decay).exp_m1()
    }

    /// The unnormalised weight of one block at level 0: r + b(D − r).
    fn block_weight(&self) -> f64 {
        self.inner + self.b() * (self.period - self.inner)
    }

    fn weight_at_zero(&self) -> f64 {
        if self.inner > 0.0 {
            1.0
        } else {
            self.b()
        }
    }

    /// Normaliser over all of Z: 2·Σ_{m≥0} w(m) − w(0).
    fn total(&self) -> f64 {
        2.0 * self.block_weight() / self.one_minus_b() - self.weight_at_zero()
    }

    /// Σ_{m=0}^{h} w(m), for h = K·D + j.
    fn cumulative(&self, h: f64) -> f64 {
        let (d, r, b) = (self.period, self.inner, self.b());
        let k = (h / d).floor();
        let j = h - k * d;
        let full = self.block_weight() * -(-self.decay * k).exp_m1() / self.one_minus_b();
        let bk = (-self.decay * k).exp();
        full + bk * ((j + 1.0).min(r) + b * (j + 1.0 - r).max(0.0))
    }

    /// P(|X| ≤ h).
    pub fn mass_within(&self, h: f64) -> f64 {
        (2.0 * self.cumulative(h) - self.weight_at_zero()) / self.total()
    }

    /// P(X ≥ m), in closed form (no cancellation for small tails): for
    /// m = K·D + j ≥ 0 it is b^K·((r − j)⁺ + b·(D − max(j, r))) plus every
    /// later block, b^(K+1)·(r + b(D − r))/(1 − b), over the normaliser;
    /// below 0 by symmetry.
    pub fn tail(&self, m: i128) -> f64 {
        if m <= 0 {
            return 1.0 - self.tail(1 - m);
        }
        let (d, r, b) = (self.period, self.inner, self.b());
        let m = m as f64;
        let k = (m / d).floor();
        let j = m - k * d;
        let bk = (-self.decay * k).exp();
        let this_block = (r - j).max(0.0) + b * (d - j.max(r));
        (bk * this_block + bk * b * self.block_weight() / self.one_minus_b()) / self.total()
    }

    /// P(X = n), for tests.
    pub fn pmf(&self, n: i128) -> f64 {
        let m = n.unsigned_abs() as f64;
        let k = (m / self.period).floor();
        let j = m - k * self.period;
        let level = if j < self.inner { k } else { k + 1.0 };
        (-self.decay * level).exp() / self.total()
    }

    /// E|X|, √E[X²] and the confidence half-width, in lattice steps.
    pub fn accuracy_in_steps(&self, confidence: f64) -> Accuracy {
        let (d, r, b, omb) = (self.period, self.inner, self.b(), self.one_minus_b());
        let w = self.block_weight();
        let s1 = |a: f64, c: f64| (c * (c - 1.0) - a * (a - 1.0)) / 2.0;
        let s2 = |a: f64, c: f64| {
            ((c - 1.0) * c * (2.0 * c - 1.0) - (a - 1.0) * a * (2.0 * a - 1.0)) / 6.0
        };
        // Within a block, offsets j weigh 1 (j < r) or b (j ≥ r).
        let j1 = s1(0.0, r) + b * s1(r, d);
        let j2 = s2(0.0, r) + b * s2(r, d);
        // Σ_k b^k, Σ_k k b^k, Σ_k k² b^k.
        let (g0, g1, g2) = (
            1.0 / omb,
            b / (omb * omb),
            b * (1.0 + b) / (omb * omb * omb),
        );
        let first = d * w * g1 + j1 * g0;
        let second = d * d * w * g2 + 2.0 * d * j1 * g1 + j2 * g0;
        let z = self.total();
        Accuracy {
            mean_abs_error: 2.0 * first / z,
            std_dev: (2.0 * second / z).sqrt(),
            ci_half_width: self.ci_half_width_in_steps(confidence),
        }
    }

    /// The smallest whole h with P(|X| ≤ h) ≥ confidence, by bisection.
    pub fn ci_half_width_in_steps(&self, confidence: f64) -> f64 {
        half_width_by_bisection(self.period, confidence, |h| self.mass_within(h))
    }
}

/// The smallest whole h ≥ 0 with `mass_within(h)` ≥ confidence: doubling
/// from `start`, then bisection. Both loops are bounded: the doubling stops
/// at the largest float (the figure is then infinite), and the bisection
/// stops when no whole number lies strictly between its ends (above 2^53
/// the floats are themselves whole numbers, and the figure is exact to the
/// float resolution), so at most ~2100 steps in all.
pub(crate) fn half_width_by_bisection(
    start: f64,
    confidence: f64,
    mass_within: impl Fn(f64) -> f64,
) -> f64 {
    let mut hi = start.max(1.0);
    while mass_within(hi) < confidence {
        crate::interrupt::check();
        if hi > f64::MAX / 2.0 {
            return f64::INFINITY;
        }
        hi *= 2.0;
    }
    let mut lo = -1.0; // h = −1 holds nothing
    while hi - lo > 1.0 {
        let mid = ((lo + hi) / 2.0).floor();
        if mid <= lo || mid >= hi {
            break;
        }
        if mid >= 0.0 && mass_within(mid) >= confidence {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Any lattice noise's law, in steps: what accuracy figures are computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Law {
    Step(StepLaw),
    /// P(n) ∝ e^(−decay·|n|) for |n| ≤ limit, zero beyond.
    TruncatedGeometric {
        decay: f64,
        limit: f64,
    },
    /// Each of −half … half − 1 with probability 1/(2·half).
    Uniform {
        half: f64,
    },
    /// P(n) ∝ e^(−n²/(2·variance)).
    Gaussian {
        variance: f64,
    },
}

/// Below this many steps a law's sums are taken term by term.
const DIRECT_SUM_STEPS: f64 = 1_048_576.0;

impl Law {
    /// P(X = n).
    pub fn pmf(&self, n: i128) -> f64 {
        let m = n.unsigned_abs() as f64;
        match *self {
            Law::Step(s) => s.pmf(n),
            Law::TruncatedGeometric { decay, limit } => {
                if m > limit {
                    0.0
                } else {
                    let z = 2.0 * -(-decay * (limit + 1.0)).exp_m1() / -(-decay).exp_m1() - 1.0;
                    (-decay * m).exp() / z
                }
            }
            Law::Uniform { half } => {
                if (n as f64) >= -half && (n as f64) < half {
                    0.5 / half
                } else {
                    0.0
                }
            }
            Law::Gaussian { variance } => {
                (-m * m / (2.0 * variance)).exp() / gaussian_total(variance)
            }
        }
    }

    /// P(|X| ≤ h), for whole h ≥ 0.
    pub fn mass_within(&self, h: f64) -> f64 {
        match *self {
            Law::Step(s) => s.mass_within(h),
            Law::TruncatedGeometric { decay, limit } => {
                let h = h.min(limit);
                let q = -(-decay).exp_m1();
                let part = |k: f64| 2.0 * -(-decay * (k + 1.0)).exp_m1() / q - 1.0;
                part(h) / part(limit)
            }
            Law::Uniform { half } => ((2.0 * h + 1.0) / (2.0 * half)).min(1.0),
            Law::Gaussian { variance } => {
                let sigma = variance.sqrt();
                if sigma < DISCRETE_GAUSSIAN_SUMS_BELOW {
                    let within: f64 = (-(h as i64)..=h as i64)
                        .map(|n| gaussian_weight(n as f64, variance))
                        .sum();
                    within / gaussian_total(variance)
                } else {
                    statrs::function::erf::erf((h + 0.5) / (sigma * std::f64::consts::SQRT_2))
                }
            }
        }
    }

    /// E|X|, √E[X²] and the confidence half-width, in lattice steps.
    pub fn accuracy_in_steps(&self, confidence: f64) -> Accuracy {
        let (mean_abs_error, second) = match *self {
            Law::Step(s) => return s.accuracy_in_steps(confidence),
            Law::TruncatedGeometric { decay, limit } => truncated_geometric_moments(decay, limit),
            Law::Uniform { half } => (half / 2.0, (2.0 * half * half + 1.0) / 6.0),
            Law::Gaussian { variance } => {
                let sigma = variance.sqrt();
                if sigma < DISCRETE_GAUSSIAN_SUMS_BELOW {
                    let reach = (40.0 * sigma + 10.0).ceil() as i64;
                    let total = gaussian_total(variance);
                    let (mut first, mut second) = (0.0, 0.0);
                    for n in 1..=reach {
                        let w = gaussian_weight(n as f64, variance);
                        first += 2.0 * n as f64 * w;
                        second += 2.0 * (n * n) as f64 * w;
                    }
                    (first / total, second / total)
                } else {
                    // Poisson summation: at σ ≥ 2^12 steps the lattice moments
                    // equal the continuous ones to far below float resolution.
                    (sigma * (2.0 / std::f64::consts::PI).sqrt(), variance)
                }
            }
        };
        Accuracy {
            mean_abs_error,
            std_dev: second.sqrt(),
            ci_half_width: self.ci_half_width_in_steps(confidence),
        }
    }

    /// The smallest whole h with P(|X| ≤ h) ≥ confidence, by bisection.
    pub fn ci_half_width_in_steps(&self, confidence: f64) -> f64 {
        if let Law::Step(s) = self {
            return s.ci_half_width_in_steps(confidence);
        }
        half_width_by_bisection(1.0, confidence, |h| self.mass_within(h))
    }
}

/// Below this σ (in steps) the discrete Gaussian's sums are taken term by term.
const DISCRETE_GAUSSIAN_SUMS_BELOW: f64 = 4096.0;

fn gaussian_weight(n: f64, variance: f64) -> f64 {
    (-n * n / (2.0 * variance)).exp()
}

/// Σ_n e^(−n²/(2σ²)) over Z.
fn gaussian_total(variance: f64) -> f64 {
    let sigma = variance.sqrt();
    if sigma < DISCRETE_GAUSSIAN_SUMS_BELOW {
        let reach = (40.0 * sigma + 10.0).ceil() as i64;
        1.0 + 2.0
            * (1..=reach)
                .map(|n| gaussian_weight(n as f64, variance))
                .sum::<f64>()
    } else {
        sigma * (2.0 * std::f64::consts::PI).sqrt()
    }
}

/// E|X| and E[X²] of the truncated two-sided geometric: term by term on
/// small supports, else from the closed forms of Σ m^k b^m over 0 … A
/// (their cancellation costs digits only when A·decay is tiny).
fn truncated_geometric_moments(decay: f64, limit: f64) -> (f64, f64) {
    if limit <= DIRECT_SUM_STEPS {
        let (mut s0, mut s1, mut s2) = (0.0, 0.0, 0.0);
        for m in 0..=limit as u64 {
            let w = (-decay * m as f64).exp();
            s0 += w;
            s1 += m as f64 * w;
            s2 += (m as f64) * (m as f64) * w;
        }
        let z = 2.0 * s0 - 1.0;
        return (2.0 * s1 / z, 2.0 * s2 / z);
    }
    let b = (-decay).exp();
    let q = -(-decay).exp_m1();
    let l = limit + 1.0;
    let bl = (-decay * l).exp();
    let one_minus_bl = -(-decay * l).exp_m1();
    let s0 = one_minus_bl / q;
    let s1 = b * one_minus_bl / (q * q) - l * bl / q;
    let s2 = b * (1.0 + b) / (q * q * q) * one_minus_bl - bl * (l * l / q + 2.0 * l * b / (q * q));
    let z = 2.0 * s0 - 1.0;
    (2.0 * s1 / z, 2.0 * s2 / z)
}

impl Accuracy {
    /// Converts figures in lattice steps to the query's units.
    pub fn scaled(self, granularity: f64) -> Accuracy {
        Accuracy {
            mean_abs_error: self.mean_abs_error * granularity,
            std_dev: self.std_dev * granularity,
            ci_half_width: self.ci_half_width * granularity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometric_case_matches_its_closed_forms() {
        // Two-sided geometric with ratio c: E|X| = 2c/(1 − c²), E[X²] = 2c/(1 − c)².
        let law = StepLaw {
            decay: 0.5,
            period: 1.0,
            inner: 1.0,
        };
        let c = (-0.5f64).exp();
        let a = law.accuracy_in_steps(0.95);
        assert!((a.mean_abs_error - 2.0 * c / (1.0 - c * c)).abs() < 1e-12);
        assert!((a.std_dev.powi(2) - 2.0 * c / (1.0 - c).powi(2)).abs() < 1e-12);
        // P(|X| ≤ h) = 1 − 2c^(h+1)/(1 + c).
        let h = a.ci_half_width;
        let within = |h: f64| 1.0 - 2.0 * c.powf(h + 1.0) / (1.0 + c);
        assert!(within(h) >= 0.95 && within(h - 1.0) < 0.95);
    }

    /// A law's figures against sums over its pmf on `range`.
    fn check_against_direct_sums(law: Law, reach: i128) {
        let range = -reach..=reach;
        let total: f64 = range.clone().map(|n| law.pmf(n)).sum();
        assert!((total - 1.0).abs() < 1e-9, "{law:?}: {total}");
        let mean_abs: f64 = range.clone().map(|n| law.pmf(n) * n.abs() as f64).sum();
        let second: f64 = range.clone().map(|n| law.pmf(n) * (n * n) as f64).sum();
        let a = law.accuracy_in_steps(0.9);
        assert!(
            (a.mean_abs_error - mean_abs).abs() < 1e-9 * mean_abs.max(1.0),
            "{law:?}"
        );
        assert!(
            (a.std_dev.powi(2) - second).abs() < 1e-8 * second.max(1.0),
            "{law:?}"
        );
        let h = a.ci_half_width as i128;
        let mass = |h: i128| (-h..=h).map(|n| law.pmf(n)).sum::<f64>();
        assert!(
            mass(h) >= 0.9 - 1e-12 && (h == 0 || mass(h - 1) < 0.9),
            "{law:?}"
        );
    }

    #[test]
    fn other_laws_match_direct_sums() {
        for law in [
            Law::TruncatedGeometric {
                decay: 0.01,
                limit: 700.0,
            },
            Law::TruncatedGeometric {
                decay: 0.5,
                limit: 3.0,
            },
            Law::Uniform { half: 37.0 },
            Law::Gaussian { variance: 13.7 },
            Law::Gaussian { variance: 0.2 },
        ] {
            check_against_direct_sums(law, 5000);
        }
    }

    #[test]
    fn truncated_closed_forms_agree_with_the_sums() {
        // Just above the direct-sum cut-off the closed forms take over.
        let (decay, limit) = (3.0 / DIRECT_SUM_STEPS, DIRECT_SUM_STEPS + 1.0);
        let closed = truncated_geometric_moments(decay, limit);
        let direct = truncated_geometric_moments(decay, DIRECT_SUM_STEPS);
        assert!(
            (closed.0 / direct.0 - 1.0).abs() < 1e-5 && (closed.1 / direct.1 - 1.0).abs() < 1e-5
        );
    }

    #[test]
    fn pmf_sums_to_one_and_moments_match_direct_sums() {
        for (decay, period, inner) in [
            (1.0, 8.0, 3.0),
            (0.3, 5.0, 0.0),
            (2.0, 5.0, 5.0),
            (1.0, 1.0, 0.0),
        ] {
            check_against_direct_sums(
                Law::Step(StepLaw {
                    decay,
                    period,
                    inner,
                }),
                4000,
            );
        }
    }
}
