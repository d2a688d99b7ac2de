//! Public parameters as exact dyadic rationals.
//!
//! A float8 is exactly `m · 2^e`; privacy-relevant arithmetic uses that exact
//! value (MECHANISMS.md §1), never a rounded `ln` or `exp`.

use crate::Error;

/// The exact value of a finite float: `sign · mantissa · 2^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dyadic {
    pub negative: bool,
    pub mantissa: u64,
    pub exponent: i32,
}

impl Dyadic {
    /// Decomposes a finite float exactly; the mantissa is odd unless zero.
    #[inline]
    pub fn from_f64(x: f64) -> Option<Dyadic> {
        if !x.is_finite() {
            return None;
        }
        let bits = x.to_bits();
        let negative = bits >> 63 == 1;
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mut mantissa, mut exponent) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | (1u64 << 52), biased - 1075)
        };
        if mantissa == 0 {
            return Some(Dyadic {
                negative,
                mantissa: 0,
                exponent: 0,
            });
        }
        let tz = mantissa.trailing_zeros();
        mantissa >>= tz;
        exponent += tz as i32;
        Some(Dyadic {
            negative,
            mantissa,
            exponent,
        })
    }

    /// floor(log2 |x|) for a non-zero value.
    pub fn floor_log2(&self) -> i32 {
        63 - self.mantissa.leading_zeros() as i32 + self.exponent
    }

    /// ceil(log2 |x|) for a non-zero value.
    pub fn ceil_log2(&self) -> i32 {
        let f = self.floor_log2();
        if self.mantissa.is_power_of_two() {
            f
        } else {
            f + 1
        }
    }
}

/// Smallest and largest ε accepted. The bounds keep every lattice sampler's
/// integers far inside u128 (numerator < 2^53, denominator ≤ 2^83).
pub const EPSILON_MIN: f64 = 1.0 / 1_073_741_824.0; // 2^-30
pub const EPSILON_MAX: f64 = 1000.0;

/// ε as an exact rational `num / den`, `den` a power of two.
///
/// The budget charges the decimal the user wrote: the shortest decimal that
/// reads back as the float8 (`0.1`, not 0.1000000000000000055…), so ten
/// releases at 0.1 spend exactly 1.0. The mechanism must never use more
/// than that charge, so ε is the float itself when it is at most its
/// decimal, and the float just below it otherwise (0.1 becomes
/// 0.09999999999999999167…): at most one ulp less private than asked, never more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Epsilon {
    value: f64,
    pub num: u128,
    pub den: u128,
}

impl Epsilon {
    pub fn new(epsilon: f64) -> Result<Epsilon, Error> {
        const ALLOWED: &str = "a finite number in [2^-30, 1000]";
        if !(EPSILON_MIN..=EPSILON_MAX).contains(&epsilon) {
            return Err(Error::invalid("epsilon", ALLOWED, epsilon));
        }
        let value = at_most_decimal(epsilon);
        let d = Dyadic::from_f64(value).expect("checked finite");
        let (num, den) = if d.exponent >= 0 {
            ((d.mantissa as u128) << d.exponent, 1)
        } else {
            (d.mantissa as u128, 1u128 << (-d.exponent))
        };
        Ok(Epsilon { value, num, den })
    }

    /// The value the mechanism uses: at most `decimal(x)` for the x given.
    pub fn value(&self) -> f64 {
        self.value
    }

    /// Exactly half of the ε the mechanism uses, for a release that spends
    /// ε in two equal parts (dp_avg: its sum and its count). Halving a
    /// float is exact, so the two halves add up to `value()` and never to
    /// more than the charge; every caller that splits gets the same bits.
    pub fn half(&self) -> Epsilon {
        Epsilon {
            value: self.value / 2.0,
            num: self.num,
            den: self.den * 2,
        }
    }

    /// Exactly `parts`/64 of the ε the mechanism uses, for releases that
    /// split ε unevenly (dp_avg, dp_var): shares whose `parts` add up to 64
    /// add up to exactly this ε. The float `value` (lattice choice and
    /// accuracy figures only; samplers use num/den) is rounded down.
    pub fn sixty_fourths(&self, parts: u32) -> Epsilon {
        assert!(
            (1..64).contains(&parts),
            "a share of ε is 1..63 sixty-fourths"
        );
        let (num, den) = (self.num * u128::from(parts), self.den * 64);
        let value = self.value * f64::from(parts) / 64.0;
        // The product rounds to nearest: one step down when that was above.
        let value = if value.mul_add(64.0, -self.value * f64::from(parts)) > 0.0 {
            value.next_down()
        } else {
            value
        };
        Epsilon { value, num, den }
    }

    /// This ε with its numerator cut to its 24 leading bits (never more
    /// than ε): the quantile's integer arithmetic then stays inside u128.
    pub fn truncated_to_24_bits(&self) -> Epsilon {
        let excess = (128 - self.num.leading_zeros()).saturating_sub(24);
        if excess == 0 {
            return *self;
        }
        // ε ≤ 1000 and num has more than 24 bits only when den > 1 (num is
        // then an odd mantissa with num ≤ 1000·den), so 2^excess < den divides it.
        assert!(
            excess < self.den.trailing_zeros(),
            "ε ≤ 1000 keeps den above the cut"
        );
        let (num, den) = (self.num >> excess, self.den >> excess);
        let value = num as f64 / den as f64;
        Epsilon {
            value: value.min(self.value),
            num,
            den,
        }
    }
}

/// The shortest decimal that reads back as `x`: what the budget charges.
pub fn decimal(x: f64) -> String {
    format!("{x}")
}

/// The exact sum of `decimal(x)` over `values` (each ≥ 0), as a decimal
/// that numeric reads: what one charge for several releases costs. Past
/// 40 significant digits it is rounded up, never down.
pub fn decimal_sum(values: &[f64]) -> String {
    // Each value as its shortest digits d (most significant first) and the
    // exponent of the last one: x = d · 10^e.
    let parts: Vec<(Vec<u8>, i32)> = values
        .iter()
        .map(|x| {
            let text = format!("{:e}", x.max(0.0));
            let (mantissa, exponent) = text.split_once('e').expect("LowerExp writes an exponent");
            let digits: Vec<u8> = mantissa
                .bytes()
                .filter(u8::is_ascii_digit)
                .map(|b| b - b'0')
                .collect();
            let exponent =
                exponent.parse::<i32>().expect("an integer exponent") - (digits.len() as i32 - 1);
            (digits, exponent)
        })
        .collect();
    let Some(lowest) = parts.iter().map(|(_, e)| *e).min() else {
        return "0".into();
    };
    // Sum, least significant digit first, at the lowest exponent.
    let mut sum: Vec<u8> = Vec::new();
    for (digits, exponent) in &parts {
        let shift = (exponent - lowest) as usize;
        let mut carry = 0u8;
        let len = digits.len() + shift;
        if sum.len() < len {
            sum.resize(len, 0);
        }
        for i in 0..sum.len() {
            let d = if i >= shift && i < len {
                digits[digits.len() - 1 - (i - shift)]
            } else {
                0
            };
            let t = sum[i] + d + carry;
            sum[i] = t % 10;
            carry = t / 10;
            if i >= len && carry == 0 {
                break;
            }
        }
        if carry > 0 {
            sum.push(carry);
        }
    }
    while sum.len() > 1 && sum.last() == Some(&0) {
        sum.pop();
    }
    let mut exponent = lowest;
    while sum.len() > 1 && sum[0] == 0 {
        sum.remove(0);
        exponent += 1;
    }
    const KEPT: usize = 40;
    if sum.len() > KEPT {
        let dropped = sum.len() - KEPT;
        let inexact = sum[..dropped].iter().any(|&d| d != 0);
        sum.drain(..dropped);
        exponent += dropped as i32;
        if inexact {
            let mut i = 0;
            loop {
                if i == sum.len() {
                    sum.push(1);
                    break;
                }
                if sum[i] == 9 {
                    sum[i] = 0;
                    i += 1;
                } else {
                    sum[i] += 1;
                    break;
                }
            }
        }
    }
    let digits: String = sum.iter().rev().map(|d| (b'0' + d) as char).collect();
    format!("{digits}e{exponent}")
}

/// `x` if its exact value is at most its shortest decimal, else the float
/// just below (which is then below the decimal: the decimal reads back as
/// `x`, so it lies within half an ulp of it). For positive finite `x`.
pub fn at_most_decimal(x: f64) -> f64 {
    if exceeds_decimal(x) {
        f64::from_bits(x.to_bits() - 1)
    } else {
        x
    }
}

/// Whether the exact value of positive finite `x` is greater than its
/// shortest decimal `D · 10^k`. Compares `m · 2^j` with `D · 2^k · 5^k`
/// in integers: both sides are multiplied by `5^-k` when `k < 0`, then the
/// powers of two are cancelled.
pub fn exceeds_decimal(x: f64) -> bool {
    let sci = format!("{x:e}");
    let (digits, exp) = sci.split_once('e').expect("scientific notation");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let mantissa: u128 = format!("{int}{frac}").parse().expect("decimal digits");
    let k = exp - frac.len() as i32;
    let d = Dyadic::from_f64(x).expect("finite");
    let five = |n: i32| 5u128.pow(n as u32);
    // value = mantissa · 2^k · 5^k ;  x = d.mantissa · 2^j
    let (mut left, mut right) = if k >= 0 {
        (mantissa * five(k), d.mantissa as u128)
    } else {
        (mantissa, d.mantissa as u128 * five(-k))
    };
    // compare left · 2^k with right · 2^j
    let (mut left_shift, mut right_shift) = (k, d.exponent);
    let low = left_shift.min(right_shift);
    left_shift -= low;
    right_shift -= low;
    // Either side shifted past 2^128 is far larger than the other, which
    // stays below 2^120 for ε in [2^-30, 1000].
    if left_shift as u32 >= left.leading_zeros() {
        return false;
    }
    if right_shift as u32 >= right.leading_zeros() {
        return true;
    }
    left <<= left_shift;
    right <<= right_shift;
    right > left
}

/// The largest double `q` with `parts · q ≤ total` exactly: what each of
/// `parts` releases may spend of a privacy parameter `total` (a person's
/// groups under `max_groups_contributed`), so that their sum never exceeds
/// it. For positive finite `total`; anything else is returned divided as it
/// is (the callers' checks refuse it).
pub fn share(total: f64, parts: u32) -> f64 {
    let parts_f = f64::from(parts);
    let q = total / parts_f;
    if !(q.is_finite() && q > 0.0) {
        return q;
    }
    // fma rounds q·parts − total once, so its sign is the exact one. Round
    // to nearest is within half an ulp of total/parts: one step down is
    // below it whenever q is above.
    if q.mul_add(parts_f, -total) > 0.0 {
        q.next_down()
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// parts · share ≤ total exactly, and the next double up breaks it.
    #[test]
    fn share_is_the_largest_fair_part() {
        let exact_at_most =
            |q: f64, parts: u32, total: f64| q.mul_add(f64::from(parts), -total) <= 0.0;
        let mut checked = 0;
        for total in [1.0, 0.1, 0.3, 1e-6, 2.5, 7.0, 1e-12, 123.456] {
            for parts in [1u32, 2, 3, 7, 10, 13, 100, 999, 1000] {
                let q = share(total, parts);
                assert!(exact_at_most(q, parts, total), "{total}/{parts}: {q}");
                assert!(
                    !exact_at_most(q.next_up(), parts, total),
                    "{total}/{parts}: {q} is not the largest"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 72);
        // 0.3/3 rounds to nearest above the quotient: one step down.
        assert!(0.3 / 3.0 * 3.0 > 0.3 || share(0.3, 3) == 0.3 / 3.0);
        assert_eq!(share(1.0, 1), 1.0);
        assert!(share(-1.0, 2) < 0.0 && share(f64::NAN, 2).is_nan());
    }

    #[test]
    fn dyadic_is_exact() {
        for x in [
            1.0,
            0.1,
            -3.75,
            1e-300,
            5e-324,
            2f64.powi(52) + 1.0,
            123456.789,
        ] {
            let d = Dyadic::from_f64(x).unwrap();
            let back = d.mantissa as f64 * 2f64.powi(d.exponent);
            assert_eq!(if d.negative { -back } else { back }, x, "{x}");
        }
        assert_eq!(Dyadic::from_f64(f64::NAN), None);
        assert_eq!(Dyadic::from_f64(8.0).unwrap().ceil_log2(), 3);
        assert_eq!(Dyadic::from_f64(9.0).unwrap().ceil_log2(), 4);
        assert_eq!(Dyadic::from_f64(9.0).unwrap().floor_log2(), 3);
        assert_eq!(Dyadic::from_f64(0.1).unwrap().floor_log2(), -4);
    }

    #[test]
    fn epsilon_never_exceeds_its_decimal() {
        let e = Epsilon::new(0.1).unwrap();
        assert!(e.den.is_power_of_two());
        // 0.1 as a float is 0.1000000000000000055…: the mechanism uses the float below.
        assert!(exceeds_decimal(0.1));
        assert_eq!(e.value(), f64::from_bits(0.1f64.to_bits() - 1));
        assert!(e.num * 10 < e.den, "num/den < 1/10");
        // 0.3 as a float is 0.299999999999999988…: already below, kept.
        assert!(!exceeds_decimal(0.3));
        assert_eq!(Epsilon::new(0.3).unwrap().value(), 0.3);
        assert_eq!(Epsilon::new(2.0).unwrap().num, 2);
        assert!(!exceeds_decimal(1.0) && !exceeds_decimal(1000.0));
        assert_eq!(decimal(0.1), "0.1");
        assert_eq!(decimal(1e-9), "0.000000001");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-12, 1e4] {
            assert!(Epsilon::new(bad).is_err(), "{bad}");
        }
    }

    /// Compares two plain non-negative decimals ("12.5", "0.125") exactly.
    fn cmp_decimal(a: &str, b: &str) -> std::cmp::Ordering {
        let split = |s: &str| {
            let (i, f) = s.split_once('.').unwrap_or((s, ""));
            (
                i.trim_start_matches('0').to_string(),
                f.trim_end_matches('0').to_string(),
            )
        };
        let ((ai, af), (bi, bf)) = (split(a), split(b));
        let width = af.len().max(bf.len());
        (ai.len(), ai, format!("{af:0<width$}")).cmp(&(bi.len(), bi, format!("{bf:0<width$}")))
    }

    /// Against an independent check: the exact expansion (Rust formats
    /// floats exactly when asked for enough digits; 100 suffice above 2^-30)
    /// compared with the shortest decimal as strings.
    #[test]
    fn exceeds_decimal_matches_the_exact_expansion() {
        let (mut x, mut above, mut below) = (EPSILON_MIN, 0, 0);
        while x <= EPSILON_MAX {
            for y in [x, x * 1.1, x / 3.0 * 2.0, x * 0.7]
                .into_iter()
                .filter(|y| (EPSILON_MIN..=EPSILON_MAX).contains(y))
            {
                let greater =
                    cmp_decimal(&format!("{y:.100}"), &decimal(y)) == std::cmp::Ordering::Greater;
                assert_eq!(exceeds_decimal(y), greater, "{y:e}");
                let used = at_most_decimal(y);
                assert_ne!(
                    cmp_decimal(&format!("{used:.100}"), &decimal(y)),
                    std::cmp::Ordering::Greater
                );
                if greater {
                    above += 1
                } else {
                    below += 1
                }
            }
            x *= 1.37;
        }
        assert!(above > 50 && below > 50, "{above} {below}");
    }
}

#[cfg(test)]
mod decimal_sum_tests {
    use super::decimal_sum;

    fn value(text: &str) -> f64 {
        text.parse().unwrap()
    }

    #[test]
    fn sums_the_decimals_exactly() {
        assert_eq!(decimal_sum(&[0.1, 0.2]), "3e-1");
        assert_eq!(decimal_sum(&[0.5, 0.5]), "1e0");
        assert_eq!(decimal_sum(&[]), "0");
        assert_eq!(decimal_sum(&[0.0, 1e-6]), "1e-6");
        assert_eq!(
            decimal_sum(&[0.30000000000000004, 0.1]),
            "40000000000000004e-17"
        );
        assert_eq!(decimal_sum(&[999.0, 1.0, 0.001]), "1000001e-3");
        assert_eq!(value(&decimal_sum(&[1e-300, 2e-300])), 3e-300);
    }

    #[test]
    fn rounds_up_past_forty_digits() {
        // 0.5 + 1e-300 needs 301 digits: kept as 40, rounded up.
        let s = decimal_sum(&[0.5, 1e-300]);
        assert!(s.len() < 64, "{s}");
        assert_eq!(s, "5000000000000000000000000000000000000001e-40");
        assert_eq!(decimal_sum(&[0.9999999999999999, 1e-200]).len() < 64, true);
    }
}
