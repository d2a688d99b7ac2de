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

    /// From the pool while it holds `n` bits; otherwise what is left of it,
    /// topped up from a new word whose remaining bits become the pool. Each
    /// bit is handed out once, so the bits taken stay independent.
    #[inline(always)]
    fn bits(&mut self, n: u32) -> u64 {
        debug_assert!(n <= 64);
        if n == 0 {
            return 0;
        }
        if n == 64 {
            return self.rng.next_u64();
        }
        if self.left >= n {
            let b = self.pool & ((1u64 << n) - 1);
            self.pool >>= n;
            self.left -= n;
            return b;
        }
        // The pool's unused bits are its low `left` bits (the rest are 0).
        let need = n - self.left;
        let word = self.rng.next_u64();
        let b = self.pool | (word & ((1u64 << need) - 1)) << self.left;
        self.pool = word >> need;
        self.left = 64 - need;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words 1, 2, 3, … in order.
    struct Counter(u64);
    impl RngCore for Counter {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0 += 1;
            self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }
        fn fill_bytes(&mut self, _: &mut [u8]) {
            unreachable!()
        }
    }

    #[test]
    fn the_pool_hands_out_every_bit_once_in_order() {
        let words: Vec<u64> = {
            let mut c = Counter(0);
            (0..4).map(|_| c.next_u64()).collect()
        };
        let stream: u128 = words[0] as u128 | (words[1] as u128) << 64;
        let mut pool = BitPool::new(Counter(0));
        // 40 + 40 + 30 bits: the second draw spans the first two words.
        assert_eq!(pool.bits(40) as u128, stream & ((1 << 40) - 1));
        assert_eq!(pool.bits(40) as u128, stream >> 40 & ((1 << 40) - 1));
        assert_eq!(pool.bits(30) as u128, stream >> 80 & ((1 << 30) - 1));
        assert_eq!(pool.bit(), stream >> 110 & 1 == 1);
        // A whole word is a new word; the pool keeps what it had.
        assert_eq!(pool.bits(64), words[2]);
        assert_eq!(pool.bits(17) as u128, stream >> 111 & ((1 << 17) - 1));
        assert_eq!(pool.bits(0), 0);
    }
}
