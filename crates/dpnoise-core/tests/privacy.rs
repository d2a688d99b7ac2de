//! The privacy checks every mechanism must pass: an empirical audit of the
//! privacy loss between neighbouring inputs, and the finite-precision
//! (Mironov-style) attack. Each is shown to catch a broken mechanism.

use dpnoise_core::audit::{lattice_fingerprint, privacy_loss_audit};
use dpnoise_core::{BitPool, Calibration, Epsilon, Laplace, Lattice, LatticeNoise};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const N: usize = 1_000_000;
/// Bins need this many draws on both sides before their loss is judged.
const MIN_COUNT: u64 = 2_000;
/// Margin in standard errors of the log-ratio; with ~100 bins a correct
/// mechanism exceeds it with probability ≈ 100 · 6e-7.
const Z: f64 = 5.0;

fn rng(seed: u64) -> BitPool<ChaCha20Rng> {
    BitPool::new(ChaCha20Rng::seed_from_u64(seed))
}

/// Draws noise for true answers 0 and D (one sensitivity apart) and audits.
fn audit_laplace(
    eps: f64,
    calibrated_eps: f64,
    sensitivity: f64,
) -> dpnoise_core::audit::AuditReport {
    let e = Epsilon::new(eps).unwrap();
    let cal = Calibration::value(e, sensitivity).unwrap();
    let noise = Laplace::new(Epsilon::new(calibrated_eps).unwrap(), cal.steps).unwrap();
    let d = cal.steps as i128;
    let (mut r0, mut r1) = (rng(10), rng(11));
    privacy_loss_audit(
        N,
        d / 4,
        MIN_COUNT,
        Z,
        || noise.sample(&mut r0),
        || d + noise.sample(&mut r1),
    )
}

#[test]
fn laplace_passes_the_privacy_audit() {
    for (eps, sens) in [(0.5, 1.0), (1.0, 3.0), (2.0, 0.25)] {
        let report = audit_laplace(eps, eps, sens);
        assert!(report.bins_audited >= 10, "{report:?}");
        assert!(report.within(eps), "ε = {eps}: {report:?}");
        // The audit sees the full loss in the tails.
        assert!(report.max_loss > 0.8 * eps, "{report:?}");
    }
}

#[test]
fn audit_flags_a_mechanism_calibrated_to_twice_epsilon() {
    // Noise scaled for 2ε spends twice the budget it claims.
    let report = audit_laplace(1.0, 2.0, 1.0);
    assert!(!report.within(1.0), "{report:?}");
}

fn draws(n: usize, mut f: impl FnMut() -> f64) -> Vec<f64> {
    (0..n).map(|_| f()).collect()
}

#[test]
fn lattice_releases_defeat_the_finite_precision_attack() {
    let e = Epsilon::new(1.0).unwrap();
    let mut r = rng(12);
    // Per-row noise at true answers 0 and Δ.
    let cal = Calibration::value(e, 1.0).unwrap();
    let lap = Laplace::new(e, cal.steps).unwrap();
    let g = cal.lattice.granularity();
    let at = |r: &mut BitPool<ChaCha20Rng>, x: f64| {
        let t = cal.lattice.round(x).unwrap();
        draws(100_000, || cal.release(&lap, r, t))
    };
    let (a, b) = (at(&mut r, 0.0), at(&mut r, 1.0));
    let (fa, fb) = (lattice_fingerprint(&a, g), lattice_fingerprint(&b, g));
    assert!(fa.is_some() && fa == fb, "{fa:?} vs {fb:?}");
    assert_eq!(fa.unwrap().len(), 256);
    // Sums at 2^52 and 2^52 + 1, where float8 spacing is 1.
    let sum = Calibration::sum(e, 0.0, 1.0).unwrap();
    let lap = Laplace::new(e, sum.steps).unwrap();
    let big = 2f64.powi(52);
    let (a, b) = (
        draws(20_000, || {
            sum.release(&lap, &mut r, sum.lattice.round(big).unwrap())
        }),
        draws(20_000, || {
            sum.release(&lap, &mut r, sum.lattice.round(big + 1.0).unwrap())
        }),
    );
    let g = sum.lattice.granularity();
    let (fa, fb) = (lattice_fingerprint(&a, g), lattice_fingerprint(&b, g));
    assert!(fa.is_some() && fa == fb, "{fa:?} vs {fb:?}");
}

#[test]
fn a_naive_float_laplace_fails_the_finite_precision_test() {
    // x + Lap(1) by inverse CDF on a float uniform: the textbook mistake.
    let mut c = ChaCha20Rng::seed_from_u64(13);
    let mut naive = |x: f64| {
        let u = (c.next_u64() >> 11) as f64 / 2f64.powi(53) - 0.5;
        x - u.signum() * (1.0 - 2.0 * u.abs()).ln()
    };
    let g = Calibration::value(Epsilon::new(1.0).unwrap(), 1.0)
        .unwrap()
        .lattice
        .granularity();
    let a = draws(100_000, || naive(0.0));
    let b = draws(100_000, || naive(1.0));
    let (fa, fb) = (lattice_fingerprint(&a, g), lattice_fingerprint(&b, g));
    assert!(fa.is_none() || fa != fb);
}

#[test]
fn rounding_half_away_from_zero_would_widen_the_sensitivity() {
    // The tie case that makes half-up necessary: |round(½) − round(−½)| must be
    // at most ⌈1/g⌉ = 1 on the unit lattice.
    let unit = Lattice::UNIT;
    assert_eq!(unit.round(0.5).unwrap() - unit.round(-0.5).unwrap(), 1);
    assert_eq!((0.5f64.round() - (-0.5f64).round()) as i64, 2);
}
