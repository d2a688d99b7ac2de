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
        let s2 = |a: f64, c: f64| ((c - 1.0) * c * (2.0 * c - 1.0) - (a - 1.0) * a * (2.0 * a - 1.0)) / 6.0;
        // Within a block, offsets j weigh 1 (j < r) or b (j ≥ r).
        let j1 = s1(0.0, r) + b * s1(r, d);
        let j2 = s2(0.0, r) + b * s2(r, d);
        // Σ_k b^k, Σ_k k b^k, Σ_k k² b^k.
        let (g0, g1, g2) = (1.0 / omb, b / (omb * omb), b * (1.0 + b) / (omb * omb * omb));
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
        let mut hi = self.period;
        while self.mass_within(hi) < confidence {
            hi *= 2.0;
        }
        let mut lo = -1.0; // mass_within(lo) < confidence, as h = −1 holds nothing
        while hi - lo > 1.0 {
            let mid = ((lo + hi) / 2.0).floor();
            if self.mass_within(mid) >= confidence {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
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
        let law = StepLaw { decay: 0.5, period: 1.0, inner: 1.0 };
        let c = (-0.5f64).exp();
        let a = law.accuracy_in_steps(0.95);
        assert!((a.mean_abs_error - 2.0 * c / (1.0 - c * c)).abs() < 1e-12);
        assert!((a.std_dev.powi(2) - 2.0 * c / (1.0 - c).powi(2)).abs() < 1e-12);
        // P(|X| ≤ h) = 1 − 2c^(h+1)/(1 + c).
        let h = a.ci_half_width;
        let within = |h: f64| 1.0 - 2.0 * c.powf(h + 1.0) / (1.0 + c);
        assert!(within(h) >= 0.95 && within(h - 1.0) < 0.95);
    }

    #[test]
    fn pmf_sums_to_one_and_moments_match_direct_sums() {
        for (decay, period, inner) in [(1.0, 8.0, 3.0), (0.3, 5.0, 0.0), (2.0, 5.0, 5.0), (1.0, 1.0, 0.0)] {
            let law = StepLaw { decay, period, inner };
            let range = -4000..=4000i128;
            let total: f64 = range.clone().map(|n| law.pmf(n)).sum();
            assert!((total - 1.0).abs() < 1e-9, "{law:?}: {total}");
            let mean_abs: f64 = range.clone().map(|n| law.pmf(n) * n.abs() as f64).sum();
            let second: f64 = range.clone().map(|n| law.pmf(n) * (n * n) as f64).sum();
            let a = law.accuracy_in_steps(0.9);
            assert!((a.mean_abs_error - mean_abs).abs() < 1e-9 * mean_abs.max(1.0), "{law:?}");
            assert!((a.std_dev.powi(2) - second).abs() < 1e-8 * second.max(1.0), "{law:?}");
            let h = a.ci_half_width as i128;
            let mass = |h: i128| (-h..=h).map(|n| law.pmf(n)).sum::<f64>();
            assert!(mass(h) >= 0.9 - 1e-12 && (h == 0 || mass(h - 1) < 0.9), "{law:?}");
        }
    }
}
