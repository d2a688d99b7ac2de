//! The only way samplers see randomness: whole 64-bit words and single bits.

use rand_core::RngCore;

/// A source of independent, uniformly distributed bits.
pub trait Entropy {
    fn next_u64(&mut self) -> u64;
    /// One fair bit, taken from a pool so a coin flip costs 1/64 of a word.
    fn bit(&mut self) -> bool;
    /// `k` fair bits (1 ≤ k ≤ 64) as the low bits of a word, from the pool.
    fn bits(&mut self, k: u32) -> u64;
}

/// Wraps a cryptographic generator and keeps a pool of unused bits.
pub struct BitPool<R> {
    rng: R,
    pool: u64,
    left: u32,
}

impl<R: RngCore> BitPool<R> {
    pub fn new(rng: R) -> Self {
        BitPool {
            rng,
            pool: 0,
            left: 0,
        }
    }
}

impl<R: RngCore> Entropy for BitPool<R> {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    #[inline]
    fn bit(&mut self) -> bool {
        if self.left == 0 {
            self.pool = self.rng.next_u64();
            self.left = 64;
        }
        let b = self.pool & 1 == 1;
        self.pool >>= 1;
        self.left -= 1;
        b
    }

    #[inline]
    fn bits(&mut self, k: u32) -> u64 {
        debug_assert!((1..=64).contains(&k));
        if k == 64 {
            return self.rng.next_u64();
        }
        let mask = (1u64 << k) - 1;
        if self.left >= k {
            let v = self.pool & mask;
            self.pool = self.pool.checked_shr(k).unwrap_or(0);
            self.left -= k;
            return v;
        }
        // Take what the pool has, refill, and take the rest.
        let have = self.left;
        let low = self.pool;
        self.pool = self.rng.next_u64();
        let need = k - have;
        let high = self.pool & ((1u64 << need) - 1);
        self.pool = self.pool.checked_shr(need).unwrap_or(0);
        self.left = 64 - need;
        (low | (high << have)) & mask
    }
}
