//! The only way samplers see randomness: whole 64-bit words and single bits.

use rand_core::RngCore;

/// A source of independent, uniformly distributed bits.
pub trait Entropy {
    fn next_u64(&mut self) -> u64;
    /// One fair bit, taken from a pool so a coin flip costs 1/64 of a word.
    fn bit(&mut self) -> bool;
    /// `n` ≤ 64 fair bits, as the low bits of a word (0 for n = 0).
    #[inline]
    fn bits(&mut self, n: u32) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() >> (64 - n)
        }
    }
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
    #[inline(always)]
    fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    #[inline(always)]
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

    /// From the pool while it holds `n` bits; otherwise what is left is
    /// dropped (unread, so the bits taken stay independent) for a new word.
    #[inline(always)]
    fn bits(&mut self, n: u32) -> u64 {
        debug_assert!(n <= 64);
        if n == 0 {
            return 0;
        }
        if n == 64 {
            return self.rng.next_u64();
        }
        if self.left < n {
            self.pool = self.rng.next_u64();
            self.left = 64;
        }
        let b = self.pool & ((1u64 << n) - 1);
        self.pool >>= n;
        self.left -= n;
        b
    }
}
