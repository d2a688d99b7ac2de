//! Bernoulli(e^(−x)) for a rational x = p/q ≥ 0, by comparing a uniform U
//! on [0, 1) with e^(−x): true exactly when U < e^(−x).
//!
//! U is drawn in parts. Almost always its first 32 bits already decide
//! (else its first 63 do): e^(−x)·2^63 is known to lie within ±`MARGIN` of a fixed-point
//! approximation (`approx_q63`), and U falls outside that window but for
//! odds of 2^−46. Inside it, U gets more bits and U·e^x is compared with 1
//! using the partial sums of e^x = Σ x^n/n! and a bound on their remainder,
//! in exact big-integer arithmetic (`decide_exactly`). The answer is
//! therefore exactly U < e^(−x) in every case, so P(true) = e^(−x)
//! exactly; the approximation only decides how fast the answer comes.
//!
//! Half a word per draw, against CKS Algorithm 1's chain of Bernoulli(x/k)
//! trials (about three words and as many random branches for x ≤ 1, and
//! one such chain per unit of x above 1).

use crate::entropy::Entropy;

const ONE: u64 = 1 << 63;

/// A bound on |approx_q63(p, q) − e^(−p/q)·2^63|, in units of 2^−63, with
/// room to spare. The error is at most about 2^12 + 20 units:
/// - x = p/q as a float: a power-of-two q is a shift (off by under 2^−64);
///   otherwise each conversion is within a relative 2^−52 (`to_f64`) and
///   the division is correctly rounded (IEEE 754, which Rust guarantees for
///   these operations), so |f − x| < 2^−50·x, which moves e^(−x) (slope
///   e^(−x)) by under 2^−50·x·e^(−x) ≤ 2^−50/e: under 2^12 units. Splitting f into its
///   whole part and 64 bits of fraction moves it by under 1 more; past
///   x = 45, e^(−x)·2^63 is below 1 and the approximation is 0;
/// - the table entries: within 1 unit each (`EXP_NEG_BYTES`, `EXP_NEG_WHOLE`);
/// - 1 − l + l²/2 for the remainder l < 2^−24: truncation under
///   l³/6·2^63 < 1 unit, rounding under 2;
/// - the four products: under 4 units each, with what they carry.
const MARGIN: u64 = 1 << 16;

/// e^(−k/2^8), e^(−k/2^16) and e^(−k/2^24), times 2^63, for k = 0..255,
/// each within 1 unit: the fraction's top three bytes are looked up.
const EXP_NEG_BYTES: [[u64; 256]; 3] = {
    let mut tables = [[0u64; 256]; 3];
    let mut level = 0;
    while level < 3 {
        let mut k = 0;
        while k < 256 {
            tables[level][k] = to_q63(exp_neg_q118(k as u128, 1 << (8 * (level + 1))));
            k += 1;
        }
        level += 1;
    }
    tables
};

/// Whole parts past this are 0 in 63-bit fixed point.
const WHOLE_LIMIT: u64 = 45;

/// e^(−w)·2^63 for w = 0..44, each within 1 unit: powers of e^(−1) at
/// 2^−118, each product off by under 3·2^−118, then rounded.
pub(crate) const EXP_NEG_WHOLE: [u64; WHOLE_LIMIT as usize] = {
    let mut table = [0u64; WHOLE_LIMIT as usize];
    let e = exp_neg_q118(1, 1);
    let mut power: u128 = 1 << 118;
    let mut w = 0;
    while w < WHOLE_LIMIT as usize {
        table[w] = to_q63(power);
        power = mul_q118(power, e);
        w += 1;
    }
    table
};

/// e^(−a/b)·2^118 for 0 ≤ a < 2^8, a ≤ b ≤ 2^24, within 2^6 units of
/// 2^−118: the series, each of its at most 40 terms floored once.
const fn exp_neg_q118(a: u128, b: u128) -> u128 {
    let mut term: u128 = 1 << 118;
    let mut sum: i128 = 1 << 118;
    let mut n = 1;
    while term > 0 {
        // term ≤ 2^118 and a < 2^8: the product stays below 2^126.
        term = term * a / (b * n);
        sum += if n % 2 == 1 {
            -(term as i128)
        } else {
            term as i128
        };
        n += 1;
    }
    sum as u128
}

/// ⌊a·b/2^118⌋ for a, b ≤ 2^118, from 64-bit halves (off by under 3).
const fn mul_q118(a: u128, b: u128) -> u128 {
    let (a1, a0, b1, b0) = (a >> 64, a as u64 as u128, b >> 64, b as u64 as u128);
    ((a1 * b1) << 10) + ((a1 * b0) >> 54) + ((a0 * b1) >> 54) + ((a0 * b0) >> 118)
}

/// A 2^−118 fixed-point value rounded to 2^−63.
const fn to_q63(x: u128) -> u64 {
    ((x + (1 << 54)) >> 55) as u64
}

#[inline(always)]
fn mul_q63(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) >> 63) as u64
}

/// A float of `x` within a relative 2^−52 (u128's own conversion is a slow
/// library call): a word's conversion is correctly rounded; a wider value's
/// two halves are converted (each correctly rounded, the high one then
/// scaled exactly) and added (rounded once more).
#[inline(always)]
fn to_f64(x: u128) -> f64 {
    let (high, low) = ((x >> 64) as u64, x as u64);
    if high == 0 {
        low as f64
    } else {
        high as f64 * 18_446_744_073_709_551_616.0 + low as f64
    }
}

/// e^(−p/q)·2^63 within `MARGIN`, for p ≥ 0, q ≥ 1.
#[inline(always)]
fn approx_q63(p: u128, q: u128) -> u64 {
    // x = whole + fraction/2^64.
    let (whole, fraction) = if q.is_power_of_two() {
        let n = q.trailing_zeros();
        let whole = u64::try_from(p >> n).unwrap_or(u64::MAX);
        let rest = p & (q - 1);
        (
            whole,
            if n <= 64 {
                (rest << (64 - n)) as u64
            } else {
                (rest >> (n - 64)) as u64
            },
        )
    } else {
        return approx_float(to_f64(p) / to_f64(q));
    };
    approx_parts(whole, fraction)
}

/// e^(−x)·2^63 within `MARGIN` for a float within a relative 2^−50 of x.
#[inline(always)]
fn approx_float(x: f64) -> u64 {
    if x >= WHOLE_LIMIT as f64 {
        return 0;
    }
    // x − ⌊x⌋ and its product with 2^64 are exact in floating point; the
    // conversion truncates.
    let whole = x as u64;
    approx_parts(
        whole,
        ((x - whole as f64) * 18_446_744_073_709_551_616.0) as u64,
    )
}

/// e^(−x)·2^63 for x = whole + fraction/2^64.
#[inline(always)]
fn approx_parts(whole: u64, fraction: u64) -> u64 {
    if whole >= WHOLE_LIMIT {
        return 0;
    }
    // e^(−x) = e^(−whole) · e^(−b1/2^8) · e^(−b2/2^16) · e^(−b3/2^24) · e^(−l),
    // l < 2^−24, with b1, b2, b3 the fraction's top bytes; e^(−l) ≈ 1 − l + l²/2.
    let byte = |i: u32| (fraction >> (56 - 8 * i)) as u8 as usize;
    let l = (fraction & ((1 << 40) - 1)) >> 1;
    let c = ONE - l + (mul_q63(l, l) >> 1);
    let high = mul_q63(EXP_NEG_BYTES[0][byte(0)], EXP_NEG_BYTES[1][byte(1)]);
    let low = mul_q63(EXP_NEG_BYTES[2][byte(2)], c);
    let fractional = mul_q63(high, low);
    if whole == 0 {
        fractional
    } else {
        mul_q63(EXP_NEG_WHOLE[whole as usize], fractional)
    }
}

/// Bernoulli(e^(−p/q)) for p ≥ 0, q ≥ 1, exactly (see the module).
#[inline]
pub fn bernoulli<E: Entropy>(rng: &mut E, p: u128, q: u128) -> bool {
    debug_assert!(q > 0);
    if p == 0 {
        return true;
    }
    decide(rng, p, q, MARGIN)
}

/// Bernoulli(e^(−p/q)) for 0 ≤ p/q < 1, exactly, for a p/q that is
/// usually small: U's first 16 bits are first compared with
/// 1 − p/q ≤ e^(−p/q), which settles all but about p/q of the draws before
/// any approximation of e^(−p/q); the others go on as in `bernoulli`, with
/// the same U. A p/q ≥ 1 goes to `bernoulli` (exact for any p/q).
#[inline(always)]
pub fn bernoulli_near_one<E: Entropy>(rng: &mut E, p: u128, q: u128) -> bool {
    if p >= q {
        return bernoulli(rng, p, q);
    }
    if q.is_power_of_two() {
        return bernoulli_near_one_shift(rng, p, q.trailing_zeros());
    }
    // x·2^63 or more: a float within a relative 2^−50 of it, plus more than
    // that error.
    let x = ((to_f64(p) / to_f64(q) * ONE as f64) as u64).saturating_add(1 << 12);
    near_one(rng, x, p, q)
}

/// `bernoulli_near_one` for q = 2^n: x·2^63 is a shift (rounded up), and p
/// < q keeps it in range: callers guarantee it (crate-private, as a larger
/// p would wrap the shift).
#[inline(always)]
pub(crate) fn bernoulli_near_one_shift<E: Entropy>(rng: &mut E, p: u128, n: u32) -> bool {
    debug_assert!(p >> n == 0);
    let x = if n <= 63 {
        (p << (63 - n)) as u64
    } else {
        ((p + (1 << (n - 63)) - 1) >> (n - 63)) as u64
    };
    near_one(rng, x, p, 1 << n)
}

/// Bernoulli(2^k·e^(−p/q)) exactly, for 0 ≤ k ≤ 62 and 2^k·e^(−p/q) ≤ 1
/// (callers guarantee it; the quantile's k·L2 with L2 ≥ ln 2 does): U < e^(−p/q)
/// for U uniform on [0, 2^−k), whose first k bits are zero and the rest
/// fair, so P = e^(−p/q)/2^(−k). As `bernoulli`, the first 63 bits of U
/// usually decide and `decide_exactly` settles the rest.
#[inline]
pub fn bernoulli_times_pow2<E: Entropy>(rng: &mut E, k: u32, p: u128, q: u128) -> bool {
    assert!(k <= 62 && q > 0, "2^k·e^(−p/q) needs k ≤ 62, q ≥ 1");
    if p == 0 {
        // 2^k ≤ 1 only at k = 0.
        debug_assert!(k == 0);
        return true;
    }
    let w = rng.bits(63 - k);
    let approx = approx_q63(p, q);
    let (low, high) = (approx.saturating_sub(MARGIN), approx.saturating_add(MARGIN));
    if w + 1 <= low {
        return true;
    }
    if w >= high {
        return false;
    }
    decide_exactly(rng, w, p, q)
}

/// U < e^(−p/q) for a fresh U, given x ≥ (p/q)·2^63.
#[inline(always)]
fn near_one<E: Entropy>(rng: &mut E, x: u64, p: u128, q: u128) -> bool {
    // U's first 16 bits, which settle all but about x + 2^−16 of the draws.
    let high = rng.bits(16) << 47;
    if high + (1 << 47) <= ONE.saturating_sub(x) {
        return true;
    }
    // Its next 16: the first 32, as `decide_from` takes them.
    let w = high | rng.bits(16) << 31;
    p == 0 || decide_from(rng, w, p, q, MARGIN)
}

/// U < e^(−p/q) for a fresh uniform U, deciding from its first 32 bits, or
/// 63, when they lie outside the window of ±`margin` around the
/// approximation.
#[inline(always)]
fn decide<E: Entropy>(rng: &mut E, p: u128, q: u128, margin: u64) -> bool {
    let w = rng.bits(32) << 31;
    decide_from(rng, w, p, q, margin)
}

/// `decide` for a U whose first 32 bits are drawn already (in `w`).
#[inline(always)]
fn decide_from<E: Entropy>(rng: &mut E, w: u64, p: u128, q: u128, margin: u64) -> bool {
    let approx = approx_q63(p, q);
    decide_in(
        rng,
        w,
        p,
        q,
        approx.saturating_sub(margin),
        approx.saturating_add(margin),
    )
}

/// Bernoulli(e^(−p/q)) for one p/q drawn many times (the staircase's
/// b = e^(−ε)): the window around e^(−p/q) is computed once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpNeg {
    p: u128,
    q: u128,
    low: u64,
    high: u64,
}

impl ExpNeg {
    /// For p ≥ 0, q ≥ 1.
    pub fn new(p: u128, q: u128) -> ExpNeg {
        assert!(q > 0, "e^(−p/q) needs q ≥ 1");
        let approx = approx_q63(p, q);
        ExpNeg {
            p,
            q,
            low: approx.saturating_sub(MARGIN),
            high: approx.saturating_add(MARGIN),
        }
    }

    /// True with probability e^(−p/q), exactly (as `bernoulli`).
    #[inline(always)]
    pub fn sample<E: Entropy>(&self, rng: &mut E) -> bool {
        if self.p == 0 {
            return true;
        }
        let w = rng.bits(32) << 31;
        decide_in(rng, w, self.p, self.q, self.low, self.high)
    }
}

/// Bernoulli(e^(−p/q)) for many p over one q ≥ 1 (the Gaussian's
/// acceptance): x = p·(1/q), with q's reciprocal computed once. Three
/// roundings of a relative 2^−53 and two conversions of 2^−52 keep the float
/// within a relative 2^−50 of x, as `MARGIN` assumes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverQ {
    q: u128,
    inverse: f64,
}

impl OverQ {
    pub fn new(q: u128) -> OverQ {
        assert!(q > 0, "e^(−p/q) needs q ≥ 1");
        OverQ {
            q,
            inverse: 1.0 / to_f64(q),
        }
    }

    /// True with probability e^(−p/q), exactly (as `bernoulli`).
    #[inline(always)]
    pub fn bernoulli<E: Entropy>(&self, rng: &mut E, p: u128) -> bool {
        if p == 0 {
            return true;
        }
        let approx = approx_float(to_f64(p) * self.inverse);
        let w = rng.bits(32) << 31;
        decide_in(
            rng,
            w,
            p,
            self.q,
            approx.saturating_sub(MARGIN),
            approx.saturating_add(MARGIN),
        )
    }
}

/// U < e^(−p/q) for a U whose first 32 bits are `w`, with e^(−p/q)·2^63
/// known to lie in [low, high].
#[inline(always)]
fn decide_in<E: Entropy>(rng: &mut E, mut w: u64, p: u128, q: u128, low: u64, high: u64) -> bool {
    // U's first 32 bits: U ∈ [w, w + 2^31)·2^−63; they decide but for odds of 2^−31.
    if w + (1 << 31) <= low {
        return true;
    }
    if w >= high {
        return false;
    }
    // 31 more: U ∈ [w, w + 1)·2^−63.
    w |= rng.bits(31);
    if w < low {
        return true;
    }
    if w >= high {
        return false;
    }
    decide_exactly(rng, w, p, q)
}

/// V ≥ 0 with P(V ≥ v) = e^(−v) exactly: the number of v ≥ 1 with
/// U < e^(−v), for one uniform U. U's first 32 bits, or 63 if need be, are
/// compared with the table: each entry T is within 1 unit, so U is surely
/// below when its interval ends under T − 1 and surely above when it starts
/// past T + 1, and otherwise `decide_exactly` settles that one entry. A U
/// below e^(−40) (surely, or as the exact path settles it) counts on: V − 40
/// is again such a count (P(V ≥ 40 + v | V ≥ 40) = e^(−v)), of a new
/// uniform. Half a word per draw, against a
/// Bernoulli(e^(−1)) chain per unit of V.
#[inline]
pub fn geometric<E: Entropy>(rng: &mut E) -> u128 {
    const LAST: usize = 40;
    let mut base = 0u128;
    loop {
        // U ∈ [w, w + width)·2^−63: its first 32 bits, then 31 more if need be.
        let (mut w, mut width) = (rng.bits(32) << 31, 1u64 << 31);
        loop {
            // The thresholds that U is surely below: v = 1..=below. The
            // table decreases, so "surely below entry v" holds for v up to
            // some point and not past it: the first eight are counted
            // without branches (the same count as a scan, whose exit, at a
            // random V, the processor mispredicts), and a scan goes on past
            // them (odds e^(−8)).
            let end = w + width;
            let mut below: usize = (1..=8).map(|v| usize::from(end < EXP_NEG_WHOLE[v])).sum();
            while below >= 8 && below < LAST && end < EXP_NEG_WHOLE[below + 1] {
                below += 1;
            }
            if below == LAST {
                break;
            }
            let v = below + 1;
            if w > EXP_NEG_WHOLE[v] {
                return base + below as u128;
            }
            if width > 1 {
                (w, width) = (w | rng.bits(31), 1);
                continue;
            }
            // U is near e^(−v) only (the entries are far apart): below it, V ≥ v.
            if !decide_exactly(rng, w, v as u128, 1) {
                return base + below as u128;
            }
            if v < LAST {
                return base + v as u128;
            }
            // U < e^(−40): count on, from a new uniform.
            break;
        }
        base += LAST as u128;
        crate::interrupt::check();
    }
}

/// The fine count's thresholds e^(−j/256) are kept for j ≤ this; a
/// uniform below the last counts on.
pub const FINE_LAST: u64 = 20 * 256;

/// A bound on |fine_threshold(j) − e^(−j/256)·2^63|: two entries within 1
/// unit each (the product moves by under 2) and the product's floor (1).
const FINE_MARGIN: u64 = 8;

/// e^(−j/256)·2^63 within `FINE_MARGIN`, for j ≤ `FINE_LAST`.
#[inline(always)]
fn fine_threshold(j: u64) -> u64 {
    mul_q63(
        EXP_NEG_WHOLE[(j >> 8) as usize],
        EXP_NEG_BYTES[0][(j & 255) as usize],
    )
}

/// 256·ln(1 + (i + ½)/1024)·2^16 for i = 0..1023, from the series
/// ln(1 + y) = 2·(z + z³/3 + z⁵/5 + …), z = y/(2 + y) ≤ 1/3: for the fine
/// count's first guess only.
const LN_MANTISSA: [u32; 1024] = {
    let mut table = [0u32; 1024];
    let mut i = 0;
    while i < 1024 {
        let y = (i as f64 + 0.5) / 1024.0;
        let z = y / (2.0 + y);
        let (mut power, mut sum, mut k) = (z, 0.0, 1.0);
        while k < 60.0 {
            sum += power / k;
            power *= z * z;
            k += 2.0;
        }
        table[i] = (2.0 * sum * 256.0 * 65536.0) as u32;
        i += 1;
    }
    table
};

/// 256·ln 2·2^16.
const LN2_256: u64 = (256.0 * std::f64::consts::LN_2 * 65536.0) as u64;

/// ⌊−256·ln(point·2^−63)⌋ to within one either way (capped at
/// `FINE_LAST`): the point's binary exponent and its mantissa's first ten
/// bits (the mantissa's interval moves the logarithm by under 1/8).
#[inline(always)]
fn fine_guess(point: u64) -> u64 {
    if point == 0 {
        return FINE_LAST;
    }
    // point·2^−63 = (1 + f)·2^−zeros, f's first ten bits indexing the table.
    let zeros = point.leading_zeros();
    let index = ((point << zeros) >> 53) as usize & 1023;
    ((zeros as u64 * LN2_256 - LN_MANTISSA[index] as u64) >> 16).min(FINE_LAST)
}

/// J ≥ 0 with P(J ≥ j) = e^(−j/256) exactly (J = ⌊256·E⌋ for an
/// exponential E): the number of j ≥ 1 with U < e^(−j/256), for one uniform
/// U. A table of logarithms guesses J from U's first bits; the thresholds next to
/// the guess, each known within `FINE_MARGIN`, then move it until U is
/// surely below e^(−J/256) and surely not below e^(−(J+1)/256). When U's
/// interval straddles one of the two, U gets 31 more bits, and if it still
/// does, `decide_exactly` settles that one threshold (the others are over
/// 2^26 units away up to `FINE_LAST`, so at most one can be in doubt). A U
/// below e^(−FINE_LAST/256) counts on from a new uniform (J − FINE_LAST is
/// again such a count). The guess decides only where the search starts,
/// never the answer.
#[inline]
pub fn geometric_fine<E: Entropy>(rng: &mut E) -> u128 {
    let mut base = 0u128;
    loop {
        // U ∈ [w, w + width)·2^−63: its first 32 bits, then 31 more if need be.
        let (mut w, mut width) = (rng.bits(32) << 31, 1u64 << 31);
        let mut j = fine_guess(w + width / 2);
        // Usually the guess is J and U's first 32 bits show it.
        if j < FINE_LAST
            && (j == 0 || w + width + FINE_MARGIN <= fine_threshold(j))
            && w >= fine_threshold(j + 1) + FINE_MARGIN
        {
            return base + j as u128;
        }
        let counted = loop {
            // Down while U is surely not below e^(−j/256); up while U is
            // surely below e^(−(j+1)/256).
            while j > 0 && w >= fine_threshold(j) + FINE_MARGIN {
                j -= 1;
            }
            while j < FINE_LAST && w + width + FINE_MARGIN <= fine_threshold(j + 1) {
                j += 1;
            }
            let below_j = j == 0 || w + width + FINE_MARGIN <= fine_threshold(j);
            let above_next = j == FINE_LAST || w >= fine_threshold(j + 1) + FINE_MARGIN;
            if below_j && above_next {
                break j;
            }
            if width > 1 {
                (w, width) = (w | rng.bits(31), 1);
                continue;
            }
            // One threshold in doubt: U is below it, or J is the one under it.
            let doubt = if below_j { j + 1 } else { j };
            break if decide_exactly(rng, w, doubt as u128, 256) {
                doubt
            } else {
                doubt - 1
            };
        };
        if counted < FINE_LAST {
            return base + counted as u128;
        }
        base += FINE_LAST as u128;
        crate::interrupt::check();
    }
}

/// `decide` with any margin, for tests of the exact path (a margin of 2^63
/// sends every draw there).
#[doc(hidden)]
pub fn bernoulli_with_margin<E: Entropy>(rng: &mut E, p: u128, q: u128, margin: u64) -> bool {
    decide(rng, p, q, margin)
}

/// U < e^(−p/q) for p > 0, where U's first 63 bits are `w` and its later
/// bits are drawn as needed. U < e^(−x) ⇔ U·e^x < 1, and e^x lies in
/// [L, L + R]: L = Σ_{k ≤ n} x^k/k! = N/D with D = q^n·n!, and R, the
/// remainder's bound x^(n+1)/(n+1)! · (n+2)/(n+2−x) once n + 2 > x. With U ∈
/// [V, V + 1)·2^−b: true surely when (V + 1)·(L + R) ≤ 2^b, false surely
/// when V·L ≥ 2^b. Otherwise either R > 2^−(b+4) (one more term) or not (64
/// more bits of U). The answer is U < e^(−x) for the U of all the bits
/// drawn, so it ends with probability 1, and almost always at once.
#[doc(hidden)]
pub fn decide_exactly<E: Entropy>(rng: &mut E, w: u64, p: u128, q: u128) -> bool {
    let mut v = Big::from(w as u128);
    let mut bits = 63u32;
    // e^(−x) ≤ 2^(−x): while U's bits are all zero and fewer than x, a later
    // one set decides (U ≥ 2^−bits ≥ e^(−x)), with no series.
    while v == Big::from(0) && (bits as u128) < p / q {
        v = Big::from(rng.next_u64() as u128);
        bits += 64;
        crate::interrupt::check();
    }
    if (bits as u128) <= p / q && v != Big::from(0) {
        return false;
    }
    let (mut n, mut sum, mut denominator, mut power) =
        (0u128, Big::from(1), Big::from(1), Big::from(p));
    loop {
        // (n + 2)·q − p > 0: the remainder bound holds.
        let spare = Big::from(n + 2).times_u128(q);
        let bounded = spare > Big::from(p);
        if bounded {
            let spare = spare.minus(&Big::from(p));
            // L + R = upper/over, R = power·(n + 2)/over.
            let over = denominator.times_u128(n + 1).times(&spare);
            let remainder = power.times_u128(n + 2);
            let upper = sum.times_u128(n + 1).times(&spare).plus(&remainder);
            if v.plus_one().times(&upper) <= over.shifted(bits) {
                return true;
            }
            if v.times(&sum) >= denominator.shifted(bits) {
                return false;
            }
            if remainder.shifted(bits + 4) <= over {
                // The bracket is narrower than a sixteenth of U's interval.
                v = v.shifted(64).plus(&Big::from(rng.next_u64() as u128));
                bits += 64;
                crate::interrupt::check();
                continue;
            }
        } else if v.times(&sum) >= denominator.shifted(bits) {
            return false;
        }
        // One more term: L += x^(n+1)/(n+1)!.
        n += 1;
        denominator = denominator.times_u128(q).times_u128(n);
        sum = sum.times_u128(q).times_u128(n).plus(&power);
        power = power.times_u128(p);
        crate::interrupt::check();
    }
}

/// A non-negative integer of any size, in 64-bit limbs, least significant
/// first, without leading zero limbs. Only the exact path uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u64>);

impl From<u128> for Big {
    fn from(x: u128) -> Big {
        Big(vec![x as u64, (x >> 64) as u64]).trimmed()
    }
}

impl Big {
    fn trimmed(mut self) -> Big {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }

    fn times_u64(&self, m: u64) -> Big {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut carry = 0u128;
        for &limb in &self.0 {
            let x = limb as u128 * m as u128 + carry;
            out.push(x as u64);
            carry = x >> 64;
        }
        out.push(carry as u64);
        Big(out).trimmed()
    }

    fn times_u128(&self, m: u128) -> Big {
        self.times_u64(m as u64)
            .plus(&self.times_u64((m >> 64) as u64).shifted(64))
    }

    fn times(&self, other: &Big) -> Big {
        let mut out = vec![0u64; self.0.len() + other.0.len()];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry = 0u128;
            for (j, &b) in other.0.iter().enumerate() {
                let x = a as u128 * b as u128 + out[i + j] as u128 + carry;
                out[i + j] = x as u64;
                carry = x >> 64;
            }
            out[i + other.0.len()] = carry as u64;
        }
        Big(out).trimmed()
    }

    fn plus(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(other.0.len()) + 1);
        let mut carry = 0u128;
        for i in 0..self.0.len().max(other.0.len()) {
            let x = *self.0.get(i).unwrap_or(&0) as u128
                + *other.0.get(i).unwrap_or(&0) as u128
                + carry;
            out.push(x as u64);
            carry = x >> 64;
        }
        out.push(carry as u64);
        Big(out).trimmed()
    }

    fn plus_one(&self) -> Big {
        self.plus(&Big::from(1))
    }

    /// self − other, for self ≥ other.
    fn minus(&self, other: &Big) -> Big {
        debug_assert!(self >= other);
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = false;
        for (i, &a) in self.0.iter().enumerate() {
            let (x, b1) = a.overflowing_sub(*other.0.get(i).unwrap_or(&0));
            let (x, b2) = x.overflowing_sub(borrow as u64);
            out.push(x);
            borrow = b1 || b2;
        }
        Big(out).trimmed()
    }

    /// self · 2^bits.
    fn shifted(&self, bits: u32) -> Big {
        let (limbs, rest) = ((bits / 64) as usize, bits % 64);
        let mut out = vec![0u64; limbs];
        let mut carry = 0u64;
        for &limb in &self.0 {
            out.push(if rest == 0 {
                limb
            } else {
                limb << rest | carry
            });
            carry = if rest == 0 { 0 } else { limb >> (64 - rest) };
        }
        out.push(carry);
        Big(out).trimmed()
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Big) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Big {
    fn cmp(&self, other: &Big) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_approximation_are_within_their_bounds() {
        for level in 0..3 {
            for k in 0..256 {
                let exact = (-(k as f64) / 2f64.powi(8 * (level as i32 + 1))).exp() * ONE as f64;
                // The float reference is itself good to about 2^−52 relative: 2^11 units.
                assert!(
                    (EXP_NEG_BYTES[level][k] as f64 - exact).abs() <= 4096.0,
                    "level {level}, k = {k}"
                );
            }
        }
        for w in 0..WHOLE_LIMIT as usize {
            let exact = (-(w as f64)).exp() * ONE as f64;
            assert!(
                (EXP_NEG_WHOLE[w] as f64 - exact).abs() <= 4096.0_f64.min(exact / 1e12 + 1.0),
                "w = {w}"
            );
        }
        for (p, q) in [
            (1u128, 1u128),
            (1, 3),
            (2, 3),
            (12345, 1 << 20),
            (1, 1 << 90),
            ((1 << 100) - 1, 1 << 100),
            (7, 2),
            (100, 3),
            (41, 1),
            (1 << 60, 1 << 58),
        ] {
            let exact = (-(p as f64) / q as f64).exp() * ONE as f64;
            assert!((approx_q63(p, q) as f64 - exact).abs() <= 8192.0, "{p}/{q}");
        }
    }

    #[test]
    fn big_arithmetic() {
        let a = Big::from(u128::MAX);
        assert_eq!(a.plus_one(), Big::from(1).shifted(128));
        assert_eq!(a.plus_one().minus(&Big::from(1)), a);
        assert_eq!(Big::from(3).times(&Big::from(5)), Big::from(15));
        assert_eq!(a.times_u128(u128::MAX), a.shifted(128).minus(&a));
        assert_eq!(a.times(&a), a.shifted(128).minus(&a));
        assert_eq!(a.times(&Big::from(2)), a.shifted(1));
        assert_eq!(Big::from(0).shifted(70), Big::from(0));
    }
}
