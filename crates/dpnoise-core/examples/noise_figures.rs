//! Writes the data behind docs/noise.md's figures and tables as CSV:
//! `cargo run --release -p dpnoise-core --example noise_figures -- DIR`
//! - density.csv: histograms of 10^6 draws of each mechanism at ε = 1, Δ = 1;
//! - error.csv: exact E|X|, standard deviation and 95 % half-width over ε;
//! - ratios.csv: empirical variance and mean |X| of 10^6 draws, staircase over Laplace.
use dpnoise_core::refine::{Prior, Query, Refinement, GRID_CELLS};
use dpnoise_core::{BitPool, Calibration, Delta, Epsilon, LatticeNoise, Loss, Mechanism, Noise};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::fmt::Write as _;

fn noise(e: f64, mechanism: Mechanism, loss: Loss) -> (Calibration, Noise) {
    let eps = Epsilon::new(e).unwrap();
    let cal = Calibration::value(eps, 1.0).unwrap();
    (
        cal,
        Noise::new(mechanism, eps, Delta::ZERO, cal.steps, loss).unwrap(),
    )
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/data".into());
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = BitPool::new(ChaCha20Rng::seed_from_u64(2026));
    const N: usize = 1_000_000;

    // Densities at ε = 1: 0.05-wide bins over [−6, 6].
    let mut csv = String::from("mechanism,bin_center,density\n");
    for (label, mech, loss) in [
        ("laplace", Mechanism::Laplace, Loss::Variance),
        ("staircase_l2", Mechanism::Staircase, Loss::Variance),
        ("staircase_l1", Mechanism::Staircase, Loss::MeanAbsolute),
    ] {
        let (cal, n) = noise(1.0, mech, loss);
        let mut bins = vec![0u64; 240];
        for _ in 0..N {
            let x = cal.lattice.release(n.sample(&mut rng));
            let b = ((x + 6.0) / 0.05).floor();
            if (0.0..240.0).contains(&b) {
                bins[b as usize] += 1;
            }
        }
        for (i, c) in bins.iter().enumerate() {
            writeln!(
                csv,
                "{label},{:.3},{:.6}",
                -6.0 + 0.05 * (i as f64 + 0.5),
                *c as f64 / N as f64 / 0.05
            )
            .unwrap();
        }
    }
    std::fs::write(format!("{dir}/density.csv"), csv).unwrap();

    // Exact accuracy over ε.
    let mut csv = String::from("epsilon,mechanism,mean_abs_error,std_dev,ci95_half_width\n");
    for i in 0..=60 {
        let e = 10f64.powf(-1.0 + 2.0 * i as f64 / 60.0);
        for (label, mech, loss) in [
            ("laplace", Mechanism::Laplace, Loss::Variance),
            ("staircase_l1", Mechanism::Staircase, Loss::MeanAbsolute),
            ("staircase_l2", Mechanism::Staircase, Loss::Variance),
            ("staircase_ci", Mechanism::Staircase, Loss::Interval(0.95)),
        ] {
            let (cal, n) = noise(e, mech, loss);
            let a = n
                .law()
                .accuracy_in_steps(0.95)
                .scaled(cal.lattice.granularity());
            writeln!(
                csv,
                "{e:.6},{label},{:.9e},{:.9e},{:.9e}",
                a.mean_abs_error, a.std_dev, a.ci_half_width
            )
            .unwrap();
        }
    }
    std::fs::write(format!("{dir}/error.csv"), csv).unwrap();

    // Empirical ratios from draws, against the exact ones.
    let mut csv = String::from("epsilon,var_ratio_l2_empirical,var_ratio_l2_exact,mae_ratio_l1_empirical,mae_ratio_l1_exact\n");
    for e in [0.1, 1.0, 5.0, 10.0] {
        let (cal, lap) = noise(e, Mechanism::Laplace, Loss::Variance);
        let (_, l2) = noise(e, Mechanism::Staircase, Loss::Variance);
        let (_, l1) = noise(e, Mechanism::Staircase, Loss::MeanAbsolute);
        let g = cal.lattice.granularity();
        let mut moments = |n: &Noise| {
            let (mut abs, mut sq) = (0.0, 0.0);
            for _ in 0..N {
                let x = n.sample(&mut rng) as f64 * g;
                abs += x.abs();
                sq += x * x;
            }
            (abs / N as f64, sq / N as f64)
        };
        let ((lap_abs, lap_sq), (_, l2_sq), (l1_abs, _)) =
            (moments(&lap), moments(&l2), moments(&l1));
        let exact = |n: &Noise| n.law().accuracy_in_steps(0.95).scaled(g);
        let (el, e2, e1) = (exact(&lap), exact(&l2), exact(&l1));
        writeln!(
            csv,
            "{e},{:.4},{:.4},{:.4},{:.4}",
            l2_sq / lap_sq,
            (e2.std_dev / el.std_dev).powi(2),
            l1_abs / lap_abs,
            e1.mean_abs_error / el.mean_abs_error
        )
        .unwrap();
    }
    std::fs::write(format!("{dir}/ratios.csv"), &csv).unwrap();
    print!("{csv}");

    // Refinement against noise addition for the average of 100 ages in
    // [0, 120] (Δ = 1.2), true average 41: exact mean |error| over ε.
    let mut csv = String::from("epsilon,laplace,staircase_l1,refine_vague,refine_tight\n");
    let truth = 41.0;
    for i in 0..=40 {
        let e = 10f64.powf(-1.0 + 2.0 * i as f64 / 40.0);
        let eps = Epsilon::new(e).unwrap();
        let cal = Calibration::value(eps, 1.2).unwrap();
        let mae = |mech, loss| {
            let n = Noise::new(mech, eps, Delta::ZERO, cal.steps, loss).unwrap();
            n.law()
                .accuracy_in_steps(0.95)
                .scaled(cal.lattice.granularity())
                .mean_abs_error
        };
        let refined = |prior: Prior| {
            let r = Refinement::new(prior, eps, Query::Statistical).unwrap();
            let width = 120.0 / GRID_CELLS as f64;
            r.numeric_law(truth)
                .unwrap()
                .iter()
                .enumerate()
                .map(|(c, p)| p * ((c as f64 + 0.5) * width - truth).abs())
                .sum::<f64>()
        };
        writeln!(
            csv,
            "{e:.5},{:.6},{:.6},{:.6},{:.6}",
            mae(Mechanism::Laplace, Loss::Variance),
            mae(Mechanism::Staircase, Loss::MeanAbsolute),
            refined(Prior::uniform(0.0, 120.0).unwrap()),
            refined(Prior::normal(40.0, 2.0, 0.0, 120.0).unwrap()),
        )
        .unwrap();
    }
    std::fs::write(format!("{dir}/refine.csv"), &csv).unwrap();
}
