//! Knowledge refinement (Soria-Comas & Domingo-Ferrer; MECHANISMS.md §5):
//! the answer is a draw from the user's prior, sharpened around the true
//! value as far as ε allows. No sensitivity is needed.
//!
//! Exactness. A numeric prior is discretised on a grid of `GRID_CELLS`
//! equal cells over its range, each holding an integer weight proportional
//! to its prior mass; a categorical prior holds one integer weight per
//! category. The boost factors are α = A/2^32 with A rounded inwards, so
//! α_u ≤ e^ε and α_d ≥ e^(−ε) (individual) or α_u/α_d ≤ e^ε (statistical),
//! and every output probability is an exact rational sampled from uniform
//! integers. `Refinement::guaranteed_epsilon` reports the loss the integers give.

use crate::entropy::Entropy;
use crate::rational::Epsilon;
use crate::sampler::uniform_below;
use crate::Error;
use statrs::distribution::{ContinuousCDF, Normal};

/// Cells of the grid a numeric prior is sampled on.
pub const GRID_CELLS: usize = 4096;
/// Total integer weight of a discretised prior.
const TOTAL: f64 = (1u64 << 40) as f64;
const ONE: u128 = 1 << 32;
/// The largest boost (and smallest damping) factor: 2^20.
const MAX_FACTOR: f64 = 1_048_576.0;

/// A prior as the user sends it. With the `serde` feature its form is
/// `{"kind": "histogram", "edges": [...], "weights": [...]}` (the SQL
/// layer's `dp_prior` text form).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "lowercase"))]
pub enum Prior {
    /// Piecewise uniform: `weights[i]` on [edges[i], edges[i+1]).
    Histogram { edges: Vec<f64>, weights: Vec<f64> },
    /// Normal(mean, sd) truncated to [lower, upper].
    Normal {
        mean: f64,
        sd: f64,
        lower: f64,
        upper: f64,
    },
    /// A finite set of answers.
    Categorical {
        values: Vec<String>,
        probs: Vec<f64>,
    },
}

fn finite(name: &'static str, x: f64) -> Result<f64, Error> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(Error::invalid(name, "a finite number", x))
    }
}

fn check_weights(name: &'static str, w: &[f64]) -> Result<(), Error> {
    if w.is_empty() {
        return Err(Error::invalid(name, "a non-empty array", "an empty array"));
    }
    for &x in w {
        if !x.is_finite() || x < 0.0 {
            return Err(Error::invalid(name, "finite and ≥ 0", x));
        }
    }
    if w.iter().sum::<f64>() <= 0.0 {
        return Err(Error::invalid(name, "positive somewhere", "all zero"));
    }
    Ok(())
}

impl Prior {
    pub fn uniform(lower: f64, upper: f64) -> Result<Prior, Error> {
        if finite("lower", lower)? >= finite("upper", upper)? {
            return Err(Error::invalid(
                "lower",
                "less than upper",
                format!("{lower} ≥ {upper}"),
            ));
        }
        Prior::histogram(vec![lower, upper], vec![1.0])
    }

    pub fn histogram(edges: Vec<f64>, weights: Vec<f64>) -> Result<Prior, Error> {
        let p = Prior::Histogram { edges, weights };
        p.validate()?;
        Ok(p)
    }

    pub fn normal(mean: f64, sd: f64, lower: f64, upper: f64) -> Result<Prior, Error> {
        let p = Prior::Normal {
            mean,
            sd,
            lower,
            upper,
        };
        p.validate()?;
        Ok(p)
    }

    pub fn categorical(values: Vec<String>, probs: Vec<f64>) -> Result<Prior, Error> {
        let p = Prior::Categorical { values, probs };
        p.validate()?;
        Ok(p)
    }

    /// Checks a prior however it was built (constructors, or text typed in).
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            Prior::Histogram { edges, weights } => {
                check_weights("weights", weights)?;
                if edges.len() != weights.len() + 1 {
                    return Err(Error::invalid(
                        "edges",
                        "one element longer than weights",
                        format!("{} edges for {} weights", edges.len(), weights.len()),
                    ));
                }
                for e in edges {
                    finite("edges", *e)?;
                }
                if edges.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Error::invalid(
                        "edges",
                        "strictly increasing",
                        format!("{edges:?}"),
                    ));
                }
                Ok(())
            }
            Prior::Normal {
                mean,
                sd,
                lower,
                upper,
            } => {
                finite("mean", *mean)?;
                finite("lower", *lower)?;
                finite("upper", *upper)?;
                if !(sd.is_finite() && *sd > 0.0) {
                    return Err(Error::invalid("sd", "a finite number > 0", sd));
                }
                if lower >= upper {
                    return Err(Error::invalid(
                        "lower",
                        "less than upper",
                        format!("{lower} ≥ {upper}"),
                    ));
                }
                let n = Normal::new(*mean, *sd).map_err(|_| Error::invalid("sd", "> 0", sd))?;
                if n.cdf(*upper) - n.cdf(*lower) <= 0.0 {
                    return Err(Error::invalid(
                        "mean",
                        "with mass inside [lower, upper]",
                        mean,
                    ));
                }
                Ok(())
            }
            Prior::Categorical { values, probs } => {
                if values.len() != probs.len() {
                    return Err(Error::invalid(
                        "values",
                        "as long as probs",
                        format!("{} values for {} probs", values.len(), probs.len()),
                    ));
                }
                check_weights("probs", probs)?;
                let mut sorted: Vec<&String> = values.iter().collect();
                sorted.sort();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    return Err(Error::invalid("values", "distinct", "a repeated value"));
                }
                Ok(())
            }
        }
    }

    /// The numeric range [lower, upper] of a numeric prior.
    fn range(&self) -> Option<(f64, f64)> {
        match self {
            Prior::Histogram { edges, .. } => Some((edges[0], edges[edges.len() - 1])),
            Prior::Normal { lower, upper, .. } => Some((*lower, *upper)),
            Prior::Categorical { .. } => None,
        }
    }

    /// Integer weights: one per grid cell (numeric) or per category.
    fn integer_weights(&self) -> Vec<u64> {
        let masses: Vec<f64> = match self {
            Prior::Categorical { probs, .. } => probs.clone(),
            Prior::Normal {
                mean,
                sd,
                lower,
                upper,
            } => {
                let n = Normal::new(*mean, *sd).expect("validated");
                let w = (upper - lower) / GRID_CELLS as f64;
                (0..GRID_CELLS)
                    .map(|i| n.cdf(lower + w * (i + 1) as f64) - n.cdf(lower + w * i as f64))
                    .map(|m| m.max(0.0))
                    .collect()
            }
            Prior::Histogram { edges, weights } => {
                let (lo, hi) = (edges[0], edges[edges.len() - 1]);
                let w = (hi - lo) / GRID_CELLS as f64;
                (0..GRID_CELLS)
                    .map(|i| {
                        let (a, b) = (lo + w * i as f64, lo + w * (i + 1) as f64);
                        // Mass of [a, b): overlap with each bin times its density.
                        edges
                            .windows(2)
                            .zip(weights)
                            .map(|(e, wt)| {
                                (b.min(e[1]) - a.max(e[0])).max(0.0) * wt / (e[1] - e[0])
                            })
                            .sum::<f64>()
                    })
                    .collect()
            }
        };
        let total: f64 = masses.iter().sum();
        masses
            .iter()
            .map(|m| (m / total * TOTAL).floor() as u64)
            .collect()
    }
}

/// Statistical query (Proposition 1) or individual query (Proposition 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    Statistical,
    Individual,
}

/// A prior ready to refine: integer weights and their boost factors.
#[derive(Debug, Clone)]
pub struct Refinement {
    prior: Prior,
    weights: Vec<u64>,
    /// prefix[i] = Σ weights[..i].
    prefix: Vec<u128>,
    /// α_u = a_up / 2^32, α_d = a_down / 2^32.
    a_up: u128,
    a_down: u128,
    query: Query,
}

impl Refinement {
    /// Statistical queries use α_d = e^(−ε/2), α_u = e^(ε/2): the middle of the
    /// allowed α_d ∈ [e^(−ε), 1] (on a log scale), so the boosted set holds
    /// mass 1/(1 + e^(ε/2)) and both sharpening and spreading are moderate.
    /// Individual queries use α_u = e^ε, α_d = e^(−ε).
    pub fn new(prior: Prior, epsilon: Epsilon, query: Query) -> Result<Refinement, Error> {
        prior.validate()?;
        let e = epsilon.value();
        let (up, down) = match query {
            Query::Statistical => ((e / 2.0).exp(), (-e / 2.0).exp()),
            Query::Individual => (e.exp(), (-e).exp()),
        };
        // Factors beyond 2^20 would overflow the 128-bit sampler; capping them
        // refines less, which only lowers the loss (guaranteed_epsilon says by how much).
        let (up, down) = (up.min(MAX_FACTOR), down.max(1.0 / MAX_FACTOR));
        // Inwards by a part in 2^30, more than float error: α_u smaller, α_d larger.
        let a_up = ((up * ONE as f64) * (1.0 - 2f64.powi(-30))).floor() as u128;
        let a_down = ((down * ONE as f64) * (1.0 + 2f64.powi(-30))).ceil() as u128;
        if a_up <= ONE || a_down >= ONE {
            return Err(Error::invalid(
                "epsilon",
                "large enough to refine (≥ 2^-28)",
                e,
            ));
        }
        let weights = prior.integer_weights();
        let mut prefix = Vec::with_capacity(weights.len() + 1);
        prefix.push(0u128);
        for w in &weights {
            prefix.push(prefix.last().unwrap() + *w as u128);
        }
        Ok(Refinement {
            prior,
            weights,
            prefix,
            a_up,
            a_down,
            query,
        })
    }

    fn total(&self) -> u128 {
        *self.prefix.last().unwrap()
    }

    /// The privacy loss the integer factors guarantee: ln(α_u/α_d) between
    /// two answers, and for individual queries also against the prior itself.
    pub fn guaranteed_epsilon(&self) -> f64 {
        match self.query {
            Query::Statistical => (self.a_up as f64 / self.a_down as f64).ln(),
            Query::Individual => {
                let up = (self.a_up as f64 / ONE as f64).ln();
                let down = (ONE as f64 / self.a_down as f64).ln();
                up.max(down)
            }
        }
    }

    /// The cell of a numeric true value, clamped to the prior's range.
    fn cell_of(&self, value: f64) -> Result<usize, Error> {
        let (lo, hi) = self
            .prior
            .range()
            .ok_or_else(|| Error::invalid("prior", "numeric for a numeric value", "categorical"))?;
        if !value.is_finite() {
            return Err(Error::invalid_data("value", "a finite number"));
        }
        let x = value.clamp(lo, hi);
        Ok((((x - lo) / (hi - lo)) * GRID_CELLS as f64)
            .floor()
            .min((GRID_CELLS - 1) as f64) as usize)
    }

    /// The output law for a numeric true value, as probabilities per cell:
    /// U is the interval of prior mass (1 − α_d)/(α_u − α_d) centred on the
    /// true value's cell, shifted inside the range when it would cross an
    /// end; cells straddling U's ends are boosted in part.
    pub fn numeric_law(&self, value: f64) -> Result<Vec<f64>, Error> {
        let (start, len) = self.boosted_span(self.cell_of(value)?);
        let d = self.a_up - self.a_down;
        let z = ONE as f64 * (self.total() * d) as f64;
        Ok((0..self.weights.len())
            .map(|i| {
                let (a, b) = (self.prefix[i] * d, self.prefix[i + 1] * d);
                let inside = b.min(start + len).saturating_sub(a.max(start));
                (self.a_up as f64 * inside as f64 + self.a_down as f64 * (b - a - inside) as f64)
                    / z
            })
            .collect())
    }

    /// The prior's own probability of each cell or category.
    pub fn prior_law(&self) -> Vec<f64> {
        let t = self.total() as f64;
        self.weights.iter().map(|w| *w as f64 / t).collect()
    }

    /// The output law for a categorical true value, as probabilities.
    pub fn categorical_probabilities(&self, value: &str) -> Result<Vec<f64>, Error> {
        let law = self.categorical_law(value)?;
        let z: u128 = law.iter().sum();
        Ok(law.iter().map(|w| *w as f64 / z as f64).collect())
    }

    /// U in scaled mass coordinates [0, T·(α_u − α_d)·2^32 … ): start and length.
    /// All masses are multiplied by (A_u − A_d) so U's mass T(2^32 − A_d) is whole.
    fn boosted_span(&self, cell: usize) -> (u128, u128) {
        let d = self.a_up - self.a_down;
        let scaled_total = self.total() * d;
        let len = self.total() * (ONE - self.a_down);
        let centre = (self.prefix[cell] + self.weights[cell] as u128 / 2) * d;
        let start = centre.saturating_sub(len / 2).min(scaled_total - len);
        (start, len)
    }

    /// A draw from the prior itself (on its grid): what an individual query
    /// answers when the person is absent. For audits.
    pub fn sample_prior_numeric<E: Entropy>(&self, rng: &mut E) -> f64 {
        let r = uniform_below(rng, self.total());
        let cell = self.prefix.partition_point(|p| *p <= r) - 1;
        let (lo, hi) = self.prior.range().expect("numeric");
        lo + (hi - lo) * (cell as f64 + 0.5) / GRID_CELLS as f64
    }

    /// One refined numeric answer: the centre of the sampled grid cell.
    pub fn sample_numeric<E: Entropy>(&self, rng: &mut E, value: f64) -> Result<f64, Error> {
        let (start, len) = self.boosted_span(self.cell_of(value)?);
        let scaled_total = self.total() * (self.a_up - self.a_down);
        // The law in mass coordinates has density A_d outside U and A_u in it;
        // Z = A_u·len + A_d·(total − len) = 2^32 · scaled_total exactly.
        let below = self.a_down * start;
        let inside = self.a_up * len;
        let r = uniform_below(rng, ONE * scaled_total);
        let coordinate = if r < below {
            r / self.a_down
        } else if r < below + inside {
            start + (r - below) / self.a_up
        } else {
            start + len + (r - below - inside) / self.a_down
        };
        let unscaled = coordinate / (self.a_up - self.a_down);
        let cell = self.prefix.partition_point(|p| *p <= unscaled) - 1;
        let (lo, hi) = self.prior.range().expect("numeric");
        Ok(lo + (hi - lo) * (cell as f64 + 0.5) / GRID_CELLS as f64)
    }

    /// The exact output law for a categorical true value (MECHANISMS.md §5):
    /// the true category gets min(α_u P(t), 1 − α_d (1 − P(t))), the others
    /// share the rest in proportion to P. Weights over a common denominator.
    pub fn categorical_law(&self, value: &str) -> Result<Vec<u128>, Error> {
        let Prior::Categorical { values, .. } = &self.prior else {
            return Err(Error::invalid(
                "prior",
                "categorical for a text value",
                "numeric",
            ));
        };
        let t = values
            .iter()
            .position(|v| v == value)
            .ok_or_else(|| Error::invalid_data("value", "one of the prior's categories"))?;
        let total = self.total();
        let wt = self.weights[t] as u128;
        // In units of 1/(2^32·total): the true category's boosted mass…
        let top = (self.a_up * wt).min(ONE * total - self.a_down * (total - wt));
        // …and the others scaled by (2^32·total − top)/(total − wt); all times (total − wt).
        let rest = ONE * total - top;
        let others = total - wt;
        Ok(self
            .weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == t {
                    top * others.max(1)
                } else {
                    *w as u128 * rest
                }
            })
            .collect())
    }

    /// One refined categorical answer.
    pub fn sample_categorical<'a, E: Entropy>(
        &'a self,
        rng: &mut E,
        value: &str,
    ) -> Result<&'a str, Error> {
        let law = self.categorical_law(value)?;
        let Prior::Categorical { values, .. } = &self.prior else {
            unreachable!()
        };
        let mut r = uniform_below(rng, law.iter().sum());
        for (i, w) in law.iter().enumerate() {
            if r < *w {
                return Ok(&values[i]);
            }
            r -= w;
        }
        unreachable!("r is below the total")
    }
}
