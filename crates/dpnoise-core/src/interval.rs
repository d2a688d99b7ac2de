//! Intervals around released values computed from the releases they are
//! post-processing of, each release's noise within a half-width with a
//! share of the confidence (a union bound): the interval holds every
//! noiseless value consistent with all of them. Exact for a count or sum;
//! conservative for an average or a spread, whose error depends on the
//! true count. The SQL layer's `dp_estimate` reads the parts the analyst
//! gate writes (docs/bi.md, "Errors").

/// The value, the interval's ends and its half-width (the larger side).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

impl Estimate {
    pub fn error(&self) -> f64 {
        (self.value - self.low).max(self.high - self.value)
    }
}

/// x/n over a box of x and n (n ≥ 1): its least and greatest values.
fn quotients((x_low, x_high): (f64, f64), (n_low, n_high): (f64, f64)) -> (f64, f64) {
    let corners = [x_low / n_low, x_low / n_high, x_high / n_low, x_high / n_high];
    (
        corners.iter().copied().fold(f64::INFINITY, f64::min),
        corners.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// The estimate `parts` describe: `[code, lower, upper, releases…,
/// half-widths…]`, the code 1 a count or sum, 2 an average of one row per person, 3 an average over several, 4 a variance, 5 a standard deviation, 6 and 7 the same over several rows per person. None: not such an array.
pub fn estimate(parts: &[f64]) -> Option<Estimate> {
    let (&code, rest) = parts.split_first()?;
    let (&lower, rest) = rest.split_first()?;
    let (&upper, rest) = rest.split_first()?;
    let k = rest.len() / 2;
    if rest.len() % 2 != 0 || rest.iter().any(|x| !x.is_finite()) || !(lower <= upper) {
        return None;
    }
    let (r, h) = rest.split_at(k);
    let around = |value: f64, half: f64| Estimate {
        value,
        low: value - half,
        high: value + half,
    };
    // Within the domain: the noiseless value is in it.
    let inside = |e: Estimate| Estimate {
        value: e.value,
        low: e.low.max(lower),
        high: e.high.min(upper),
    };
    let (m, a) = ((lower + upper) / 2.0, (upper - lower) / 2.0);
    match (code as i64, k) {
        // A count or sum: its value ± its half-width.
        (1, 1) => Some(around(r[0], h[0])),
        // m + S̃/max(Ñ, 1), as dp_avg: with n the true count, |n − max(Ñ, 1)|
        // ≤ h_N (a true count is at least 1), and |S/n| ≤ a, the error is
        // at most (a·h_N + h_S)/max(Ñ, 1).
        (2, 2) => {
            let n = r[1].max(1.0);
            let value = (m + r[0] / n).clamp(lower, upper);
            Some(inside(around(value, (a * h[1] + h[0]) / n)))
        }
        // A sum of a person's values (at most R rows) over their count: the
        // same bound with the mean's largest magnitude in place of a.
        (3, 2) => {
            let n = r[1].max(1.0);
            let value = (r[0] / n).clamp(lower, upper);
            let largest = lower.abs().max(upper.abs());
            Some(inside(around(value, (largest * h[1] + h[0]) / n)))
        }
        // E[y²] − E[y]² as dp_var: of centred values y (S̃ = Σy, Q̃ =
        // Σ(y² − a²/2), Ñ; codes 4, 5), or over several rows per person of
        // one value a person, shifted to y = x − lower in [0, 2a] (S̃ = Σy,
        // Q̃ = Σy², Ñ; codes 6, 7). Each true sum within its half-width,
        // the variance over that box by interval arithmetic; at most a².
        (4..=7, 3) => {
            let shifted = code as i64 >= 6;
            let (offset, (least, most), square_most) = if shifted {
                (0.0, (0.0, 2.0 * a), 4.0 * a * a)
            } else {
                (a * a / 2.0, (-a, a), a * a)
            };
            let n = r[2].max(1.0);
            let mean = r[0] / n;
            let variance = (r[1] / n + offset - mean * mean).clamp(0.0, a * a);
            let counts = ((r[2] - h[2]).max(1.0), (r[2] + h[2]).max(1.0));
            let (mean_low, mean_high) = quotients((r[0] - h[0], r[0] + h[0]), counts);
            let (mean_low, mean_high) = (mean_low.clamp(least, most), mean_high.clamp(least, most));
            let square_low = if mean_low <= 0.0 && mean_high >= 0.0 {
                0.0
            } else {
                (mean_low * mean_low).min(mean_high * mean_high)
            };
            let square_high = (mean_low * mean_low).max(mean_high * mean_high);
            let (q_low, q_high) = quotients((r[1] - h[1], r[1] + h[1]), counts);
            let (second_low, second_high) = (
                (q_low + offset).clamp(0.0, square_most),
                (q_high + offset).clamp(0.0, square_most),
            );
            let low = (second_low - square_high).clamp(0.0, a * a).min(variance);
            let high = (second_high - square_low).clamp(0.0, a * a).max(variance);
            let v = Estimate {
                value: variance,
                low,
                high,
            };
            Some(if matches!(code as i64, 4 | 6) {
                v
            } else {
                Estimate {
                    value: v.value.sqrt(),
                    low: v.low.sqrt(),
                    high: v.high.sqrt(),
                }
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::estimate;

    #[test]
    fn counts_and_sums_are_symmetric() {
        let e = estimate(&[1.0, 0.0, 0.0, 100.0, 3.5]).unwrap();
        assert_eq!((e.value, e.low, e.high), (100.0, 96.5, 103.5));
    }

    #[test]
    fn an_average_holds_every_consistent_mean() {
        // Domain [0, 10]: m = 5, a = 5. S̃ = 100 over Ñ = 50: 7.
        let parts = [2.0, 0.0, 10.0, 100.0, 50.0, 20.0, 4.0];
        let e = estimate(&parts).unwrap();
        assert_eq!(e.value, 7.0);
        // Every (S, n) within the half-widths gives a mean inside.
        for s in [80.0f64, 100.0, 120.0] {
            for n in [46.0f64, 50.0, 54.0] {
                let mean = (5.0 + s / n).clamp(0.0, 10.0);
                assert!(e.low <= mean && mean <= e.high, "{mean} outside {e:?}");
            }
        }
        // A noisy count below 1 counts as 1; the interval stays in the domain.
        let e = estimate(&[2.0, 0.0, 10.0, 3.0, -2.0, 20.0, 4.0]).unwrap();
        assert_eq!((e.value, e.low, e.high), (8.0, 0.0, 10.0));
        // Not an interval's parts.
        assert!(estimate(&[2.0, 0.0, 10.0, 3.0]).is_none());
        assert!(estimate(&[9.0, 0.0, 10.0, 3.0, 1.0]).is_none());
        assert!(estimate(&[1.0, 0.0, 0.0, f64::NAN, 1.0]).is_none());
    }

    #[test]
    fn a_variance_holds_every_consistent_variance() {
        // Domain [0, 4]: a = 2; centred values y in [-2, 2].
        let (s, q, n) = (10.0f64, -40.0f64, 100.0f64);
        let parts = [4.0, 0.0, 4.0, s, q, n, 5.0, 8.0, 3.0];
        let e = estimate(&parts).unwrap();
        assert!(e.low <= e.value && e.value <= e.high);
        for ds in [-5.0, 0.0, 5.0] {
            for dq in [-8.0, 0.0, 8.0] {
                for dn in [-3.0, 0.0, 3.0] {
                    let (s, q, n) = (s + ds, q + dq, n + dn);
                    let mean = s / n;
                    let v = (q / n + 2.0 - mean * mean).clamp(0.0, 4.0);
                    assert!(e.low <= v + 1e-12 && v <= e.high + 1e-12, "{v} outside {e:?}");
                }
            }
        }
        // Shifted values y = x − lower in [0, 4] over several rows: Σy, Σy².
        let (s1, s2) = (210.0f64, 520.0f64);
        let f = estimate(&[6.0, 0.0, 4.0, s1, s2, n, 5.0, 8.0, 3.0]).unwrap();
        assert!(f.low <= f.value && f.value <= f.high);
        for ds in [-5.0, 0.0, 5.0] {
            for dq in [-8.0, 0.0, 8.0] {
                for dn in [-3.0, 0.0, 3.0] {
                    let (s, q, n) = (s1 + ds, s2 + dq, n + dn);
                    let v = (q / n - (s / n) * (s / n)).clamp(0.0, 4.0);
                    assert!(f.low <= v + 1e-12 && v <= f.high + 1e-12, "{v} outside {f:?}");
                }
            }
        }
        let sd = estimate(&[5.0, 0.0, 4.0, s, q, n, 5.0, 8.0, 3.0]).unwrap();
        assert_eq!(sd.value, e.value.sqrt());
        assert_eq!(sd.high, e.high.sqrt());
    }
}
