//! Zero-concentrated differential privacy (Bun & Steinke, "Concentrated
//! differential privacy: simplifications, extensions, and lower bounds",
//! TCC 2016): what a release costs in ρ, and the conversions between a
//! (δ-approximate) ρ-zCDP guarantee and an (ε, δ) one.
//!
//! A mechanism is ρ-zCDP when the Rényi divergence of order α between its
//! outputs on neighbouring tables is at most ρα for every α > 1. Costs add
//! up under composition, and the analyst may choose each release after
//! seeing the last: a zCDP filter that stops once the ρ spent would pass
//! the budget is valid at the same rate (Whitehouse, Ramdas, Rogers & Wu,
//! "Fully-adaptive composition in differential privacy", ICML 2023).
//!
//! What each release costs:
//! - The Gaussian, continuous or discrete, of standard deviation σ for L2
//!   sensitivity Δ: ρ = Δ²/(2σ²) (the discrete one: Canonne, Kamath &
//!   Steinke, NeurIPS 2020). dpnoise's discrete Gaussian is cut off at
//!   16 384 σ, a tail below 2^-(10^8), charged as nothing.
//! - A pure ε-DP release: ρ = ε²/2 (Bun & Steinke, Proposition 3.3).
//! - A release at (ε, δ) with δ > 0 and no finite ρ (the truncated
//!   Laplacian, partition selection, a thresholded count's δ, the run
//!   time): δ-approximately (ε²/2)-zCDP (Bun & Steinke, Section 8: every
//!   (ε, δ)-DP mechanism is), whose δ adds up apart from ρ.
//! - Over a person's k groups, each group at ε/k: k·(ε/k)²/2 = ε²/(2k).
//!
//! From ρ to (ε, δ): Canonne, Kamath & Steinke (2020), Corollary 13 (the
//! same as Asoodeh et al. 2021 and Balle et al. 2020 for Rényi DP): ρ-zCDP
//! gives (ε, δ)-DP for
//!   ε = inf over α > 1 of αρ + (ln(1/δ) − ln α)/(α − 1) + ln(1 − 1/α),
//! always below Bun & Steinke's ρ + 2√(ρ ln(1/δ)).

use crate::accuracy::Law;
use crate::noise::LatticeNoise;
use crate::plan::Plan;

/// ρ of a pure ε-DP release: ε²/2, rounded up.
pub fn pure_rho(epsilon: f64) -> f64 {
    up(epsilon * epsilon / 2.0)
}

/// What a release at (ε, δ), shared over `groups` groups of a person
/// (each at ε/k and δ/k), costs under zCDP: (ρ, δ) with ρ = ε²/(2k), δ
/// carried apart (δ-approximate zCDP). Rounded up.
pub fn approximate_cost(epsilon: f64, delta: f64, groups: u32) -> (f64, f64) {
    let k = f64::from(groups.max(1));
    (up(epsilon * epsilon / (2.0 * k)), delta)
}

/// ρ of `plan`'s release over `groups` groups where its noise is the
/// Gaussian (k·Δ²/(2σ²), Δ the sensitivity in lattice steps, σ² the
/// variance it samples); None for every other noise.
pub fn gaussian_rho(plan: &Plan, groups: u32) -> Option<f64> {
    match plan.noise.law() {
        Law::Gaussian { variance } if variance > 0.0 => {
            let d = plan.calibration.steps as f64;
            Some(up(f64::from(groups.max(1)) * d * d / (2.0 * variance)))
        }
        _ => None,
    }
}

/// The ε at which the Gaussian of `shape` at `delta` (over `groups`
/// groups) costs at most `rho` and within a relative 1e-9 of it: how an
/// analyst asks a release for a share of a zCDP budget. The plan's ρ grows
/// with ε: bisection on ln ε. An error where no ε in [1e-9, 1000] reaches it.
pub fn gaussian_epsilon(
    rho: f64,
    delta: f64,
    shape: crate::calibration::Shape,
    groups: u32,
) -> Result<f64, crate::Error> {
    use crate::params::{Choice, Delta, Mechanism};
    use crate::rational::Epsilon;
    let rho_at = |epsilon: f64| -> Result<f64, crate::Error> {
        let plan = Plan::shared(
            Choice::Fixed(Mechanism::Gaussian),
            Epsilon::new(epsilon)?,
            Delta::new(delta)?,
            crate::staircase::Loss::Variance,
            shape,
            groups,
        )?;
        Ok(gaussian_rho(&plan, groups).unwrap_or(f64::INFINITY))
    };
    if !(rho.is_finite() && rho > 0.0) {
        return Err(crate::Error::invalid("rho", "a finite number > 0", rho));
    }
    let (mut lo, mut hi) = (1e-9f64.ln(), 1e3f64.ln());
    if rho_at(lo.exp())? > rho || rho_at(hi.exp())? < rho {
        return Err(crate::Error::invalid(
            "rho",
            "one a Gaussian release at this delta can cost (epsilon between 1e-9 and 1000)",
            rho,
        ));
    }
    for _ in 0..200 {
        crate::interrupt::check();
        let mid = (lo + hi) / 2.0;
        if rho_at(mid.exp())? <= rho {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    Ok(lo.exp())
}

/// Bun & Steinke's conversion: ρ-zCDP gives (ρ + 2√(ρ ln(1/δ)), δ)-DP.
pub fn epsilon_simple(rho: f64, delta: f64) -> f64 {
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

/// The ε of the (ε, δ)-DP guarantee ρ-zCDP gives (Canonne, Kamath &
/// Steinke 2020, Corollary 13), minimised over α by a golden-section
/// search on ln(α − 1) (the bound is unimodal there), rounded up by a
/// relative 1e-9. Never more than `epsilon_simple`. 0 for ρ = 0.
pub fn epsilon_of(rho: f64, delta: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    let at = |t: f64| {
        let alpha = 1.0 + t.exp();
        alpha * rho + ((1.0 / delta).ln() - alpha.ln()) / (alpha - 1.0) + (1.0 - 1.0 / alpha).ln()
    };
    // α − 1 from 1e-6 to 1e9: the minimiser, near 1 + √(ln(1/δ)/ρ), lies inside for every ρ and δ used.
    let (mut lo, mut hi) = ((1e-6f64).ln(), (1e9f64).ln());
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (hi - phi * (hi - lo), lo + phi * (hi - lo));
    let (mut fa, mut fb) = (at(a), at(b));
    for _ in 0..200 {
        if fa < fb {
            hi = b;
            b = a;
            fb = fa;
            a = hi - phi * (hi - lo);
            fa = at(a);
        } else {
            lo = a;
            a = b;
            fa = fb;
            b = lo + phi * (hi - lo);
            fb = at(b);
        }
    }
    let best = fa.min(fb).min(epsilon_simple(rho, delta));
    best * (1.0 + 1e-9)
}

/// The largest ρ whose (ε, δ) guarantee (`epsilon_of`) is within
/// `epsilon`: what a zCDP budget of (ε, δ) may spend. Rounded down.
pub fn rho_for(epsilon: f64, delta: f64) -> f64 {
    if epsilon <= 0.0 {
        return 0.0;
    }
    // epsilon_of grows with ρ, and epsilon_of(ε) > ε: bisect on [0, ε].
    let (mut lo, mut hi) = (0.0f64, epsilon);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if epsilon_of(mid, delta) <= epsilon {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo * (1.0 - 1e-9)
}

/// `x` rounded up to the next float twice: a cost computed in floating
/// point is never below the exact one (0 stays 0).
fn up(x: f64) -> f64 {
    if x > 0.0 {
        x.next_up().next_up()
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approximate::ln_normal_cdf;

    /// The exact (ε, δ) curve of a Gaussian whose ρ-zCDP is tight
    /// (σ = 1, Δ = √(2ρ)): δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), μ = √(2ρ)
    /// (Balle & Wang, ICML 2018). Any valid conversion from ρ must give an
    /// ε at which this δ is within the δ asked.
    fn gaussian_delta(rho: f64, epsilon: f64) -> f64 {
        let mu = (2.0 * rho).sqrt();
        ln_normal_cdf(-epsilon / mu + mu / 2.0).exp()
            - (epsilon + ln_normal_cdf(-epsilon / mu - mu / 2.0)).exp()
    }

    #[test]
    fn the_issues_table_is_the_simple_conversion() {
        // (1, 1e-5) spent evenly on n Gaussian releases of sensitivity 1:
        // σ = 1/√(2ρ/n), with ρ from ε = ρ + 2√(ρ ln(1/δ)).
        let delta: f64 = 1e-5;
        let l = (1.0 / delta).ln();
        let x = (-2.0 * l.sqrt() + (4.0 * l + 4.0).sqrt()) / 2.0;
        let rho = x * x;
        assert!((epsilon_simple(rho, delta) - 1.0).abs() < 1e-12);
        for (n, sigma) in [(10.0, 15.5), (100.0, 49.0), (1000.0, 155.0)] {
            let s = 1.0 / (2.0 * rho / n).sqrt();
            assert!((s - sigma).abs() < 0.1, "{n}: {s}");
        }
    }

    #[test]
    fn the_conversion_is_valid_and_tighter_than_the_simple_one() {
        for rho in [1e-4, 0.01, 0.0209, 0.1, 0.5, 1.0, 5.0] {
            for delta in [1e-3, 1e-5, 1e-6, 1e-9] {
                let e = epsilon_of(rho, delta);
                let simple = epsilon_simple(rho, delta);
                assert!(e <= simple * (1.0 + 1e-9), "{rho} {delta}: {e} > {simple}");
                // Valid: the tight Gaussian meets δ at this ε.
                let exact = gaussian_delta(rho, e);
                assert!(
                    exact <= delta * (1.0 + 1e-6),
                    "{rho} {delta}: δ(ε) = {exact}"
                );
                // And not loose by much: the Gaussian's own ε at δ (by
                // bisection) is at least 2/3 of it, so no conversion from ρ
                // alone could give much less.
                let (mut lo, mut hi) = (0.0f64, e);
                for _ in 0..100 {
                    let mid = (lo + hi) / 2.0;
                    if gaussian_delta(rho, mid) > delta {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                assert!(
                    hi >= e / 1.5,
                    "{rho} {delta}: {e} against the Gaussian's {hi}"
                );
            }
        }
        assert_eq!(epsilon_of(0.0, 1e-5), 0.0);
    }

    #[test]
    fn a_negative_control_fails_the_validity_check() {
        // Claiming ρ + √(ρ ln(1/δ)) (half the simple bound's root term) is
        // not valid: the exact Gaussian needs more δ there.
        let (rho, delta) = (0.0209f64, 1e-5f64);
        let wrong = rho + (rho * (1.0 / delta).ln()).sqrt();
        assert!(gaussian_delta(rho, wrong) > delta);
    }

    #[test]
    fn rho_for_inverts_epsilon_of() {
        for (epsilon, delta) in [(1.0, 1e-5), (0.1, 1e-6), (3.0, 1e-9), (10.0, 1e-3)] {
            let rho = rho_for(epsilon, delta);
            assert!(epsilon_of(rho, delta) <= epsilon, "{epsilon} {delta}");
            assert!(
                epsilon_of(rho * 1.001, delta) > epsilon,
                "{epsilon} {delta}: {rho} too small"
            );
        }
        // The budget (1, 1e-5) buys more than the simple conversion's ρ.
        assert!(rho_for(1.0, 1e-5) > 0.0209);
        assert_eq!(rho_for(0.0, 1e-5), 0.0);
    }

    /// D_α(N ‖ N + d) of a lattice law, summed term by term in log space
    /// over ±`reach` steps around both.
    fn renyi(law: &Law, d: i128, alpha: f64, reach: i128) -> f64 {
        let terms: Vec<f64> = (-reach..=reach + d)
            .filter_map(|n| {
                let (p, q) = (law.pmf(n), law.pmf(n - d));
                (p > 0.0 && q > 0.0).then(|| alpha * p.ln() + (1.0 - alpha) * q.ln())
            })
            .collect();
        let top = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = terms.iter().map(|t| (t - top).exp()).sum();
        (top + sum.ln()) / (alpha - 1.0)
    }

    /// Each mechanism's charged ρ against the Rényi divergence of its exact
    /// lattice law between neighbours (shifted by up to its sensitivity in
    /// steps), at orders from 1.01 to 64: D_α ≤ ρα everywhere; charged
    /// half its ρ, some order fails (the negative control).
    #[test]
    fn the_charged_rho_bounds_the_renyi_divergence_of_each_law() {
        use crate::calibration::Shape;
        use crate::params::{Choice, Delta, IntegerBounds, Mechanism};
        use crate::rational::Epsilon;
        use crate::staircase::Loss;
        let alphas = [1.01, 1.5, 2.0, 4.0, 8.0, 16.0, 64.0];
        for (mechanism, epsilon, delta, shape) in [
            (Mechanism::Gaussian, 1.0, 1e-5, Shape::Count),
            (
                Mechanism::Gaussian,
                0.3,
                1e-6,
                Shape::SumInteger(IntegerBounds::new(0, 3).unwrap()),
            ),
            (Mechanism::Laplace, 1.0, 0.0, Shape::Count),
            (
                Mechanism::Laplace,
                0.5,
                0.0,
                Shape::SumInteger(IntegerBounds::new(0, 4).unwrap()),
            ),
            (Mechanism::Staircase, 1.0, 0.0, Shape::Count),
            (
                Mechanism::Staircase,
                2.0,
                0.0,
                Shape::SumInteger(IntegerBounds::new(-2, 2).unwrap()),
            ),
        ] {
            let plan = Plan::shared(
                Choice::Fixed(mechanism),
                Epsilon::new(epsilon).unwrap(),
                Delta::new(delta).unwrap(),
                Loss::Variance,
                shape,
                1,
            )
            .unwrap();
            let law = plan.noise.law();
            let d = plan.calibration.steps as i128;
            let (rho, reach) = match gaussian_rho(&plan, 1) {
                Some(rho) => {
                    let Law::Gaussian { variance } = law else {
                        unreachable!()
                    };
                    (rho, (40.0 * variance.sqrt()) as i128 + 2 * d)
                }
                None => (pure_rho(epsilon), (80.0 / epsilon * d as f64) as i128 + 50),
            };
            let mut worst_half = 0f64;
            for shift in 1..=d {
                for alpha in alphas {
                    let div = renyi(&law, shift, alpha, reach);
                    assert!(
                        div <= rho * alpha * (1.0 + 1e-9) + 1e-12,
                        "{mechanism:?} {epsilon}: D_{alpha}(shift {shift}) = {div} > {}",
                        rho * alpha
                    );
                    worst_half = worst_half.max(div / (rho / 2.0 * alpha));
                }
            }
            assert!(
                worst_half > 1.0,
                "{mechanism:?} {epsilon}: half its rho would pass ({worst_half})"
            );
        }
    }

    #[test]
    fn costs_of_releases() {
        assert!(pure_rho(1.0) >= 0.5 && pure_rho(1.0) < 0.5 + 1e-15);
        let (rho, delta) = approximate_cost(1.0, 1e-6, 4);
        assert!((rho - 1.0 / 8.0).abs() < 1e-15 && rho >= 0.125 && delta == 1e-6);
        use crate::calibration::Shape;
        use crate::params::{Choice, Delta, Mechanism};
        use crate::rational::Epsilon;
        use crate::staircase::Loss;
        let plan = |mechanism, groups| {
            Plan::shared(
                Choice::Fixed(mechanism),
                Epsilon::new(1.0).unwrap(),
                Delta::new(1e-5).unwrap(),
                Loss::Variance,
                Shape::Count,
                groups,
            )
            .unwrap()
        };
        // The Gaussian's ρ: Δ = 1, σ² as sampled; over k groups, σ grows by
        // √k and ρ stays (the plan is calibrated to the L2 sensitivity √k).
        let one = gaussian_rho(&plan(Mechanism::Gaussian, 1), 1).unwrap();
        let four = gaussian_rho(&plan(Mechanism::Gaussian, 4), 4).unwrap();
        assert!((one - four).abs() < 1e-2 * one, "{one} {four}");
        // (1, 1e-5) Gaussian: ρ below what its own (ε, δ) converts to, and
        // the (ε, δ) it converts back to is within a few times ε.
        assert!(epsilon_of(one, 1e-5) >= 1.0 * 0.9, "{one}");
        assert!(gaussian_rho(&plan(Mechanism::TruncatedLaplace, 1), 1).is_none());
        assert_eq!(approximate_cost(0.0, 1e-6, 1), (0.0, 1e-6));
        // A share of a budget asked as a Gaussian's epsilon: at most the
        // share, within 1e-6 of it.
        let bounds = crate::params::Bounds::new(0.0, 1.0).unwrap();
        let share = 0.000283967031;
        let e = gaussian_epsilon(share, 1e-6, Shape::Sum(bounds), 1).unwrap();
        let p = Plan::shared(
            Choice::Fixed(Mechanism::Gaussian),
            Epsilon::new(e).unwrap(),
            Delta::new(1e-6).unwrap(),
            Loss::Variance,
            Shape::Sum(bounds),
            1,
        )
        .unwrap();
        let got = gaussian_rho(&p, 1).unwrap();
        assert!(
            got <= share && got > share * (1.0 - 1e-6),
            "{got} against {share}"
        );
    }
}
