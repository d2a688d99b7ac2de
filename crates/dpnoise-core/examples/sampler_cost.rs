//! Prints the cost of the exact samplers: nanoseconds and random words per draw.
//! `cargo run --release -p dpnoise-core --example sampler_cost`
use dpnoise_core::sampler::discrete_laplace;
use dpnoise_core::{
    BitPool, Choice, Delta, Entropy, Epsilon, Loss, Mechanism, Request, Sensitivity, Shape,
};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::time::Instant;

static WORDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
struct Counting<R>(R, u64);
impl<R: RngCore> RngCore for Counting<R> {
    fn next_u32(&mut self) -> u32 {
        self.1 += 1;
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        WORDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, d: &mut [u8]) {
        self.0.fill_bytes(d)
    }
}

/// What PostgreSQL's CHECK_FOR_INTERRUPTS costs when nothing is pending: a flag read.
static PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() {
    const N: u64 = 2_000_000;
    dpnoise_core::interrupt::set_check(|| {
        if PENDING.load(std::sync::atomic::Ordering::Relaxed) {
            panic!("cancelled");
        }
    });
    let mut raw = ChaCha20Rng::seed_from_u64(1);
    let t0 = Instant::now();
    let mut acc = 0u64;
    for _ in 0..N {
        acc ^= raw.next_u64();
    }
    println!(
        "chacha20 word: {:.1} ns ({acc})",
        t0.elapsed().as_nanos() as f64 / N as f64
    );
    for (label, s, t) in [
        ("eps=1, 2^40 steps", 1u128, 1u128 << 40),
        ("eps=0.1, 2^36 steps", 3602879701896397u128, 1u128 << 91),
    ] {
        let mut pool = BitPool::new(Counting(ChaCha20Rng::seed_from_u64(2), 0));
        let t0 = Instant::now();
        let mut acc = 0i128;
        for _ in 0..N {
            acc ^= discrete_laplace(&mut pool, s, t);
        }
        let ns = t0.elapsed().as_nanos() as f64 / N as f64;
        let _ = pool.bit();
        let words = WORDS.swap(0, std::sync::atomic::Ordering::Relaxed) as f64 / N as f64;
        println!("discrete Laplace {label}: {ns:.1} ns/draw, {words:.2} words/draw ({acc})");
    }
    // The per-row releases bench/run.sh times in SQL, here without SQL:
    // dp_laplace(x, 1, 1), dp_staircase(x, 1, 1), dp_noise(x, 1, 1, 1e-6, 'gaussian').
    for (label, mechanism, delta) in [
        ("laplace", Mechanism::Laplace, 0.0),
        ("staircase", Mechanism::Staircase, 0.0),
        ("gaussian", Mechanism::Gaussian, 1e-6),
    ] {
        let plan = Request {
            choice: Choice::Fixed(mechanism),
            epsilon: Epsilon::new(1.0).unwrap(),
            delta: Delta::new(delta).unwrap(),
            loss: Loss::Variance,
            shape: Shape::Value(Sensitivity::new(1.0).unwrap()),
            groups: 1,
        }
        .plan()
        .unwrap();
        let mut pool = BitPool::new(Counting(ChaCha20Rng::seed_from_u64(3), 0));
        let t0 = Instant::now();
        let mut acc = 0f64;
        for i in 0..N {
            acc += plan.release(&mut pool, i as i128);
        }
        let ns = t0.elapsed().as_nanos() as f64 / N as f64;
        let words = WORDS.swap(0, std::sync::atomic::Ordering::Relaxed) as f64 / N as f64;
        println!("{label} release, eps=1, sensitivity 1: {ns:.1} ns/draw, {words:.2} words/draw ({acc:.0})");
    }
}
