//! Exact differential-privacy mechanisms on a power-of-two lattice.
//!
//! Everything that touches a release is integer arithmetic on uniform random
//! bits: see `../shared/MECHANISMS.md` §1–2. Floats appear only when a public
//! parameter is turned into an exact rational or when a lattice integer is
//! converted to float8 at the very end.

pub mod accuracy;
pub mod approximate;
pub mod audit;
pub mod calibration;
pub mod entropy;
pub mod interrupt;
pub mod lattice;
pub mod mechanism;
pub mod multivariate;
pub mod plan;
pub mod rational;
pub mod refine;
pub mod sampler;
pub mod staircase;

pub use calibration::Calibration;
pub use entropy::{BitPool, Entropy};
pub use lattice::Lattice;
pub use mechanism::{Choice, Laplace, LatticeNoise, Mechanism, Noise};
pub use rational::Epsilon;
pub use staircase::{Loss, Staircase};
pub use accuracy::{Accuracy, Law, StepLaw};
pub use plan::{Plan, Shape};

/// Why a privacy parameter or a value was refused. The SQL layer maps each
/// variant to a fixed SQLSTATE.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An argument outside its allowed range (SQLSTATE 22023).
    #[error("{name} must be {allowed}, got {got}")]
    InvalidParameter {
        name: &'static str,
        allowed: &'static str,
        got: String,
    },
    /// A value that does not fit the lattice's integer range (SQLSTATE 22003).
    #[error("{0}")]
    OutOfRange(String),
}

impl Error {
    pub fn invalid(name: &'static str, allowed: &'static str, got: impl ToString) -> Self {
        Error::InvalidParameter {
            name,
            allowed,
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

impl Error {
}
