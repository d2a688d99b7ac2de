//! Errors as users see them: each kind has one fixed SQLSTATE (README).

use pgrx::prelude::*;

/// Raises a core error with its documented SQLSTATE.
pub fn raise(err: dpnoise_core::Error) -> ! {
    let code = match err {
        dpnoise_core::Error::InvalidParameter { .. } => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        dpnoise_core::Error::OutOfRange(_) => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
    };
    ereport!(ERROR, code, err.to_string());
}

/// An argument that must be given was NULL (SQLSTATE 22023).
pub fn null_parameter(name: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{name} must not be NULL")
    );
}

/// A privacy parameter that varies from row to row (SQLSTATE 22023).
pub fn varying_parameter(function: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("the privacy parameters of {function} must be the same for every row"),
        "Pass constants or query parameters, not columns or volatile expressions."
    );
}

/// Unwraps a core result or raises it.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, dpnoise_core::Error> {
    #[inline]
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e),
        }
    }
}

/// The exact 128-bit sum overflowed (SQLSTATE 22003).
pub fn sum_overflow() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        "dp_sum_laplace: the exact sum overflows its 128-bit accumulator"
    );
}

/// A NaN where a value is summed (SQLSTATE 22023).
pub fn nan_value(function: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{function}: value must not be NaN")
    );
}
