//! The law of a sum of k independent copies of one lattice law: its k-fold
//! self-convolution, by the fast Fourier transform (one forward transform,
//! each frequency raised to the k-th power, one inverse), so that the
//! joint Gaussian calibration (`approximate::joint_discrete_gaussian_delta`)
//! reads the sum's exact law instead of a binned one.
//!
//! Float error: a transform of n = 2^m points moves each value by at most
//! about m·n·2^-52 times the largest magnitude (here ≤ 1, a probability
//! law), and the k-th power multiplies the relative error of a frequency by
//! k. `ERROR_PER_VALUE` bounds what one value of the result can be off by;
//! callers add it for every value they use, on the side against their claim.

/// What one value of `self_convolution`'s result may be off by, per point
/// of the transform and per copy (a generous multiple of the transform's
/// rounding: tested against the direct sum).
pub const ERROR_PER_VALUE: f64 = 1e-15;

/// The law of the sum of `k` copies of `pmf` (values at 0, 1, …: a law on
/// consecutive integers), at 0 … k·(len − 1). Values below 0 (rounding) are
/// returned as 0; each may be off by `error_bound(len, k)`.
pub fn self_convolution(pmf: &[f64], k: usize) -> Vec<f64> {
    let k = k.max(1);
    if pmf.is_empty() {
        return Vec::new();
    }
    let len = k * (pmf.len() - 1) + 1;
    let mut out = circular_self_convolution(pmf, k, len.next_power_of_two());
    out.truncate(len);
    out
}

/// The same, folded on a circle of `n` points (a power of two, at least
/// `pmf.len()`): value j is the sum of the law at j, j + n, j + 2n, … So a
/// window of n consecutive sums reads their law, raised by the mass of the
/// sums outside the window that fold onto it (never lowered).
pub fn circular_self_convolution(pmf: &[f64], k: usize, n: usize) -> Vec<f64> {
    assert!(n.is_power_of_two() && n >= pmf.len());
    let k = k.max(1);
    let mut re = vec![0.0f64; n];
    let mut im = vec![0.0f64; n];
    re[..pmf.len()].copy_from_slice(pmf);
    if k == 1 {
        return re;
    }
    transform(&mut re, &mut im, false);
    for (r, i) in re.iter_mut().zip(im.iter_mut()) {
        let (modulus, angle) = (r.hypot(*i), i.atan2(*r));
        let power = modulus.powi(k as i32);
        let turned = angle * k as f64;
        (*r, *i) = (power * turned.cos(), power * turned.sin());
    }
    transform(&mut re, &mut im, true);
    re.iter_mut().for_each(|x| *x = (*x / n as f64).max(0.0));
    re
}

/// The most one value of a self-convolution of `k` copies on `n` points can
/// be off by.
pub fn error_bound(n: usize, k: usize) -> f64 {
    ERROR_PER_VALUE * (n.max(2) as f64).log2() * k.max(1) as f64
}

/// In-place radix-2 Fourier transform of (re, im), of a power-of-two
/// length; `inverse` conjugates the twiddles (the caller divides by n).
fn transform(re: &mut [f64], im: &mut [f64], inverse: bool) {
    let n = re.len();
    // Bit-reversal permutation.
    let mut j = 0usize;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    // Every twiddle e^(±2πi·m/n), each computed directly (not by products).
    let angle = sign * 2.0 * std::f64::consts::PI / n as f64;
    let twiddles: Vec<(f64, f64)> = (0..n / 2).map(|m| (angle * m as f64).sin_cos()).collect();
    let mut size = 2;
    while size <= n {
        crate::interrupt::check();
        let half = size / 2;
        let stride = n / size;
        for start in (0..n).step_by(size) {
            for m in 0..half {
                let (s, c) = twiddles[m * stride];
                let (a, b) = (start + m, start + m + half);
                let (tr, ti) = (re[b] * c - im[b] * s, re[b] * s + im[b] * c);
                re[b] = re[a] - tr;
                im[b] = im[a] - ti;
                re[a] += tr;
                im[a] += ti;
            }
        }
        size *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(pmf: &[f64], k: usize) -> Vec<f64> {
        let mut sum = pmf.to_vec();
        for _ in 1..k {
            let mut next = vec![0.0; sum.len() + pmf.len() - 1];
            for (i, a) in sum.iter().enumerate() {
                for (j, b) in pmf.iter().enumerate() {
                    next[i + j] += a * b;
                }
            }
            sum = next;
        }
        sum
    }

    #[test]
    fn matches_the_direct_sum_within_its_bound() {
        for (width, k) in [(7usize, 2usize), (61, 9), (201, 20), (33, 50)] {
            let sigma = width as f64 / 8.0;
            let mid = (width / 2) as f64;
            let mut pmf: Vec<f64> = (0..width)
                .map(|i| (-(i as f64 - mid).powi(2) / (2.0 * sigma * sigma)).exp())
                .collect();
            let total: f64 = pmf.iter().sum();
            pmf.iter_mut().for_each(|p| *p /= total);
            let fast = self_convolution(&pmf, k);
            let slow = direct(&pmf, k);
            assert_eq!(fast.len(), slow.len());
            let bound = error_bound((k * width).next_power_of_two(), k);
            let worst = fast
                .iter()
                .zip(&slow)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                worst <= bound,
                "width {width}, k {k}: off by {worst:e} > {bound:e}"
            );
            assert!((fast.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn a_circle_folds_the_sums_outside_it_onto_the_window() {
        let pmf = [0.2, 0.3, 0.5];
        let full = self_convolution(&pmf, 3); // 7 values
        let folded = circular_self_convolution(&pmf, 3, 4);
        for j in 0..4 {
            let expected: f64 = full.iter().skip(j).step_by(4).sum();
            assert!((folded[j] - expected).abs() < 1e-15, "{j}");
        }
    }

    #[test]
    fn one_copy_is_the_law_itself() {
        assert_eq!(
            self_convolution(&[0.25, 0.5, 0.25], 1),
            vec![0.25, 0.5, 0.25]
        );
        let two = self_convolution(&[0.5, 0.5], 2);
        assert!((two[0] - 0.25).abs() < 1e-15 && (two[1] - 0.5).abs() < 1e-15);
    }
}
