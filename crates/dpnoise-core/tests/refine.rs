//! Knowledge refinement: the paper's Example 2, exact and from draws; the
//! privacy guarantee, exact and audited from draws, with negative controls;
//! and the refusals of malformed priors.

use dpnoise_core::audit::privacy_loss_audit;
use dpnoise_core::refine::{Prior, Query, Refinement, GRID_CELLS};
use dpnoise_core::{BitPool, Epsilon};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const N: usize = 1_000_000;

fn rng(seed: u64) -> BitPool<ChaCha20Rng> {
    BitPool::new(ChaCha20Rng::seed_from_u64(seed))
}

fn boolean_prior() -> Prior {
    Prior::categorical(vec!["0".into(), "1".into()], vec![0.99, 0.01]).unwrap()
}

#[test]
fn example_2_exact() {
    let r = Refinement::new(
        boolean_prior(),
        Epsilon::new(1.0).unwrap(),
        Query::Individual,
    )
    .unwrap();
    let given_0 = r.categorical_probabilities("0").unwrap()[1];
    let given_1 = r.categorical_probabilities("1").unwrap()[1];
    assert!((given_0 - 0.003679).abs() < 1e-6, "{given_0}");
    assert!((given_1 - 0.027183).abs() < 1e-6, "{given_1}");
    let population = 0.99 * given_0 + 0.01 * given_1;
    // The paper prints 0.003912 from its rounded factors; exactly it is 0.0039140.
    assert!((population - 0.00391).abs() < 1e-5, "{population}");
    // The thresholded Laplace answer of the paper's comparison: P(Lap(1/2) ≥ 1/2) = e^-1 / 2.
    let laplace = 0.99 * (-1f64).exp() / 2.0 + 0.01 * (1.0 - (-1f64).exp() / 2.0);
    assert!((laplace - 0.19).abs() < 0.005);
}

#[test]
fn example_2_from_draws() {
    let r = Refinement::new(
        boolean_prior(),
        Epsilon::new(1.0).unwrap(),
        Query::Individual,
    )
    .unwrap();
    let mut g = rng(90);
    let mut rates = Vec::new();
    for (truth, p) in [("0", 0.003679), ("1", 0.027183)] {
        let ones = (0..N)
            .filter(|_| r.sample_categorical(&mut g, truth).unwrap() == "1")
            .count() as f64;
        let se = (p * (1.0 - p) / N as f64).sqrt();
        assert!(
            (ones / N as f64 - p).abs() < 5.0 * se,
            "truth {truth}: {}",
            ones / N as f64
        );
        // Negative control: the same check rejects the prior's own rate 0.01.
        assert!((ones / N as f64 - 0.01).abs() > 5.0 * se);
        rates.push((ones / N as f64, se));
    }
    // The population's rate: 0.99 · P(1 | 0) + 0.01 · P(1 | 1) ≈ 0.00391.
    let population = 0.99 * rates[0].0 + 0.01 * rates[1].0;
    let se = (0.99f64.powi(2) * rates[0].1.powi(2) + 0.01f64.powi(2) * rates[1].1.powi(2)).sqrt();
    assert!((population - 0.003914).abs() < 5.0 * se, "{population}");
}

#[test]
fn example_3_disjoint_individuals_compose_to_epsilon() {
    // Two individuals, uniform Boolean priors, individual queries at ε = 1;
    // both true values 0. A neighbour drops individual 1: f_1's answer is
    // then the prior itself. Joint ratios are α_d or 2 − α_d (Proposition 3).
    let prior = Prior::categorical(vec!["0".into(), "1".into()], vec![0.5, 0.5]).unwrap();
    let r = Refinement::new(prior, Epsilon::new(1.0).unwrap(), Query::Individual).unwrap();
    let q = r.categorical_probabilities("0").unwrap();
    assert!(
        (q[1] - 0.183939).abs() < 1e-6 && (q[0] - 0.816061).abs() < 1e-6,
        "{q:?}"
    );
    let absent = r.prior_law();
    let alpha_d = (-1f64).exp();
    for a in 0..2 {
        for b in 0..2 {
            let joint = q[a] * q[b];
            let neighbour = absent[a] * q[b];
            let ratio = joint / neighbour;
            assert!(
                (ratio - alpha_d).abs() < 1e-6 || (ratio - (2.0 - alpha_d)).abs() < 1e-6,
                "{ratio}"
            );
            assert!(ratio.ln().abs() <= 1.0, "the pair stays 1-DP, not 2-DP");
        }
    }
}

fn max_log_ratio(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .filter(|(x, y)| **x > 0.0 || **y > 0.0)
        .map(|(x, y)| (x / y).ln().abs())
        .fold(0.0, f64::max)
}

fn numeric_priors() -> Vec<Prior> {
    vec![
        Prior::uniform(0.0, 120.0).unwrap(),
        Prior::histogram(vec![0.0, 18.0, 65.0, 120.0], vec![1.0, 5.0, 2.0]).unwrap(),
        Prior::normal(40.0, 15.0, 0.0, 120.0).unwrap(),
    ]
}

#[test]
fn exact_laws_keep_the_promised_loss() {
    for e in [0.5, 1.0, 3.0] {
        let eps = Epsilon::new(e).unwrap();
        for prior in numeric_priors() {
            let stat = Refinement::new(prior.clone(), eps, Query::Statistical).unwrap();
            assert!(stat.guaranteed_epsilon() <= e && stat.guaranteed_epsilon() > e - 1e-6);
            let laws: Vec<Vec<f64>> = [0.0, 1.0, 37.5, 60.0, 119.0, 500.0]
                .iter()
                .map(|t| stat.numeric_law(*t).unwrap())
                .collect();
            for law in &laws {
                assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            }
            for a in &laws {
                for b in &laws {
                    assert!(
                        max_log_ratio(a, b) <= e + 1e-9,
                        "ε = {e}: {}",
                        max_log_ratio(a, b)
                    );
                }
            }
            // Individual queries: each answer's law within e^±ε of the prior.
            let ind = Refinement::new(prior.clone(), eps, Query::Individual).unwrap();
            let p = ind.prior_law();
            for t in [0.0, 60.0, 120.0] {
                assert!(max_log_ratio(&ind.numeric_law(t).unwrap(), &p) <= e + 1e-9);
            }
            // And the answers are sharpened: more mass near the truth than the prior gives.
            let near = |law: &[f64]| {
                law[GRID_CELLS / 2 - 50..GRID_CELLS / 2 + 50]
                    .iter()
                    .sum::<f64>()
            };
            assert!(near(&stat.numeric_law(60.0).unwrap()) > near(&p));
        }
        let cat = Refinement::new(boolean_prior(), eps, Query::Statistical).unwrap();
        let (a, b) = (
            cat.categorical_probabilities("0").unwrap(),
            cat.categorical_probabilities("1").unwrap(),
        );
        assert!(max_log_ratio(&a, &b) <= e + 1e-9);
    }
}

/// Audits refined numeric answers for two neighbouring true values from draws.
fn audit(used: f64, query: Query) -> dpnoise_core::audit::AuditReport {
    let prior = Prior::uniform(0.0, 100.0).unwrap();
    let r = Refinement::new(prior, Epsilon::new(used).unwrap(), query).unwrap();
    let (mut g0, mut g1) = (rng(91), rng(92));
    let report = privacy_loss_audit(
        N,
        1,
        2_000,
        5.0,
        || (r.sample_numeric(&mut g0, 30.0).unwrap() / 5.0).floor() as i128,
        || (r.sample_numeric(&mut g1, 70.0).unwrap() / 5.0).floor() as i128,
    );
    assert!(report.bins_audited >= 10, "{report:?}");
    report
}

#[test]
fn refined_answers_pass_the_privacy_audit_and_a_2eps_refinement_fails() {
    for e in [0.5, 1.0, 3.0] {
        assert!(audit(e, Query::Statistical).within(e), "ε = {e}");
    }
    // Factors for 2ε, claimed as ε.
    assert!(!audit(2.0, Query::Statistical).within(1.0));
}

/// Audits individual-query answers against draws from the prior itself.
fn audit_individual(used: f64) -> dpnoise_core::audit::AuditReport {
    let prior = Prior::normal(50.0, 20.0, 0.0, 100.0).unwrap();
    let r = Refinement::new(prior, Epsilon::new(used).unwrap(), Query::Individual).unwrap();
    let (mut g0, mut g1) = (rng(93), rng(94));
    privacy_loss_audit(
        N,
        1,
        2_000,
        5.0,
        || (r.sample_numeric(&mut g0, 45.0).unwrap() / 5.0).floor() as i128,
        || (r.sample_prior_numeric(&mut g1) / 5.0).floor() as i128,
    )
}

#[test]
fn individual_answers_stay_within_epsilon_of_the_prior() {
    for e in [0.5, 1.0, 2.0] {
        let report = audit_individual(e);
        assert!(
            report.bins_audited >= 10 && report.within(e),
            "ε = {e}: {report:?}"
        );
    }
    // Factors for 2ε, claimed as ε.
    assert!(!audit_individual(2.0).within(1.0));
}

#[test]
fn malformed_priors_are_refused() {
    assert!(Prior::histogram(vec![0.0, 1.0], vec![1.0, 2.0]).is_err());
    assert!(Prior::histogram(vec![0.0, 2.0, 1.0], vec![1.0, 2.0]).is_err());
    assert!(Prior::histogram(vec![0.0, 1.0, 2.0], vec![-1.0, 2.0]).is_err());
    assert!(Prior::histogram(vec![0.0, 1.0, 2.0], vec![0.0, 0.0]).is_err());
    assert!(Prior::histogram(vec![], vec![]).is_err());
    assert!(Prior::histogram(vec![0.0, f64::INFINITY], vec![1.0]).is_err());
    assert!(Prior::uniform(1.0, 1.0).is_err());
    assert!(Prior::normal(0.0, 0.0, -1.0, 1.0).is_err());
    assert!(Prior::normal(0.0, 1.0, 1.0, -1.0).is_err());
    assert!(Prior::normal(f64::NAN, 1.0, -1.0, 1.0).is_err());
    assert!(Prior::categorical(vec!["a".into()], vec![0.5, 0.5]).is_err());
    assert!(Prior::categorical(vec!["a".into(), "a".into()], vec![0.5, 0.5]).is_err());
    assert!(Prior::categorical(vec![], vec![]).is_err());
    let r = Refinement::new(
        boolean_prior(),
        Epsilon::new(1.0).unwrap(),
        Query::Statistical,
    )
    .unwrap();
    assert!(r.sample_categorical(&mut rng(1), "2").is_err());
    assert!(r.sample_numeric(&mut rng(1), 1.0).is_err());
    let u = Refinement::new(
        Prior::uniform(0.0, 1.0).unwrap(),
        Epsilon::new(1.0).unwrap(),
        Query::Statistical,
    )
    .unwrap();
    assert!(u.sample_numeric(&mut rng(1), f64::NAN).is_err());
    // Out of range values are clamped to the prior's range.
    let v = u.sample_numeric(&mut rng(1), 1e9).unwrap();
    assert!((0.0..=1.0).contains(&v));
}
