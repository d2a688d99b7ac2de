//! Per-person contribution bounding: which of a person's groups they
//! contribute to, and their exact combined value in each.
//!
//! A person with rows in m groups contributes to at most k of them. Each of
//! the person's groups gets a key, `choice_key(seed, words)`, a keyed hash
//! (SipHash-2-4) of the person and the group; the person contributes to
//! the k groups with the smallest keys. For a hash that behaves as a random
//! function, that is a uniformly random k-subset of the person's groups,
//! independent across persons, and it depends on nothing but the person's
//! own rows: the bound holds whatever the hash (DP needs no secrecy here),
//! while the seed, derived from the server's secret, keeps the choice from
//! being steered. The same rows always give the same choice, so a bounded
//! release can be repeated (docs/budget.md, "Repeated releases").
//!
//! A person's values in a group are summed exactly (`ExactSum`), so the
//! combined value does not depend on the order the rows arrive in.

/// SipHash-2-4 of `words` (each as 8 little-endian bytes) under `key`.
pub fn choice_key(key: [u64; 2], words: &[u64]) -> u64 {
    let mut v = [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut compress = |m: u64| {
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    };
    for &w in words {
        compress(w);
    }
    // The final block: the message length in bytes in the top byte.
    compress(((words.len() as u64 * 8) & 0xff) << 56);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Limbs of the fixed-point accumulator: a finite double is an integer
/// multiple of 2^-1074 below 2^1024, 2098 bits; 64 more bits of headroom
/// for 2^63 additions, and a sign, fit in 34 limbs.
const LIMBS: usize = 34;

/// The exact sum of doubles, kept as one two's complement integer in units
/// of 2^-1074, with the infinities and NaN apart. Adding is exact and
/// commutative, so the sum is the same in any order of the values.
#[derive(Clone, Copy)]
pub struct ExactSum {
    limbs: [u64; LIMBS],
    nan: bool,
    positive_infinity: bool,
    negative_infinity: bool,
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum {
            limbs: [0; LIMBS],
            nan: false,
            positive_infinity: false,
            negative_infinity: false,
        }
    }
}

impl ExactSum {
    pub fn add(&mut self, x: f64) {
        if x.is_nan() {
            self.nan = true;
            return;
        }
        if x.is_infinite() {
            if x > 0.0 {
                self.positive_infinity = true;
            } else {
                self.negative_infinity = true;
            }
            return;
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as u32;
        let fraction = bits & ((1 << 52) - 1);
        // x = mantissa × 2^(shift − 1074).
        let (mantissa, shift) = if exponent == 0 {
            (fraction, 0)
        } else {
            (fraction | 1 << 52, exponent - 1)
        };
        if mantissa == 0 {
            return;
        }
        let (limb, offset) = ((shift / 64) as usize, shift % 64);
        let wide = (mantissa as u128) << offset;
        let parts = [wide as u64, (wide >> 64) as u64];
        if x > 0.0 {
            self.add_at(limb, parts);
        } else {
            self.subtract_at(limb, parts);
        }
    }

    /// Adds m·2^e exactly (e ≥ −1074, the least exponent of a double's
    /// last bit: `ShortSum` hands its integer over this way).
    pub fn add_scaled(&mut self, m: i128, e: i32) {
        if m == 0 {
            return;
        }
        let shift = (e + 1074) as u32;
        let (limb, offset) = ((shift / 64) as usize, shift % 64);
        let magnitude = m.unsigned_abs();
        // magnitude·2^offset in three limbs.
        let low = magnitude << offset;
        let high = if offset == 0 {
            0
        } else {
            magnitude >> (128 - offset)
        };
        let parts = [low as u64, (low >> 64) as u64, high as u64];
        for (i, part) in parts.into_iter().enumerate() {
            if limb + i >= LIMBS || part == 0 {
                continue;
            }
            if m > 0 {
                self.add_at(limb + i, [part, 0]);
            } else {
                self.subtract_at(limb + i, [part, 0]);
            }
        }
    }

    fn add_at(&mut self, limb: usize, parts: [u64; 2]) {
        let mut carry = 0u64;
        for (i, slot) in self.limbs.iter_mut().enumerate().skip(limb) {
            let part = if i - limb < 2 { parts[i - limb] } else { 0 };
            let (s, c1) = slot.overflowing_add(part);
            let (s, c2) = s.overflowing_add(carry);
            *slot = s;
            carry = (c1 || c2) as u64;
            if i - limb >= 1 && carry == 0 {
                break;
            }
        }
    }

    fn subtract_at(&mut self, limb: usize, parts: [u64; 2]) {
        let mut borrow = 0u64;
        for (i, slot) in self.limbs.iter_mut().enumerate().skip(limb) {
            let part = if i - limb < 2 { parts[i - limb] } else { 0 };
            let (s, b1) = slot.overflowing_sub(part);
            let (s, b2) = s.overflowing_sub(borrow);
            *slot = s;
            borrow = (b1 || b2) as u64;
            if i - limb >= 1 && borrow == 0 {
                break;
            }
        }
    }

    /// The sum as a double: NaN if a NaN was added or both infinities were,
    /// an infinity if one was, else the exact sum rounded (to within one
    /// unit in the last place; ±Infinity beyond the doubles' range). The
    /// same values give the same double, whatever their order.
    pub fn value(&self) -> f64 {
        if self.nan || (self.positive_infinity && self.negative_infinity) {
            return f64::NAN;
        }
        if self.positive_infinity {
            return f64::INFINITY;
        }
        if self.negative_infinity {
            return f64::NEG_INFINITY;
        }
        let negative = self.limbs[LIMBS - 1] >> 63 == 1;
        let mut magnitude = self.limbs;
        if negative {
            let mut carry = 1u64;
            for limb in magnitude.iter_mut() {
                let (s, c) = (!*limb).overflowing_add(carry);
                *limb = s;
                carry = c as u64;
            }
        }
        let Some(top) = magnitude.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        // The 64 bits from the highest set one down; the bits below them
        // only round, through a sticky bit.
        let bit = top * 64 + 63 - magnitude[top].leading_zeros() as usize;
        let window = if bit < 63 {
            magnitude[0] << (63 - bit)
        } else {
            let low = bit - 63;
            let (limb, offset) = (low / 64, low % 64);
            let upper = if offset > 0 && limb + 1 < LIMBS {
                magnitude[limb + 1] << (64 - offset)
            } else {
                0
            };
            let sticky = magnitude[..limb].iter().any(|&l| l != 0)
                || magnitude[limb] & ((1u64 << offset) - 1) != 0;
            (magnitude[limb] >> offset) | upper | sticky as u64
        };
        // window × 2^(bit − 63 − 1074): u64 → f64 rounds once to nearest
        // (a subnormal result rounds again); the powers of two are exact.
        let exponent = bit as i32 - 63 - 1074;
        let scaled = if exponent < 0 {
            (window as f64) * 2f64.powi(exponent + 600) * 2f64.powi(-600)
        } else {
            (window as f64) * 2f64.powi(exponent)
        };
        if negative {
            -scaled
        } else {
            scaled
        }
    }
}

/// The exact sum of doubles as one integer m·2^e while it fits in 128 bits
/// (a person's few values of similar size always do), else an `ExactSum`:
/// a small state for aggregating each person's rows, whose `value` is the
/// `ExactSum`'s of the same values, bit for bit.
#[derive(Clone, Copy)]
pub struct ShortSum {
    /// m as two words (low, high): the state lives in memory PostgreSQL
    /// aligns to 8 bytes, not i128's 16.
    m: [u64; 2],
    /// The exponent of m's last bit; i32::MAX while no finite value came.
    e: i32,
    /// Whether the sum outgrew m (or met a NaN or an infinity): then `long`.
    long: bool,
}

impl Default for ShortSum {
    fn default() -> Self {
        ShortSum {
            m: [0, 0],
            e: i32::MAX,
            long: false,
        }
    }
}

impl ShortSum {
    /// Adds x; false when the sum no longer fits (the caller moves it to
    /// an `ExactSum` with `into_exact` and adds x there).
    pub fn add(&mut self, x: f64) -> bool {
        if self.long || !x.is_finite() {
            self.long = true;
            return false;
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as i32;
        let fraction = (bits & ((1 << 52) - 1)) as i128;
        let (mantissa, e) = if exponent == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1 << 52, exponent - 1075)
        };
        if mantissa == 0 {
            return true;
        }
        let signed = if x < 0.0 { -mantissa } else { mantissa };
        if self.e == i32::MAX {
            (self.m, self.e) = (words(signed), e);
            return true;
        }
        let m = join_words(self.m);
        // Both at the smaller exponent, if the shift keeps them in 126 bits.
        let (low, shift_m, shift_x) = if e < self.e {
            (e, (self.e - e) as u32, 0)
        } else {
            (self.e, 0, (e - self.e) as u32)
        };
        let fits = |v: i128, shift: u32| shift < 126 && (v.unsigned_abs() >> (126 - shift)) == 0;
        if !fits(m, shift_m) || !fits(signed, shift_x) {
            self.long = true;
            return false;
        }
        match (m << shift_m).checked_add(signed << shift_x) {
            Some(m) => {
                (self.m, self.e) = (words(m), low);
                true
            }
            None => {
                self.long = true;
                false
            }
        }
    }

    /// The sum rounded once: `into_exact().value()`, bit for bit, without
    /// building the accumulator where m·2^e is a normal double (i128 to
    /// f64 rounds to nearest, ties to even, as `ExactSum::value` does, and
    /// the scaling by a power of two is then exact).
    pub fn value(self) -> f64 {
        if self.e == i32::MAX {
            return 0.0;
        }
        let rounded = join_words(self.m) as f64;
        if (-1022..=1023).contains(&self.e) {
            let scaled = rounded * f64::from_bits(((self.e + 1023) as u64) << 52);
            if scaled.is_normal() || scaled == 0.0 {
                return scaled;
            }
        }
        self.into_exact().value()
    }

    /// The same sum as an `ExactSum`.
    pub fn into_exact(self) -> ExactSum {
        let mut sum = ExactSum::default();
        if self.e != i32::MAX {
            sum.add_scaled(join_words(self.m), self.e);
        }
        sum
    }
}

fn words(x: i128) -> [u64; 2] {
    [x as u64, (x >> 64) as u64]
}

fn join_words(w: [u64; 2]) -> i128 {
    ((w[1] as i128) << 64) | w[0] as i128
}

/// The exact sum of 64-bit integers, saturated to their range at the end.
#[derive(Clone, Copy, Default)]
pub struct IntegerSum(i128);

impl IntegerSum {
    pub fn add(&mut self, x: i64) {
        self.0 = self.0.saturating_add(x as i128);
    }

    pub fn value(self) -> i64 {
        self.0.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

/// The rank (from 0) of a person's own p-quantile among their n values in
/// a group, in ascending order: the nearest rank to p·(n − 1), halves up.
/// A quantile over several rows per person reads this one value of each
/// person (their median for p = ½, about their least and greatest at the
/// ends), so a person moves the group's ranks by at most one.
pub fn nearest_rank(p: f64, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let p = if p.is_nan() { 0.5 } else { p.clamp(0.0, 1.0) };
    ((p * (n - 1) as f64 + 0.5).floor() as u64).min(n - 1)
}

/// A rank (from 0) among a person's n values in a group, drawn from the
/// group's choice key: each rank equally likely (to within n·2^-64) for a
/// key that behaves as random, so the value at it is one of the person's
/// rows taken uniformly, and the same one for the same rows. A variance
/// over several rows per person reads this one row of each person.
pub fn drawn_rank(key: u64, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    // SplitMix64's finaliser of the key and n: a new word for each n.
    let mut z = key ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z as u128 * n as u128) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{chi_square, histogram};
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    use rand_chacha::ChaCha20Rng;
    use std::collections::HashMap;

    #[test]
    fn short_sum_is_the_exact_sum() {
        // Random doubles of every size, in runs of a few: the short sum
        // (moved to the exact one when it outgrows 128 bits) gives the
        // same bits as the exact sum.
        let mut rng = ChaCha20Rng::seed_from_u64(47);
        let mut moved = 0;
        for round in 0..5000 {
            let n = 1 + (rng.next_u64() % 12) as usize;
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    let r = rng.next_u64();
                    match round % 3 {
                        // Similar sizes, as a person's amounts.
                        0 => (r % 100_000) as f64 / 7.0 - 5000.0,
                        // Any finite double.
                        1 => {
                            let x = f64::from_bits(r);
                            if x.is_finite() {
                                x
                            } else {
                                1.5
                            }
                        }
                        // Subnormals and tiny values beside ordinary ones.
                        _ => f64::from_bits(r % (1 << 60)) * if r & 1 == 0 { 1.0 } else { -1.0 },
                    }
                })
                .collect();
            let mut exact = ExactSum::default();
            values.iter().for_each(|&x| exact.add(x));
            let mut short = ShortSum::default();
            let mut long: Option<ExactSum> = None;
            for &x in &values {
                match &mut long {
                    Some(l) => l.add(x),
                    None => {
                        if !short.add(x) {
                            let mut l = short.into_exact();
                            l.add(x);
                            long = Some(l);
                            moved += 1;
                        }
                    }
                }
            }
            let got = match long {
                Some(l) => l.value(),
                None => {
                    // The short sum's own rounding, without the accumulator.
                    let direct = short.value();
                    assert_eq!(
                        direct.to_bits(),
                        short.into_exact().value().to_bits(),
                        "{values:?}"
                    );
                    direct
                }
            };
            assert_eq!(got.to_bits(), exact.value().to_bits(), "{values:?}");
        }
        assert!(moved > 100, "the long path was taken {moved} times");
    }

    #[test]
    fn nearest_rank_is_the_median_and_the_ends() {
        assert_eq!(nearest_rank(0.5, 1), 0);
        assert_eq!(nearest_rank(0.5, 3), 1);
        assert_eq!(nearest_rank(0.5, 4), 2);
        assert_eq!(nearest_rank(0.01, 8), 0);
        assert_eq!(nearest_rank(0.99, 8), 7);
        assert_eq!(nearest_rank(1.0, 5), 4);
        assert_eq!(nearest_rank(0.0, 5), 0);
        assert_eq!(nearest_rank(f64::NAN, 5), 2);
        assert_eq!(nearest_rank(0.5, 0), 0);
    }

    #[test]
    fn drawn_rank_is_uniform() {
        // Over many keys, each of n ranks is drawn about equally often: a
        // chi-square test at a 1e-6 false-alarm rate; a rank rule that
        // favours rank 0 (a negative control) fails it.
        let mut rng = ChaCha20Rng::seed_from_u64(45);
        for n in [2u64, 3, 7, 8] {
            let draws = 40_000usize;
            let counts = histogram(draws, || drawn_rank(rng.next_u64(), n) as i128);
            // The control: rank 0 twice as likely as each other rank.
            let biased = histogram(draws, || {
                let b = rng.next_u64() % (n + 1);
                b.saturating_sub(1) as i128
            });
            let uniform = |r: i128| {
                if (0..n as i128).contains(&r) {
                    1.0 / n as f64
                } else {
                    0.0
                }
            };
            assert!(
                chi_square(&counts, uniform, 0, n as i128 - 1, 1e-6).passes(),
                "n = {n}"
            );
            assert!(
                !chi_square(&biased, uniform, 0, n as i128 - 1, 1e-6).passes(),
                "control, n = {n}"
            );
        }
    }

    #[test]
    fn siphash_reference_vector() {
        // SipHash-2-4 of the 8 bytes 00..07 under the key 00..0f (the
        // reference implementation's vectors: 8-byte message).
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        assert_eq!(
            choice_key(key, &[0x0706_0504_0302_0100]),
            0x93f5_f579_9a93_2462
        );
        assert_eq!(choice_key(key, &[]), 0x726f_db47_dd0e_0e31);
    }

    fn sum_of(values: &[f64]) -> f64 {
        let mut s = ExactSum::default();
        values.iter().for_each(|&v| s.add(v));
        s.value()
    }

    #[test]
    fn exact_sum_cancels_and_keeps_what_doubles_lose() {
        assert_eq!(sum_of(&[1e300, 5.0, -1e300]), 5.0);
        assert_eq!(sum_of(&[1e16, 1.0, 1.0, -1e16]), 2.0);
        assert_eq!(sum_of(&[0.1, 0.2]), 0.30000000000000004);
        assert_eq!(sum_of(&[]), 0.0);
        assert_eq!(sum_of(&[-0.0]), 0.0);
        assert_eq!(
            sum_of(&[f64::MIN_POSITIVE / 4.0, f64::MIN_POSITIVE / 4.0]),
            f64::MIN_POSITIVE / 2.0
        );
        assert_eq!(sum_of(&[5e-324, 5e-324, 5e-324]), 1.5e-323);
        assert_eq!(sum_of(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(sum_of(&[-f64::MAX, -f64::MAX, f64::MAX]), -f64::MAX);
        assert_eq!(sum_of(&[f64::INFINITY, 1.0]), f64::INFINITY);
        assert_eq!(sum_of(&[f64::NEG_INFINITY, 1.0]), f64::NEG_INFINITY);
        assert!(sum_of(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert!(sum_of(&[f64::NAN, 1.0]).is_nan());
        assert_eq!(sum_of(&[-3.5, 1.25]), -2.25);
        assert_eq!(
            sum_of(&[(1u64 << 53) as f64, 1.0, 1.0]),
            ((1u64 << 53) + 2) as f64
        );
    }

    #[test]
    fn exact_sum_is_the_same_in_any_order() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for _ in 0..200 {
            let n = 2 + (rng.next_u32() % 40) as usize;
            let mut values: Vec<f64> = (0..n)
                .map(|_| {
                    let mantissa = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    let exponent = (rng.next_u32() % 200) as i32 - 100;
                    let sign = if rng.next_u32() % 2 == 0 { 1.0 } else { -1.0 };
                    sign * mantissa * 2f64.powi(exponent)
                })
                .collect();
            let first = sum_of(&values);
            for _ in 0..5 {
                for i in (1..values.len()).rev() {
                    values.swap(i, (rng.next_u32() as usize) % (i + 1));
                }
                assert_eq!(sum_of(&values).to_bits(), first.to_bits());
            }
            // And it is the sum to within a unit in the last place of a
            // double sum's error bound.
            let naive: f64 = values.iter().sum();
            let bound = values.iter().map(|v| v.abs()).sum::<f64>() * n as f64 * f64::EPSILON;
            assert!(
                (first - naive).abs() <= bound + first.abs() * f64::EPSILON,
                "{first} {naive}"
            );
        }
    }

    #[test]
    fn integer_sum_saturates_only_at_the_end() {
        let mut s = IntegerSum::default();
        for x in [i64::MAX, i64::MAX, i64::MIN, i64::MIN, 5] {
            s.add(x);
        }
        assert_eq!(s.value(), 3);
        s.add(i64::MAX);
        s.add(i64::MAX);
        assert_eq!(s.value(), i64::MAX);
    }

    /// The groups a person with `groups` groups keeps: the k with the
    /// smallest keys under `key`.
    fn kept(key: [u64; 2], person: u64, groups: &[u64], k: usize) -> Vec<u64> {
        let mut keyed: Vec<(i64, u64)> = groups
            .iter()
            .map(|&g| (choice_key(key, &[person, g]) as i64, g))
            .collect();
        keyed.sort();
        keyed.into_iter().take(k).map(|(_, g)| g).collect()
    }

    /// Each of a person's 10 groups is kept (k = 3) by 3/10 of the persons:
    /// chi-square over 20 000 persons; and two persons' choices are
    /// independent: the 10 × 10 table of their first kept groups.
    fn choice_is_uniform(choose: impl Fn(u64, &[u64]) -> Vec<u64>) -> (bool, bool) {
        let groups: Vec<u64> = (100..110).collect();
        let persons = 20_000u64;
        let mut kept_counts = vec![0u64; groups.len()];
        let mut pairs = vec![0u64; groups.len() * groups.len()];
        for p in 0..persons {
            let mine = choose(2 * p, &groups);
            for g in &mine {
                kept_counts[(g - 100) as usize] += 1;
            }
            let other = choose(2 * p + 1, &groups);
            // Each person's smallest kept group, as a pair.
            let a = mine.iter().min().copied().unwrap_or(100) - 100;
            let b = other.iter().min().copied().unwrap_or(100) - 100;
            pairs[(a * 10 + b) as usize] += 1;
        }
        let table = |counts: &[u64]| {
            counts
                .iter()
                .enumerate()
                .map(|(i, &c)| (i as i128, c))
                .collect::<HashMap<_, _>>()
        };
        let single = chi_square(&table(&kept_counts), |_| 0.1, 0, 9, 1e-6);
        // Independence: the pair table against the product of its margins.
        let mut margin_a = [0f64; 10];
        let mut margin_b = [0f64; 10];
        for a in 0..10 {
            for b in 0..10 {
                margin_a[a] += pairs[a * 10 + b] as f64;
                margin_b[b] += pairs[a * 10 + b] as f64;
            }
        }
        let total = persons as f64;
        let expected: Vec<f64> = (0..100)
            .map(|i| margin_a[i / 10] / total * margin_b[i % 10] / total)
            .collect();
        let joint = chi_square(&table(&pairs), |i| expected[i as usize], 0, 99, 1e-6);
        (single.passes(), joint.passes())
    }

    #[test]
    fn choice_is_uniform_over_groups_and_independent_across_persons() {
        let key = [0x1234_5678, 0x9abc_def0];
        let (single, joint) = choice_is_uniform(|p, groups| kept(key, p, groups, 3));
        assert!(single && joint);
    }

    #[test]
    fn negative_controls_fail_the_choice_tests() {
        // Keeping the smallest group keys is not uniform over the groups.
        let (single, _) = choice_is_uniform(|_, groups| groups[..3].to_vec());
        assert!(!single);
        // A key that leaves out the person's last bit gives the two persons
        // of each pair the same (uniform) choice.
        let key = [0x1234_5678, 0x9abc_def0];
        let (single, joint) = choice_is_uniform(|p, groups| kept(key, p / 2, groups, 3));
        assert!(single && !joint);
    }
}
