//! Exact differential-privacy mechanisms on a power-of-two lattice.
//!
//! Everything that touches a release is integer arithmetic on uniform random
//! bits: see `../shared/MECHANISMS.md` §1–2. Floats appear only when a public
//! parameter is turned into an exact rational or when a lattice integer is
//! converted to float8 at the very end. This crate knows nothing of
//! PostgreSQL and holds no state between calls.
//!
//! # From a query to a released float
//!
//! ```text
//! f64 ε, δ, bounds, texts      what the SQL layer reads from a call
//!   │  Epsilon::new, Delta::new, Sensitivity::new, Bounds::new,
//!   │  IntegerBounds::new, Choice::parse, Loss::parse    (checked once, here)
//!   ▼
//! Shape (Count | Value | Sum | SumInteger)               calibration.rs
//!   │  Plan::new(choice, ε, δ, loss, shape)              plan.rs
//!   │    ├ scale_ratio(mechanism, ε, δ)                   mechanism.rs
//!   │    ├ Calibration::for_shape → Lattice + D steps     calibration.rs, lattice.rs
//!   │    └ Noise::with_scale → Laplace | Staircase |      laplace.rs, staircase.rs,
//!   │        TruncatedLaplace | Uniform | DiscreteGaussian  approximate.rs
//!   │      ('auto': every mechanism, ranked by its exact Law's loss: accuracy.rs)
//!   ▼
//! Plan { mechanism, calibration, noise }   (Average, Variance: centred, ε split; moments.rs)
//!   │  Lattice::round(value) → exact i128 answer in steps
//!   │  Plan::release(rng, steps) = answer + LatticeNoise::sample   noise.rs
//!   ▼                                      (samplers: sampler.rs, bits: entropy.rs)
//! f64 / i64 on the lattice                 Lattice::release
//! ```
//!
//! Vectors take the same road through `multivariate::BoxPlan` (box noise)
//! and `multivariate::L1Staircase`; knowledge refinement through
//! `refine::Refinement`.

#![forbid(unsafe_code)]

pub mod accuracy;
pub mod approximate;
#[cfg(feature = "audit")]
pub mod audit;
pub mod bounding;
pub mod calibration;
pub mod convolution;
pub mod entropy;
pub mod exp_neg;
pub mod interrupt;
pub mod interval;
pub mod laplace;
pub mod lattice;
pub mod mechanism;
pub mod moments;
pub mod multivariate;
pub mod noise;
pub mod params;
pub mod plan;
pub mod quantile;
pub mod rational;
pub mod refine;
pub mod sampler;
pub mod selection;
pub mod staircase;
pub mod threshold;
pub mod zcdp;

pub use accuracy::{Accuracy, Law, StepLaw};
pub use calibration::{Calibration, Shape};
pub use entropy::{BitPool, Entropy};
pub use laplace::Laplace;
pub use lattice::Lattice;
pub use mechanism::Noise;
pub use moments::{Average, Variance};
pub use noise::LatticeNoise;
pub use params::{Bounds, Choice, Delta, IntegerBounds, Mechanism, Sensitivity, MECHANISMS};
pub use plan::{Plan, Request};
pub use quantile::Quantile;
pub use rational::Epsilon;
pub use staircase::{Loss, Staircase};

use std::borrow::Cow;

/// Why a privacy parameter or a value was refused. The SQL layer maps each
/// variant to a fixed SQLSTATE.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An argument outside its allowed range (SQLSTATE 22023).
    #[error("{name} must be {allowed}, got {got}")]
    InvalidParameter {
        name: &'static str,
        allowed: Cow<'static, str>,
        got: String,
    },
    /// A value that does not fit the lattice's integer range (SQLSTATE 22003).
    #[error("{0}")]
    OutOfRange(String),
    /// Parameters whose noise would not fit the result type (SQLSTATE 22023).
    #[error("{0}")]
    NoiseTooLarge(String),
}

impl Error {
    pub fn invalid(
        name: &'static str,
        allowed: impl Into<Cow<'static, str>>,
        got: impl ToString,
    ) -> Self {
        Error::InvalidParameter {
            name,
            allowed: allowed.into(),
            got: got.to_string(),
        }
    }

    /// A value read from the data that cannot be used: the message never
    /// shows it (an analyst could read a row through an error otherwise).
    pub fn invalid_data(name: &'static str, allowed: &'static str) -> Self {
        Error::invalid(name, allowed, DATA_NOT_SHOWN)
    }
}

/// What an error says instead of a value read from the data.
pub const DATA_NOT_SHOWN: &str = "a value from the data (not shown)";
