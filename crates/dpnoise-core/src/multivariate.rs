//! Multivariate noise (MECHANISMS.md §6): Soria-Comas & Domingo-Ferrer's box
//! noise (Theorem 13) and Geng's two-dimensional L1 staircase, both exact on
//! the lattice.
//!
//! Box noise, in lattice steps: component j has sensitivity D_j steps and
//! inner half-width Z_j ≤ D_j. B_i = Π[−(Z_j + i·D_j), Z_j + i·D_j] (lattice
//! points), S_0 = B_0, S_i = B_i \ B_(i−1), and P(x) = M·e^(−iε) on S_i.
//! A shift by at most D_j steps in every component moves a point at most one
//! shell, so the loss is at most ε (the paper's proof, unchanged on Z^d).

use crate::entropy::Entropy;
use crate::lattice::Lattice;
use crate::params::Sensitivity;
use crate::rational::Epsilon;
use crate::sampler::{bernoulli_exp_neg, bernoulli_ratio, geometric_exp, uniform_below};
use crate::Error;

/// At most this many components: keeps every count a finite float.
pub const MAX_COMPONENTS: usize = 16;
/// Inner half-widths are at least D/1024 (see `BoxNoise::new`).
pub const MIN_INNER_DIVISOR: u128 = 1024;
/// The smallest ε box noise takes: its exact figures and its default inner
/// half-widths sum over about 40/ε shells per evaluation, some thirty
/// evaluations (at 1e-3, over half a second for 8 components).
pub const MIN_EPSILON: f64 = 0.01;
/// The most tuples a box-noise draw may expect to try (`expected_tries`):
/// about a microsecond each for 16 components, so at most ~0.1 s a draw.
pub const MAX_EXPECTED_TRIES: f64 = 65_536.0;

/// One component of box noise, in lattice steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxComponent {
    /// Sensitivity D_j ≥ 1.
    pub steps: u128,
    /// Inner half-width Z_j, 0 ≤ Z_j ≤ D_j.
    pub inner: u128,
}

impl BoxComponent {
    /// Lattice points of B_i along this component: 2(Z + iD) + 1.
    fn width(&self, shell: f64) -> f64 {
        2.0 * (self.inner as f64 + shell * self.steps as f64) + 1.0
    }
}

/// Box noise (Theorem 13) on the lattice.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxNoise {
    epsilon: Epsilon,
    components: Vec<BoxComponent>,
}

impl BoxNoise {
    pub fn new(epsilon: Epsilon, components: Vec<BoxComponent>) -> Result<BoxNoise, Error> {
        // Compared as Epsilon::new reads it: 0.001 itself is accepted.
        if epsilon.value() < crate::rational::at_most_decimal(MIN_EPSILON) {
            return Err(Error::invalid(
                "epsilon",
                "at least 0.01 for box noise",
                epsilon.value(),
            ));
        }
        if components.is_empty() || components.len() > MAX_COMPONENTS {
            return Err(Error::invalid(
                "sensitivities",
                "an array of 1 to 16 elements",
                components.len(),
            ));
        }
        for c in &components {
            if c.steps == 0 || c.steps >= 1 << 100 {
                return Err(Error::invalid(
                    "sensitivity",
                    "> 0 and within the lattice",
                    c.steps,
                ));
            }
            if c.inner > c.steps {
                return Err(Error::invalid(
                    "inner",
                    "at most the sensitivity, component by component",
                    c.inner,
                ));
            }
        }
        // A component's proposal keeps a shell-0 draw with probability
        // (2Z + 1)/(2D): Z is raised to at least D/1024 so a draw never takes
        // more than ~1024 tries (at large ε the variance-optimal Z is 0).
        // Any Z ≤ D is ε-DP; the figures are those of the Z used.
        let components = components
            .into_iter()
            .map(|c| BoxComponent {
                inner: c.inner.max(c.steps.div_ceil(MIN_INNER_DIVISOR)),
                ..c
            })
            .collect();
        Ok(BoxNoise {
            epsilon,
            components,
        })
    }

    pub fn components(&self) -> &[BoxComponent] {
        &self.components
    }

    /// One draw, in lattice steps per component.
    ///
    /// Each component is drawn on its own from the 1-D law with weight
    /// e^(−(ε/d)·i_j) on its shell i_j (a geometric block index, an offset
    /// uniform in the block, kept in proportion to the block's size); the
    /// tuple is kept with probability e^(−(ε/d)·(d·max_j i_j − Σ_j i_j)). The
    /// product is then ∝ e^(−ε·max_j i_j) = e^(−ε·i) on S_i, exactly, as every
    /// probability is an exact rational or e^(−rational).
    pub fn sample<E: Entropy>(&self, rng: &mut E) -> Vec<i128> {
        let d = self.components.len() as u128;
        let (s, t) = (self.epsilon.num, self.epsilon.den * d);
        let mut point = vec![0i128; self.components.len()];
        let mut shells = vec![0u128; self.components.len()];
        loop {
            for (j, c) in self.components.iter().enumerate() {
                let (x, shell) = sample_component(rng, c, s, t);
                point[j] = x;
                shells[j] = shell;
            }
            let max = *shells.iter().max().expect("at least one component");
            let excess = d * max - shells.iter().sum::<u128>();
            if bernoulli_exp_neg(rng, s * excess, t) {
                return point;
            }
            crate::interrupt::check();
        }
    }

    /// e^(−εi)·|S_i| for the shells up to where it is negligible against
    /// the total, and their sum: the target law's normaliser, in points.
    fn shell_masses(&self) -> (Vec<f64>, f64) {
        let eps = self.epsilon.value();
        let volume = |shell: f64| -> f64 {
            if shell < 0.0 {
                0.0
            } else {
                self.components.iter().map(|c| c.width(shell)).product()
            }
        };
        let mut shell_mass = Vec::new();
        let mut total = 0.0;
        // MIN_EPSILON bounds the count: about (41 + 15·ln i)/ε shells for 16 components.
        for i in 0.. {
            if i % 4096 == 0 {
                crate::interrupt::check();
            }
            let m = (-eps * i as f64).exp() * (volume(i as f64) - volume(i as f64 - 1.0));
            total += m;
            shell_mass.push(m);
            if i > 2 && m < 1e-18 * total {
                break;
            }
        }
        (shell_mass, total)
    }

    /// The expected number of tuples `sample` draws before it keeps one:
    /// the proposal's normaliser (the product of the components' 1-D ones)
    /// over the target's. It grows quickly with the number of components.
    pub fn expected_tries(&self) -> f64 {
        let d = self.components.len() as f64;
        let ratio = (-self.epsilon.value() / d).exp();
        let proposal: f64 = self
            .components
            .iter()
            .map(|c| {
                (2 * c.inner + 1) as f64
                    + 2.0 * c.steps as f64 * ratio / -(-self.epsilon.value() / d).exp_m1()
            })
            .product();
        proposal / self.shell_masses().1
    }

    /// The exact figures of the law sampled, in lattice steps.
    pub fn figures(&self) -> Result<BoxFigures, Error> {
        let eps = self.epsilon.value();
        let d = self.components.len();
        let (shell_mass, total) = self.shell_masses();
        let shells = shell_mass.len();
        // One pass from the last shell down, all components at once (O(shells·d)):
        // for component c, P(x_c) on its shell i is e^(−εi)·N_c(i) + T_c(i),
        // N_c(i) the other components' points in B_i (the box's volume over
        // c's width) and T_c(i) = Σ_{m > i} e^(−εm)·(N_c(m) − N_c(m − 1)).
        let squares = |n: f64| n * (n + 1.0) * (2.0 * n + 1.0) / 6.0;
        let fill = |shell: f64, out: &mut Vec<f64>| -> f64 {
            out.clear();
            out.extend(
                self.components
                    .iter()
                    .map(|c| if shell < 0.0 { 0.0 } else { c.width(shell) }),
            );
            out.iter().product()
        };
        let (mut width, mut width_before) = (Vec::with_capacity(d), Vec::with_capacity(d));
        let mut tail = vec![0.0; d];
        let mut second = vec![0.0; d];
        for i in (0..shells).rev() {
            if i % 4096 == 0 {
                crate::interrupt::check();
            }
            let shell = i as f64;
            let volume = fill(shell, &mut width);
            let volume_before = fill(shell - 1.0, &mut width_before);
            let weight = (-eps * shell).exp();
            for (c, comp) in self.components.iter().enumerate() {
                let others = volume / width[c];
                let others_before = if i == 0 {
                    0.0
                } else {
                    volume_before / width_before[c]
                };
                let p = weight * others + tail[c];
                let (z, step) = (comp.inner as f64, comp.steps as f64);
                let q = if i == 0 {
                    2.0 * squares(z)
                } else {
                    2.0 * (squares(z + shell * step) - squares(z + (shell - 1.0) * step))
                };
                second[c] += p * q;
                tail[c] += weight * (others - others_before);
            }
        }
        let variances = second.iter().map(|s| s / total).collect();
        Ok(BoxFigures {
            variances,
            shell_mass,
            total,
        })
    }
}

/// Exact figures of a box noise, in lattice steps.
#[derive(Debug, Clone)]
pub struct BoxFigures {
    /// Variance of each component (the noise has mean zero).
    pub variances: Vec<f64>,
    /// e^(−εi)·|S_i| for the shells that matter, and their sum.
    shell_mass: Vec<f64>,
    total: f64,
}

impl BoxFigures {
    /// The smallest β (in shells) whose box Π[−(Z_j + ⌊βD_j⌋), Z_j + ⌊βD_j⌋]
    /// holds `confidence` of the mass; such boxes are the smallest regions,
    /// as they fill S_i before S_(i+1) (Soria-Comas & Domingo-Ferrer, Table 4).
    /// Returns (β, the box's number of lattice points per component).
    pub fn region(&self, noise: &BoxNoise, confidence: f64) -> (f64, Vec<f64>) {
        let eps = noise.epsilon.value();
        let widths = |beta: f64| -> Vec<f64> {
            noise
                .components
                .iter()
                .map(|c| 2.0 * (c.inner as f64 + (beta * c.steps as f64).floor()) + 1.0)
                .collect()
        };
        let mass_within = |beta: f64| -> f64 {
            let whole = beta.floor() as usize;
            let full: f64 = self.shell_mass.iter().take(whole + 1).sum();
            let inside: f64 = widths(beta).iter().product();
            let shell_box: f64 = widths(whole as f64).iter().product();
            (full + (-eps * (whole + 1) as f64).exp() * (inside - shell_box)) / self.total
        };
        let (mut lo, mut hi) = (0.0, 1.0);
        while mass_within(hi) < confidence {
            lo = hi;
            hi *= 2.0;
        }
        for _ in 0..80 {
            let mid = 0.5 * (lo + hi);
            if mass_within(mid) >= confidence {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        (hi, widths(hi))
    }
}

/// One component's 1-D proposal: shell 0 is its 2Z + 1 central points at
/// weight 1, shell i ≥ 1 its 2D points with |x| in (Z + (i−1)D, Z + iD] at
/// weight e^(−i·s/t). Returns (x, shell).
fn sample_component<E: Entropy>(rng: &mut E, c: &BoxComponent, s: u128, t: u128) -> (i128, u128) {
    let centre = 2 * c.inner + 1;
    let block = centre.max(2 * c.steps);
    loop {
        let shell = geometric_exp(rng, s, t);
        let size = if shell == 0 { centre } else { 2 * c.steps };
        // A uniform slot of the largest block, kept when the shell has it.
        let slot = uniform_below(rng, block);
        if slot >= size {
            crate::interrupt::check();
            continue;
        }
        let x = if shell == 0 {
            slot as i128 - c.inner as i128
        } else {
            let magnitude = c.inner + (shell - 1) * c.steps + 1 + slot / 2;
            if slot % 2 == 0 {
                magnitude as i128
            } else {
                -(magnitude as i128)
            }
        };
        return (x, shell);
    }
}

/// The z rule: z_j = τ·s_j with one τ ∈ [0, 1] for all components, the τ
/// minimising the sum of the component variances (relative to s_j², so no
/// component's units dominate), by grid and golden-section search on the
/// exact figures.
pub fn default_inner_fraction(epsilon: Epsilon, steps: &[u128]) -> Result<f64, Error> {
    let cost = |tau: f64| -> Result<f64, Error> {
        let comps = steps
            .iter()
            .map(|&d| BoxComponent {
                steps: d,
                inner: ((tau * d as f64).round() as u128).min(d),
            })
            .collect();
        let f = BoxNoise::new(epsilon, comps)?.figures()?;
        Ok(f.variances
            .iter()
            .zip(steps)
            .map(|(v, d)| v / (*d as f64 * *d as f64))
            .sum())
    };
    let grid: Vec<f64> = (0..=10).map(|i| i as f64 / 10.0).collect();
    let mut costs = Vec::with_capacity(grid.len());
    for &g in &grid {
        costs.push(cost(g)?);
    }
    let at = (0..grid.len())
        .min_by(|a, b| costs[*a].total_cmp(&costs[*b]))
        .expect("grid");
    // The grid evaluated every τ's figures, so none fails here.
    let (lo, hi) = (
        grid[at.saturating_sub(1)],
        grid[(at + 1).min(grid.len() - 1)],
    );
    let mid =
        crate::staircase::golden_section_min(lo, hi, 20, |t| cost(t).unwrap_or(f64::INFINITY));
    Ok(if cost(mid)? <= costs[at] {
        mid
    } else {
        grid[at]
    })
}

/// The smallest acceptance rate of the L1 staircase's sampler (see `L1Staircase::new`).
pub const MIN_L1_ACCEPTANCE: f64 = 1.0 / 2048.0;

/// Geng's two-dimensional staircase for an L1 sensitivity of D steps: the
/// weight of a point depends on r = ‖x‖₁ only, b^k for r in [kD, kD + γD)
/// and b^(k+1) for r in [kD + γD, (k+1)D), b = e^(−ε). Any shift of L1 norm
/// at most D changes r by at most D, hence the weight by at most e^ε.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct L1Staircase {
    epsilon: Epsilon,
    period: u128,
    inner: u128,
}

impl L1Staircase {
    pub fn new(epsilon: Epsilon, steps: u128, gamma: f64) -> Result<L1Staircase, Error> {
        if steps == 0 || steps >= 1 << 100 {
            return Err(Error::invalid(
                "sensitivity",
                "> 0 and within the lattice",
                steps,
            ));
        }
        if !(0.0..=1.0).contains(&gamma) {
            return Err(Error::invalid("gamma", "in [0, 1]", gamma));
        }
        // A try is kept with probability about γ²/2 + b(1 − γ²)/2 (mostly in
        // block 0, where the radius r is kept with probability r/D, and the
        // outer part of the block with b): at large ε (b tiny, optimal γ
        // near 0) a draw would try almost forever. γ is raised so that this
        // is at least 2^-11 (γ ≥ 2^-5 as b → 0); any γ is ε-DP, and the
        // noise is then at most D/32 or so, far below the sensitivity.
        let b = (-epsilon.value()).exp();
        let gamma = gamma
            .max(((MIN_L1_ACCEPTANCE * 2.0 - b).max(0.0) / (1.0 - b)).sqrt())
            .min(1.0);
        let inner = ((gamma * steps as f64).round() as u128).min(steps);
        Ok(L1Staircase {
            epsilon,
            period: steps,
            inner,
        })
    }

    /// One draw (x, y), in lattice steps.
    ///
    /// The radius r = kD + j: k from P(k) ∝ (k + 1)·b^k (the sum of two
    /// geometrics), j uniform in [0, D), kept with probability
    /// b^[j ≥ γD]·cnt(r)/(4(k + 1)D), cnt(r) = 4r points on the L1 sphere
    /// (1 at r = 0); then a uniform point of that sphere.
    pub fn sample<E: Entropy>(&self, rng: &mut E) -> (i128, i128) {
        let (s, t) = (self.epsilon.num, self.epsilon.den);
        let d = self.period;
        let r = loop {
            let k = geometric_exp(rng, s, t) + geometric_exp(rng, s, t);
            let j = uniform_below(rng, d);
            let r = k * d + j;
            let count = if r == 0 { 1 } else { 4 * r };
            let kept = bernoulli_ratio(rng, count, 4 * (k + 1) * d)
                && (j < self.inner || bernoulli_exp_neg(rng, s, t));
            if kept {
                break r;
            }
            crate::interrupt::check();
        };
        if r == 0 {
            return (0, 0);
        }
        let u = uniform_below(rng, 4 * r);
        let (quadrant, offset) = (u / r, u % r);
        let (mut x, mut y) = ((r - offset) as i128, offset as i128);
        for _ in 0..quadrant {
            (x, y) = (-y, x);
        }
        (x, y)
    }

    /// P(r), the law of the L1 radius (for tests): cnt(r)·weight(r)/Z, Z
    /// summed over the blocks that matter.
    pub fn radius_pmf(&self, r: u128) -> f64 {
        let b = (-self.epsilon.value()).exp();
        let weight = |r: u128| {
            let (k, j) = (r / self.period, r % self.period);
            b.powi(k as i32 + i32::from(j >= self.inner))
        };
        let count = |r: u128| if r == 0 { 1.0 } else { 4.0 * r as f64 };
        let limit = self.period * ((60.0 / self.epsilon.value()).ceil() as u128 + 2);
        let z: f64 = (0..limit).map(|r| count(r) * weight(r)).sum();
        count(r) * weight(r) / z
    }
}

/// The γ minimising E‖X‖₁ for the continuous 2-D L1 staircase at ε (period
/// 1, density ∝ r·w(r) along the radius), by golden-section search.
///
/// Block k contributes b^k·(∫_k^{k+γ} + b∫_{k+γ}^{k+1}) r^n dr, a polynomial
/// in k: A·k² + B·k + C for n = 2 and A·k + B/2 for n = 1, with
/// A = γ + b(1 − γ), B = γ² + b(1 − γ²), C = (γ³ + b(1 − γ³))/3. The sums
/// over k are the closed forms Σb^k = 1/(1 − b), Σk·b^k = b/(1 − b)²,
/// Σk²·b^k = b(1 + b)/(1 − b)³, so the cost does not grow as ε shrinks
/// (summing block by block took minutes at ε = 1e-6).
pub fn l1_staircase_gamma(epsilon: f64) -> f64 {
    let b = (-epsilon).exp();
    let omb = -(-epsilon).exp_m1();
    let (s0, s1, s2) = (
        1.0 / omb,
        b / (omb * omb),
        b * (1.0 + b) / (omb * omb * omb),
    );
    let mean_radius = |gamma: f64| {
        let a = gamma + b * (1.0 - gamma);
        let bb = gamma * gamma + b * (1.0 - gamma * gamma);
        let c = (gamma.powi(3) + b * (1.0 - gamma.powi(3))) / 3.0;
        (a * s2 + bb * s1 + c * s0) / (a * s1 + bb / 2.0 * s0)
    };
    crate::staircase::golden_section_min(0.0, 1.0, 60, mean_radius)
}

/// Two values with an L1 sensitivity Δ (`dp_noise_l1_staircase`): one
/// lattice for both (scale Δ/ε), and the 2-D staircase (γ for the least
/// E‖X‖₁) for D = ⌈Δ/g⌉ + 1 steps: each component rounds on its own, so
/// the L1 distance of two rounded points is at most ⌈Δ/g⌉ + 1 steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct L1Plan {
    pub lattice: Lattice,
    pub noise: L1Staircase,
}

impl L1Plan {
    pub fn new(epsilon: Epsilon, sensitivity: Sensitivity) -> Result<L1Plan, Error> {
        let s = sensitivity.value();
        let lattice = Lattice::for_noise(s / epsilon.value(), s)?;
        let steps = lattice.steps_ceil(s)? + 1;
        let noise = L1Staircase::new(epsilon, steps, l1_staircase_gamma(epsilon.value()))?;
        Ok(L1Plan { lattice, noise })
    }

    /// Both values rounded onto the lattice.
    pub fn round(&self, values: &[f64]) -> Result<[i128; 2], Error> {
        match values {
            [x, y] => Ok([self.lattice.round(*x)?, self.lattice.round(*y)?]),
            _ => Err(Error::invalid_data(
                "values",
                "an array as long as the sensitivities (or bounds)",
            )),
        }
    }

    pub fn release<E: Entropy>(&self, rng: &mut E, [x, y]: [i128; 2]) -> [f64; 2] {
        let (nx, ny) = self.noise.sample(rng);
        [self.lattice.release(x + nx), self.lattice.release(y + ny)]
    }
}

/// Refuses box noise whose draws would take too long (`MAX_EXPECTED_TRIES`).
fn check_tries(noise: &BoxNoise) -> Result<(), Error> {
    if noise.expected_tries() > MAX_EXPECTED_TRIES {
        return Err(Error::invalid(
            "sensitivities",
            "few enough components for box noise to be drawn in well under a second at this epsilon (release a large vector in groups, or pass larger inner half-widths)",
            format!("{} components", noise.components.len()),
        ));
    }
    Ok(())
}

/// Box noise for sensitivities and inner half-widths in the query's units:
/// one lattice per component (2^40 steps per s_j/ε, at least 2^20 per s_j),
/// D_j = ⌈s_j/g_j⌉, Z_j = z_j/g_j rounded (any Z_j ≤ D_j is ε-DP, so z is
/// free to round). Without `inner`, z_j = τ·s_j by `default_inner_fraction`.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxPlan {
    pub lattices: Vec<Lattice>,
    pub noise: BoxNoise,
    /// The z_j used, in the query's units.
    pub inner: Vec<f64>,
}

impl BoxPlan {
    pub fn new(
        epsilon: Epsilon,
        sensitivities: &[f64],
        inner: Option<&[f64]>,
    ) -> Result<BoxPlan, Error> {
        if sensitivities.is_empty() || sensitivities.len() > MAX_COMPONENTS {
            return Err(Error::invalid(
                "sensitivities",
                "an array of 1 to 16 elements",
                sensitivities.len(),
            ));
        }
        if let Some(z) = inner {
            if z.len() != sensitivities.len() {
                return Err(Error::invalid(
                    "inner",
                    "an array as long as sensitivities",
                    format!("{} elements for {}", z.len(), sensitivities.len()),
                ));
            }
            for (zj, sj) in z.iter().zip(sensitivities) {
                if !(zj.is_finite() && *zj >= 0.0 && zj <= sj) {
                    return Err(Error::invalid(
                        "inner",
                        "in [0, sensitivity] component by component",
                        zj,
                    ));
                }
            }
        }
        let mut lattices = Vec::with_capacity(sensitivities.len());
        let mut steps = Vec::with_capacity(sensitivities.len());
        for &s in sensitivities {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::invalid("sensitivities", "finite numbers > 0", s));
            }
            let lattice = Lattice::for_noise(s / epsilon.value(), s)?;
            steps.push(lattice.steps_ceil(s)?);
            lattices.push(lattice);
        }
        BoxPlan::on_lattices(epsilon, lattices, steps, inner)
    }

    /// As `new`, on lattices and sensitivities (in steps) already chosen.
    pub fn on_lattices(
        epsilon: Epsilon,
        lattices: Vec<Lattice>,
        steps: Vec<u128>,
        inner: Option<&[f64]>,
    ) -> Result<BoxPlan, Error> {
        let inner_steps: Vec<u128> = match inner {
            Some(z) => z
                .iter()
                .zip(&lattices)
                .zip(&steps)
                .map(|((zj, l), d)| ((zj / l.granularity()).round() as u128).min(*d))
                .collect(),
            None => {
                // The widest S_0 draws fastest: if even it needs too many
                // tries, refuse before searching τ.
                let widest = steps
                    .iter()
                    .map(|&d| BoxComponent { steps: d, inner: d })
                    .collect();
                check_tries(&BoxNoise::new(epsilon, widest)?)?;
                let tau = default_inner_fraction(epsilon, &steps)?;
                steps
                    .iter()
                    .map(|d| ((tau * *d as f64).round() as u128).min(*d))
                    .collect()
            }
        };
        let components: Vec<BoxComponent> = steps
            .iter()
            .zip(&inner_steps)
            .map(|(&steps, &inner)| BoxComponent { steps, inner })
            .collect();
        let noise = BoxNoise::new(epsilon, components)?;
        check_tries(&noise)?;
        let inner = noise
            .components
            .iter()
            .zip(&lattices)
            .map(|(c, l)| c.inner as f64 * l.granularity())
            .collect();
        Ok(BoxPlan {
            noise,
            lattices,
            inner,
        })
    }

    /// Component-wise sums of vectors clamped to [−b_j, b_j] (`dp_sum_multi`):
    /// lattices for noise of scale b_j/ε, sensitivity the rounded bound in steps.
    pub fn for_sums(epsilon: Epsilon, bounds: &[f64]) -> Result<BoxPlan, Error> {
        if bounds.is_empty() || bounds.len() > MAX_COMPONENTS {
            return Err(Error::invalid(
                "bounds",
                "an array of 1 to 16 elements",
                bounds.len(),
            ));
        }
        let mut lattices = Vec::with_capacity(bounds.len());
        let mut steps = Vec::with_capacity(bounds.len());
        for &b in bounds {
            if !(b.is_finite() && b > 0.0) {
                return Err(Error::invalid("bounds", "finite numbers > 0", b));
            }
            let lattice = Lattice::for_noise(b / epsilon.value(), b)?;
            steps.push(lattice.round(b)?.unsigned_abs());
            lattices.push(lattice);
        }
        BoxPlan::on_lattices(epsilon, lattices, steps, None)
    }

    /// `values` rounded onto each component's lattice. A length other than
    /// the number of components is refused without showing it (it comes
    /// from the data).
    pub fn round(&self, values: &[f64]) -> Result<Vec<i128>, Error> {
        if values.len() != self.lattices.len() {
            return Err(Error::invalid_data(
                "values",
                "an array as long as the sensitivities (or bounds)",
            ));
        }
        values
            .iter()
            .zip(&self.lattices)
            .map(|(v, l)| l.round(*v))
            .collect()
    }

    /// The release of exact answers in steps: one draw of the box noise.
    pub fn release<E: Entropy>(&self, rng: &mut E, exact: &[i128]) -> Vec<f64> {
        let noise = self.noise.sample(rng);
        exact
            .iter()
            .zip(&noise)
            .zip(&self.lattices)
            .map(|((x, n), l)| l.release(x + n))
            .collect()
    }

    /// Per-component variances and the volumes of the smallest box regions
    /// holding each confidence, in the query's units.
    pub fn accuracy(&self, confidences: &[f64]) -> Result<(Vec<f64>, Vec<f64>), Error> {
        let f = self.noise.figures()?;
        let g: Vec<f64> = self.lattices.iter().map(|l| l.granularity()).collect();
        let variances = f.variances.iter().zip(&g).map(|(v, g)| v * g * g).collect();
        let volumes = confidences
            .iter()
            .map(|c| {
                f.region(&self.noise, *c)
                    .1
                    .iter()
                    .zip(&g)
                    .map(|(w, g)| w * g)
                    .product()
            })
            .collect();
        Ok((variances, volumes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_epsilon_draws_terminate_and_inner_is_floored() {
        // At ε = 1000 the variance-optimal z is 0; without the floor a draw
        // would take ~2D tries.
        let plan = BoxPlan::new(Epsilon::new(1000.0).unwrap(), &[1.0, 10.0], None).unwrap();
        let mut r = crate::BitPool::new(
            <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(3),
        );
        for c in plan.noise.components() {
            assert!(c.inner * MIN_INNER_DIVISOR >= c.steps);
        }
        for _ in 0..1000 {
            let p = plan.noise.sample(&mut r);
            assert!(p
                .iter()
                .zip(plan.noise.components())
                .all(|(x, c)| x.unsigned_abs() <= c.inner));
        }
        assert!(BoxPlan::new(Epsilon::new(1.0).unwrap(), &[1.0, 10.0], Some(&[2.0, 1.0])).is_err());
        assert!(BoxPlan::new(Epsilon::new(1.0).unwrap(), &[1.0, -10.0], None).is_err());
        assert!(BoxPlan::new(Epsilon::new(1.0).unwrap(), &[], None).is_err());
        assert!(BoxPlan::new(Epsilon::new(1.0).unwrap(), &[1.0], Some(&[0.5, 0.5])).is_err());
    }
}
