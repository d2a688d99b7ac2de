//! Knowledge refinement in SQL: the `dp_prior` type, its constructors, and
//! `dp_refine` for numeric and categorical answers.

use crate::errors::{self, OrRaise};
use crate::rng::with_rng;
use dpnoise_core::refine::{Prior, Query, Refinement};
use dpnoise_core::Epsilon;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::InOutFuncs;
use serde::{Deserialize, Serialize};
use std::rc::Rc;

pgrx::extension_sql_file!(
    "refine.sql",
    name = "refine_sql",
    requires = [
        dp_prior,
        dp_prior_send,
        dp_prior_recv,
        dp_prior_uniform,
        dp_prior_histogram,
        dp_prior_normal,
        dp_prior_categorical,
        dp_refine_numeric,
        dp_refine_text
    ]
);

/// A prior over a query's answer, as the user believes it: the core's
/// `Prior` (which carries the serde form), wrapped as a PostgreSQL type. Its
/// text form is JSON; a prior typed in as text is checked again when it is used.
#[derive(PostgresType, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[inoutfuncs]
#[serde(transparent)]
#[allow(non_camel_case_types)]
pub struct dp_prior(Prior);

impl dp_prior {
    /// The prior, checked (a prior typed in as text may be invalid).
    fn to_core(&self) -> Prior {
        self.0.validate().or_raise();
        self.0.clone()
    }

    fn from_core(p: Prior) -> dp_prior {
        dp_prior(p)
    }
}

impl InOutFuncs for dp_prior {
    /// JSON, checked as the constructors check it: malformed text is 22P02,
    /// an invalid prior 22023.
    fn input(input: &core::ffi::CStr) -> Self {
        dp_prior::parse(&input.to_string_lossy())
    }

    fn output(&self, buffer: &mut pgrx::StringInfo) {
        buffer.push_str(&serde_json::to_string(self).expect("a prior serialises"));
    }
}

/// The binary form's version: a byte before the JSON text, as jsonb does,
/// so the form can change without breaking old readers' errors.
const BINARY_VERSION: u8 = 1;

impl dp_prior {
    /// Parses and checks a prior's JSON, as the text input does.
    fn parse(text: &str) -> dp_prior {
        let prior: dp_prior = serde_json::from_str(text).unwrap_or_else(|e| {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
                format!("malformed dp_prior: {e}"),
                "Build priors with dp_prior_uniform, dp_prior_histogram, dp_prior_normal or dp_prior_categorical."
            );
        });
        prior.to_core();
        prior
    }
}

/// dp_prior's binary output (psycopg's and JDBC's binary mode, COPY …
/// (FORMAT binary)): a version byte, then the JSON text.
#[pg_extern(immutable, strict, parallel_safe)]
fn dp_prior_send(prior: dp_prior) -> Vec<u8> {
    let mut out = vec![BINARY_VERSION];
    out.extend(serde_json::to_vec(&prior).expect("a prior serialises"));
    out
}

/// dp_prior's binary input: the inverse of `dp_prior_send`, checked as the
/// text input is.
#[pg_extern(immutable, strict, parallel_safe)]
fn dp_prior_recv(mut buffer: pgrx::Internal) -> dp_prior {
    // SAFETY: PostgreSQL calls a type's receive function with a live StringInfo.
    let buffer = unsafe { buffer.get_mut::<pg_sys::StringInfoData>() }
        .unwrap_or_else(|| errors::null_parameter("buffer"));
    let start = buffer.cursor as usize;
    let end = buffer.len as usize;
    // SAFETY: data[cursor..len] is the message's unread part.
    let bytes =
        unsafe { std::slice::from_raw_parts(buffer.data.add(start) as *const u8, end - start) };
    buffer.cursor = buffer.len;
    if bytes.first() != Some(&BINARY_VERSION) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
            "unsupported dp_prior binary version"
        );
    }
    let text = std::str::from_utf8(&bytes[1..]).unwrap_or_else(|_| {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
            "dp_prior binary form is not UTF-8"
        );
    });
    dp_prior::parse(text)
}

/// An array argument without NULL elements.
fn no_nulls<T>(name: &'static str, items: Vec<Option<T>>) -> Vec<T> {
    items
        .into_iter()
        .map(|v| {
            v.unwrap_or_else(|| {
                errors::raise(dpnoise_core::Error::invalid(
                    name,
                    "free of NULL elements",
                    "NULL",
                ))
            })
        })
        .collect()
}

/// Uniform on [lower, upper].
#[pg_extern(immutable, parallel_safe)]
fn dp_prior_uniform(lower: f64, upper: f64) -> dp_prior {
    dp_prior::from_core(Prior::uniform(lower, upper).or_raise())
}

/// Piecewise uniform: weights[i] on [edges[i], edges[i+1]); weights are normalised.
#[pg_extern(immutable, parallel_safe)]
fn dp_prior_histogram(edges: Vec<Option<f64>>, weights: Vec<Option<f64>>) -> dp_prior {
    dp_prior::from_core(
        Prior::histogram(no_nulls("edges", edges), no_nulls("weights", weights)).or_raise(),
    )
}

/// A finite set of answers with their probabilities (normalised).
#[pg_extern(immutable, parallel_safe)]
fn dp_prior_categorical(values: Vec<Option<String>>, probs: Vec<Option<f64>>) -> dp_prior {
    dp_prior::from_core(
        Prior::categorical(no_nulls("values", values), no_nulls("probs", probs)).or_raise(),
    )
}

/// Normal(mean, sd) truncated to [lower, upper].
#[pg_extern(immutable, parallel_safe)]
fn dp_prior_normal(mean: f64, sd: f64, lower: f64, upper: f64) -> dp_prior {
    dp_prior::from_core(Prior::normal(mean, sd, lower, upper).or_raise())
}

/// The refinement for (prior, ε, query), from the backend's plan cache:
/// discretising a prior costs about 40–180 µs, so rows and groups reuse it.
fn refinement(
    prior: Option<dp_prior>,
    epsilon: Option<f64>,
    individual: Option<bool>,
) -> Rc<Refinement> {
    let prior = prior.unwrap_or_else(|| errors::null_parameter("prior"));
    let epsilon = epsilon.unwrap_or_else(|| errors::null_parameter("epsilon"));
    let individual = individual.unwrap_or_else(|| errors::null_parameter("individual"));
    let query = if individual {
        Query::Individual
    } else {
        Query::Statistical
    };
    // A prior typed in as text is checked when first used (the check runs on a cache miss).
    crate::plans::refinement(&prior.0, Epsilon::new(epsilon).or_raise(), query, || {
        prior.0.validate().or_raise()
    })
}

/// Checks the parameters of a dp_refine call as the call will (`values`:
/// its evaluated arguments, None for NULL; `numeric`: the float8 form;
/// `value_fixed`: its value is a constant or parameter) and returns what it
/// pays, (ε, 0).
///
/// # Safety
/// The prior in `values` is live.
pub(crate) unsafe fn checked_cost(
    numeric: bool,
    value_fixed: bool,
    values: &[Option<pg_sys::Datum>],
) -> (f64, f64) {
    let arg = |i: usize| values.get(i).copied().flatten();
    // SAFETY: the caller's contract: argument 1 is a live dp_prior.
    let prior = arg(1).and_then(|d| unsafe { dp_prior::from_datum(d, false) });
    let epsilon = arg(2).map(|d| f64::from_bits(d.value() as u64));
    let individual = if values.len() > 3 {
        arg(3).map(|d| d.value() != 0)
    } else {
        Some(false)
    };
    let categorical = matches!(prior, Some(dp_prior(Prior::Categorical { .. })));
    if numeric && categorical {
        refuse(
            "a categorical prior needs a text value",
            "Pass the value as text, or use a numeric prior.",
        );
    }
    if !numeric && !categorical && prior.is_some() && !value_fixed {
        refuse(
            "a numeric prior needs a float8 value",
            "Cast the value: dp_refine(value::float8, prior, epsilon).",
        );
    }
    refinement(prior, epsilon, individual);
    (epsilon.unwrap_or(0.0), 0.0)
}

/// Refuses a call whose value cannot be refined with `prior` (before
/// anything is charged): a categorical prior needs a text value.
fn refuse(message: &str, hint: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("dp_refine: {message}"),
        hint
    );
}

/// A draw from `prior` sharpened around `value` (clamped to the prior's
/// range), on the prior's grid. NULL value: NULL, nothing released.
#[pg_extern(volatile, parallel_restricted, name = "dp_refine")]
fn dp_refine_numeric(
    value: Option<f64>,
    prior: Option<dp_prior>,
    epsilon: Option<f64>,
    individual: default!(Option<bool>, false),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<f64> {
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe { crate::parameters::require_fixed_call(fcinfo, 1, "dp_refine") };
    if matches!(prior, Some(dp_prior(Prior::Categorical { .. }))) {
        refuse(
            "a categorical prior needs a text value",
            "Pass the value as text, or use a numeric prior.",
        );
    }
    let r = refinement(prior, epsilon, individual);
    let value = value?;
    if value.is_nan() {
        // Depends on the data; raised before the charge, like a sum's NaN.
        errors::nan_value("dp_refine");
    }
    // ±Infinity is clamped to the prior's range, as any value outside it is.
    let value = if value.is_infinite() {
        f64::MAX.copysign(value)
    } else {
        value
    };
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe {
        crate::release::pay(
            fcinfo,
            "dp_refine",
            "refinement",
            (epsilon.unwrap_or(0.0), 0.0),
        )
    };
    Some(with_rng(|rng| r.sample_numeric(rng, value)).or_raise())
}

/// A category drawn from `prior` sharpened towards `value`, which must be
/// one of the prior's categories. NULL value: NULL, nothing released. With
/// a numeric prior, a constant or parameter value is read as a number (so
/// drivers' untyped parameters work), and the draw returned as text.
#[pg_extern(volatile, parallel_restricted, name = "dp_refine")]
fn dp_refine_text(
    value: Option<&str>,
    prior: Option<dp_prior>,
    epsilon: Option<f64>,
    individual: default!(Option<bool>, false),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<String> {
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe { crate::parameters::require_fixed_call(fcinfo, 1, "dp_refine") };
    let categories = match &prior {
        Some(dp_prior(Prior::Categorical { values, .. })) => Some(values.clone()),
        _ => None,
    };
    let Some(categories) = categories else {
        // SAFETY: fcinfo is the live call pgrx passes to this function.
        let typed = unsafe { first_argument_is_fixed(fcinfo) };
        if !typed {
            refuse(
                "a numeric prior needs a float8 value",
                "Cast the value: dp_refine(value::float8, prior, epsilon).",
            );
        }
        let number = value.map(|v| {
            v.trim().parse::<f64>().unwrap_or_else(|_| {
                errors::raise(dpnoise_core::Error::invalid(
                    "value",
                    "a number for a numeric prior",
                    format!("'{v}'"),
                ))
            })
        });
        return dp_refine_numeric(number, prior, epsilon, individual, fcinfo)
            .map(|x| x.to_string());
    };
    let r = refinement(prior, epsilon, individual);
    let value = value?;
    if !categories.iter().any(|c| c == value) {
        // Depends on the data (the message never names the value); raised
        // before the charge.
        refuse(
            "the value is not one of the prior's categories",
            "Give the prior every category the column can hold.",
        );
    }
    // SAFETY: fcinfo is the live call pgrx passes to this function.
    unsafe {
        crate::release::pay(
            fcinfo,
            "dp_refine",
            "refinement",
            (epsilon.unwrap_or(0.0), 0.0),
        )
    };
    Some(with_rng(|rng| r.sample_categorical(rng, value).map(str::to_owned)).or_raise())
}

/// Whether the call's first argument is a constant or a query parameter
/// (typed by the user, so it may be parsed and echoed), not data.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn first_argument_is_fixed(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: fcinfo is this live call; fn_expr is its FuncExpr or NULL, checked first.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null()
            || (*flinfo).fn_expr.is_null()
            || (*(*flinfo).fn_expr).type_ != pg_sys::NodeTag::T_FuncExpr
        {
            return false;
        }
        let args = (*((*flinfo).fn_expr as *mut pg_sys::FuncExpr)).args;
        !args.is_null()
            && (*args).length > 0
            && crate::parameters::is_fixed((*(*args).elements).ptr_value as *mut pg_sys::Node)
    }
}
