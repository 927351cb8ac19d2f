"""Our CPU FMM against FMM3D (fmm3dpy) on the same points, one after the
other in the same run: gravity-like Laplace potential and gradient (no
softening), N points uniform in the unit cube, equal positive masses.

Usage: python3 scripts/fmm3d_compare.py [--n N] [--p P] [--theta T]
       [--eps EPS] [--precision f32|f64] [--repeat R]
(run through scripts/fmm3d_compare.sh, which builds fmm_bench first).
Prints time and relative L2 error (potential and gradient together, on
256 sampled targets against an f64 direct sum) of both, and the ratio.
"""
import argparse, json, os, subprocess, sys, tempfile, time

import numpy as np
import fmm3dpy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--p", type=int, default=6)
    ap.add_argument("--theta", type=float, default=0.5)
    ap.add_argument("--ncrit", type=int, default=64)
    ap.add_argument("--tol", type=float, default=None,
                    help="our tolerance (fmm_bench --tol) instead of --p and --theta")
    ap.add_argument("--eps", type=float, default=1e-4, help="FMM3D's tolerance")
    ap.add_argument("--precision", default="f32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--bin", default="target/release/examples/fmm_bench")
    a = ap.parse_args()

    rng = np.random.default_rng(1)
    x = rng.random((a.n, 3))
    m = np.full(a.n, 1.0 / a.n)
    sample = rng.choice(a.n, size=min(a.samples, a.n), replace=False)

    # Reference: potential sum m / r and its gradient, self excluded.
    ref_pot = np.empty(len(sample))
    ref_grad = np.empty((len(sample), 3))
    for s, i in enumerate(sample):
        d = x[i] - x
        r2 = np.einsum("ij,ij->i", d, d)
        r2[i] = np.inf
        inv = 1.0 / np.sqrt(r2)
        ref_pot[s] = np.dot(m, inv)
        ref_grad[s] = -(m * inv**3) @ d

    def rel(pot, grad):
        num = np.sum((pot - ref_pot) ** 2) + np.sum((grad - ref_grad) ** 2)
        den = np.sum(ref_pot**2) + np.sum(ref_grad**2)
        return float(np.sqrt(num / den))

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "points.npy")
        np.save(path, np.column_stack([x, m]))
        out = os.path.join(tmp, "ours.json")
        cmd = [a.bin, "--method", "fmm", "--kernel", "gravity", "--input", path,
               "--params", "0", "--ncrit", str(a.ncrit), "--precision", a.precision,
               "--repeat", str(a.repeat), "--samples", str(a.samples), "--json", out]
        cmd += ["--tol", str(a.tol)] if a.tol else ["--p", str(a.p), "--theta", str(a.theta)]
        print("ours:", " ".join(cmd[1:]), flush=True)
        print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout, flush=True)
        ours = json.load(open(out))

    src = np.ascontiguousarray(x.T)
    times = []
    for _ in range(max(a.repeat, 1)):
        t0 = time.perf_counter()
        res = fmm3dpy.lfmm3d(eps=a.eps, sources=src, charges=m, pg=2)
        times.append(time.perf_counter() - t0)
    t3d = sorted(times)[len(times) // 2]
    pot = res.pot[sample]
    grad = res.grad[:, sample].T
    # fmm3dpy's Laplace kernel is 1 / r; check rather than assume.
    scale = float(np.dot(pot, ref_pot) / np.dot(ref_pot, ref_pot))
    e3d = rel(pot / scale, grad / scale)
    print(f"fmm3dpy {fmm3dpy.__version__ if hasattr(fmm3dpy, '__version__') else ''} lfmm3d eps {a.eps}: "
          f"{t3d:.3f} s (median of {len(times)}), relative L2 error {e3d:.3e} (kernel scale {scale:.6f})")
    print(f"ours  p {ours['p']} theta {ours['theta']} {a.precision}: {ours['seconds']:.3f} s, "
          f"relative L2 error {ours['relative_l2_error']:.3e}")
    print(f"N = {a.n}, {os.cpu_count()} cores: FMM3D time / ours = {t3d / ours['seconds']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
