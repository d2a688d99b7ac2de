//! The exact error of every mechanism over ε at δ ∈ {1e-6, 1e-3}, Δ = 1,
//! with `'auto'`'s choice marked: the tables in docs/approximate.md and
//! docs/data/delta.csv.
//! `cargo run --release -p dpnoise-core --example delta_figures -- DIR`
use dpnoise_core::{Choice, Delta, Epsilon, Loss, Mechanism, Plan, Sensitivity, Shape};
use std::fmt::Write as _;

const MECHANISMS: [Mechanism; 5] = [
    Mechanism::Laplace,
    Mechanism::Staircase,
    Mechanism::TruncatedLaplace,
    Mechanism::Uniform,
    Mechanism::Gaussian,
];

fn main() {
    let unit = Shape::Value(Sensitivity::new(1.0).unwrap());
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/data".into());
    std::fs::create_dir_all(&dir).unwrap();
    let mut csv = String::from("delta,epsilon,mechanism,mean_abs_error,variance,auto_l1,auto_l2\n");
    for delta in [1e-6, 1e-3] {
        println!("\n### δ = {delta:e}, Δ = 1: E|X| / variance (* = 'auto' with loss l1 / l2)\n");
        let names: Vec<&str> = MECHANISMS.iter().map(|m| m.name()).collect();
        println!("| ε | {} |", names.join(" | "));
        println!("|---|{}", "---|".repeat(names.len()));
        for eps in [0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0] {
            let e = Epsilon::new(eps).unwrap();
            let pick = |loss| {
                Plan::new(Choice::Auto, e, Delta::new(delta).unwrap(), loss, unit)
                    .unwrap()
                    .mechanism
            };
            let (l1, l2) = (pick(Loss::MeanAbsolute), pick(Loss::Variance));
            let mut row = format!("| {eps} |");
            for m in MECHANISMS {
                let own = if m.needs_delta() { delta } else { 0.0 };
                let a = Plan::new(
                    Choice::Fixed(m),
                    e,
                    Delta::new(own).unwrap(),
                    Loss::Variance,
                    unit,
                )
                .unwrap()
                .accuracy(0.95);
                let mark = |chosen: Mechanism| if chosen == m { "*" } else { "" };
                write!(
                    row,
                    " {:.4}{} / {:.4}{} |",
                    a.mean_abs_error,
                    mark(l1),
                    a.std_dev.powi(2),
                    mark(l2)
                )
                .unwrap();
                writeln!(
                    csv,
                    "{delta:e},{eps},{},{},{},{},{}",
                    m.name(),
                    a.mean_abs_error,
                    a.std_dev.powi(2),
                    l1 == m,
                    l2 == m
                )
                .unwrap();
            }
            println!("{row}");
        }
    }
    std::fs::write(format!("{dir}/delta.csv"), csv).unwrap();
}
