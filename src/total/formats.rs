//! Total forms of to_char for numbers: to_char(integer | bigint | real |
//! double precision | numeric, text), NULL for a format it might refuse.
//!
//! PostgreSQL raises an error for some number formats ("multiple decimal
//! points", "cannot use "S" twice", ...), and for V (a power of ten) an
//! integer overflow that depends on the value; a format read from a
//! column, or met only when a protected row arrives, would tell what the
//! rows hold. The total forms format only what cannot fail: digits (9
//! and 0), group separators (`,` and G), at most one decimal point (`.`
//! or D), the currency symbol (L), FM and spaces, at most `FORMAT_BYTES`
//! long; any other format gives NULL. A value too wide for its digits
//! shows as `#`s, as PostgreSQL shows it.

use super::{text_arg, text_bytes};
use crate::fmgr::{return_null, v1_function};
use pgrx::pg_sys;

/// The longest format the total forms format (PostgreSQL allocates a
/// buffer per format byte).
const FORMAT_BYTES: usize = 1024;

/// Whether to_char formats every number with `format` without an error.
fn number_format_total(format: &[u8]) -> bool {
    if format.len() > FORMAT_BYTES {
        return false;
    }
    let mut points = 0;
    let mut i = 0;
    while i < format.len() {
        match format[i] {
            b'F' | b'f' if matches!(format.get(i..i + 2), Some(b"FM" | b"fm")) => i += 1,
            b'9' | b'0' | b',' | b'G' | b'g' | b'L' | b'l' | b' ' => {}
            b'.' | b'D' | b'd' => points += 1,
            _ => return false,
        }
        i += 1;
    }
    points <= 1
}

macro_rules! number_to_char {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared (a number, text); the built-in is called with the same
            // arguments once the format is one that formats every value.
            unsafe {
                if text_bytes(fcinfo, 1) > FORMAT_BYTES || !number_format_total(text_arg(fcinfo, 1))
                {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

number_to_char!(
    pg_finfo_dp_total_int4_to_char,
    dp_total_int4_to_char,
    int4_to_char
);
number_to_char!(
    pg_finfo_dp_total_int8_to_char,
    dp_total_int8_to_char,
    int8_to_char
);
number_to_char!(
    pg_finfo_dp_total_float4_to_char,
    dp_total_float4_to_char,
    float4_to_char
);
number_to_char!(
    pg_finfo_dp_total_float8_to_char,
    dp_total_float8_to_char,
    float8_to_char
);
number_to_char!(
    pg_finfo_dp_total_numeric_to_char,
    dp_total_numeric_to_char,
    numeric_to_char
);

#[cfg(test)]
mod tests {
    use super::number_format_total;

    #[test]
    fn only_formats_that_cannot_fail() {
        for ok in [
            "999",
            "FM999,999.00",
            "999G999D99",
            "L 9 9 9",
            "fm0000",
            "",
            "9.",
            "FM",
        ] {
            assert!(number_format_total(ok.as_bytes()), "{ok}");
        }
        for refused in [
            "9.9.9", "9D9.9", "999V99", "S999", "9999MI", "9.99EEEE", "RN", "999th", "F9", "'x'999",
        ] {
            assert!(!number_format_total(refused.as_bytes()), "{refused}");
        }
        assert!(!number_format_total("9".repeat(2000).as_bytes()));
    }
}
