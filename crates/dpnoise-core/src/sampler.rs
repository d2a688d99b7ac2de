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
///
/// For t a multiple of 256 (every per-row release's lattice is), X is
/// drawn as ⌊t·E⌋ for an exponential E instead: with m = t/256, X = m·J + L
/// where J = ⌊256·E⌋ (`exp_neg::geometric_fine`, one uniform) and L, on
/// [0, m) with P(L = l) ∝ e^(−l/t), is independent of J (the fraction of
/// 256·E has density ∝ e^(−g/256) whatever its whole part). L is a uniform
/// kept with probability e^(−L/t) ≥ e^(−1/256): one Bernoulli that almost
/// never rejects, where the uniform on [0, t) above is kept only 63 % of
/// the time.
pub fn geometric_exp<E: Entropy>(rng: &mut E, s: u128, t: u128) -> u128 {
    debug_assert!(s > 0 && t > 0);
    let x = match t.trailing_zeros() {
        // t = 1 (the staircase's blocks at a whole ε): U = 0, X = V.
        0 if t == 1 => crate::exp_neg::geometric(rng),
        // t = 2^n, the usual lattice: the fraction's draw is n − 8 bits.
        n @ 8..=110 if t.is_power_of_two() => exponential_floor_shift(rng, n),
        8.. => exponential_floor(rng, t),
        _ => cks_geometric(rng, t),
    };
    // 128-bit division is a slow library call; skip it when it is not
    // needed (the opaque value keeps the compiler from merging the arms).
    match (u64::try_from(x), u64::try_from(s)) {
        _ if s == 1 => x,
        (Ok(x), Ok(s)) => (x / s) as u128,
        _ => std::hint::black_box(x) / s,
    }
}

/// ⌊t·E⌋ for an exponential E and t a multiple of 256 (see `geometric_exp`).
#[inline(always)]
fn exponential_floor<E: Entropy>(rng: &mut E, t: u128) -> u128 {
    let m = t / 256;
    let j = crate::exp_neg::geometric_fine(rng);
    let l = first_kept(
        rng,
        |rng| uniform_below(rng, m),
        |rng, l| crate::exp_neg::bernoulli_near_one(rng, l, t),
    );
    // m < 2^64 and J < 2^64 (almost always): one 64-bit multiply.
    match (u64::try_from(m), u64::try_from(j)) {
        (Ok(m), Ok(j)) => (m as u128 * j as u128).checked_add(l),
        _ => m.checked_mul(j).and_then(|mj| mj.checked_add(l)),
    }
    .expect("geometric draw overflow")
}

/// `exponential_floor` for t = 2^n, 8 ≤ n ≤ 110 (t < 2^110 always): m = 2^(n − 8), so L is
/// n − 8 fair bits and X = J·2^(n − 8) + L.
#[inline(always)]
fn exponential_floor_shift<E: Entropy>(rng: &mut E, n: u32) -> u128 {
    let k = n - 8;
    let j = crate::exp_neg::geometric_fine(rng);
    let l = first_kept(
        rng,
        |rng| {
            if k <= 64 {
                rng.bits(k) as u128
            } else {
                (rng.bits(k - 64) as u128) << 64 | rng.next_u64() as u128
            }
        },
        |rng, l| crate::exp_neg::bernoulli_near_one_shift(rng, l, n),
    );
    // J·2^k + L, L < 2^k: a shift and an or, unless J·2^k overflows.
    assert!(j.leading_zeros() >= k, "geometric draw overflow");
    j << k | l
}

/// The first of `draw`'s values that `keep` keeps. The loop ends after a
/// few rounds but for odds like e^(−64): it checks for a cancel every 64
/// rounds (a check per round cost a tenth of a per-row draw).
#[inline(always)]
pub(crate) fn first_kept<E: Entropy, T: Copy>(
    rng: &mut E,
    mut draw: impl FnMut(&mut E) -> T,
    mut keep: impl FnMut(&mut E, T) -> bool,
) -> T {
    let mut tries: u32 = 0;
    loop {
        let x = draw(rng);
        if keep(rng, x) {
            return x;
        }
        tries = tries.wrapping_add(1);
        if tries % 64 == 0 {
            crate::interrupt::check();
        }
    }
}

/// X with P(X = x) ∝ e^(−x/t): CKS Algorithm 2 (see `geometric_exp`).
#[inline(always)]
fn cks_geometric<E: Entropy>(rng: &mut E, t: u128) -> u128 {
    let u = first_kept(
        rng,
        |rng| uniform_below(rng, t),
        |rng, u| crate::exp_neg::bernoulli(rng, u, t),
    );
    // The number of Bernoulli(e^(−1)) successes before a failure.
    let v = crate::exp_neg::geometric(rng);
    t.checked_mul(v)
        .and_then(|tv| tv.checked_add(u))
        .expect("geometric draw overflow")
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
