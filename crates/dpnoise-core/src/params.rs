//! What a query asks for, each value checked once, where it is built.
//!
//! A `Delta`, `Sensitivity`, `Bounds` or `IntegerBounds` that exists is
//! valid: code further down takes these types and never checks again. The
//! mechanism names, and every message that lists them, come from one table.

use crate::Error;

/// δ, a finite number in [0, 1).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Delta(f64);

impl Delta {
    pub const ZERO: Delta = Delta(0.0);

    pub fn new(delta: f64) -> Result<Delta, Error> {
        if delta.is_finite() && (0.0..1.0).contains(&delta) {
            Ok(Delta(delta))
        } else {
            Err(Error::invalid("delta", "a number in [0, 1)", delta))
        }
    }

    pub fn value(self) -> f64 {
        self.0
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0.0
    }
}

/// A sensitivity Δ: a finite number > 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sensitivity(f64);

impl Sensitivity {
    pub fn new(sensitivity: f64) -> Result<Sensitivity, Error> {
        if sensitivity.is_finite() && sensitivity > 0.0 {
            Ok(Sensitivity(sensitivity))
        } else {
            Err(Error::invalid(
                "sensitivity",
                "a finite number > 0",
                sensitivity,
            ))
        }
    }

    pub fn value(self) -> f64 {
        self.0
    }
}

/// The clamping range [lower, upper] of a float8 sum: both finite,
/// lower ≤ upper, not both zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    lower: f64,
    upper: f64,
}

impl Bounds {
    pub fn new(lower: f64, upper: f64) -> Result<Bounds, Error> {
        if !lower.is_finite() {
            return Err(Error::invalid("lower", "a finite number", lower));
        }
        if !upper.is_finite() {
            return Err(Error::invalid("upper", "a finite number", upper));
        }
        if lower > upper {
            return Err(Error::invalid(
                "lower",
                "at most upper",
                format!("{lower} > {upper}"),
            ));
        }
        if lower == 0.0 && upper == 0.0 {
            return Err(Error::invalid(
                "upper",
                "non-zero when lower is zero",
                upper,
            ));
        }
        Ok(Bounds { lower, upper })
    }

    /// [−Δ, Δ]: what `dp_sum_staircase` clamps to.
    pub fn symmetric(sensitivity: Sensitivity) -> Bounds {
        Bounds {
            lower: -sensitivity.0,
            upper: sensitivity.0,
        }
    }

    pub fn lower(self) -> f64 {
        self.lower
    }

    pub fn upper(self) -> f64 {
        self.upper
    }

    /// max(|lower|, |upper|): how far one value can move a sum.
    pub fn width(self) -> f64 {
        self.lower.abs().max(self.upper.abs())
    }

    /// `x` clamped to [lower, upper] (NaN stays NaN: the caller refuses it).
    #[inline]
    pub fn clamp(self, x: f64) -> f64 {
        x.clamp(self.lower, self.upper)
    }
}

/// The clamping range [lower, upper] of a bigint sum: lower ≤ upper, not
/// both zero, and each at most 2^63 − 2 in magnitude (so −lower and −upper
/// are bigints too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntegerBounds {
    lower: i64,
    upper: i64,
}

impl IntegerBounds {
    pub fn new(lower: i64, upper: i64) -> Result<IntegerBounds, Error> {
        if lower > upper {
            return Err(Error::invalid(
                "lower",
                "at most upper",
                format!("{lower} > {upper}"),
            ));
        }
        if lower == 0 && upper == 0 {
            return Err(Error::invalid(
                "upper",
                "non-zero when lower is zero",
                upper,
            ));
        }
        Ok(IntegerBounds { lower, upper })
    }

    /// [−Δ, Δ] for an integer sensitivity in [1, 2^63 − 2].
    pub fn symmetric(sensitivity: i64) -> Result<IntegerBounds, Error> {
        if sensitivity <= 0 || sensitivity == i64::MAX {
            return Err(Error::invalid(
                "sensitivity",
                "in [1, 2^63 − 2]",
                sensitivity,
            ));
        }
        Ok(IntegerBounds {
            lower: -sensitivity,
            upper: sensitivity,
        })
    }

    pub fn lower(self) -> i64 {
        self.lower
    }

    pub fn upper(self) -> i64 {
        self.upper
    }

    /// max(|lower|, |upper|), as a float.
    pub fn width(self) -> f64 {
        (self.lower as f64).abs().max((self.upper as f64).abs())
    }

    #[inline]
    pub fn clamp(self, x: i64) -> i64 {
        x.clamp(self.lower, self.upper)
    }
}

/// The univariate mechanisms a query can ask for by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Laplace,
    Staircase,
    TruncatedLaplace,
    Uniform,
    Gaussian,
}

/// Every mechanism, in the order `'auto'` prefers them on a tie.
pub const MECHANISMS: [Mechanism; 5] = [
    Mechanism::Laplace,
    Mechanism::Staircase,
    Mechanism::TruncatedLaplace,
    Mechanism::Uniform,
    Mechanism::Gaussian,
];

/// `'a', 'b' or 'c'`: names quoted and joined for a message.
fn quoted_list<'a>(names: impl IntoIterator<Item = &'a str>, last: &str) -> String {
    let names: Vec<String> = names.into_iter().map(|n| format!("'{n}'")).collect();
    match names.split_last() {
        Some((tail, [])) => tail.clone(),
        Some((tail, head)) => format!("{} {last} {tail}", head.join(", ")),
        None => String::new(),
    }
}

impl Mechanism {
    /// The name `parse` reads (and the ledger records).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Laplace => "laplace",
            Mechanism::Staircase => "staircase",
            Mechanism::TruncatedLaplace => "truncated_laplace",
            Mechanism::Uniform => "uniform",
            Mechanism::Gaussian => "gaussian",
        }
    }

    pub fn parse(name: &str) -> Result<Mechanism, Error> {
        let wanted = name.trim().to_ascii_lowercase();
        MECHANISMS
            .into_iter()
            .find(|m| m.name() == wanted)
            .ok_or_else(|| {
                let allowed = format!(
                    "one of {}",
                    MECHANISMS.map(|m| format!("'{}'", m.name())).join(", ")
                );
                Error::invalid("mechanism", allowed, format!("'{name}'"))
            })
    }

    /// Whether the mechanism needs δ > 0 (else it needs δ = 0).
    pub fn needs_delta(self) -> bool {
        matches!(
            self,
            Mechanism::TruncatedLaplace | Mechanism::Uniform | Mechanism::Gaussian
        )
    }

    /// The names of the mechanisms that serve δ > 0 (`true`) or δ = 0.
    fn serving(positive_delta: bool) -> impl Iterator<Item = &'static str> {
        MECHANISMS
            .into_iter()
            .filter(move |m| m.needs_delta() == positive_delta)
            .map(Mechanism::name)
    }

    /// Refuses a δ this mechanism cannot serve, naming the ones that can.
    pub fn check_delta(self, delta: Delta) -> Result<(), Error> {
        let name = self.name();
        match (self.needs_delta(), delta.value() > 0.0) {
            (true, false) => {
                let others = quoted_list(Mechanism::serving(false).chain(["auto"]), "or");
                let allowed = format!("in (0, 1) for '{name}'; with delta = 0 use {others}");
                Err(Error::invalid("delta", allowed, delta.value()))
            }
            (false, true) => {
                let others = quoted_list(Mechanism::serving(true).chain(["auto"]), "or");
                let allowed =
                    format!("0 for '{name}' (it is pure ε-DP); for delta > 0 use {others}");
                Err(Error::invalid("delta", allowed, delta.value()))
            }
            _ => Ok(()),
        }
    }
}

/// What a query asks for: a named mechanism, or the least noisy one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Choice {
    Auto,
    Fixed(Mechanism),
}

impl Choice {
    pub fn parse(name: &str) -> Result<Choice, Error> {
        if name.trim().eq_ignore_ascii_case("auto") {
            return Ok(Choice::Auto);
        }
        Mechanism::parse(name).map(Choice::Fixed).map_err(|_| {
            let names = ["auto"].into_iter().chain(MECHANISMS.map(Mechanism::name));
            let allowed = format!(
                "one of {}",
                names
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Error::invalid("mechanism", allowed, format!("'{name}'"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_list_the_mechanisms_by_name() {
        let text = |e: Error| e.to_string();
        assert_eq!(
            text(Mechanism::Gaussian.check_delta(Delta::ZERO).unwrap_err()),
            "delta must be in (0, 1) for 'gaussian'; with delta = 0 use 'laplace', 'staircase' or 'auto', got 0"
        );
        assert_eq!(
            text(Mechanism::Laplace.check_delta(Delta::new(0.1).unwrap()).unwrap_err()),
            "delta must be 0 for 'laplace' (it is pure ε-DP); for delta > 0 use 'truncated_laplace', 'uniform', \
             'gaussian' or 'auto', got 0.1"
        );
        assert_eq!(
            text(Choice::parse("x").unwrap_err()),
            "mechanism must be one of 'auto', 'laplace', 'staircase', 'truncated_laplace', 'uniform', 'gaussian', got 'x'"
        );
        assert!(Mechanism::parse(" Uniform ").is_ok());
    }

    #[test]
    fn values_are_checked_once_at_construction() {
        assert!(
            Delta::new(1.0).is_err() && Delta::new(-0.0).is_ok() && Delta::new(f64::NAN).is_err()
        );
        assert!(Sensitivity::new(0.0).is_err() && Sensitivity::new(f64::INFINITY).is_err());
        assert!(Bounds::new(1.0, 0.0).is_err() && Bounds::new(0.0, 0.0).is_err());
        assert!(Bounds::new(f64::NEG_INFINITY, 0.0).is_err());
        assert_eq!(Bounds::new(-3.0, 2.0).unwrap().width(), 3.0);
        assert!(
            IntegerBounds::symmetric(i64::MAX).is_err() && IntegerBounds::symmetric(0).is_err()
        );
    }
}
