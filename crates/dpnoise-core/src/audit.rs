//! Statistical checks shared by every mechanism's tests: a chi-square
//! goodness-of-fit test against an exact pmf, and an empirical audit of the
//! privacy loss between neighbouring inputs.

use statrs::distribution::{ChiSquared, ContinuousCDF};
use std::collections::{BTreeSet, HashMap};

/// The outcome of a chi-square goodness-of-fit test.
#[derive(Debug, Clone)]
pub struct ChiSquare {
    pub statistic: f64,
    pub degrees_of_freedom: usize,
    /// Rejection threshold at the requested significance.
    pub critical: f64,
}

impl ChiSquare {
    pub fn passes(&self) -> bool {
        self.statistic <= self.critical
    }
}

/// Counts of each distinct draw.
pub fn histogram(n: usize, mut draw: impl FnMut() -> i128) -> HashMap<i128, u64> {
    let mut h = HashMap::new();
    for _ in 0..n {
        *h.entry(draw()).or_insert(0) += 1;
    }
    h
}

/// Chi-square test of `counts` (n draws in all) against `pmf`. The integers in
/// [lo, hi] are grouped left to right into bins of expected count ≥ 20;
/// everything outside [lo, hi] is one more bin. `alpha` is the significance.
pub fn chi_square(
    counts: &HashMap<i128, u64>,
    pmf: impl Fn(i128) -> f64,
    lo: i128,
    hi: i128,
    alpha: f64,
) -> ChiSquare {
    let n: u64 = counts.values().sum();
    let n = n as f64;
    let mut bins: Vec<(f64, f64)> = Vec::new(); // (expected, observed)
    let (mut exp_acc, mut obs_acc, mut mass_in) = (0.0, 0.0, 0.0);
    for i in lo..=hi {
        let p = pmf(i);
        mass_in += p;
        exp_acc += n * p;
        obs_acc += *counts.get(&i).unwrap_or(&0) as f64;
        if exp_acc >= 20.0 {
            bins.push((exp_acc, obs_acc));
            exp_acc = 0.0;
            obs_acc = 0.0;
        }
    }
    let outside_obs: u64 = counts
        .iter()
        .filter(|(k, _)| **k < lo || **k > hi)
        .map(|(_, c)| *c)
        .sum();
    let outside = (n * (1.0 - mass_in)).max(0.0) + exp_acc;
    bins.push((outside, outside_obs as f64 + obs_acc));
    let statistic = bins
        .iter()
        .map(|(e, o)| {
            if *e <= 1e-9 {
                // Any draw where the pmf says none can happen fails the test.
                if *o > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            } else {
                (o - e) * (o - e) / e
            }
        })
        .sum();
    let df = bins.len().saturating_sub(1).max(1);
    let critical = ChiSquared::new(df as f64)
        .expect("df > 0")
        .inverse_cdf(1.0 - alpha);
    ChiSquare {
        statistic,
        degrees_of_freedom: df,
        critical,
    }
}

/// The empirical privacy loss of a mechanism between two neighbouring inputs.
#[derive(Debug, Clone)]
pub struct AuditReport {
    /// The largest |ln(P0(bin)/P1(bin))| minus its statistical margin.
    pub worst_excess_loss: f64,
    /// The bin (its first lattice value) where that happened.
    pub worst_bin: i128,
    /// The largest raw |ln(P0/P1)| over the audited bins.
    pub max_loss: f64,
    pub bins_audited: usize,
}

impl AuditReport {
    /// True when no bin's loss exceeds ε beyond its margin.
    pub fn within(&self, epsilon: f64) -> bool {
        self.worst_excess_loss <= epsilon
    }
}

/// Draws `n` outputs from each of M(x0) and M(x1), bins them by `bin_width`
/// lattice steps, and for every bin holding at least `min_count` draws of
/// each, compares |ln(c0/c1)| with ε. A bin's margin is `z` standard errors of
/// the log-ratio (delta method: √(1/c0 + 1/c1)), so a correct mechanism
/// passes with overwhelming probability and a mechanism whose loss exceeds ε
/// by more than the margin is flagged.
pub fn privacy_loss_audit(
    n: usize,
    bin_width: i128,
    min_count: u64,
    z: f64,
    mut m0: impl FnMut() -> i128,
    mut m1: impl FnMut() -> i128,
) -> AuditReport {
    let bin = |x: i128| x.div_euclid(bin_width);
    let h0 = histogram(n, || bin(m0()));
    let h1 = histogram(n, || bin(m1()));
    let mut report = AuditReport {
        worst_excess_loss: f64::NEG_INFINITY,
        worst_bin: 0,
        max_loss: 0.0,
        bins_audited: 0,
    };
    for (b, &c0) in &h0 {
        let c1 = *h1.get(b).unwrap_or(&0);
        if c0 < min_count || c1 < min_count {
            continue;
        }
        let (c0, c1) = (c0 as f64, c1 as f64);
        let loss = (c0 / c1).ln().abs();
        let excess = loss - z * (1.0 / c0 + 1.0 / c1).sqrt();
        report.bins_audited += 1;
        report.max_loss = report.max_loss.max(loss);
        if excess > report.worst_excess_loss {
            report.worst_excess_loss = excess;
            report.worst_bin = b * bin_width;
        }
    }
    report
}

/// The finite-precision check (Mironov; Gazeau et al.): if every output is an
/// integer multiple of the granularity `g`, the set of residues of output/g
/// modulo 256 (over outputs whose lattice integer float8 holds exactly);
/// `None` when some output is off the lattice. Two neighbouring inputs must
/// give `Some` of the same set.
pub fn lattice_fingerprint(outputs: &[f64], g: f64) -> Option<BTreeSet<u8>> {
    let mut residues = BTreeSet::new();
    for &o in outputs {
        let steps = o / g; // exact: g is a power of two
        if steps.fract() != 0.0 {
            return None;
        }
        if steps.abs() < 2f64.powi(53) {
            residues.insert((steps as i64 & 0xff) as u8);
        }
    }
    Some(residues)
}

/// The outcome of an (ε, δ) audit between two neighbouring inputs.
#[derive(Debug, Clone)]
pub struct DeltaAuditReport {
    /// The largest P̂0(S) − e^ε·P̂1(S) minus its statistical margin, over
    /// the audited sets S: an estimate of δ that errs low.
    pub worst_excess: f64,
    /// Where it happened: "x >= t", "x <= t" or "bin t".
    pub worst_set: String,
    pub sets_audited: usize,
}

impl DeltaAuditReport {
    /// True when no set shows more than δ beyond its margin.
    pub fn within(&self, delta: f64) -> bool {
        self.worst_excess <= delta
    }
}

/// Draws `n` outputs from each of M(x0) and M(x1) and checks, over every
/// upper tail {x ≥ t}, lower tail {x ≤ t} and bin of `bin_width` lattice
/// steps, that P̂0(S) ≤ e^ε·P̂1(S) + δ. A set's margin is `z` standard errors
/// of P̂0 − e^ε·P̂1, so a correct mechanism passes with overwhelming
/// probability and one whose δ is larger than claimed by more than the
/// margin is flagged. Audit both orders of the pair.
pub fn delta_audit(
    n: usize,
    bin_width: i128,
    epsilon: f64,
    z: f64,
    mut m0: impl FnMut() -> i128,
    mut m1: impl FnMut() -> i128,
) -> DeltaAuditReport {
    let h0 = histogram(n, || m0());
    let h1 = histogram(n, || m1());
    let mut points: Vec<i128> = h0
        .keys()
        .chain(h1.keys())
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    points.sort_unstable();
    let count = |h: &HashMap<i128, u64>, x: i128| *h.get(&x).unwrap_or(&0) as f64;
    let nf = n as f64;
    let e = epsilon.exp();
    let mut report = DeltaAuditReport {
        worst_excess: f64::NEG_INFINITY,
        worst_set: String::new(),
        sets_audited: 0,
    };
    let mut judge = |c0: f64, c1: f64, set: &dyn Fn() -> String| {
        let (p0, p1) = (c0 / nf, c1 / nf);
        let se = (p0 * (1.0 - p0) / nf + e * e * p1 * (1.0 - p1) / nf).sqrt();
        // A set seen in neither sample still carries the chance of a few draws.
        let excess = p0 - e * p1 - z * se.max(1.0 / nf);
        report.sets_audited += 1;
        if excess > report.worst_excess {
            report.worst_excess = excess;
            report.worst_set = set();
        }
    };
    // Lower tails {x ≤ t} in one sweep up, upper tails {x ≥ t} in one sweep down.
    let (mut c0, mut c1) = (0.0, 0.0);
    for &x in &points {
        c0 += count(&h0, x);
        c1 += count(&h1, x);
        judge(c0, c1, &|| format!("x <= {x}"));
    }
    let (mut c0, mut c1) = (0.0, 0.0);
    for &x in points.iter().rev() {
        c0 += count(&h0, x);
        c1 += count(&h1, x);
        judge(c0, c1, &|| format!("x >= {x}"));
    }
    let mut bins: HashMap<i128, (f64, f64)> = HashMap::new();
    for &x in &points {
        let b = bins.entry(x.div_euclid(bin_width)).or_default();
        b.0 += count(&h0, x);
        b.1 += count(&h1, x);
    }
    for (b, (c0, c1)) in bins {
        judge(c0, c1, &|| format!("bin {}", b * bin_width));
    }
    report
}
