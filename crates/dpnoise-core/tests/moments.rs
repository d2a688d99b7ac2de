//! Statistical tests of the centred average, the variance and the
//! quantile's exponential mechanism: each against its stated law or error,
//! each with a negative control showing the same test rejects a wrong one.
//! Run in release (`cargo test --release -p dpnoise-core`).

use dpnoise_core::audit::{chi_square, histogram};
use dpnoise_core::quantile::sort;
use dpnoise_core::{Average, BitPool, Bounds, Epsilon, Quantile, Variance};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Significance of each goodness-of-fit test.
const ALPHA: f64 = 1e-6;

fn rng(seed: u64) -> BitPool<ChaCha20Rng> {
    BitPool::new(ChaCha20Rng::seed_from_u64(seed))
}

/// Offsets of `data` on `q`'s lattice, sorted.
fn offsets(q: &Quantile, data: &[f64]) -> Vec<u64> {
    let mut v: Vec<u64> = data.iter().map(|&x| q.offset(x).unwrap()).collect();
    sort(&mut v);
    v
}

/// Chi-square of `draws` draws of `sampler`'s group against `truth`'s exact group probabilities.
fn quantile_fit(
    sampler: &Quantile,
    truth: &Quantile,
    data: &[f64],
    cap: u32,
    draws: usize,
    seed: u64,
) -> bool {
    let sorted = offsets(sampler, data);
    let probabilities = truth.group_probabilities(&sorted);
    let mut r = rng(seed);
    let h = histogram(draws, || {
        let t = sampler.sample_sorted(&mut r, &sorted, cap).unwrap();
        sorted.partition_point(|&v| v < t) as i128
    });
    let pmf = |i: i128| probabilities.get(i as usize).map_or(0.0, |g| g.2);
    let test = chi_square(&h, pmf, 0, sorted.len() as i128, ALPHA);
    test.passes()
}

#[test]
fn quantile_draws_follow_the_exponential_mechanism() {
    let data = [1.0, 2.0, 2.0, 2.5, 4.0, 4.01, 7.0, 9.0, 9.5, 9.99];
    let bounds = Bounds::new(0.0, 10.0).unwrap();
    for (epsilon, p) in [(1.0, 0.5), (0.3, 0.9), (4.0, 0.1), (2.0, 1.0)] {
        let q = Quantile::new(Epsilon::new(epsilon).unwrap(), bounds, p).unwrap();
        // The production cap, and a cap of 1 that sends most groups through the capped path.
        for cap in [40, 1, 0] {
            assert!(
                quantile_fit(&q, &q, &data, cap, 200_000, 7 + cap as u64),
                "ε {epsilon}, p {p}, cap {cap}"
            );
        }
    }
    // Negative control: draws at 1.5ε tested against ε's probabilities fail.
    let right = Quantile::new(Epsilon::new(1.0).unwrap(), bounds, 0.5).unwrap();
    let wrong = Quantile::new(Epsilon::new(1.5).unwrap(), bounds, 0.5).unwrap();
    assert!(
        !quantile_fit(&wrong, &right, &data, 40, 200_000, 3),
        "the test cannot tell ε from 1.5ε"
    );
}

#[test]
fn quantile_is_near_the_true_median_at_large_n() {
    let data: Vec<f64> = (0..10_001).map(|i| i as f64 / 100.0).collect();
    let q = Quantile::new(
        Epsilon::new(1.0).unwrap(),
        Bounds::new(0.0, 100.0).unwrap(),
        0.5,
    )
    .unwrap();
    let mut r = rng(11);
    let mut v: Vec<u64> = data.iter().map(|&x| q.offset(x).unwrap()).collect();
    for _ in 0..200 {
        let m = q.release(&mut r, &mut v).unwrap();
        // 10 ranks at ε = 1 is e^(−5) per side: 0.1 in value.
        assert!((m - 50.0).abs() < 0.2, "{m}");
    }
}

/// Mean, standard deviation and excess-free kurtosis of `draws` releases.
fn moments(mut draw: impl FnMut() -> f64, draws: usize) -> (f64, f64, f64) {
    let xs: Vec<f64> = (0..draws).map(|_| draw()).collect();
    let mean = xs.iter().sum::<f64>() / draws as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws as f64;
    let fourth = xs.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / draws as f64;
    (mean, var.sqrt(), fourth / (var * var))
}

/// Whether the empirical standard deviation is within `slack` (relative,
/// the stated figure's first-order model) plus five standard errors of
/// `stated`.
fn sd_matches(sd: f64, kurtosis: f64, draws: usize, stated: f64, slack: f64) -> bool {
    let se = ((kurtosis - 1.0) / (4.0 * draws as f64)).sqrt();
    (sd / stated - 1.0).abs() <= slack + 5.0 * se
}

#[test]
fn centred_average_is_unbiased_with_the_stated_error() {
    const DRAWS: usize = 40_000;
    let epsilon = Epsilon::new(1.0).unwrap();
    let bounds = Bounds::new(0.0, 100.0).unwrap();
    let avg = Average::new(epsilon, bounds).unwrap();
    let n = 400u64;
    let stated = avg.accuracy(n, 0.95).std_dev;
    let mut r = rng(5);
    // A mean inside the bounds (at a bound the release is clamped).
    let inner = avg.lattice().round(90.0).unwrap() * i128::from(n as i64);
    let (mean, sd, kurtosis) = moments(|| avg.release(&mut r, inner, n as i64).unwrap(), DRAWS);
    let se = sd / (DRAWS as f64).sqrt();
    assert!(
        (mean - 90.0).abs() < 5.0 * se + 0.01 * stated,
        "bias: {mean}"
    );
    // The stated figure is for the mean at a bound (|ȳ| = 50): at 90 (ȳ = 40) it is an upper bound.
    let at_90 = {
        let s = avg.sum.accuracy(0.95).std_dev;
        let c = avg.count.accuracy(0.95).std_dev;
        (s * s + (40.0 * c).powi(2)).sqrt() / n as f64
    };
    assert!(at_90 <= stated);
    assert!(
        sd_matches(sd, kurtosis, DRAWS, at_90, 0.03),
        "sd {sd} vs {at_90}"
    );
    // Negative control: the uncentred average's error (sensitivity 100 at ε/2 each) is not what is drawn.
    let uncentred = {
        let s = 100.0 * 2f64.sqrt() / 0.5;
        let c = 2f64.sqrt() / 0.5;
        (s * s + (90.0 * c).powi(2)).sqrt() / n as f64
    };
    assert!(
        !sd_matches(sd, kurtosis, DRAWS, uncentred, 0.03),
        "the test cannot tell the uncentred error"
    );
    assert!(sd < 0.75 * uncentred, "centring gains: {sd} vs {uncentred}");
}

#[test]
fn variance_is_nearly_unbiased_within_its_bound() {
    const DRAWS: usize = 20_000;
    let epsilon = Epsilon::new(1.0).unwrap();
    let bounds = Bounds::new(0.0, 100.0).unwrap();
    let var = Variance::new(epsilon, bounds).unwrap();
    // 1000 values 20, 40, 60, 80 in turn: variance 500.
    let data: Vec<f64> = (0..1000).map(|i| 20.0 * (1 + i % 4) as f64).collect();
    let (mut sum, mut squares) = (0i128, 0i128);
    for &x in &data {
        let (r, q) = var.steps(x).unwrap();
        sum += r;
        squares += q;
    }
    let mut r = rng(9);
    let (mean, sd, _) = moments(
        || {
            var.release(&mut r, sum, squares, data.len() as i64)
                .unwrap()
        },
        DRAWS,
    );
    let stated = var.accuracy(data.len() as u64, 0.95).std_dev;
    // The ratio estimator's bias is second order: (σ_N/n)² · V, far under a standard error here.
    assert!(
        (mean - 500.0).abs() < 5.0 * sd / (DRAWS as f64).sqrt() + 0.5,
        "bias: {mean}"
    );
    assert!(
        sd <= 1.05 * stated,
        "sd {sd} above the stated bound {stated}"
    );
    assert!(
        sd >= 0.2 * stated,
        "sd {sd} far below the bound {stated}: the bound is loose or the noise missing"
    );
    // Negative control: without noise on the squares the spread is smaller than the bound's squares term.
    let squares_only = var.squares.accuracy(0.95).std_dev / data.len() as f64;
    assert!(
        sd > squares_only,
        "the squares' noise is not in the release"
    );
}
