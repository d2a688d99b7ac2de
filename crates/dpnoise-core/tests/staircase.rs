//! The staircase mechanism: its sampler against its exact pmf, its accuracy
//! figures against the papers and against draws, its privacy, and the
//! finite-precision check. Each check is shown to catch a wrong mechanism.

use dpnoise_core::audit::{chi_square, histogram, lattice_fingerprint, privacy_loss_audit};
use dpnoise_core::{BitPool, Calibration, Epsilon, Laplace, LatticeNoise, Loss, Staircase};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const N: usize = 1_000_000;
const ALPHA: f64 = 1e-6;

fn rng(seed: u64) -> BitPool<ChaCha20Rng> {
    BitPool::new(ChaCha20Rng::seed_from_u64(seed))
}

fn eps(e: f64) -> Epsilon {
    Epsilon::new(e).unwrap()
}

/// The staircase and Laplace for sensitivity 1 on their real lattice.
fn calibrated(e: f64, loss: Loss) -> (Calibration, Staircase, Laplace) {
    let cal = Calibration::value(eps(e), 1.0).unwrap();
    let stair = Staircase::new(eps(e), cal.steps, loss.gamma(e)).unwrap();
    (cal, stair, Laplace::new(eps(e), cal.steps).unwrap())
}

#[test]
fn sampler_matches_the_pmf_and_rejects_a_wrong_inner_width() {
    let mut r = rng(20);
    for (e, d, gamma) in [
        (1.0, 8u128, 0.4),
        (0.5, 5, 0.0),
        (2.0, 5, 1.0),
        (1.0, 1, 0.5),
        (3.0, 16, 0.1),
    ] {
        let s = Staircase::new(eps(e), d, gamma).unwrap();
        let h = histogram(N, || s.sample(&mut r));
        let lim = (d as f64 * 30.0 / e) as i128;
        let test = chi_square(&h, |n| s.pmf(n), -lim, lim, ALPHA);
        assert!(test.passes(), "ε = {e}, D = {d}, γ = {gamma}: {test:?}");
        if d > 4 {
            // The same draws judged against a staircase with a different step.
            let wrong_gamma = if gamma < 0.5 {
                gamma + 0.4
            } else {
                gamma - 0.4
            };
            let wrong = Staircase::new(eps(e), d, wrong_gamma).unwrap();
            assert!(
                !chi_square(&h, |n| wrong.pmf(n), -lim, lim, ALPHA).passes(),
                "ε = {e}, D = {d}"
            );
        }
    }
}

#[test]
fn accuracy_reproduces_soria_comas_tables_1_and_2() {
    // Table 1: minimum variance at Δ = 1.
    for (e, laplace, optimal) in [(0.1, 200.00, 199.92), (0.5, 8.00, 7.92), (1.0, 2.00, 1.92)] {
        let (cal, stair, lap) = calibrated(e, Loss::Variance);
        let g = cal.lattice.granularity();
        let v = stair
            .law()
            .accuracy_in_steps(0.95)
            .scaled(g)
            .std_dev
            .powi(2);
        let vl = lap.law().accuracy_in_steps(0.95).scaled(g).std_dev.powi(2);
        assert_eq!(format!("{v:.2}"), format!("{optimal:.2}"), "ε = {e}");
        assert_eq!(format!("{vl:.2}"), format!("{laplace:.2}"), "ε = {e}");
    }
    // Table 2: length of the shortest 95 % interval at Δ = 1. The paper
    // truncates (not rounds) to two decimals: 11.979 prints as 11.97.
    for (e, laplace, optimal) in [(0.1, 59.91, 59.91), (0.5, 11.98, 11.97), (1.0, 5.99, 5.98)] {
        let (cal, stair, lap) = calibrated(e, Loss::Interval(0.95));
        let g = cal.lattice.granularity();
        let len = 2.0 * stair.law().accuracy_in_steps(0.95).scaled(g).ci_half_width;
        let len_l = 2.0 * lap.law().accuracy_in_steps(0.95).scaled(g).ci_half_width;
        assert_eq!((len * 100.0).floor() / 100.0, optimal, "ε = {e}: {len}");
        assert_eq!(
            format!("{len_l:.2}"),
            format!("{laplace:.2}"),
            "ε = {e}: {len_l}"
        );
    }
}

#[test]
fn accuracy_matches_gengs_closed_forms() {
    for e in [0.1, 1.0, 5.0, 10.0] {
        let b = (-e as f64).exp();
        let (cal, l1, _) = calibrated(e, Loss::MeanAbsolute);
        let g = cal.lattice.granularity();
        let mae = l1.law().accuracy_in_steps(0.95).scaled(g).mean_abs_error;
        let expected_mae = (e / 2.0).exp() / (e.exp() - 1.0);
        assert!(
            (mae / expected_mae - 1.0).abs() < 1e-6,
            "ε = {e}: {mae} vs {expected_mae}"
        );
        let (_, l2, _) = calibrated(e, Loss::Variance);
        let var = l2.law().accuracy_in_steps(0.95).scaled(g).std_dev.powi(2);
        let expected_var = (2f64.powf(-2.0 / 3.0) * b.powf(2.0 / 3.0) * (1.0 + b).powf(2.0 / 3.0)
            + b)
            / (1.0 - b).powi(2);
        assert!(
            (var / expected_var - 1.0).abs() < 1e-6,
            "ε = {e}: {var} vs {expected_var}"
        );
    }
}

/// Mean |X|, E[X²] and coverage of `n` draws against the exact figures,
/// each within 5 standard errors computed from the sample.
fn check_against_draws(e: f64, loss: Loss, n: usize, seed: u64) {
    let (cal, stair, lap) = calibrated(e, loss);
    let g = cal.lattice.granularity();
    let exact = stair.law().accuracy_in_steps(0.95).scaled(g);
    let mut r = rng(seed);
    let xs: Vec<f64> = (0..n)
        .map(|_| cal.lattice.release(stair.sample(&mut r)))
        .collect();
    let nf = n as f64;
    let abs: Vec<f64> = xs.iter().map(|x| x.abs()).collect();
    let sq: Vec<f64> = xs.iter().map(|x| x * x).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / nf;
    let se = |v: &[f64]| {
        let m = mean(v);
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (nf - 1.0) / nf).sqrt()
    };
    assert!(
        (mean(&abs) - exact.mean_abs_error).abs() < 5.0 * se(&abs),
        "ε = {e} {loss:?}: mean |X|"
    );
    assert!(
        (mean(&sq) - exact.std_dev.powi(2)).abs() < 5.0 * se(&sq),
        "ε = {e} {loss:?}: E[X²]"
    );
    let covered = abs.iter().filter(|a| **a <= exact.ci_half_width).count() as f64 / nf;
    let p = stair.law().mass_within(exact.ci_half_width / g);
    assert!(
        (covered - p).abs() < 5.0 * (p * (1.0 - p) / nf).sqrt(),
        "ε = {e} {loss:?}: coverage"
    );
    // Print the figures the closing note and the docs quote.
    let lap_exact = lap.law().accuracy_in_steps(0.95).scaled(g);
    println!(
        "ε = {e:>4} {loss:?}: empirical var ratio staircase/Laplace {:.3} (exact {:.3}), mean|X| ratio {:.3} (exact {:.3})",
        mean(&sq) / lap_exact.std_dev.powi(2),
        exact.std_dev.powi(2) / lap_exact.std_dev.powi(2),
        mean(&abs) / lap_exact.mean_abs_error,
        exact.mean_abs_error / lap_exact.mean_abs_error,
    );
}

#[test]
fn draws_agree_with_the_exact_accuracy() {
    for (i, e) in [0.1, 1.0, 5.0, 10.0].into_iter().enumerate() {
        check_against_draws(e, Loss::MeanAbsolute, N, 30 + i as u64);
        check_against_draws(e, Loss::Variance, N, 40 + i as u64);
        // γ for the interval loss shrinks like e^(−ε): at ε = 10 each draw
        // rejects ~e^10/… offsets, so fewer draws there.
        let n = if e >= 10.0 { N / 20 } else { N };
        check_against_draws(e, Loss::Interval(0.95), n, 50 + i as u64);
    }
}

#[test]
#[should_panic(expected = "mean |X|")]
fn the_draw_check_catches_a_staircase_with_the_wrong_gamma() {
    // Draws from γ = 0.9 judged by the exact figures of the l1 γ (≈ 0.38).
    let e = 1.0;
    let (cal, _, _) = calibrated(e, Loss::MeanAbsolute);
    let wrong = Staircase::new(eps(e), cal.steps, 0.9).unwrap();
    let exact = calibrated(e, Loss::MeanAbsolute)
        .1
        .law()
        .accuracy_in_steps(0.95);
    let mut r = rng(60);
    let mean = (0..N)
        .map(|_| wrong.sample(&mut r).unsigned_abs() as f64)
        .sum::<f64>()
        / N as f64;
    let sd = exact.std_dev / (N as f64).sqrt();
    assert!(
        (mean - exact.mean_abs_error).abs() < 5.0 * sd,
        "mean |X|: {mean} vs {}",
        exact.mean_abs_error
    );
}

/// Audits a staircase of period `d` steps, claimed at ε, drawn with `draw`.
fn audit(e: f64, d: u128, draw: Staircase) -> dpnoise_core::audit::AuditReport {
    let (mut r0, mut r1) = (rng(70), rng(71));
    let shift = d as i128;
    privacy_loss_audit(
        N,
        (shift / 8).max(1),
        2_000,
        5.0,
        || draw.sample(&mut r0),
        || shift + draw.sample(&mut r1),
    )
    .tap(|rep| assert!(rep.bins_audited >= 8, "ε = {e}: {rep:?}"))
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&Self)) -> Self {
        f(&self);
        self
    }
}
impl<T> Tap for T {}

#[test]
fn staircase_passes_the_privacy_audit_including_gamma_near_0_and_1() {
    for (e, d, gamma) in [
        (1.0, 64u128, 0.0),
        (1.0, 64, 0.02),
        (1.0, 64, 0.4167),
        (1.0, 64, 0.98),
        (1.0, 64, 1.0),
        (0.5, 8, 0.3),
        (2.0, 1 << 20, 0.2),
    ] {
        let s = Staircase::new(eps(e), d, gamma).unwrap();
        let report = audit(e, d, s);
        assert!(
            report.within(e),
            "ε = {e}, D = {d}, γ = {gamma}: {report:?}"
        );
    }
}

#[test]
fn audit_flags_a_staircase_with_the_wrong_step_ratio() {
    // Steps of ratio e^(−2) while claiming ε = 1.
    let d = 64;
    let wrong = Staircase::new(eps(2.0), d, 0.4).unwrap();
    assert!(!audit(1.0, d, wrong).within(1.0));
}

#[test]
fn staircase_releases_defeat_the_finite_precision_attack() {
    let (cal, stair, _) = calibrated(1.0, Loss::Variance);
    let g = cal.lattice.granularity();
    let mut r = rng(80);
    let mut at = |x: f64| {
        let t = cal.lattice.round(x).unwrap();
        (0..100_000)
            .map(|_| cal.release(&stair, &mut r, t))
            .collect::<Vec<f64>>()
    };
    let (a, b) = (at(0.0), at(1.0));
    let (fa, fb) = (lattice_fingerprint(&a, g), lattice_fingerprint(&b, g));
    assert!(fa.is_some() && fa == fb);
    let sum = Calibration::sum(eps(1.0), 0.0, 1.0).unwrap();
    let stair = Staircase::new(eps(1.0), sum.steps, 0.4).unwrap();
    let big = 2f64.powi(52);
    let mut at = |x: f64| {
        (0..20_000)
            .map(|_| sum.release(&stair, &mut r, sum.lattice.round(x).unwrap()))
            .collect::<Vec<f64>>()
    };
    let (a, b) = (at(big), at(big + 1.0));
    let g = sum.lattice.granularity();
    assert!(
        lattice_fingerprint(&a, g).is_some()
            && lattice_fingerprint(&a, g) == lattice_fingerprint(&b, g)
    );
}
