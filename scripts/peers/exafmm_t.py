"""exafmm-t (kernel-independent FMM, C++) on points we write and can read
back: our driver (scripts/peers/exafmm_t_driver.cpp, built by
scripts/peers/exafmm_t.sh) runs exafmm-t's Laplace and modified Helmholtz
FMM on them; the error is measured here against an f64 numpy direct sum.

Usage: python3 scripts/peers/exafmm_t.py --driver BIN [--n N]
       [--cases laplace:5:300,yukawa:5:64] [--k 20] [--targets separate|sources]
       [--points exafmm|numpy] [--seed S] [--samples 1000] [--repeat 3]
       [--threads 2] [--wait-idle S [--retries 3]] [--outdir DIR]
       [--ours FMM_BENCH [--ours-cases coulomb:laplace:6:0.6:64,...]]
(run through scripts/peers/exafmm_t.sh, which builds exafmm-t and the driver).

With --ours, our fmm_bench (target/release/examples/fmm_bench) runs on the
same points right after exafmm-t, f64, with --threads worker threads
(RAYON_NUM_THREADS), and its outputs are checked against the same sampled
f64 direct sums: one line per --ours-cases entry
kernel:far_field:p:theta:ncrit[:rank_tol] (kernel coulomb or yukawa,
lambda = --k; far_field laplace, ki or ppm; ncrit 0 for the far field's
default; rank_tol the compressed M2L's, fmm_bench --rank-tol). Our time is
the median of --repeat evaluations after an untimed first one, whose time
is printed too as "cold": the compressed M2L computes its operators there
and keeps them, as exafmm-t's later runs load theirs from its file.
Needs numpy (python3 -m pip install numpy).

Points (--points exafmm, the default): exactly those of exafmm-t's own tests
(include/dataset.h, distribution "cube"): glibc drand48 reproduced here,
sources srand48(0): 3N coordinates uniform in [0, 1)^3 then N charges
drand48() - 0.5; targets srand48(5): 3N coordinates. --points numpy draws
the same distribution from numpy's generator with --seed instead.
Targets: --targets separate (default; N sources and N other targets, as in
exafmm-t's tests and the reference figures) or --targets sources (the
targets are the sources, self term excluded: what our fmm_bench computes).

Written for our side (DIR = --outdir, default $PEERS_BUILD/points):
  DIR/exafmm_cube_n{N}_sources.npy  float64 (N, 4): x, y, z, q  (our
        `--input` layout for the Coulomb kernel and for a Yukawa kernel
        whose one source field is q)
  DIR/exafmm_cube_n{N}_targets.npy  float64 (N, 3): x, y, z
  DIR/exafmm_t_{kernel}_p{p}_c{ncrit}_{targets}_n{N}.npy  exafmm-t's
        outputs (N, 4): potential, gradient x, y, z, in the targets' order.

Normalisations. exafmm-t: Laplace phi = sum_j q_j / (4 pi r), modified
Helmholtz phi = sum_j q_j exp(-k r) / (4 pi r); its "gradient" is
d phi / d x_target (so E = -gradient). Ours: Coulomb phi = sum q / r,
e = -grad phi; Yukawa (lambda) phi = sum q exp(-lambda r) / r. So
ours_phi = 4 pi exafmm_phi, ours_e = -4 pi exafmm_gradient, lambda = k.

Prints one line per case: kernel, N, p, ncrit, seconds (median total of
--repeat runs, and the least of them: tree + lists + precompute + M2L
setup + evaluation, file I/O excluded; the first run computes the
operators, the others load them from exafmm-t's cache file), the
evaluation alone, the cold first run, and the
potential and gradient relative L2 errors on --samples random targets,
and how many cores other processes kept busy during the run (from
/proc/stat: the timings mean something only when that is about 0).
"""
import argparse, json, os, re, sys, time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_load import run_timed  # noqa: E402

A48, C48, M48 = 0x5DEECE66D, 0xB, (1 << 48) - 1


def drand48(seed, count):
    """glibc srand48(seed) then `count` drand48() values, bit for bit
    (x_{n+1} = (a x_n + c) mod 2^48, value x / 2^48)."""
    x = ((seed & 0xFFFFFFFF) << 16) | 0x330E
    block = 4096
    first = np.empty(min(block, count), dtype=np.uint64)
    for i in range(len(first)):
        x = (A48 * x + C48) & M48
        first[i] = x
    out = np.empty(count, dtype=np.uint64)
    out[: len(first)] = first
    # jump ahead by `block` steps: x_{n+B} = A_B x_n + C_B (mod 2^48); uint64
    # products wrap mod 2^64, which 2^48 divides.
    ab, cb = 1, 0
    for _ in range(block):
        ab, cb = (A48 * ab) & M48, (A48 * cb + C48) & M48
    ab, cb, mask = np.uint64(ab), np.uint64(cb), np.uint64(M48)
    pos = len(first)
    prev = first
    while pos < count:
        nxt = (prev * ab + cb) & mask
        take = min(block, count - pos)
        out[pos : pos + take] = nxt[:take]
        prev = nxt
        pos += take
    return out.astype(np.float64) * 2.0**-48



def exafmm_points(n):
    s = drand48(0, 4 * n)
    sources = np.column_stack([s[: 3 * n].reshape(n, 3), s[3 * n :] - 0.5])
    targets = drand48(5, 3 * n).reshape(n, 3)
    return sources, targets


def numpy_points(n, seed):
    rng = np.random.default_rng(seed)
    sources = np.column_stack([rng.random((n, 3)), rng.random(n) - 0.5])
    targets = rng.random((n, 3))
    return sources, targets


def direct(kernel, k, src, tgt, chunk=8):
    """f64 direct sum in exafmm-t's normalisation: potential and gradient
    (d / d x_target) at the points `tgt`, terms with r = 0 left out."""
    x, q = src[:, :3], src[:, 3]
    pot = np.empty(len(tgt))
    grad = np.empty((len(tgt), 3))
    for a in range(0, len(tgt), chunk):
        t = tgt[a : a + chunk]
        dx = t[:, 0:1] - x[None, :, 0]
        dy = t[:, 1:2] - x[None, :, 1]
        dz = t[:, 2:3] - x[None, :, 2]
        r2 = dx * dx + dy * dy + dz * dz
        zero = r2 == 0
        r2[zero] = 1.0
        inv = 1.0 / np.sqrt(r2)
        inv[zero] = 0.0
        if kernel == "laplace":
            g = inv * q  # q / r
            pot[a : a + chunk] = g.sum(axis=1)
            g *= inv * inv  # q / r^3; d/dx_t (1/r) = -d / r^3
        else:
            r = r2 * inv
            g = np.exp(-k * r) * inv * q  # q exp(-kr) / r
            pot[a : a + chunk] = g.sum(axis=1)
            g *= (1.0 + k * r) * inv * inv  # d/dx_t = -(1 + kr) e^{-kr} / r^3 d
        grad[a : a + chunk, 0] = -(g * dx).sum(axis=1)
        grad[a : a + chunk, 1] = -(g * dy).sum(axis=1)
        grad[a : a + chunk, 2] = -(g * dz).sum(axis=1)
    return pot / (4 * np.pi), grad / (4 * np.pi)


def timed(cmd, env, a):
    """Runs `cmd` (`machine_load.run_timed`); returns its stdout and the
    cores other processes used meanwhile."""
    res, others = run_timed(cmd, env, a.wait_idle, a.retries)
    return res.stdout, others


def errors(pot, grad, ref_pot, ref_grad):
    """Relative L2 errors of the potential and the gradient, and the best
    scale of the potential (1 when the normalisations agree)."""
    scale = float(np.dot(pot, ref_pot) / np.dot(ref_pot, ref_pot))
    epot = float(np.linalg.norm(pot - ref_pot) / np.linalg.norm(ref_pot))
    egrad = float(np.linalg.norm(grad - ref_grad) / np.linalg.norm(ref_grad))
    return epot, egrad, scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--cases", default="laplace:5:300,yukawa:5:64",
                    help="comma-separated kernel:p:ncrit (kernel laplace or yukawa)")
    ap.add_argument("--k", type=float, default=20.0, help="modified Helmholtz wavenumber")
    ap.add_argument("--targets", choices=["separate", "sources"], default="separate")
    ap.add_argument("--points", choices=["exafmm", "numpy"], default="exafmm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wait-idle", type=float, default=0.0,
                    help="before each timed run, wait up to this many seconds for other processes to go idle")
    ap.add_argument("--retries", type=int, default=3,
                    help="with --wait-idle: runs again (at most this often) when other processes were busy")
    ap.add_argument("--outdir", default=os.path.join(os.environ.get("PEERS_BUILD", "/work/peers-build"), "points"))
    ap.add_argument("--ours", help="our fmm_bench binary: run it on the same points")
    ap.add_argument("--ours-cases", default="coulomb:laplace:9:0.58:64,yukawa:ki:5:0.8:0:1e-4",
                    help="comma-separated kernel:far_field:p:theta:ncrit[:rank_tol] for --ours")
    a = ap.parse_args()

    os.makedirs(a.outdir, exist_ok=True)
    tag = "exafmm_cube" if a.points == "exafmm" else f"numpy_cube_s{a.seed}"
    spath = os.path.join(a.outdir, f"{tag}_n{a.n}_sources.npy")
    tpath = os.path.join(a.outdir, f"{tag}_n{a.n}_targets.npy")
    t0 = time.perf_counter()
    sources, targets = exafmm_points(a.n) if a.points == "exafmm" else numpy_points(a.n, a.seed)
    np.save(spath, sources)
    np.save(tpath, targets)
    print(f"points: {spath} (x, y, z, q), {tpath} (x, y, z) [{time.perf_counter() - t0:.1f} s]", flush=True)
    tgt = targets if a.targets == "separate" else sources[:, :3]
    rng = np.random.default_rng(12345)
    sample = np.sort(rng.choice(len(tgt), size=min(a.samples, len(tgt)), replace=False))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS=str(a.threads))
    refs = {}
    lines = []
    for case in filter(None, a.cases.split(",")):
        kernel, p, ncrit = case.split(":")
        out = os.path.join(a.outdir, f"exafmm_t_{kernel}_p{p}_c{ncrit}_{a.targets}_n{a.n}.npy")
        cmd = [a.driver, "--kernel", kernel, "--k", str(a.k), "--p", p, "--ncrit", ncrit,
               "--threads", str(a.threads), "--sources", spath, "--out", out,
               "--repeat", str(a.repeat), "--cache", a.outdir]
        if a.targets == "separate":
            cmd += ["--targets", tpath]
        print("$ OPENBLAS_NUM_THREADS=1 " + " ".join(cmd), flush=True)
        stdout, others = timed(cmd, env, a)
        info = json.loads(stdout.strip().splitlines()[-1])
        print(json.dumps(info), flush=True)
        fmm = np.load(out)
        key = (kernel, a.k if kernel == "yukawa" else 0.0)
        if key not in refs:
            t0 = time.perf_counter()
            refs[key] = direct(kernel, a.k, sources, tgt[sample])
            print(f"direct sum on {len(sample)} targets: {time.perf_counter() - t0:.1f} s", flush=True)
        ref_pot, ref_grad = refs[key]
        epot, egrad, scale = errors(fmm[sample, 0], fmm[sample, 1:4], ref_pot, ref_grad)
        name = "laplace" if kernel == "laplace" else f"mod-helmholtz k={a.k:g}"
        lines.append(
            f"exafmm-t {name:22s} N {a.n:>8d}  targets {a.targets:8s} p {p:>2s}  ncrit {ncrit:>4s}  "
            f"depth {info['depth']}  {info['median']['total']:7.3f} s  (least {info['min']['total']:.3f} s, "
            f"eval {info['median']['evaluation']:.3f} s, cold run {info['cold']['total']:.3f} s, "
            f"{a.threads} threads)  "
            f"pot err {epot:.2e}  grad err {egrad:.2e}  (kernel scale {scale:.6f}; "
            f"other processes used {others:.2f} cores meanwhile)")
        print(lines[-1], flush=True)

    if a.ours:
        env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
        for case in filter(None, a.ours_cases.split(",")):
            kernel, far, p, theta, ncrit, *rank = case.split(":")
            out = os.path.join(a.outdir, f"ours_{kernel}_{far}_p{p}_t{theta}_c{ncrit}_{a.targets}_n{a.n}.npy")
            cmd = [a.ours, "--kernel", kernel, "--precision", "f64", "--far-field", far,
                   "--p", p, "--theta", theta, "--ncrit", ncrit, "--input", spath,
                   "--output", out, "--repeat", str(a.repeat), "--samples", "0"]
            if kernel == "yukawa":
                cmd += ["--params", f"{a.k:g}"]
            if rank:
                cmd += ["--rank-tol", rank[0]]
            if a.targets == "separate":
                cmd += ["--targets", tpath]
            print(f"$ RAYON_NUM_THREADS={a.threads} " + " ".join(cmd), flush=True)
            stdout, others = timed(cmd, env, a)
            print(stdout, end="", flush=True)
            secs = float(re.search(r"time per evaluation\s+([0-9.]+) s", stdout).group(1))
            cold = float(re.search(r"first evaluation\s+([0-9.]+) s", stdout).group(1))
            key = ("laplace", 0.0) if kernel == "coulomb" else ("yukawa", a.k)
            if key not in refs:
                refs[key] = direct(key[0], a.k, sources, tgt[sample])
            ref_pot, ref_grad = refs[key]
            ours = np.load(out)
            # ours: phi = 4 pi phi_exafmm, e = -4 pi grad_exafmm
            pot, grad = ours[sample, 0] / (4 * np.pi), -ours[sample, 1:4] / (4 * np.pi)
            epot, egrad, scale = errors(pot, grad, ref_pot, ref_grad)
            lines.append(
                f"ours     {kernel + ' ' + far:22s} N {a.n:>8d}  targets {a.targets:8s} p {p:>2s}  ncrit {ncrit:>4s}  "
                f"theta {theta}{'  rank tol ' + rank[0] if rank else ''}  {secs:7.3f} s  (median of {a.repeat}, "
                f"cold run {cold:.3f} s, trees included, {a.threads} threads)  "
                f"pot err {epot:.2e}  grad err {egrad:.2e}  (kernel scale {scale:.6f}; "
                f"other processes used {others:.2f} cores meanwhile)")
            print(lines[-1], flush=True)
    print("\n".join(["", "summary:"] + lines))


if __name__ == "__main__":
    sys.exit(main())
