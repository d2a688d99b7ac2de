//! The staircase mechanism (Geng & Viswanath), which is also Soria-Comas &
//! Domingo-Ferrer's optimal data-independent noise (MECHANISMS.md §3),
//! sampled exactly on the lattice.

use crate::accuracy::StepLaw;
use crate::entropy::Entropy;
use crate::exp_neg::ExpNeg;
use crate::noise::LatticeNoise;
use crate::rational::Epsilon;
use crate::sampler::{first_kept, geometric_exp, uniform_below};
use crate::Error;

/// What the user wants the noise to be small in; it picks γ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Mean absolute error: γ = 1/(1 + e^(ε/2)).
    MeanAbsolute,
    /// Variance: Geng's closed form.
    Variance,
    /// The shortest symmetric interval holding this confidence, found numerically.
    Interval(f64),
    /// γ as given.
    Gamma(f64),
}

impl Loss {
    /// Parses `'l1'`, `'l2'`, `'ci'` (95 %), `'ci=0.99'` or `'gamma=0.3'`.
    pub fn parse(text: &str) -> Result<Loss, Error> {
        const ALLOWED: &str =
            "one of 'l1', 'l2', 'ci', 'ci=<confidence in (0, 1)>', 'gamma=<γ in [0, 1]>'";
        let t = text.trim().to_ascii_lowercase();
        let number = |v: &str| {
            v.trim()
                .parse::<f64>()
                .map_err(|_| Error::invalid("loss", ALLOWED, format!("'{text}'")))
        };
        match t.as_str() {
            "l1" => Ok(Loss::MeanAbsolute),
            "l2" => Ok(Loss::Variance),
            "ci" => Ok(Loss::Interval(0.95)),
            _ => {
                if let Some(v) = t.strip_prefix("ci=") {
                    let c = number(v)?;
                    check_confidence(c)?;
                    Ok(Loss::Interval(c))
                } else if let Some(v) = t.strip_prefix("gamma=") {
                    let g = number(v)?;
                    if !(0.0..=1.0).contains(&g) {
                        return Err(Error::invalid("gamma", "in [0, 1]", g));
                    }
                    Ok(Loss::Gamma(g))
                } else {
                    Err(Error::invalid("loss", ALLOWED, format!("'{text}'")))
                }
            }
        }
    }

    /// The staircase's γ for this loss at privacy loss ε. A loss's optimal γ
    /// is never 0 (it only underflows there), so it is kept positive for the
    /// floor in `Staircase::new` to apply.
    pub fn gamma(&self, epsilon: f64) -> f64 {
        let b = (-epsilon).exp();
        let optimal = match *self {
            Loss::MeanAbsolute => 1.0 / (1.0 + (epsilon / 2.0).exp()),
            Loss::Variance => {
                let cube = (b - 2.0 * b * b + 2.0 * b.powi(4) - b.powi(5)).cbrt();
                (-b / (1.0 - b) + cube / (2f64.cbrt() * (1.0 - b).powi(2))).clamp(0.0, 1.0)
            }
            Loss::Interval(c) => interval_gamma(epsilon, c),
            Loss::Gamma(g) => return g,
        };
        optimal.max(f64::MIN_POSITIVE)
    }
}

pub fn check_confidence(c: f64) -> Result<(), Error> {
    if c > 0.0 && c < 1.0 {
        Ok(())
    } else {
        Err(Error::invalid("confidence", "in (0, 1)", c))
    }
}

/// The γ minimising the symmetric interval that holds `confidence`, for the
/// continuous staircase (approximated with 2^32 steps per Δ): a grid, then
/// golden-section search around the grid's best point. It costs about a
/// millisecond: the SQL layer keeps the plans it computed.
fn interval_gamma(epsilon: f64, confidence: f64) -> f64 {
    let period = 2f64.powi(32);
    let width = |gamma: f64| {
        StepLaw {
            decay: epsilon,
            period,
            inner: (gamma * period).round(),
        }
        .ci_half_width_in_steps(confidence)
    };
    // A linear grid and a logarithmic one (the optimum is tiny at large ε),
    // then golden-section search between the best point's neighbours.
    const GRID: usize = 200;
    let mut grid: Vec<f64> = (0..=GRID).map(|i| i as f64 / GRID as f64).collect();
    grid.extend((0..GRID).map(|i| 10f64.powf(-8.0 + 8.0 * i as f64 / GRID as f64)));
    grid.sort_by(f64::total_cmp);
    let widths: Vec<f64> = grid
        .iter()
        .map(|g| {
            crate::interrupt::check();
            width(*g)
        })
        .collect();
    let at = (0..grid.len())
        .min_by(|a, b| widths[*a].total_cmp(&widths[*b]))
        .expect("grid is not empty");
    let best = grid[at];
    let mid = golden_section_min(
        grid[at.saturating_sub(1)],
        grid[(at + 1).min(grid.len() - 1)],
        60,
        width,
    );
    if width(mid) <= width(best) {
        mid
    } else {
        best
    }
}

/// The minimiser of a unimodal `f` on [lo, hi], by golden-section search:
/// one new evaluation per iteration (the other inner point is kept).
pub(crate) fn golden_section_min(
    mut lo: f64,
    mut hi: f64,
    iterations: usize,
    f: impl Fn(f64) -> f64,
) -> f64 {
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (hi - phi * (hi - lo), lo + phi * (hi - lo));
    let (mut fa, mut fb) = (f(a), f(b));
    for _ in 0..iterations {
        crate::interrupt::check();
        if fa <= fb {
            (hi, b, fb) = (b, a, fa);
            a = hi - phi * (hi - lo);
            fa = f(a);
        } else {
            (lo, a, fa) = (a, b, fb);
            b = lo + phi * (hi - lo);
            fb = f(b);
        }
    }
    0.5 * (lo + hi)
}

/// The smallest acceptance rate of the offset sampler, r/D + (1 − r/D)·b:
/// a γ that would go below it (large ε with a tiny optimal γ) is raised to
/// 2^-10, so a draw takes at most ~1024 tries. Any γ is ε-DP; the accuracy
/// figures are those of the γ actually used.
pub const MIN_ACCEPTANCE: f64 = 1.0 / 1024.0;

/// The discrete staircase on the lattice: blocks of D steps (the
/// sensitivity), the first r = round(γD) of each at weight b^k, the rest at
/// b^(k+1), b = e^(−ε).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Staircase {
    epsilon: Epsilon,
    period: u128,
    inner: u128,
    /// Bernoulli(b): an outer offset's weight relative to an inner one.
    outer: ExpNeg,
}

impl Staircase {
    pub fn new(epsilon: Epsilon, steps: u128, gamma: f64) -> Result<Staircase, Error> {
        if steps == 0 {
            return Err(Error::invalid("sensitivity", "> 0", 0));
        }
        if !(0.0..=1.0).contains(&gamma) {
            return Err(Error::invalid("gamma", "in [0, 1]", gamma));
        }
        let b = (-epsilon.value()).exp();
        let gamma = if gamma > 0.0 && gamma + (1.0 - gamma) * b < MIN_ACCEPTANCE {
            MIN_ACCEPTANCE
        } else {
            gamma
        };
        let inner = ((gamma * steps as f64).round() as u128).min(steps);
        Ok(Staircase {
            epsilon,
            period: steps,
            inner,
            outer: ExpNeg::new(epsilon.num, epsilon.den),
        })
    }

    /// The inner width r, in steps.
    pub fn inner(&self) -> u128 {
        self.inner
    }
}

impl LatticeNoise for Staircase {
    fn sample<E: Entropy>(&self, rng: &mut E) -> i128 {
        let (s, t) = (self.epsilon.num, self.epsilon.den);
        loop {
            // Block index: P(G = k) = (1 − b) b^k.
            // At ε = 1 the block is the count of e^(−1) successes itself,
            // without geometric_exp's dispatch (a tenth of a draw).
            let block = if (s, t) == (1, 1) {
                crate::exp_neg::geometric(rng)
            } else {
                geometric_exp(rng, s, t)
            };
            // Offset in the block: uniform, an outer one kept with probability b.
            // With r = 0 every offset weighs the same, so none is rejected.
            let offset = first_kept(
                rng,
                |rng| uniform_below(rng, self.period),
                |rng, j| self.inner == 0 || j < self.inner || self.outer.sample(rng),
            );
            let magnitude = block
                .checked_mul(self.period)
                .and_then(|m| m.checked_add(offset))
                .and_then(|m| i128::try_from(m).ok())
                .expect("staircase draw overflow");
            let negative = rng.bit();
            // Zero would be reached from both signs: keep it from one only.
            if negative && magnitude == 0 {
                crate::interrupt::check();
                continue;
            }
            return if negative { -magnitude } else { magnitude };
        }
    }

    fn law(&self) -> crate::accuracy::Law {
        crate::accuracy::Law::Step(StepLaw {
            decay: self.epsilon.value(),
            period: self.period as f64,
            inner: self.inner as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_parses_and_refuses() {
        assert_eq!(Loss::parse("L2").unwrap(), Loss::Variance);
        assert_eq!(Loss::parse("ci").unwrap(), Loss::Interval(0.95));
        assert_eq!(Loss::parse("ci=0.99").unwrap(), Loss::Interval(0.99));
        assert_eq!(Loss::parse("gamma=0.25").unwrap(), Loss::Gamma(0.25));
        for bad in ["l3", "ci=1", "gamma=1.5", "gamma=x", ""] {
            assert!(Loss::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn large_epsilon_draws_terminate() {
        // At ε = 1000 the l2 γ is 0 and b underflows; at ε = 60 the l1 γ is
        // ~1e-13: both would reject (nearly) forever without the floor.
        let mut r = crate::BitPool::new(
            <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(1),
        );
        for (e, loss) in [
            (1000.0, Loss::Variance),
            (60.0, Loss::MeanAbsolute),
            (1000.0, Loss::Gamma(0.0)),
        ] {
            let s = Staircase::new(Epsilon::new(e).unwrap(), 1 << 40, loss.gamma(e)).unwrap();
            for _ in 0..1000 {
                assert!(s.sample(&mut r).unsigned_abs() < 1 << 40);
            }
        }
    }

    #[test]
    fn gamma_matches_the_papers() {
        // Soria-Comas & Domingo-Ferrer: d = 0.416737 (variance) at ε = 1, Δ = 1.
        assert!((Loss::Variance.gamma(1.0) - 0.416737).abs() < 1e-5);
        // ... and d ≈ 0.993 for the shortest 95 % interval.
        assert!((Loss::Interval(0.95).gamma(1.0) - 0.993).abs() < 0.005);
        assert!((Loss::MeanAbsolute.gamma(0.0) - 0.5).abs() < 1e-12);
    }
}
