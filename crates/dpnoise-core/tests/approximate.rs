//! The (ε, δ) mechanisms: truncated Laplacian, uniform and discrete
//! Gaussian, their calibration, an (ε, δ) audit, and `'auto'`. Each
//! statistical test has a negative control that the same test rejects.
//! Run in release (`cargo test --release -p dpnoise-core`).

use dpnoise_core::approximate::{
    analytic_gaussian_sigma, discrete_gaussian_delta, gaussian_sigma_in_steps, DiscreteGaussian,
    TruncatedLaplace, Uniform, DISCRETE_CALIBRATION_BELOW,
};
use dpnoise_core::audit::{chi_square, delta_audit, histogram};
use dpnoise_core::plan::{confidence_of, objective};
use dpnoise_core::{
    BitPool, Choice, Delta, Epsilon, LatticeNoise, Law, Loss, Mechanism, Noise, Plan, Sensitivity,
    Shape,
};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const ALPHA: f64 = 1e-6;
/// Standard errors of margin: a correct mechanism fails about once in 10^6 runs.
const Z: f64 = 5.0;

fn d(delta: f64) -> Delta {
    Delta::new(delta).unwrap()
}

fn value(sensitivity: f64) -> Shape {
    Shape::Value(Sensitivity::new(sensitivity).unwrap())
}

fn rng(seed: u64) -> BitPool<ChaCha20Rng> {
    BitPool::new(ChaCha20Rng::seed_from_u64(seed))
}

/// E|X| and E[X²] of the continuous truncated Laplacian (scale λ, support
/// [−A, A]): the integrals the lattice law must reproduce.
fn truncated_laplace_integrals(lambda: f64, a: f64) -> (f64, f64) {
    let r = (-a / lambda).exp();
    let mass = 1.0 - r;
    let first = lambda - a * r / mass;
    let second =
        (2.0 * lambda * lambda - r * (a * a + 2.0 * a * lambda + 2.0 * lambda * lambda)) / mass;
    (first, second)
}

/// Sample means of |X| and X², each with its standard error.
fn moments(draws: &[f64]) -> ((f64, f64), (f64, f64)) {
    let n = draws.len() as f64;
    let mean = |f: &dyn Fn(f64) -> f64| draws.iter().map(|x| f(*x)).sum::<f64>() / n;
    let (m1, m2, m4) = (mean(&|x| x.abs()), mean(&|x| x * x), mean(&|x| x.powi(4)));
    (
        (m1, ((m2 - m1 * m1) / n).sqrt()),
        (m2, ((m4 - m2 * m2) / n).sqrt()),
    )
}

#[test]
fn truncated_laplace_stays_within_its_bound_and_matches_the_integrals() {
    // ε = 1, δ = 0.05, Δ = 1 on the fine lattice: A = λ·ln(1 + (e − 1)/0.1)
    // ≈ 2.9λ, so draws reach the bound often and a bound off by a step shows.
    let (eps, delta) = (1.0, 0.05);
    let e = Epsilon::new(eps).unwrap();
    let plan = Plan::new(
        Choice::Fixed(Mechanism::TruncatedLaplace),
        e,
        d(delta),
        Loss::Variance,
        value(1.0),
    )
    .unwrap();
    let Noise::TruncatedLaplace(tl) = plan.noise else {
        panic!("not a truncated Laplacian")
    };
    let g = plan.calibration.lattice.granularity();
    let mut r = rng(11);
    let n = 10_000_000;
    let mut max = 0u128;
    let draws: Vec<f64> = (0..n)
        .map(|_| {
            let x = tl.sample(&mut r);
            max = max.max(x.unsigned_abs());
            x as f64 * g
        })
        .collect();
    assert!(max <= tl.limit(), "a draw beyond A: {max} > {}", tl.limit());
    // The bound is reached: the top 0.1 % of the support holds draws.
    assert!(
        max as f64 >= 0.999 * tl.limit() as f64,
        "bound not tight: {max} of {}",
        tl.limit()
    );
    let lambda = plan.calibration.steps as f64 * g / e.value();
    let a = tl.limit() as f64 * g;
    let continuous_a = (1.0 + eps.exp_m1() / (2.0 * delta)).ln();
    assert!(
        (a / continuous_a - 1.0).abs() < 1e-5,
        "A = {a}, the formula gives {continuous_a}"
    );
    let (want1, want2) = truncated_laplace_integrals(lambda, a);
    let ((m1, se1), (m2, se2)) = moments(&draws);
    assert!(
        (m1 - want1).abs() <= Z * se1,
        "E|X| {m1} vs {want1} ± {}",
        Z * se1
    );
    assert!(
        (m2 - want2).abs() <= Z * se2,
        "E[X²] {m2} vs {want2} ± {}",
        Z * se2
    );
    // The exact lattice figures dp_accuracy reports agree with the integrals.
    let exact = plan.accuracy(0.95);
    assert!((exact.mean_abs_error / want1 - 1.0).abs() < 1e-6);
    assert!((exact.std_dev.powi(2) / want2 - 1.0).abs() < 1e-6);
    // Negative control: the same test rejects the untruncated Laplacian's moments.
    let (lap1, lap2) = (lambda, 2.0 * lambda * lambda);
    assert!((m1 - lap1).abs() > Z * se1 && (m2 - lap2).abs() > Z * se2);
}

#[test]
fn truncated_laplace_holds_its_bound_at_small_delta() {
    // δ = 1e-6 on a short lattice: A ≈ 13.8 D; 10^7 draws never pass it.
    let e = Epsilon::new(0.5).unwrap();
    let tl = TruncatedLaplace::new(e, 4, d(1e-6)).unwrap();
    let mut r = rng(12);
    let max = (0..10_000_000)
        .map(|_| tl.sample(&mut r).unsigned_abs())
        .max()
        .unwrap();
    assert!(
        max <= tl.limit() && tl.delta() <= 1e-6,
        "{max} > {}",
        tl.limit()
    );
}

#[test]
fn analytic_gaussian_sigma_matches_the_reference() {
    // 60-digit figures from scripts/gaussian_reference.py (mpmath).
    for (eps, delta, reference) in [
        (1.0, 1e-5, 3.7306316348159418322),
        (0.5, 1e-6, 8.0576184807250442552),
        (0.1, 1e-3, 17.404396203031167088),
    ] {
        let sigma = analytic_gaussian_sigma(eps, delta);
        assert!(
            (sigma / reference - 1.0).abs() < 1e-9,
            "ε = {eps}, δ = {delta}: {sigma} vs {reference}"
        );
        // Negative control: the classical calibration √(2 ln(1.25/δ))/ε is
        // far from it, so the comparison can tell them apart.
        let classical = (2.0 * (1.25f64 / delta).ln()).sqrt() / eps;
        assert!((classical / reference - 1.0).abs() > 1e-3);
    }
}

#[test]
fn discrete_gaussian_matches_its_pmf_and_rejects_a_wrong_sigma() {
    let mut r = rng(13);
    // The proposal's scale t = 2^a: 1 (σ = 0.8), 4 ≥ σ, 16 < σ (r = 0.78),
    // and 256 < σ (a multiple of 256: the Laplace's shift path).
    for sigma in [0.8, 3.7306316348159418, 20.5, 300.7] {
        let g = DiscreteGaussian::with_sigma(sigma).unwrap();
        let law = Law::Gaussian {
            variance: g.variance(),
        };
        let h = histogram(1_000_000, || g.sample(&mut r));
        let lim = (8.0 * sigma).ceil() as i128 + 2;
        let test = chi_square(&h, |n| law.pmf(n), -lim, lim, ALPHA);
        assert!(test.passes(), "σ = {sigma}: {test:?}");
        let wrong = Law::Gaussian {
            variance: g.variance() * 1.1,
        };
        assert!(
            !chi_square(&h, |n| wrong.pmf(n), -lim, lim, ALPHA).passes(),
            "σ = {sigma}: wrong σ passed"
        );
    }
}

#[test]
fn uniform_matches_its_pmf_and_range() {
    let mut r = rng(14);
    let u = Uniform::new(3, d(0.05)).unwrap(); // H = 30: −30 … 29
    assert_eq!(u.half(), 30);
    let law = Law::Uniform { half: 30.0 };
    let h = histogram(1_000_000, || u.sample(&mut r));
    assert!(h.keys().all(|x| (-30..30).contains(x)));
    assert!(chi_square(&h, |n| law.pmf(n), -31, 31, ALPHA).passes());
    // Negative control: a symmetric −30 … 30 law is rejected.
    assert!(!chi_square(
        &h,
        |n| if n.abs() <= 30 { 1.0 / 61.0 } else { 0.0 },
        -31,
        31,
        ALPHA
    )
    .passes());
}

#[test]
fn discrete_gaussian_calibration_pays_delta_on_the_lattice() {
    // Coarse lattices are calibrated on the exact discrete δ; fine ones on
    // the continuous σ raised by 2^-20 (2^-30 fails here: the discrete δ is
    // a few parts in 10^9 above the continuous one just past the switch). Check the exact discrete δ of the σ
    // really sampled in both regimes, including just past the switch.
    for (eps, delta) in [(1.0, 1e-5), (0.5, 1e-6), (0.1, 1e-3), (3.0, 0.01)] {
        let s1 = analytic_gaussian_sigma(eps, delta);
        let past_switch = (DISCRETE_CALIBRATION_BELOW / s1).ceil() as u128 + 1;
        for steps in [1u128, 2, 7, 64, past_switch, 2 * past_switch] {
            let sigma = gaussian_sigma_in_steps(Epsilon::new(eps).unwrap(), d(delta), steps, s1);
            let g = DiscreteGaussian::with_sigma(sigma).unwrap();
            let got = discrete_gaussian_delta(g.variance(), steps, eps);
            assert!(
                got <= delta,
                "ε = {eps}, δ = {delta}, D = {steps}: δ = {got}"
            );
            // And not wastefully: 1 % less noise would not pay δ (coarse
            // lattices), or σ is within 1e-6 of the continuous figure.
            if sigma < DISCRETE_CALIBRATION_BELOW {
                assert!(
                    discrete_gaussian_delta(0.98 * g.variance(), steps, eps) > delta,
                    "D = {steps}"
                );
            } else {
                assert!((sigma / (s1 * steps as f64) - 1.0).abs() < 2e-6);
            }
        }
    }
}

/// (ε, δ) audits of each mechanism at D = 4 steps, both orders of the pair.
fn audit(noise: &dyn Fn(&mut BitPool<ChaCha20Rng>) -> i128, eps: f64, seed: u64) -> f64 {
    let d = 4;
    let (mut r0, mut r1) = (rng(seed), rng(seed + 1));
    let forward = delta_audit(
        1_000_000,
        4,
        eps,
        Z,
        || noise(&mut r0),
        || d + noise(&mut r1),
    );
    let backward = delta_audit(
        1_000_000,
        4,
        eps,
        Z,
        || d + noise(&mut r0),
        || noise(&mut r1),
    );
    forward.worst_excess.max(backward.worst_excess)
}

#[test]
fn every_mechanism_passes_the_delta_audit_and_a_short_truncation_fails_it() {
    let (eps, delta) = (0.5, 0.01);
    let e = Epsilon::new(eps).unwrap();
    for mechanism in [
        Mechanism::TruncatedLaplace,
        Mechanism::Uniform,
        Mechanism::Gaussian,
        Mechanism::Laplace,
    ] {
        let own_delta = if mechanism.needs_delta() { delta } else { 0.0 };
        let noise = Noise::new(mechanism, e, d(own_delta), 4, Loss::Variance).unwrap();
        let worst = audit(&|r| noise.sample(r), eps, 20);
        assert!(
            worst <= own_delta,
            "{mechanism:?}: δ̂ = {worst} > {own_delta}"
        );
    }
    // Negative control: A halved pays δ ≈ 0.06, not 0.01; the audit sees it.
    let tl = TruncatedLaplace::new(e, 4, d(delta)).unwrap();
    let short = tl.with_limit(tl.limit() / 2);
    assert!(short.delta() > 3.0 * delta);
    let worst = audit(&|r| short.sample(r), eps, 30);
    assert!(worst > delta, "a truncation at A/2 passed: δ̂ = {worst}");
}

#[test]
fn auto_picks_the_least_exact_loss() {
    // Every (ε, δ, loss) here is ranked independently by building each
    // mechanism and reading its exact figures; 'auto' must agree.
    let mut picked = std::collections::BTreeMap::new();
    for eps in [0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 1000.0] {
        for delta in [0.0, 1e-9, 1e-6, 1e-3, 0.1] {
            for loss in [Loss::Variance, Loss::MeanAbsolute, Loss::Interval(0.95)] {
                for shape in [value(1.0), Shape::Count] {
                    let e = Epsilon::new(eps).unwrap();
                    let auto = Plan::new(Choice::Auto, e, d(delta), loss, shape).unwrap();
                    let mut best: Option<(f64, Mechanism)> = None;
                    for m in [
                        Mechanism::Laplace,
                        Mechanism::Staircase,
                        Mechanism::TruncatedLaplace,
                        Mechanism::Uniform,
                        Mechanism::Gaussian,
                    ] {
                        let own = if m.needs_delta() { delta } else { 0.0 };
                        if m.needs_delta() && delta == 0.0 {
                            continue;
                        }
                        let plan = Plan::new(Choice::Fixed(m), e, d(own), loss, shape).unwrap();
                        let score = objective(loss, &plan.accuracy(confidence_of(loss)));
                        if best.is_none_or(|(s, _)| score < s) {
                            best = Some((score, m));
                        }
                    }
                    let (score, m) = best.unwrap();
                    let auto_score = objective(loss, &auto.accuracy(confidence_of(loss)));
                    assert_eq!(
                        auto.mechanism, m,
                        "ε = {eps}, δ = {delta}, {loss:?}, {shape:?}"
                    );
                    assert_eq!(auto_score, score);
                    *picked.entry(m.name()).or_insert(0) += 1;
                }
            }
        }
    }
    // The table spans regimes where different mechanisms win.
    assert!(picked.len() >= 3, "{picked:?}");
}

#[test]
fn truncated_laplace_beats_the_gaussian_as_the_seed_paper_claims() {
    // Geng, Ding, Guo & Kumar: less noise amplitude and power than the
    // optimal (analytic) Gaussian, compared here at Δ = 1 on the lattice.
    for delta in [1e-6, 1e-3] {
        for eps in [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0] {
            let e = Epsilon::new(eps).unwrap();
            let figures = |m| {
                Plan::new(Choice::Fixed(m), e, d(delta), Loss::Variance, value(1.0))
                    .unwrap()
                    .accuracy(0.95)
            };
            let (tl, g) = (
                figures(Mechanism::TruncatedLaplace),
                figures(Mechanism::Gaussian),
            );
            assert!(
                tl.mean_abs_error < g.mean_abs_error,
                "ε = {eps}, δ = {delta}: E|X| {tl:?} vs {g:?}"
            );
            assert!(
                tl.std_dev < g.std_dev,
                "ε = {eps}, δ = {delta}: σ {tl:?} vs {g:?}"
            );
        }
    }
}

#[test]
fn delta_is_refused_where_it_does_not_belong() {
    let e = Epsilon::new(1.0).unwrap();
    let plan = |m, delta| Plan::new(Choice::Fixed(m), e, d(delta), Loss::Variance, Shape::Count);
    assert!(plan(Mechanism::Gaussian, 0.0)
        .unwrap_err()
        .to_string()
        .contains("'laplace', 'staircase' or 'auto'"));
    assert!(plan(Mechanism::Laplace, 1e-6)
        .unwrap_err()
        .to_string()
        .contains("'truncated_laplace', 'uniform', 'gaussian' or 'auto'"));
    // δ itself is checked once, where it is built.
    for bad in [-1e-6, 1.0, f64::NAN, f64::INFINITY] {
        assert!(Delta::new(bad).is_err(), "{bad}");
    }
    assert!(Choice::parse("gauss").is_err() && Choice::parse(" AUTO ").is_ok());
}
