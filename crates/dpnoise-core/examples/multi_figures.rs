//! The figures of docs/multivariate.md: Soria-Comas & Domingo-Ferrer's
//! Example 2 (S_f = [−1, 1] × [−10, 10], S_0 = [−0.1, 0.1] × [−1, 1], ε = 1)
//! for box noise against independent Laplace with the L1 sensitivity 11, and
//! the two densities on a grid (docs/data/multi_density.csv).
//! `cargo run --release -p dpnoise-core --example multi_figures -- DIR`
use dpnoise_core::multivariate::{
    default_inner_fraction, l1_staircase_gamma, BoxComponent, BoxNoise,
};
use dpnoise_core::Epsilon;
use std::fmt::Write as _;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/data".into());
    std::fs::create_dir_all(&dir).unwrap();
    let g = 2f64.powi(-16);
    let eps = Epsilon::new(1.0).unwrap();
    let build = |z: [f64; 2]| {
        let comps = [(1.0, z[0]), (10.0, z[1])]
            .iter()
            .map(|&(s, z)| BoxComponent {
                steps: (s / g) as u128,
                inner: (z / g).round() as u128,
            })
            .collect();
        BoxNoise::new(eps, comps).unwrap()
    };
    // Independent Laplace, scale 11 per component.
    let lap_var = 2.0 * 121.0;
    let lap_area = |c: f64| {
        let mut a: f64 = 0.0;
        while 1.0 - (-a).exp() * (1.0 + a) < c {
            a += 1e-5;
        }
        2.0 * (11.0 * a).powi(2)
    };
    let tau = default_inner_fraction(eps, &[(1.0 / g) as u128, (10.0 / g) as u128]).unwrap();
    println!("| noise | Var(Y1) | Var(Y2) | 90 % region | 95 % region | 99 % region |");
    println!("|---|---|---|---|---|---|");
    for (label, z) in [
        ("box, paper's S_0 (z = 0.1·s)", [0.1, 1.0]),
        ("box, dpnoise's default z", [tau, 10.0 * tau]),
    ] {
        let noise = build(z);
        let f = noise.figures().unwrap();
        let mut row = format!(
            "| {label} | {:.4} | {:.2} |",
            f.variances[0] * g * g,
            f.variances[1] * g * g
        );
        for c in [0.90, 0.95, 0.99] {
            let (_, widths) = f.region(&noise, c);
            write!(
                row,
                " {:.1} |",
                widths.iter().map(|w| w * g).product::<f64>()
            )
            .unwrap();
        }
        println!("{row}");
    }
    println!(
        "| independent Laplace, scale 11 | {lap_var:.1} | {lap_var:.1} | {:.1} | {:.1} | {:.1} |",
        lap_area(0.90),
        lap_area(0.95),
        lap_area(0.99)
    );
    println!(
        "\ndefault τ = {tau:.4} (z = τ·s); L1 staircase γ at ε = 1: {:.4}",
        l1_staircase_gamma(1.0)
    );

    // Densities of the continuous laws on a grid over [−5, 5] × [−50, 50],
    // each relative to its maximum (the lattice laws are these at 2^16 steps per unit).
    let shell = |x: f64, y: f64| {
        let i = |v: f64, s: f64, z: f64| ((v.abs() - z) / s).ceil().max(0.0);
        i(x, 1.0, 0.1).max(i(y, 10.0, 1.0))
    };
    let mut csv = String::from("x,y,box,laplace\n");
    for a in 0..=100 {
        for b in 0..=100 {
            let (x, y) = (-5.0 + a as f64 * 0.1, -50.0 + b as f64);
            let boxed = (-shell(x, y)).exp();
            let laplace = (-(x.abs() + y.abs()) / 11.0).exp();
            writeln!(csv, "{x},{y},{boxed},{laplace}").unwrap();
        }
    }
    std::fs::write(format!("{dir}/multi_density.csv"), csv).unwrap();
}
