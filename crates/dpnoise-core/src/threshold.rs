//! Thresholded counts and sums: one noise for partition selection and the
//! released value.
//!
//! A group whose key comes from the data is shown when its noisy count
//! c + N reaches a threshold τ, and the count shown is that same c + N
//! (the thresholding of Korolova, Kenthapadi, Mishra & Ntoulas, WWW 2009,
//! and of Wilson et al., "Differentially private SQL with bounded user
//! contribution", PoPETs 2020). N is the count's own pure noise on the unit
//! lattice (the geometric, or the discrete staircase) at its per-group
//! share ε/k, for a person in up to k groups who adds at most one to each
//! count. The count then spends the whole ε; selection adds only δ.
//!
//! Why it is (ε, δ)-DP. Take two tables that differ in one person.
//! - A group present in both (counts c and c + 1): what is shown ("not
//!   shown", or c + N ≥ τ) is a function of c + N, a pure ε/k release.
//! - A group the person alone makes (count 1 in one table, no group in the
//!   other): the other table never shows it; this one shows it with
//!   probability P(N ≥ τ − 1), which τ keeps ≤ δ/k.
//!
//! Over the person's k groups, by composition: (ε, k · δ/k) = (ε, δ).
//! τ is the least integer with P(N ≥ τ − 1) ≤ δ/k, the tail computed in
//! closed form from the law (`StepLaw::tail`) and rounded up by a relative
//! 1e-9, far beyond the float error of that closed form. What δ/k leaves
//! over is spent on the value just below: a noisy count of τ − 1 is shown
//! with probability q = (δ/k − P(N ≥ τ − 1)) / P(N = τ − 2) (rounded down),
//! so that the lone person's group is shown with probability exactly up to
//! δ/k, not up to one lattice step less (a randomized threshold; the coin
//! is a post-processing of c + N, so groups of both tables stay pure ε/k).
//!
//! A sum (a row count written `dp_sum(1.0, ε, 0, U)`, for one) is
//! thresholded the same way on its lattice: one person moves it by at most
//! D steps (the plan's sensitivity in steps, the larger rounded bound), so
//! the group the person alone makes holds at most D steps, and τ is D
//! above the least m with P(N ≥ m) ≤ δ/k. A lone value v < D is shown with
//! P(N ≥ τ − v) + q·P(N = τ − 1 − v), which falls as τ − v grows: at most
//! δ/k. With D = 1 this is the count's rule.

use crate::accuracy::{Law, StepLaw};
use crate::entropy::Entropy;
use crate::noise::LatticeNoise;
use crate::plan::Plan;
use crate::selection::bernoulli_dyadic;
use crate::Error;

/// The relative margin a computed tail is rounded up by.
const TAIL_MARGIN: f64 = 1e-9;

/// The threshold of one thresholded count or sum, in its lattice steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountThreshold {
    law: StepLaw,
    /// τ: a noisy value of this many steps or more is shown.
    threshold: i128,
    /// The probability that a noisy value of τ − 1 steps is shown.
    below: f64,
}

impl CountThreshold {
    /// The threshold for a count or sum released with `plan` (a pure noise
    /// on its lattice: its per-group share when the release is spread over
    /// `groups` groups), shown at `delta` for the k groups together.
    pub fn new(plan: &Plan, groups: u32, delta: f64) -> Result<CountThreshold, Error> {
        let law = match plan.noise.law() {
            Law::Step(law) => law,
            _ => {
                return Err(Error::invalid(
                    "mechanism",
                    "a pure mechanism (laplace, staircase or auto without delta) to threshold",
                    plan.mechanism.name(),
                ))
            }
        };
        if !(delta.is_finite() && delta > 0.0 && delta < 1.0) {
            return Err(Error::invalid(
                "selection delta",
                "a number in (0, 1) (with delta = 0 group keys must be public)",
                delta,
            ));
        }
        let per_group = crate::rational::share(delta, groups.max(1));
        let passes = |m: i128| law.tail(m) * (1.0 + TAIL_MARGIN) <= per_group;
        // The least m ≥ 0 with P(N ≥ m) ≤ δ/k: doubling, then bisection.
        let limit: i128 = 1 << 62;
        let mut hi: i128 = 1;
        while !passes(hi) {
            crate::interrupt::check();
            hi *= 2;
            if hi > limit {
                return Err(Error::invalid(
                    "epsilon",
                    "large enough for a thresholded count to show a group (raise epsilon or delta, or lower max_groups_contributed)",
                    plan.mechanism.name(),
                ));
            }
        }
        let mut lo: i128 = 0; // P(N ≥ 0) ≥ 1/2 > δ/k: fails
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if passes(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        // δ/k − P(N ≥ m) is spent on τ − 1 (N = m − 1 for the lone person at D).
        let spent = law.tail(hi) * (1.0 + TAIL_MARGIN);
        let at = law.pmf(hi - 1) * (1.0 + TAIL_MARGIN);
        let below = if at > 0.0 {
            ((per_group - spent) / at * (1.0 - TAIL_MARGIN)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let lone = plan.calibration.steps.min(1 << 100) as i128;
        Ok(CountThreshold {
            law,
            threshold: hi + lone,
            below,
        })
    }

    /// The probability that a noisy value of exactly τ − 1 steps is shown.
    pub fn below(&self) -> f64 {
        self.below
    }

    /// τ: the smallest noisy count shown (for a sum: in lattice steps).
    pub fn threshold(&self) -> i64 {
        self.threshold
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// Whether a released noisy count is shown: from τ, and τ − 1 with
    /// probability `below` (an exact Bernoulli of that dyadic number).
    pub fn shown<E: Entropy>(&self, rng: &mut E, noisy: i64) -> bool {
        self.shown_steps(rng, i128::from(noisy))
    }

    /// `shown` for a noisy value of `noisy` lattice steps (a sum's).
    pub fn shown_steps<E: Entropy>(&self, rng: &mut E, noisy: i128) -> bool {
        noisy >= self.threshold
            || (noisy == self.threshold - 1 && bernoulli_dyadic(rng, self.below))
    }

    /// P(shown) for a true count (a sum: lattice steps) of `count`.
    pub fn keep_probability(&self, count: u64) -> f64 {
        let gap = self.threshold - count.min(i64::MAX as u64) as i128;
        self.law.tail(gap) + self.below * self.law.pmf(gap - 1)
    }

    /// The smallest number of persons, each adding `each` lattice steps
    /// (1 for a count), whose group is shown with probability at least `p`.
    pub fn persons_kept_at(&self, p: f64, each: u128) -> u64 {
        let steps = u128::from(self.count_kept_at(p));
        steps.div_ceil(each.max(1)).min(u128::from(u64::MAX)) as u64
    }

    /// The threshold of `plan` over `groups` groups at `delta`, where it
    /// shows a group with even odds from no more persons, each adding at
    /// least `each` steps, than `separate` (the separate selection at the
    /// same δ) does: then one noise serves both and at least as many groups
    /// are shown. None where the separate selection shows more, or `plan`
    /// cannot be thresholded. Public parameters only.
    pub fn if_better(
        plan: &Plan,
        groups: u32,
        delta: f64,
        separate: &crate::selection::PartitionSelection,
        each: u128,
    ) -> Option<CountThreshold> {
        CountThreshold::new(plan, groups, delta)
            .ok()
            .filter(|t| t.persons_kept_at(0.5, each) <= separate.even_odds())
    }

    /// The smallest true count (a sum: lattice steps) shown with
    /// probability at least `p`.
    pub fn count_kept_at(&self, p: f64) -> u64 {
        let (mut lo, mut hi) = (0u64, 1u64);
        while self.keep_probability(hi) < p {
            lo = hi;
            hi = hi.saturating_mul(2);
            if hi == u64::MAX {
                return hi;
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.keep_probability(mid) >= p {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::Shape;
    use crate::params::{Choice, Delta, Mechanism};
    use crate::rational::Epsilon;
    use crate::staircase::Loss;

    fn plan(mechanism: Mechanism, epsilon: f64, groups: u32) -> Plan {
        Plan::shared(
            Choice::Fixed(mechanism),
            Epsilon::new(epsilon).unwrap(),
            Delta::ZERO,
            Loss::Variance,
            Shape::Count,
            groups,
        )
        .unwrap()
    }

    fn law(plan: &Plan) -> StepLaw {
        match plan.noise.law() {
            Law::Step(l) => l,
            _ => unreachable!(),
        }
    }

    /// The exact (ε, δ) of one group's output ("not shown", or a shown
    /// value v ≥ τ − 1, τ − 1 with probability `below`) between true counts
    /// `a` and `b` (None: no group, never shown): Σ max(0, P_a(o) − e^ε·P_b(o))
    /// over the outputs, the law's pmf summed term by term (not the
    /// closed-form tail under test).
    fn hockey_stick(
        law: &StepLaw,
        (tau, below): (i64, f64),
        epsilon: f64,
        a: Option<i64>,
        b: Option<i64>,
    ) -> f64 {
        let span = (60.0 / law.decay * law.period.max(1.0)).ceil() as i64 + 10;
        let top = tau + a.unwrap_or(0).max(b.unwrap_or(0)) + span;
        let p = |c: Option<i64>, v: i64| {
            let weight = if v < tau { below } else { 1.0 };
            c.map_or(0.0, |c| weight * law.pmf(i128::from(v - c)))
        };
        let e = epsilon.exp();
        let (mut excess, mut shown_a, mut shown_b) = (0.0, 0.0, 0.0);
        for v in (tau - 1)..=top {
            let (pa, pb) = (p(a, v), p(b, v));
            shown_a += pa;
            shown_b += pb;
            excess += (pa - e * pb).max(0.0);
        }
        excess + ((1.0 - shown_a) - e * (1.0 - shown_b)).max(0.0)
    }

    /// Every (mechanism, ε, k, δ): the singleton group's δ is within δ/k
    /// and a group of both tables costs nothing beyond ε/k, in both
    /// directions; one step lower, the threshold fails (negative control).
    #[test]
    fn the_threshold_gives_epsilon_delta_exactly_and_one_less_does_not() {
        for mechanism in [Mechanism::Laplace, Mechanism::Staircase] {
            for (epsilon, groups, delta) in [
                (1.0, 1, 1e-5),
                (0.5, 4, 1e-6),
                (3.0, 2, 1e-3),
                (0.1, 1, 1e-5),
            ] {
                let plan = plan(mechanism, epsilon, groups);
                let t = CountThreshold::new(&plan, groups, delta).unwrap();
                let law = law(&plan);
                let per_group = delta / f64::from(groups);
                let eps_g = law.decay * law.period.max(1.0);
                let rule = (t.threshold(), t.below());
                let tau = rule.0;
                // A group only the person makes: δ/k, spent almost whole.
                let alone = hockey_stick(&law, rule, eps_g, Some(1), None);
                assert!(
                    alone <= per_group,
                    "{mechanism:?} {epsilon} {groups}: {alone} > {per_group}"
                );
                assert!(
                    alone >= per_group * (1.0 - 1e-6),
                    "{mechanism:?} {epsilon}: δ left unspent: {alone}"
                );
                let back = hockey_stick(&law, rule, eps_g, None, Some(1));
                assert!(back <= per_group, "{mechanism:?} {epsilon}: {back}");
                // Groups of both tables, around the threshold.
                for c in 0..(tau + 5) {
                    for (a, b) in [(c + 1, c), (c, c + 1)] {
                        let d = hockey_stick(&law, rule, eps_g * (1.0 + 1e-9), Some(a), Some(b));
                        assert!(d <= 1e-12, "{mechanism:?} ε {epsilon} c {c}: {d}");
                    }
                }
                // Negative controls: τ − 1 shown always, or τ − 1 as the threshold.
                for wrong in [(tau, 1.0), (tau - 1, t.below())] {
                    let lower = hockey_stick(&law, wrong, eps_g, Some(1), None);
                    assert!(
                        lower > per_group,
                        "{mechanism:?} {epsilon}: {wrong:?} should fail"
                    );
                }
            }
        }
    }

    /// A sum: the lone person's group holds any value up to D steps (its
    /// larger rounded bound), and is shown within δ/k whatever that value
    /// (exactly δ/k at D); groups of both tables, whose values differ by
    /// up to D steps, cost nothing beyond ε/k. One step lower fails.
    #[test]
    fn a_sum_threshold_covers_every_lone_value_and_one_less_does_not() {
        use crate::params::IntegerBounds;
        for mechanism in [Mechanism::Laplace, Mechanism::Staircase] {
            for (lower, upper, epsilon, groups, delta) in [
                (0i64, 3i64, 1.0, 1, 1e-5),
                (-2, 3, 0.5, 2, 1e-3),
                (0, 1, 2.0, 1, 1e-4),
                (1, 4, 1.0, 3, 1e-5),
            ] {
                let plan = Plan::shared(
                    Choice::Fixed(mechanism),
                    Epsilon::new(epsilon).unwrap(),
                    Delta::ZERO,
                    Loss::Variance,
                    Shape::SumInteger(IntegerBounds::new(lower, upper).unwrap()),
                    groups,
                )
                .unwrap();
                assert_eq!(plan.calibration.lattice.k, 0, "an integer lattice");
                let d = plan.calibration.steps as i64;
                assert_eq!(d, lower.abs().max(upper.abs()));
                let t = CountThreshold::new(&plan, groups, delta).unwrap();
                let law = law(&plan);
                let per_group = delta / f64::from(groups);
                let eps_g = crate::rational::share(epsilon, groups) * (1.0 + 1e-9);
                let rule = (t.threshold(), t.below());
                for v in lower..=upper {
                    let alone = hockey_stick(&law, rule, eps_g, Some(v), None);
                    assert!(
                        alone <= per_group,
                        "{mechanism:?} lone {v}: {alone} > {per_group}"
                    );
                    if v == d {
                        assert!(alone >= per_group * (1.0 - 1e-6), "{mechanism:?}: {alone}");
                    }
                }
                let tau = rule.0;
                for c in (tau - 2 * d - 2)..(tau + 3) {
                    for step in 1..=d {
                        for (a, b) in [(c + step, c), (c, c + step)] {
                            let x = hockey_stick(&law, rule, eps_g, Some(a), Some(b));
                            assert!(x <= 1e-12, "{mechanism:?} {a} {b}: {x}");
                        }
                    }
                }
                for wrong in [(tau, 1.0), (tau - 1, t.below())] {
                    let alone = hockey_stick(&law, wrong, eps_g, Some(d), None);
                    assert!(alone > per_group, "{mechanism:?} {wrong:?} should fail");
                }
            }
        }
    }

    #[test]
    fn closed_form_tail_matches_the_pmf() {
        for mechanism in [Mechanism::Laplace, Mechanism::Staircase] {
            let law = law(&plan(mechanism, 0.7, 1));
            for m in [-30i128, -1, 0, 1, 2, 7, 40] {
                let direct: f64 = (m..m + 4000).map(|n| law.pmf(n)).sum();
                assert!(
                    (law.tail(m) - direct).abs() <= 1e-12 * direct.max(1e-300) + 1e-15,
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn the_threshold_is_what_the_laplace_formula_gives() {
        // Geometric at ε: P(N ≥ m) = b^m / (1 + b), b = e^(−ε).
        let (epsilon, delta) = (1.0f64, 1e-5f64);
        let t = CountThreshold::new(&plan(Mechanism::Laplace, epsilon, 1), 1, delta).unwrap();
        let b = (-epsilon).exp();
        let m = ((delta * (1.0 + b)).ln() / b.ln()).ceil() as i64;
        assert_eq!(t.threshold(), m + 1);
        // What is left of δ shows τ − 1 with probability (δ − b^m/(1+b)) / P(N = m − 1).
        let q =
            (delta - b.powi(m as i32) / (1.0 + b)) / ((1.0 - b) / (1.0 + b) * b.powi(m as i32 - 1));
        assert!((t.below() - q).abs() < 1e-6, "{} against {q}", t.below());
        assert!(t.keep_probability(t.threshold() as u64) >= 0.5);
    }

    #[test]
    fn refuses_what_it_cannot_threshold() {
        let gaussian = Plan::shared(
            Choice::Fixed(Mechanism::Gaussian),
            Epsilon::new(1.0).unwrap(),
            Delta::new(1e-5).unwrap(),
            Loss::Variance,
            Shape::Count,
            1,
        )
        .unwrap();
        assert!(CountThreshold::new(&gaussian, 1, 1e-5).is_err());
        assert!(CountThreshold::new(&plan(Mechanism::Laplace, 1.0, 1), 1, 0.0).is_err());
    }
}

/// Sampled audits of the thresholded count with the real sampler: the
/// singleton group's chance of being shown, and the (ε, δ) audit between
/// neighbouring counts, against a threshold one lower as the negative
/// control.
#[cfg(all(test, feature = "audit"))]
mod audit_tests {
    use super::*;
    use crate::audit::delta_audit;
    use crate::calibration::Shape;
    use crate::entropy::{BitPool, Entropy};
    use crate::params::{Choice, Delta, Mechanism};
    use crate::rational::Epsilon;
    use crate::staircase::Loss;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    fn rng(seed: u64) -> BitPool<ChaCha20Rng> {
        BitPool::new(ChaCha20Rng::seed_from_u64(seed))
    }

    /// −1 for "not shown" (and for no group), else the shown count.
    fn output(
        plan: &Plan,
        rule: &CountThreshold,
        rng: &mut impl Entropy,
        count: Option<i64>,
    ) -> i128 {
        count
            .map(|c| plan.release_integer(rng, i128::from(c)).unwrap())
            .filter(|&v| rule.shown(rng, v))
            .map_or(-1, i128::from)
    }

    #[test]
    fn sampled_singleton_and_neighbours_pass_and_one_lower_fails() {
        // A large δ, so that a sample sees it: ε = 1, δ = 0.02, k = 1. With
        // n = 400 000 draws the audit's margin (5 standard errors of a
        // probability near 0.02) is about 0.0016; τ − 1 shows the singleton
        // with probability e·0.02 ≈ 0.05, far beyond it.
        // A sum of values in [0, 3] (a row count of up to 3 rows a person)
        // likewise, its lone person at the largest value.
        let (epsilon, delta) = (1.0, 0.02);
        let sum = Shape::SumInteger(crate::params::IntegerBounds::new(0, 3).unwrap());
        for (shape, lone) in [(Shape::Count, 1i64), (sum, 3)] {
            let plan = Plan::shared(
                Choice::Fixed(Mechanism::Laplace),
                Epsilon::new(epsilon).unwrap(),
                Delta::ZERO,
                Loss::Variance,
                shape,
                1,
            )
            .unwrap();
            let rule = CountThreshold::new(&plan, 1, delta).unwrap();
            let tau = rule.threshold();
            let n = 400_000;
            // One lower: τ − 1 always shown (the rule's own q is below 1).
            let lower = CountThreshold {
                threshold: i128::from(tau) - 1,
                ..rule
            };
            for (r, should_pass) in [(&rule, true), (&lower, false)] {
                let t = r.threshold();
                let (mut r1, mut r2) = (rng(1), rng(2));
                let report = delta_audit(
                    n,
                    1,
                    epsilon,
                    5.0,
                    || output(&plan, r, &mut r1, Some(lone)),
                    || output(&plan, r, &mut r2, None),
                );
                assert_eq!(
                    report.within(delta),
                    should_pass,
                    "threshold {t} (τ = {tau}): {report:?}"
                );
            }
            // Neighbouring counts around τ, both orders: pure ε (δ = 0 beyond
            // the sampling margin).
            for c in [tau - 2, tau, tau + 3] {
                for (a, b) in [(c + lone, c), (c, c + lone)] {
                    let (mut r1, mut r2) = (rng(a as u64 * 7 + 3), rng(b as u64 * 7 + 5));
                    let report = delta_audit(
                        n,
                        1,
                        epsilon,
                        5.0,
                        || output(&plan, &rule, &mut r1, Some(a)),
                        || output(&plan, &rule, &mut r2, Some(b)),
                    );
                    assert!(report.within(0.0), "{a} against {b}: {report:?}");
                }
            }
        }
    }
}
