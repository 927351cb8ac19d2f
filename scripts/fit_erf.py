"""The coefficients of the vectorised erf of fmm-core/src/simd.rs, fitted
here (needs mpmath: python3 -m pip install mpmath; about a minute).

erf is split at |x| = 1:
  |x| < 1:       erf(x) = x + x * A(x^2), A a polynomial fitted to
                 erf(x) / x - 1 on x^2 in [0, 1], error relative to erf;
  1 <= |x| < c:  erf(x) = 1 - exp(-x^2) * P(s) / Q(s), s = |x| - 1, P / Q
                 fitted to g(x) = erfc(x) exp(x^2); c = 6 (f64), 4 (f32),
                 past which erfc(x) is below half an ulp of 1.
The rational part is weighted by exp(-x^2): what matters is the absolute
error of erf, and erf is close to 1 there (W. J. Cody, "Rational Chebyshev
approximations for the error function", Math. Comp. 23 (1969) 631-637,
uses the same two forms; the coefficients here are fitted anew, on other
intervals and degrees). Near-minimax by Lawson's iteratively reweighted
least squares on Chebyshev points, in 50 digits; the rational one by
Loeb's linearisation (P - g Q with Q from the previous pass). Printed as
Rust constants (shortest round-trip decimal of the f64 / f32 rounding),
with the fitted error (before that rounding) in units of 2^-53 (f64) or
2^-24 (f32): relative to erf for |x| < 1, absolute (the ulp of erf in
[0.5, 1)) past it.
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 50


def lstsq(rows, b, w):
    """Weighted least squares through the normal equations (50 digits)."""
    n = len(rows[0])
    m = mp.matrix(n, n)
    r = mp.matrix(n, 1)
    for row, bi, wi in zip(rows, b, w):
        for j in range(n):
            t = wi * row[j]
            r[j] += t * bi
            for k in range(j, n):
                m[j, k] += t * row[k]
    for j in range(n):
        for k in range(j):
            m[j, k] = m[k, j]
    return list(mp.lu_solve(m, r))


def lawson(rows, b, wt, iters=60):
    """Coefficients c with max_i wt_i |rows_i . c - b_i| near its minimum."""
    u = [mp.mpf(1) / len(rows)] * len(rows)
    best = None
    for _ in range(iters):
        c = lstsq(rows, b, [ui * wi**2 for ui, wi in zip(u, wt)])
        e = [abs(mp.fsum(a * cj for a, cj in zip(row, c)) - bi) * wi
             for row, bi, wi in zip(rows, b, wt)]
        if best is None or max(e) < best[0]:
            best = (max(e), c)
        s = mp.fsum(ui * ei for ui, ei in zip(u, e))
        u = [ui * ei / s for ui, ei in zip(u, e)]
    return best


def cheb(lo, hi, n):
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    return [(lo + hi) / 2 - (hi - lo) / 2 * mp.cos(mp.pi * k / (n - 1)) for k in range(n)]


def small(deg, unit):
    """A(z) ~ erf(sqrt z) / sqrt z - 1 on [0, 1], relative to erf."""
    def s(z):
        if z == 0:
            return 2 / mp.sqrt(mp.pi) - 1
        x = mp.sqrt(z)
        return mp.erf(x) / x - 1
    zs = cheb(0, 1, 160)
    e, c = lawson([[z**j for j in range(deg + 1)] for z in zs], [s(z) for z in zs],
                  [1 / (1 + s(z)) for z in zs])
    return e / unit, c


def large(hi, m, n, unit, floor):
    """P / Q (degrees m, n; Q(0) = 1) ~ erfc(x) exp(x^2) in s = x - 1 on
    [1, hi], weight exp(-x^2) + floor."""
    xs = cheb(1, hi, 160)
    ss = [x - 1 for x in xs]
    gs = [mp.erfc(x) * mp.exp(x * x) for x in xs]
    wt = [mp.exp(-x * x) + floor for x in xs]
    qprev = [mp.mpf(1)] * len(xs)
    for _ in range(4):
        rows = [[s**j for j in range(m + 1)] + [-g * s**j for j in range(1, n + 1)]
                for s, g in zip(ss, gs)]
        _, c = lawson(rows, gs, [w / abs(q) for w, q in zip(wt, qprev)])
        p, q = c[: m + 1], [mp.mpf(1)] + c[m + 1:]
        qprev = [mp.polyval(q[::-1], s) for s in ss]
        assert min(qprev) > 0
    e = max(abs(mp.polyval(p[::-1], s) / qv - g) * w
            for s, qv, g, w in zip(ss, qprev, gs, wt))
    return e / unit, p, q


def rust(name, ty, cs):
    conv = float if ty == "f64" else (lambda v: float(np.float32(float(v))))
    vals = ", ".join(repr(np.float64(conv(v))) if ty == "f64" else repr(np.float32(conv(v))) for v in cs)
    vals = vals.replace("np.float64(", "").replace("np.float32(", "").replace(")", "")
    print(f"const {name}: [{ty}; {len(cs)}] = [{vals}];")


for ty, deg, hi, m, n, unit, floor in [
    ("f64", 11, 6, 5, 6, mp.mpf(2) ** -53, mp.mpf(10) ** -14),
    ("f32", 6, 4, 2, 3, mp.mpf(2) ** -24, mp.mpf(10) ** -7),
]:
    ea, a = small(deg, unit)
    eb, p, q = large(hi, m, n, unit, floor)
    print(f"// {ty}: |x| < 1 fitted to {mp.nstr(ea, 2)}, [1, {hi}] to {mp.nstr(eb, 2)} (units of 2^-{53 if ty == 'f64' else 24})")
    suf = ty.upper()
    rust(f"ERF_SMALL_{suf}", ty, a)
    rust(f"ERF_P_{suf}", ty, p)
    rust(f"ERF_Q_{suf}", ty, q[1:])
