"""FMM3D's Stokes FMM (fmm3dpy.stfmm3d) and ours (fmm_bench, --ours) on
the same points, saved as .npy: singular Stokeslet, velocity at the
sources themselves (self term excluded; no separate targets, as our
fmm_bench evaluates at its sources), N points uniform in the unit cube
[0, 1)^3 with force vectors uniform in [-0.5, 0.5)^3 (numpy
default_rng(--seed)).

Usage: python3 scripts/peers/fmm3d_stokes.py [--n 100000,1000000]
       [--eps 1e-4,1e-6] [--samples 1000] [--repeat 1] [--seed 1]
       [--wait-idle S [--retries 3]] [--outdir DIR]
       [--ours FMM_BENCH [--ours-cases 4:0.8:1e-4,6:0.55:1e-7] [--ours-repeat 3]
        [--ours-ncrit 0] [--threads 2]]
(run through scripts/peers/fmm3d_stokes.sh, which sets OMP_NUM_THREADS=2
and builds our fmm_bench). --eps "" runs only our side.
Needs numpy and fmm3dpy: python3 -m pip install numpy fmm3dpy

With --ours, our fmm_bench (target/release/examples/fmm_bench) runs on the
same points file, kernel stokeslet-singular (FMM3D's normalisation, checked
here: the fitted scale), f64, the kernel-independent far field (--far-field
ki), velocity at the sources with the self term excluded (no --targets), with
--threads worker threads (RAYON_NUM_THREADS), one run per --ours-cases
entry p:theta[:rank_tol] (Chebyshev degree, acceptance criterion, the
compressed M2L's rank tolerance, fmm_bench --rank-tol; default 10^-(p+2));
default 4:0.8:1e-4,6:0.55:1e-7, our cheapest cases at FMM3D's accuracy for
eps 1e-3 and 1e-4 at N = 10^6 (docs/peers.md, 2026-11-24); leaves of
--ours-ncrit points (0: ki's default, 200). Its velocity
(--output) is checked on the same sampled sources against the same direct
sum. Our time is the median of --ours-repeat evaluations after an untimed
first one, printed too as "cold": the compressed M2L computes its operators
in the first and keeps them; FMM3D's one call computes everything each time
(trees included on both sides, file I/O excluded on ours).

FMM3D's normalisation (FMM3D src/Stokes/stfmm3d.f, header comment of the
current master, commit 38c0655; viscosity mu = 1): with r = x - y (target
minus source),
    u_i(x) = sum_m G_ij(x, y_m) f_j^(m),
    G_ij(x, y) = (delta_ij / r + r_i r_j / r^3) / (8 pi),
the physical Stokeslet of unit viscosity. (Older FMM3D versions documented
G_ij = r_i r_j / (2 r^3) + delta_ij / (2 r) "without the 1/4pi scaling",
the same kernel times 4 pi. fmm3dpy 2.1.0 from PyPI computes the 1/(8 pi)
one: the scale fitted below against the 1/(8 pi) direct sum is 1.000000,
against the 1/2 one 0.0795775 = 1/(4 pi).) The direct sum below uses
1/(8 pi) and the script prints the fitted scale, so a change shows.

Written (DIR = --outdir, default $PEERS_BUILD/points, PEERS_BUILD default
/work/peers-build):
  DIR/stokes_cube_n{N}_s{seed}.npy  float64 (N, 6): x, y, z, f_x, f_y, f_z
        (our `--input` layout for a kernel with one vec3 source field f)
  DIR/fmm3d_stokes_n{N}_eps{eps}.npy  FMM3D's velocity (N, 3), in FMM3D's
        normalisation, in the points' order.
  DIR/ours_stokes_n{N}_p{p}_t{theta}[_r{rank_tol}].npy  our velocity (N, 3).

Prints one line per (N, eps): seconds of the stfmm3d call (median of
--repeat; the whole call: tree, precomputation, evaluation; the numpy
arrays are made before), CPU time / wall time (the threads it really used:
the PyPI wheel of fmm3dpy 2.1.0 is built without OpenMP and runs on one
core whatever OMP_NUM_THREADS says), and the relative L2 error of the
velocity on --samples random sources against an f64 numpy direct sum,
and how many cores other processes kept busy during the call (from
/proc/stat: the timings mean something only when that is about 0); the
same per --ours case; then for each N a table of both codes and, for each
FMM3D eps, the ratio FMM3D seconds / our seconds against our cheapest case
(by median) whose error is at most FMM3D's ("matched accuracy"), for our
median and for our cold first evaluation.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "2")

import argparse, re, sys, time

import numpy as np
import fmm3dpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_load import busy_seconds, run_timed, wait_idle  # noqa: E402



def direct(x, f, idx, chunk=8):
    """Stokeslet velocity at the points x[idx] in FMM3D's normalisation,
    self term left out: u = sum_m (f_m / r + (f_m . r) r / r^3) / (8 pi),
    r = x - x_m."""
    out = np.empty((len(idx), 3))
    c = 1.0 / (8.0 * np.pi)
    for a in range(0, len(idx), chunk):
        t = x[idx[a : a + chunk]]
        dx = t[:, 0:1] - x[None, :, 0]
        dy = t[:, 1:2] - x[None, :, 1]
        dz = t[:, 2:3] - x[None, :, 2]
        r2 = dx * dx + dy * dy + dz * dz
        zero = r2 == 0
        r2[zero] = 1.0
        inv = 1.0 / np.sqrt(r2)
        inv[zero] = 0.0
        fr = (dx * f[None, :, 0] + dy * f[None, :, 1] + dz * f[None, :, 2]) * inv**3
        out[a : a + chunk, 0] = c * ((f[None, :, 0] * inv).sum(axis=1) + (fr * dx).sum(axis=1))
        out[a : a + chunk, 1] = c * ((f[None, :, 1] * inv).sum(axis=1) + (fr * dy).sum(axis=1))
        out[a : a + chunk, 2] = c * ((f[None, :, 2] * inv).sum(axis=1) + (fr * dz).sum(axis=1))
    return out


def run_ours(cmd, env, a):
    """Runs fmm_bench (`machine_load.run_timed`); returns its stdout, its
    stderr (its log lines, e.g. that M2L fell back to the kernel) and the
    cores other processes used meanwhile."""
    res, others = run_timed(cmd, env, a.wait_idle, a.retries)
    return res.stdout, res.stderr, others


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="100000,1000000", help="comma-separated sizes")
    ap.add_argument("--eps", default="1e-4,1e-6", help="comma-separated FMM3D tolerances")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wait-idle", type=float, default=0.0,
                    help="before each timed run, wait up to this many seconds for other processes to go idle")
    ap.add_argument("--retries", type=int, default=3,
                    help="with --wait-idle: runs again (at most this often) when other processes were busy")
    ap.add_argument("--outdir", default=os.path.join(os.environ.get("PEERS_BUILD", "/work/peers-build"), "points"))
    ap.add_argument("--ours", help="our fmm_bench binary: run it on the same points")
    ap.add_argument("--ours-cases", default="4:0.8:1e-4,6:0.55:1e-7",
                    help="comma-separated p:theta[:rank_tol] of our ki FMM for --ours")
    ap.add_argument("--ours-repeat", type=int, default=3,
                    help="our timed evaluations (fmm_bench --repeat), after an untimed first one")
    ap.add_argument("--ours-ncrit", default="0", help="our leaf size (0: ki's default)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")),
                    help="our worker threads (RAYON_NUM_THREADS; default OMP_NUM_THREADS)")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    version = getattr(fmm3dpy, "__version__", "")
    try:
        from importlib.metadata import version as dist_version
        version = version or dist_version("fmm3dpy")
    except Exception:
        pass
    print(f"fmm3dpy {version} ({os.path.dirname(fmm3dpy.__file__)}), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, {os.cpu_count()} cores", flush=True)

    lines, tables = [], []
    for n in [int(float(s)) for s in a.n.split(",")]:
        rows = []  # (code, setting, seconds, cold or None, err, others)
        rng = np.random.default_rng(a.seed)
        x = rng.random((n, 3))
        f = rng.random((n, 3)) - 0.5
        path = os.path.join(a.outdir, f"stokes_cube_n{n}_s{a.seed}.npy")
        np.save(path, np.column_stack([x, f]))
        print(f"points: {path} (x, y, z, f_x, f_y, f_z)", flush=True)
        sample = np.sort(np.random.default_rng(12345).choice(n, size=min(a.samples, n), replace=False))
        t0 = time.perf_counter()
        ref = direct(x, f, sample)
        print(f"direct sum on {len(sample)} sources: {time.perf_counter() - t0:.1f} s", flush=True)
        src = np.ascontiguousarray(x.T)
        stoklet = np.ascontiguousarray(f.T)
        for eps in [float(s) for s in a.eps.split(",") if s]:
            walls, cpus, others = [], [], []
            retries = a.retries if a.wait_idle > 0 else 0
            while len(walls) < max(a.repeat, 1):
                if a.wait_idle > 0:
                    print(f"machine load before the run: {wait_idle(a.wait_idle):.2f} cores", flush=True)
                b0, c0, t0 = busy_seconds(), time.process_time(), time.perf_counter()
                res = fmm3dpy.stfmm3d(eps=eps, sources=src, stoklet=stoklet, ifppreg=1)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                busy = max(0.0, (busy_seconds() - b0 - cpu) / wall)
                if busy >= 0.1 and retries > 0:
                    retries -= 1
                    print(f"{wall:.3f} s, but other processes used {busy:.2f} cores meanwhile: again", flush=True)
                    continue
                walls.append(wall)
                cpus.append(cpu)
                others.append(busy)
            k = int(np.argsort(walls)[len(walls) // 2])
            u = np.asarray(res.pot).reshape(3, n).T  # (n, 3); fmm3dpy may add an nd axis
            np.save(os.path.join(a.outdir, f"fmm3d_stokes_n{n}_eps{eps:g}.npy"), u)
            us = u[sample]
            scale = float(np.sum(us * ref) / np.sum(ref * ref))
            err = float(np.linalg.norm(us - ref) / np.linalg.norm(ref))
            lines.append(
                f"FMM3D stfmm3d Stokeslet  N {n:>8d}  eps {eps:.0e}  {walls[k]:8.3f} s "
                f"(median of {len(walls)}, cpu/wall {cpus[k] / walls[k]:.2f})  "
                f"velocity rel L2 err {err:.2e}  (kernel scale {scale:.6f}; "
                f"other processes used {others[k]:.2f} cores meanwhile)")
            print(lines[-1], flush=True)
            rows.append(("FMM3D", f"eps {eps:g}", walls[k], None, err, others[k]))

        if a.ours:
            env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
            for case in filter(None, a.ours_cases.split(",")):
                p, theta, *rank = case.split(":")
                out = os.path.join(a.outdir, f"ours_stokes_n{n}_p{p}_t{theta}{'_r' + rank[0] if rank else ''}.npy")
                cmd = [a.ours, "--kernel", "stokeslet-singular", "--precision", "f64", "--far-field", "ki",
                       "--p", p, "--theta", theta, "--ncrit", a.ours_ncrit, "--input", path,
                       "--output", out, "--repeat", str(a.ours_repeat), "--samples", "0"]
                if rank:
                    cmd += ["--rank-tol", rank[0]]
                print(f"$ RAYON_NUM_THREADS={a.threads} " + " ".join(cmd), flush=True)
                stdout, stderr, others = run_ours(cmd, env, a)
                print(stderr + stdout, end="", flush=True)
                secs = float(re.search(r"time per evaluation\s+([0-9.]+) s", stdout).group(1))
                cold = float(re.search(r"first evaluation\s+([0-9.]+) s", stdout).group(1))
                us = np.load(out)[sample, :3]
                scale = float(np.sum(us * ref) / np.sum(ref * ref))
                err = float(np.linalg.norm(us - ref) / np.linalg.norm(ref))
                setting = f"ki p {p}, theta {theta}, rank tol {rank[0] if rank else 'default'}"
                lines.append(
                    f"ours  ki Stokeslet        N {n:>8d}  p {p} theta {theta}"
                    f"{'  rank tol ' + rank[0] if rank else ''}  {secs:8.3f} s (median of {a.ours_repeat}, "
                    f"cold run {cold:.3f} s, {a.threads} threads)  velocity rel L2 err {err:.2e}  "
                    f"(kernel scale {scale:.6f}; other processes used {others:.2f} cores meanwhile)")
                print(lines[-1], flush=True)
                rows.append(("ours", setting, secs, cold, err, others))
        tables.append((n, rows))

    print("\n".join(["", "summary:"] + lines))
    for n, rows in tables:
        print(f"\nN = {n}, velocity at the sources, f64; seconds: FMM3D one stfmm3d call "
              f"(median of {a.repeat})"
              + (f", ours median of {a.ours_repeat} (cold first evaluation), {a.threads} threads"
                 if a.ours else ""))
        print("| code | setting | seconds (cold) | velocity rel L2 err | others (cores) |")
        print("|---|---|---|---|---|")
        for code, setting, secs, cold, err, others in rows:
            t = f"{secs:.3f}" + (f" ({cold:.3f})" if cold is not None else "")
            print(f"| {code} | {setting} | {t} | {err:.2e} | {others:.2f} |")
        ours = [r for r in rows if r[0] == "ours"]
        for code, setting, secs, _, err, _ in rows:
            if code != "FMM3D" or not ours:
                continue
            ok = [r for r in ours if r[4] <= err]
            if not ok:
                print(f"FMM3D {setting} ({err:.2e}): no case of ours as accurate")
                continue
            m = min(ok, key=lambda r: r[2])
            print(f"FMM3D {setting} ({secs:.3f} s, {err:.2e}) / ours {m[1]} ({m[2]:.3f} s, {m[4]:.2e}): "
                  f"{secs / m[2]:.2f}x; against our cold evaluation ({m[3]:.3f} s): {secs / m[3]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
