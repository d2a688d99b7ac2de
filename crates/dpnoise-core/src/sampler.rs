//! Exact samplers from uniform bits, in integer arithmetic only.
//!
//! The geometric and the discrete Laplace follow Canonne, Kamath & Steinke,
//! "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
//! Algorithm 2. Its Bernoulli(e^(−x)) trials, and the count of
//! Bernoulli(e^(−1)) successes, compare a uniform with e^(−x) exactly
//! (`exp_neg`) instead of running Algorithm 1's chains. Every other
//! probability here is an exact rational, so the sampled law is exactly the
//! one stated.

use crate::entropy::Entropy;

/// Uniform on {0, …, n − 1}, exactly. n must be ≥ 1.
#[inline(always)]
pub fn uniform_below<E: Entropy>(rng: &mut E, n: u128) -> u128 {
    debug_assert!(n > 0);
    if n <= 1u128 << 64 {
        return uniform_below_u64(rng, n) as u128;
    }
    // Mask to the next power of two and reject: under 2 tries on average.
    let mask = u128::MAX >> (n - 1).leading_zeros();
    loop {
        let x = (((rng.next_u64() as u128) << 64) | rng.next_u64() as u128) & mask;
        if x < n {
            return x;
        }
        crate::interrupt::check();
    }
}

/// Uniform on {0, …, n − 1} for 1 ≤ n ≤ 2^64, by Lemire's multiply-and-reject,
/// which is exact and usually costs one word; a power of two costs its bits
/// only, and n ≤ 2^32 half a word (from the entropy's pool).
#[inline(always)]
fn uniform_below_u64<E: Entropy>(rng: &mut E, n: u128) -> u64 {
    if n == 1u128 << 64 {
        return rng.next_u64();
    }
    let n = n as u64;
    if n.is_power_of_two() {
        return rng.bits(n.trailing_zeros());
    }
    if n <= 1 << 32 {
        return uniform_below_u32(rng, n as u32) as u64;
    }
    // Lemire's nearly divisionless method: the division runs only when the
    // low half falls in the first n values, which is rare.
    let mut m = (rng.next_u64() as u128) * (n as u128);
    if (m as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u64) < threshold {
            m = (rng.next_u64() as u128) * (n as u128);
        }
    }
    (m >> 64) as u64
}

/// Uniform on {0, …, n − 1} for 1 ≤ n < 2^32: Lemire's method on 32 fair
/// bits, exact as the 64-bit one is.
#[inline(always)]
fn uniform_below_u32<E: Entropy>(rng: &mut E, n: u32) -> u32 {
    let mut m = rng.bits(32) * n as u64;
    if (m as u32) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u32) < threshold {
            m = rng.bits(32) * n as u64;
        }
    }
    (m >> 32) as u32
}

/// Bernoulli(p / q), exactly, for 0 ≤ p ≤ q, q ≥ 1.
#[inline]
pub fn bernoulli_ratio<E: Entropy>(rng: &mut E, p: u128, q: u128) -> bool {
    p >= q || (p > 0 && uniform_below(rng, q) < p)
}

/// Bernoulli(e^(−p/q)) for any rational p/q ≥ 0, exactly: a uniform
/// compared with e^(−p/q) (`exp_neg`), usually decided by its first word.
#[inline]
pub fn bernoulli_exp_neg<E: Entropy>(rng: &mut E, p: u128, q: u128) -> bool {
    crate::exp_neg::bernoulli(rng, p, q)
}

/// Geometric: P(Y = y) = (1 − e^(−s/t)) · e^(−y·s/t) for y ≥ 0, s, t ≥ 1.
///
/// X = U + t·V with U uniform on [0, t) kept with probability e^(−U/t) and V
/// the number of Bernoulli(e^(−1)) successes is geometric with ratio
/// e^(−1/t); Y = ⌊X / s⌋ then has ratio e^(−s/t) (CKS Algorithm 2).
pub fn geometric_exp<E: Entropy>(rng: &mut E, s: u128, t: u128) -> u128 {
    debug_assert!(s > 0 && t > 0);
    // The loop ends after a few rounds but for odds like e^(−64): it checks
    // for a cancel every 64 rounds (a check per round cost a tenth of a
    // per-row draw).
    let mut tries: u32 = 0;
    let u = loop {
        let u = uniform_below(rng, t);
        if crate::exp_neg::bernoulli(rng, u, t) {
            break u;
        }
        tries = tries.wrapping_add(1);
        if tries % 64 == 0 {
            crate::interrupt::check();
        }
    };
    // The number of Bernoulli(e^(−1)) successes before a failure.
    let v = crate::exp_neg::geometric(rng);
    let x = t
        .checked_mul(v)
        .and_then(|tv| tv.checked_add(u))
        .expect("geometric draw overflow");
    // 128-bit division is a slow library call; skip it when it is not
    // needed (the opaque value keeps the compiler from merging the arms).
    match (u64::try_from(x), u64::try_from(s)) {
        _ if s == 1 => x,
        (Ok(x), Ok(s)) => (x / s) as u128,
        _ => std::hint::black_box(x) / s,
    }
}

/// Discrete Laplace: P(Z = z) ∝ e^(−|z|·s/t) on all of Z (CKS Algorithm 2).
pub fn discrete_laplace<E: Entropy>(rng: &mut E, s: u128, t: u128) -> i128 {
    loop {
        let y = geometric_exp(rng, s, t);
        let negative = rng.bit();
        // Zero would be reached from both signs: keep it from one only.
        if negative && y == 0 {
            crate::interrupt::check();
            continue;
        }
        let y = i128::try_from(y).expect("discrete Laplace draw overflow");
        return if negative { -y } else { y };
    }
}
