//! The Gaussian over a person's k groups (the gate's bounding): calibrated
//! to the L2 sensitivity D·√k at the whole (ε, δ), checked exactly against
//! the analytic Gaussian and the joint discrete δ, and audited over the
//! joint law with one person's contribution changed in all k groups at once.
//! Run in release (`cargo test --release -p dpnoise-core`).

use dpnoise_core::approximate::{
    analytic_gaussian_sigma, discrete_gaussian_delta, joint_discrete_gaussian_delta,
    DISCRETE_CALIBRATION_BELOW,
};
use dpnoise_core::audit::delta_audit;
use dpnoise_core::{
    BitPool, Bounds, Choice, Delta, Epsilon, IntegerBounds, LatticeNoise, Loss, Mechanism, Noise,
    Plan, Shape,
};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Standard errors of margin: a correct mechanism fails about once in 10^6 runs.
const Z: f64 = 5.0;

fn gaussian(epsilon: f64, delta: f64, shape: Shape, groups: u32) -> Plan {
    let (e, d) = (Epsilon::new(epsilon).unwrap(), Delta::new(delta).unwrap());
    Plan::shared(
        Choice::Fixed(Mechanism::Gaussian),
        e,
        d,
        Loss::Variance,
        shape,
        groups,
    )
    .unwrap()
}

fn variance(plan: &Plan) -> f64 {
    match plan.noise {
        Noise::Gaussian(g) => g.variance(),
        _ => panic!("not a Gaussian"),
    }
}

#[test]
fn one_group_is_the_discrete_gaussian() {
    for (sigma, steps, eps) in [(3.73f64, 1u128, 1.0), (12.0, 3, 0.5), (40.0, 10, 2.0)] {
        let v = sigma * sigma;
        let (joint, single) = (
            joint_discrete_gaussian_delta(v, steps, 1, eps),
            discrete_gaussian_delta(v, steps, eps),
        );
        assert!(
            (joint / single - 1.0).abs() < 1e-9,
            "σ = {sigma}: {joint} vs {single}"
        );
    }
}

#[test]
fn k_groups_are_calibrated_to_the_l2_sensitivity() {
    let (eps, delta) = (1.0, 1e-5);
    let s1 = analytic_gaussian_sigma(eps, delta);
    let shapes = [
        ("count", Shape::Count, 1.0),
        (
            "sum [0, 100]",
            Shape::Sum(Bounds::new(0.0, 100.0).unwrap()),
            100.0,
        ),
        (
            "bigint sum [0, 5]",
            Shape::SumInteger(IntegerBounds::new(0, 5).unwrap()),
            5.0,
        ),
        (
            "bigint sum [-1000, 1000]",
            Shape::SumInteger(IntegerBounds::new(-1000, 1000).unwrap()),
            1000.0,
        ),
    ];
    for (name, shape, bound) in shapes {
        for k in [2u32, 4, 10, 25] {
            let plan = gaussian(eps, delta, shape, k);
            let g = plan.calibration.lattice.granularity();
            let sigma = variance(&plan).sqrt() * g;
            let l2 = s1 * bound * (k as f64).sqrt();
            // The target: within 10 % of the L2-calibrated figure.
            assert!(
                sigma <= 1.1 * l2,
                "{name}, k = {k}: σ = {sigma} > 1.1 × {l2}"
            );
            if sigma / g >= DISCRETE_CALIBRATION_BELOW {
                assert!(
                    sigma >= l2 && sigma <= l2 * (1.0 + 2e-6),
                    "{name}, k = {k}: σ = {sigma} vs {l2}"
                );
            } else {
                // Coarse: the exact joint δ of the σ sampled is paid, and 2 % less noise would not pay it.
                let steps = plan.calibration.steps;
                let v = variance(&plan);
                assert!(
                    joint_discrete_gaussian_delta(v, steps, k, eps) <= delta,
                    "{name}, k = {k}"
                );
                assert!(
                    joint_discrete_gaussian_delta(0.96 * v, steps, k, eps) > delta,
                    "{name}, k = {k}: wasteful"
                );
            }
            // Splitting (ε, δ) by k, as each group did before, costs far more at k ≥ 4.
            let split = |t: f64| dpnoise_core::rational::share(t, k);
            let per_group = gaussian(split(eps), split(delta), shape, 1);
            let split_sigma =
                variance(&per_group).sqrt() * per_group.calibration.lattice.granularity();
            assert!(split_sigma > sigma, "{name}, k = {k}");
            if k >= 10 {
                assert!(
                    split_sigma > 2.0 * sigma,
                    "{name}, k = {k}: split {split_sigma} vs joint {sigma}"
                );
            }
        }
    }
}

#[test]
fn other_mechanisms_keep_their_share() {
    let (e, d) = (Epsilon::new(1.0).unwrap(), Delta::new(1e-5).unwrap());
    for m in [Mechanism::TruncatedLaplace, Mechanism::Uniform] {
        let joint = Plan::shared(Choice::Fixed(m), e, d, Loss::Variance, Shape::Count, 10).unwrap();
        let share = |t: f64| dpnoise_core::rational::share(t, 10);
        let split = Plan::new(
            Choice::Fixed(m),
            Epsilon::new(share(1.0)).unwrap(),
            Delta::new(share(1e-5)).unwrap(),
            Loss::Variance,
            Shape::Count,
        )
        .unwrap();
        assert_eq!(joint, split, "{m:?}");
    }
    let laplace = Plan::shared(
        Choice::Fixed(Mechanism::Laplace),
        e,
        Delta::ZERO,
        Loss::Variance,
        Shape::Count,
        10,
    )
    .unwrap();
    let tenth = Epsilon::new(dpnoise_core::rational::share(1.0, 10)).unwrap();
    let split = Plan::new(
        Choice::Fixed(Mechanism::Laplace),
        tenth,
        Delta::ZERO,
        Loss::Variance,
        Shape::Count,
    );
    assert_eq!(laplace, split.unwrap());
    // 'auto' over 10 groups at (1, 1e-5) picks the jointly calibrated Gaussian.
    let auto = Plan::shared(Choice::Auto, e, d, Loss::Variance, Shape::Count, 10).unwrap();
    assert_eq!(auto.mechanism, Mechanism::Gaussian);
}

/// The largest δ̂ over both orders of the pair: k groups, each moved by `shift` steps.
fn audit_groups(noise: &Noise, k: usize, shift: i128, eps: f64, seed: u64) -> f64 {
    let (mut r0, mut r1) = (
        BitPool::new(ChaCha20Rng::seed_from_u64(seed)),
        BitPool::new(ChaCha20Rng::seed_from_u64(seed + 1)),
    );
    // The privacy loss between the two joint laws is a function of the sum
    // of the k answers: auditing that sum audits the joint release.
    let release = |r: &mut BitPool<ChaCha20Rng>, moved: bool| -> i128 {
        (0..k)
            .map(|_| noise.sample(r) + if moved { shift } else { 0 })
            .sum()
    };
    let forward = delta_audit(
        400_000,
        4,
        eps,
        Z,
        || release(&mut r0, false),
        || release(&mut r1, true),
    );
    let backward = delta_audit(
        400_000,
        4,
        eps,
        Z,
        || release(&mut r0, true),
        || release(&mut r1, false),
    );
    forward.worst_excess.max(backward.worst_excess)
}

#[test]
fn a_person_changed_in_all_k_groups_passes_the_delta_audit() {
    let (eps, delta, k) = (0.5, 0.01, 6u32);
    let plan = gaussian(eps, delta, Shape::Count, k);
    let worst = audit_groups(&plan.noise, k as usize, 1, eps, 7);
    assert!(
        worst <= delta,
        "joint Gaussian over {k} groups: δ̂ = {worst} > {delta}"
    );
    // Negative control: each group calibrated for one group at the whole
    // (ε, δ), as if a person were in one group, is seen by the same audit.
    let wrong = gaussian(eps, delta, Shape::Count, 1);
    let worst = audit_groups(&wrong.noise, k as usize, 1, eps, 9);
    assert!(
        worst > delta,
        "a Gaussian ignoring the {k} groups passed: δ̂ = {worst}"
    );
}
