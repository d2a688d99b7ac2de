"""Reference σ for the analytic Gaussian mechanism (Balle & Wang 2018), at
60 significant digits with mpmath: the smallest σ with
Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ, Δ = 1. The Rust tests compare
dpnoise's float calibration with these figures (1e-9 relative)."""
import mpmath as mp

mp.mp.dps = 60


def delta(sigma, eps):
    phi = lambda x: mp.ncdf(x)
    return phi(1 / (2 * sigma) - eps * sigma) - mp.e**eps * phi(-1 / (2 * sigma) - eps * sigma)


def sigma(eps, target):
    lo, hi = mp.mpf("1e-6"), mp.mpf(1)
    while delta(hi, eps) > target:
        hi *= 2
    for _ in range(400):
        mid = (lo + hi) / 2
        if delta(mid, eps) > target:
            lo = mid
        else:
            hi = mid
    return hi


for eps, d in [("1", "1e-5"), ("0.5", "1e-6"), ("0.1", "1e-3")]:
    print(eps, d, mp.nstr(sigma(mp.mpf(eps), mp.mpf(d)), 20))
