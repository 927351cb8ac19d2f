//! Remeshing by interpolation: the particles' strengths spread onto the
//! points of a lattice with Monaghan's M4' kernel (1985), the new
//! particles the lattice points that receive any. The vortex methods'
//! usual remedy for the particles' distortion (Koumoutsakos 1997; van
//! Rees, Leonard and Pullin 2011 remesh every step): M4' is third order
//! and interpolating (a particle on a lattice point stays there
//! unchanged), and keeps the strengths' moments through the second: the
//! total circulation, the linear and the angular impulse.
//!
//! Unlike [`crate::reinit`] (an RBF solve through the front door, for the
//! vorticity between the points), remeshing is one local pass, O(N), and
//! wraps in a periodic box. The lattice points are `origin + h (i + 1/2)`
//! (a periodic box's cell centres for `origin` its corner and `h` its
//! side over `n`); the new particles' cores are the old ones' spread the
//! same way (so equal cores stay equal), their volumes `h^3`.

use fmm_core::PeriodicBox;
use rayon::prelude::*;

use crate::error::VortexError;
use crate::particles::VortexParticles;

/// M4' (Monaghan 1985): 1 at 0, 0 at the other integers, its integer
/// shifts summing to 1 and reproducing quadratics.
pub fn m4p(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - 2.5 * x * x + 1.5 * x * x * x
    } else if x < 2.0 {
        0.5 * (2.0 - x) * (2.0 - x) * (1.0 - x)
    } else {
        0.0
    }
}

/// Where the new particles go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lattice {
    /// The `n^3` cell centres of a periodic box (positions wrapped).
    Periodic { pbox: PeriodicBox, n: usize },
    /// The points `origin + h (i + 1/2)` in open space, as many as the
    /// particles reach.
    Open { origin: [f64; 3], h: f64 },
}

impl Lattice {
    /// The spacing, the corner the points are offset from (`origin + h (i
    /// + 1/2)`), and a periodic lattice's points a side; checked.
    pub(crate) fn frame(&self) -> Result<(f64, [f64; 3], Option<i64>), VortexError> {
        match *self {
            Lattice::Periodic { pbox, n } => {
                if n < 4 || pbox.periodic_axes() != 3 {
                    return Err(VortexError::BadSetting {
                        what: "the remeshing lattice's points a side",
                        value: n as f64,
                        why: "must be at least 4, in a box periodic along all three axes",
                    });
                }
                Ok((pbox.side / n as f64, pbox.origin, Some(n as i64)))
            }
            Lattice::Open { origin, h } => {
                if !(h.is_finite() && h > 0.0) {
                    return Err(VortexError::BadSetting {
                        what: "the remeshing lattice's spacing",
                        value: h,
                        why: "must be finite and positive",
                    });
                }
                Ok((h, origin, None))
            }
        }
    }
}

/// A point's M4' stencil on the lattice of spacing `h` whose points are
/// `origin + h (i + 1/2)`: the first of its four indices along each axis
/// (not wrapped) and the weights of the four.
pub(crate) fn stencil(x: [f64; 3], origin: [f64; 3], h: f64) -> ([i64; 3], [[f64; 4]; 3]) {
    let base = stencil_base(x, origin, h);
    let mut w = [[0.0; 4]; 3];
    for a in 0..3 {
        let s = (x[a] - origin[a]) / h - 0.5;
        for (k, wk) in w[a].iter_mut().enumerate() {
            *wk = m4p(s - (base[a] + k as i64) as f64);
        }
    }
    (base, w)
}

/// The first of a point's four stencil indices along each axis
/// ([`stencil`] without the weights: what frames a part's box).
pub(crate) fn stencil_base(x: [f64; 3], origin: [f64; 3], h: f64) -> [i64; 3] {
    [0, 1, 2].map(|a| ((x[a] - origin[a]) / h - 0.5).floor() as i64 - 1)
}

/// The checks of a remeshing's `cull`.
pub(crate) fn check_cull(cull: f64) -> Result<(), VortexError> {
    if !(cull.is_finite() && (0.0..1.0).contains(&cull)) {
        return Err(VortexError::BadSetting {
            what: "the remeshing's cull",
            value: cull,
            why: "must be at least 0 and below 1",
        });
    }
    Ok(())
}

/// `p` remeshed onto `lattice`; lattice points whose strength is below
/// `cull` times the largest are left empty.
pub fn remesh(
    p: &VortexParticles,
    lattice: &Lattice,
    cull: f64,
) -> Result<VortexParticles, VortexError> {
    check_cull(cull)?;
    p.check()?;
    // The lattice: its spacing, its first point, its size, and whether it
    // wraps.
    let (h, origin, size, wrap) = match lattice.frame()? {
        (h, origin, Some(n)) => (h, origin, [n; 3], true),
        (h, origin, None) => {
            // Cover the particles and the stencil's two points each side.
            let mut lo = [i64::MAX; 3];
            let mut hi = [i64::MIN; 3];
            for x in &p.x {
                for a in 0..3 {
                    let c = ((x[a] - origin[a]) / h - 0.5).floor() as i64;
                    lo[a] = lo[a].min(c - 1);
                    hi[a] = hi[a].max(c + 2);
                }
            }
            if p.is_empty() {
                return Ok(p.clone());
            }
            let first = [0, 1, 2].map(|a| origin[a] + lo[a] as f64 * h);
            (h, first, [0, 1, 2].map(|a| hi[a] - lo[a] + 1), false)
        }
    };
    // Each particle's stencil: its first lattice index along each axis
    // (wrapped where the lattice is) and the M4' weights of its four
    // points there.
    let stencils: Vec<([i64; 3], [[f64; 4]; 3])> =
        p.x.par_iter()
            .map(|x| {
                let (mut base, w) = stencil(*x, origin, h);
                if wrap {
                    base = [0, 1, 2].map(|a| base[a].rem_euclid(size[a]));
                }
                (base, w)
            })
            .collect();
    // The particles by the layer (z) their stencil starts at: a layer of
    // the lattice receives from the four layers' particles below it and
    // its own, so the layers fill in parallel, each by one thread.
    let mut by_layer: Vec<Vec<usize>> = vec![Vec::new(); size[2] as usize];
    for (i, (base, _)) in stencils.iter().enumerate() {
        by_layer[base[2] as usize].push(i);
    }
    let layer = (size[0] * size[1]) as usize;
    // alpha (3), sum of weights x sigma^2, sum of weights.
    let mut acc = vec![[0.0f64; 5]; layer * size[2] as usize];
    acc.par_chunks_mut(layer).enumerate().for_each(|(iz, out)| {
        let iz = iz as i64;
        for kz in 0..4i64 {
            let from = if wrap {
                (iz - kz).rem_euclid(size[2])
            } else if iz - kz < 0 {
                continue;
            } else {
                iz - kz
            };
            for &i in &by_layer[from as usize] {
                let (base, w) = &stencils[i];
                let s2 = p.sigma[i] * p.sigma[i];
                // The stencil's points along x and y (the base wrapped
                // already: no division a point).
                let run = |a: usize| -> [i64; 4] {
                    [0, 1, 2, 3].map(|k| {
                        let mut j = base[a] + k;
                        while wrap && j >= size[a] {
                            j -= size[a];
                        }
                        j
                    })
                };
                let (xs, ys) = (run(0), run(1));
                for ky in 0..4 {
                    for kx in 0..4 {
                        let wt = w[0][kx] * w[1][ky] * w[2][kz as usize];
                        // A particle on a lattice point weighs 0 at
                        // the others but for rounding: no particles
                        // made of that.
                        if wt.abs() < 1e-12 {
                            continue;
                        }
                        let cell = (ys[ky] * size[0] + xs[kx]) as usize;
                        let c = &mut out[cell];
                        for (cd, ad) in c.iter_mut().zip(p.alpha[i]) {
                            *cd += wt * ad;
                        }
                        c[3] += wt * s2;
                        c[4] += wt;
                    }
                }
            }
        }
    });
    let largest = acc.par_iter().map(strength).reduce(|| 0.0, f64::max);
    let fallback = p.sigma.iter().sum::<f64>() / p.len().max(1) as f64;
    let q = lattice_particles(
        &acc,
        layer,
        |c| {
            let s = strength(c);
            s != 0.0 && s >= cull * largest
        },
        |cell| {
            let cell = cell as i64;
            [
                cell % size[0],
                (cell / size[0]) % size[1],
                cell / (size[0] * size[1]),
            ]
        },
        (origin, h, fallback),
    );
    q.check()?;
    Ok(q)
}

/// The strength of a lattice point's sums (alpha, the weights times
/// sigma^2, the weights).
pub(crate) fn strength(c: &[f64; 5]) -> f64 {
    (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt()
}

/// The particles of the lattice points whose sums `acc` (x fastest,
/// `layer` points a z layer) `keep` takes, in the points' order, `point`
/// a point's lattice index: each layer's made apart, in parallel (one
/// loop over the 16.7 million points of 256^3 took 0.9 s on 2 cores).
pub(crate) fn lattice_particles(
    acc: &[[f64; 5]],
    layer: usize,
    keep: impl Fn(&[f64; 5]) -> bool + Sync,
    point: impl Fn(usize) -> [i64; 3] + Sync,
    (origin, h, fallback): ([f64; 3], f64, f64),
) -> VortexParticles {
    let layer = layer.max(1);
    // How many each layer makes, then each layer's written in place.
    let counts: Vec<usize> = acc
        .par_chunks(layer)
        .map(|chunk| chunk.iter().filter(|c| keep(c)).count())
        .collect();
    let n = counts.iter().sum();
    let mut q = VortexParticles {
        x: vec![[0.0; 3]; n],
        alpha: vec![[0.0; 3]; n],
        sigma: vec![0.0; n],
        volume: vec![0.0; n],
    };
    let mut rest = (
        &mut q.x[..],
        &mut q.alpha[..],
        &mut q.sigma[..],
        &mut q.volume[..],
    );
    let mut slices = Vec::with_capacity(counts.len());
    for &c in &counts {
        let (x, xr) = std::mem::take(&mut rest.0).split_at_mut(c);
        let (a, ar) = std::mem::take(&mut rest.1).split_at_mut(c);
        let (s, sr) = std::mem::take(&mut rest.2).split_at_mut(c);
        let (v, vr) = std::mem::take(&mut rest.3).split_at_mut(c);
        slices.push((x, a, s, v));
        rest = (xr, ar, sr, vr);
    }
    acc.par_chunks(layer)
        .zip(slices)
        .enumerate()
        .for_each(|(z, (chunk, (x, a, s, v)))| {
            let mut j = 0;
            for (k, c) in chunk.iter().enumerate() {
                if keep(c) {
                    (x[j], a[j], s[j], v[j]) =
                        point_particle(origin, point(z * layer + k), h, c, fallback);
                    j += 1;
                }
            }
        });
    q
}

/// The particle of lattice point `g` (`origin + h (g + 1/2)`) from its
/// sums `c` (position, strength, core, volume): its core the weights'
/// mean of the cores spread there, or `fallback` where they sum to
/// little.
fn point_particle(
    origin: [f64; 3],
    g: [i64; 3],
    h: f64,
    c: &[f64; 5],
    fallback: f64,
) -> ([f64; 3], [f64; 3], f64, f64) {
    let x = [0, 1, 2].map(|a| origin[a] + (g[a] as f64 + 0.5) * h);
    // The weights can sum to little (or below 0: M4' is negative past
    // one spacing) at the edge of the particles' reach.
    let sigma = if c[4] > 0.25 {
        (c[3] / c[4]).max(0.0).sqrt()
    } else {
        fallback
    };
    (x, [c[0], c[1], c[2]], sigma, h * h * h)
}

/// What [`filter_lattice`] does to the vorticity of a periodic lattice,
/// mode by mode in Fourier space.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatticeFilter {
    /// Make it the curl of a periodic velocity: divergence-free, `w_k - k
    /// (k . w_k) / |k|^2`, and of zero mean. The classical stretching lets the particles' vorticity stray
    /// from divergence-free (Cottet and Koumoutsakos, Vortex Methods,
    /// 2000), which remeshing carries along; this takes it out (the
    /// Taylor-Green runs of docs/VORTEX.md: without it their energy grew
    /// after t = 3).
    pub project: bool,
    /// Diffuse it exactly over a viscosity times a time, `nu t`: each mode
    /// times `exp(-nu t |k|^2)`. Viscous splitting on the lattice (the
    /// remeshed vortex methods' way: van Rees et al. 2011 diffuse on
    /// their mesh), the cores kept as they are; where core spreading
    /// widens them without end, this keeps the resolution.
    pub diffuse: f64,
}

/// Applies `filter` to the strengths of particles that fill the `n^3`
/// cell centres of a periodic box (what [`remesh`] onto
/// [`Lattice::Periodic`] gives, in any order), the lattice's vorticity
/// taken to Fourier space and back once. Returns the relative size of what
/// the projection took out.
pub fn filter_lattice(
    p: &mut VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
    filter: LatticeFilter,
) -> Result<f64, VortexError> {
    use crate::spectral::HalfFft3;
    filter.check()?;
    if n == 0 {
        return Err(VortexError::BadSetting {
            what: "the lattice's points a side",
            value: 0.0,
            why: "must be at least 1",
        });
    }
    let (cell, at) = lattice_permutation(p, pbox, n)?;
    let fft = HalfFft3::new(n);
    let h = fft.h();
    let mut w = [0, 1, 2].map(|a| {
        let values: Vec<f64> = at.par_iter().map(|&i| p.alpha[i][a]).collect();
        fft.forward(&values)
    });
    let [wx, wy, wz] = &mut w;
    let (removed, total) = wx
        .par_iter_mut()
        .zip(wy.par_iter_mut())
        .zip(wz.par_iter_mut())
        .enumerate()
        .map(|(i, ((a, b), e))| {
            let j = [i % h, (i / h) % n, i / (h * n)];
            filter.apply_half(j, n, pbox.side, [a, b, e])
        })
        .reduce(|| (0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
    let scale = 1.0 / (n * n * n) as f64;
    let values = w.map(|mut m| fft.inverse(&mut m));
    p.alpha
        .par_iter_mut()
        .zip(cell.par_iter())
        .for_each(|(alpha, &c)| *alpha = [0, 1, 2].map(|a| values[a][c] * scale));
    Ok(LatticeFilter::took_out(removed, total))
}

impl LatticeFilter {
    /// The diffusion checked: finite and not negative.
    pub(crate) fn check(&self) -> Result<(), VortexError> {
        if self.diffuse.is_finite() && self.diffuse >= 0.0 {
            return Ok(());
        }
        Err(VortexError::BadSetting {
            what: "the lattice's diffusion (viscosity times time)",
            value: self.diffuse,
            why: "must be finite and at least 0",
        })
    }

    /// The filter on one mode `w` of the vorticity (wavenumber `k`):
    /// returns the squared size of what the projection took out and of the
    /// mode before.
    pub(crate) fn apply(
        &self,
        k: [f64; 3],
        w: [&mut rustfft::num_complex::Complex64; 3],
    ) -> (f64, f64) {
        let [a, b, e] = w;
        let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
        let total = a.norm_sqr() + b.norm_sqr() + e.norm_sqr();
        let mut removed = 0.0;
        if k2 == 0.0 {
            // The mean: zero for the curl of a periodic velocity, which
            // the stretching's rounding and truncation let drift (the
            // periodic sums refuse a net strength).
            if self.project {
                removed = total;
                (*a, *b, *e) = Default::default();
            }
            return (removed, total);
        }
        if self.project {
            let dot = (*a * k[0] + *b * k[1] + *e * k[2]) / k2;
            for (v, kd) in [&mut *a, &mut *b, &mut *e].into_iter().zip(k) {
                let g = dot * kd;
                removed += g.norm_sqr();
                *v -= g;
            }
        }
        if self.diffuse > 0.0 {
            let decay = (-self.diffuse * k2).exp();
            for v in [a, b, e] {
                *v *= decay;
            }
        }
        (removed, total)
    }

    /// [`Self::apply`] on mode `j` (indices `0..n` a side, `j[0] <= n /
    /// 2`) of a real lattice's half spectrum ([`crate::spectral::HalfFft3`]),
    /// so that the real transform back gives what `apply` on every mode of
    /// the full spectrum and the real part of its inverse give: a mode
    /// stands for itself and for its partner at the opposite indices (the
    /// conjugate), whose filter is applied too; where the partner's
    /// wavenumber is not the mode's negative (a Nyquist index along y or z
    /// of an even lattice: both are the same index, wavenumber `-n / 2`),
    /// the full spectrum's real part takes the mean of the two filters.
    /// The modes of `x` index 0 and `n / 2` have their partners in the
    /// half spectrum: once. Returns `apply`'s sums over the full
    /// spectrum's modes it stands for.
    pub(crate) fn apply_half(
        &self,
        j: [usize; 3],
        n: usize,
        side: f64,
        w: [&mut rustfft::num_complex::Complex64; 3],
    ) -> (f64, f64) {
        let k = wavenumber(j, n, side);
        if j[0] == 0 || 2 * j[0] == n {
            return self.apply(k, w);
        }
        let partner = wavenumber(j.map(|i| (n - i) % n), n, side);
        if partner == k.map(|v| -v) {
            let (r, t) = self.apply(k, w);
            return (2.0 * r, 2.0 * t);
        }
        let [a, b, e] = w;
        let [mut a2, mut b2, mut e2] = [*a, *b, *e];
        let (r, t) = self.apply(k, [&mut *a, &mut *b, &mut *e]);
        let (r2, t2) = self.apply(partner, [&mut a2, &mut b2, &mut e2]);
        for (v, v2) in [(a, a2), (b, b2), (e, e2)] {
            *v = (*v + v2) * 0.5;
        }
        (r + r2, t + t2)
    }

    /// The relative size of what was taken out, from the sums of
    /// [`Self::apply`]'s two.
    pub(crate) fn took_out(removed: f64, total: f64) -> f64 {
        if total > 0.0 {
            (removed / total).sqrt()
        } else {
            0.0
        }
    }
}

/// Replaces the strengths of particles that fill the `n^3` cell centres
/// of a periodic box, taken as the vorticity at their points times the
/// cell's volume (`alpha = w h^3`), with the strengths whose Gaussian
/// blobs give that vorticity at every lattice point: the RBF
/// interpolation of yokota2009 (section 5.1: "the strength of the vortex
/// elements was calculated from the vorticity field on the grid by
/// solving a system of equations"), which on a periodic lattice of equal
/// cores is a circulant system, solved exactly by FFT (each mode divided
/// by the blob's lattice sum). Without it the blobs carry the vorticity
/// smoothed by their cores (for cores of one spacing, a mode of `k h =
/// pi / 2` keeps 29% of its amplitude). Modes below `1e-13` of the
/// largest are taken as empty (rounding, which the solve would multiply
/// by up to `1e10`). Returns the largest factor a mode was multiplied by.
pub fn interpolate_on_lattice(
    p: &mut VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
) -> Result<f64, VortexError> {
    use crate::spectral::Fft3;
    use rustfft::num_complex::Complex64;
    let sigma = p.sigma.first().copied().unwrap_or(0.0);
    if let Some((i, &s)) = p.sigma.iter().enumerate().find(|(_, &s)| s != sigma) {
        return Err(VortexError::BadParticle {
            index: i,
            what: "a core radius on the interpolating lattice",
            value: s,
            why: "must equal the first particle's: the FFT solve needs one core size",
        });
    }
    let cell = lattice_cells(p, pbox, n)?;
    let fft = Fft3::new(n);
    let eigen = blob_eigenvalues(sigma, pbox.side, n);
    let mut w = to_modes(p, &cell, &fft);
    // Modes holding only rounding are dropped, not multiplied (by up to
    // 1e10 for cores of 1.3 spacings at the lattice's corner modes).
    let top = w
        .iter()
        .flat_map(|a| a.iter().map(|v| v.norm()))
        .fold(0.0f64, f64::max);
    let largest = w
        .par_iter_mut()
        .map(|a| {
            let mut largest = 0.0f64;
            for (i, v) in a.iter_mut().enumerate() {
                let e = eigen.at(i);
                if v.norm() <= 1e-13 * top {
                    *v = Complex64::default();
                } else {
                    *v /= e;
                    largest = largest.max(1.0 / e);
                }
            }
            largest
        })
        .reduce(|| 0.0, f64::max);
    from_modes(p, &cell, &fft, w);
    Ok(largest)
}

/// The eigenvalues of the circulant that [`interpolate_on_lattice`]
/// solves: the transform of a Gaussian blob's values at the `n^3` lattice
/// points about one of them (its periodic images summed), times the
/// cell's volume. The blob and its images' sum are a product over the
/// three axes, so the 3-D transform is the product of one 1-D transform
/// `per_axis` for each axis' wavenumber: `n` sums of `n` terms, not a
/// transform of `n^3` points each summing `(2 images + 1)^3` images (at
/// `n = 256`, two billion exponentials: most of the turbulence runs'
/// set-up).
struct BlobEigenvalues {
    n: usize,
    per_axis: Vec<f64>,
}

impl BlobEigenvalues {
    /// The eigenvalue of mode `i` (index `(z n + y) n + x`).
    fn at(&self, i: usize) -> f64 {
        let n = self.n;
        self.per_axis[i % n] * self.per_axis[(i / n) % n] * self.per_axis[i / (n * n)]
    }
}

/// [`BlobEigenvalues`] of blobs of core `sigma` on the `n^3` lattice of a
/// periodic box of side `side`.
fn blob_eigenvalues(sigma: f64, side: f64, n: usize) -> BlobEigenvalues {
    let h = side / n as f64;
    // The cell's volume over the Gaussian's normalisation, a cube root a
    // factor.
    let norm = h / (std::f64::consts::TAU.sqrt() * sigma);
    let images = (6.0 * sigma / side).ceil() as i64 + 1;
    // One axis' blob about a lattice point, its images summed: symmetric
    // (`g[j] = g[n - j]`), so its transform is real, a sum of cosines.
    let g: Vec<f64> = (0..n)
        .map(|j| {
            (-images..=images)
                .map(|a| {
                    let r = j as f64 * h + a as f64 * side;
                    (-0.5 * r * r / (sigma * sigma)).exp()
                })
                .sum::<f64>()
        })
        .collect();
    let per_axis = (0..n)
        .map(|k| {
            let sum: f64 = g
                .iter()
                .enumerate()
                .map(|(j, gj)| {
                    // `j k mod n` keeps the cosine's argument below 2 pi.
                    let phase = std::f64::consts::TAU * ((j * k) % n) as f64 / n as f64;
                    gj * phase.cos()
                })
                .sum();
            norm * sum
        })
        .collect();
    BlobEigenvalues { n, per_axis }
}

/// The kinetic energy per unit volume, `<|u|^2> / 2`, of the periodic
/// velocity whose curl is the vorticity of particles that fill the `n^3`
/// cell centres of `pbox` (the strengths over the cells' volume, the
/// lattice's modes, `u_k = i k x w_k / |k|^2`): the energy the lattice
/// carries, before the blobs smooth it (their velocity's energy, on a
/// grid, is that of the field smoothed by the cores). Its mean and
/// divergence are left out, as a periodic velocity's curl has none.
pub fn lattice_energy(
    p: &VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
) -> Result<f64, VortexError> {
    let cell = lattice_cells(p, pbox, n)?;
    let fft = crate::spectral::Fft3::new(n);
    let w = to_modes(p, &cell, &fft);
    let h = pbox.side / n as f64;
    let unit = std::f64::consts::TAU / pbox.side;
    let m = |j: usize| signed(j, n);
    // rustfft's sums over the n^3 cells, of strengths (h^3 times the
    // vorticity): the Fourier series' coefficients times n^3 h^3.
    let scale = 1.0 / ((n * n * n) as f64 * h * h * h);
    let mut sum = 0.0;
    let [wx, wy, wz] = &w;
    for (c, ((a, b), e)) in wx.iter().zip(wy).zip(wz).enumerate() {
        let k = [m(c % n), m((c / n) % n), m(c / (n * n))].map(|j| j * unit);
        let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
        if k2 == 0.0 {
            continue;
        }
        let wk = [a, b, e].map(|z| z * scale);
        // |k x w|^2 / |k|^4: the solenoidal part's energy.
        let cross = [
            wk[2] * k[1] - wk[1] * k[2],
            wk[0] * k[2] - wk[2] * k[0],
            wk[1] * k[0] - wk[0] * k[1],
        ];
        sum += cross.iter().map(|z| z.norm_sqr()).sum::<f64>() / (k2 * k2);
    }
    Ok(0.5 * sum)
}

/// The signed wavenumber (in whole waves a side) of index `j` of an
/// `n`-point FFT: `-n / 2` at an even `n`'s Nyquist index; an odd `n`'s
/// run from `-(n - 1) / 2` to `(n - 1) / 2`, each mode's partner at the
/// opposite index its negative, so that the projection of a real field
/// leaves every mode of an odd lattice divergence-free.
fn signed(j: usize, n: usize) -> f64 {
    if 2 * j < n {
        j as f64
    } else {
        j as f64 - n as f64
    }
}

/// The strengths of particles in the lattice's cells `cell`, each
/// component taken to Fourier space (rustfft's unnormalised sums).
fn to_modes(
    p: &VortexParticles,
    cell: &[usize],
    fft: &crate::spectral::Fft3,
) -> [Vec<rustfft::num_complex::Complex64>; 3] {
    use rustfft::num_complex::Complex64;
    let len = fft.n().pow(3);
    let mut w: [Vec<Complex64>; 3] = [(); 3].map(|_| vec![Complex64::default(); len]);
    for (i, &c) in cell.iter().enumerate() {
        for (wd, ad) in w.iter_mut().zip(p.alpha[i]) {
            wd[c] = Complex64::new(ad, 0.0);
        }
    }
    for a in &mut w {
        fft.forward(a);
    }
    w
}

/// [`to_modes`] undone: the modes `w` back to the lattice, the particles
/// of `cell` given their values.
fn from_modes(
    p: &mut VortexParticles,
    cell: &[usize],
    fft: &crate::spectral::Fft3,
    mut w: [Vec<rustfft::num_complex::Complex64>; 3],
) {
    for a in &mut w {
        fft.inverse(a);
    }
    let scale = 1.0 / fft.n().pow(3) as f64;
    for (i, &c) in cell.iter().enumerate() {
        for (ad, wd) in p.alpha[i].iter_mut().zip(&w) {
            *ad = wd[c].re * scale;
        }
    }
}

/// Each particle's cell on the `n^3` lattice of cell centres of `pbox`
/// (index `(z n + y) n + x`), the particles filling it one a cell.
fn lattice_cells(
    p: &VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
) -> Result<Vec<usize>, VortexError> {
    if p.len() != n * n * n {
        return Err(VortexError::LengthMismatch {
            what: "particles filling the remeshing lattice",
            got: p.len(),
            expected: n * n * n,
        });
    }
    Ok(lattice_permutation(p, pbox, n)?.0)
}

/// [`lattice_cells`], and each cell's particle, in parallel (16.8 million
/// particles' cells found and checked one after another cost the
/// single-process filter a tenth of a second on the H200 host's cores).
fn lattice_permutation(
    p: &VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
) -> Result<(Vec<usize>, Vec<usize>), VortexError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    if p.len() != n * n * n {
        return Err(VortexError::LengthMismatch {
            what: "particles filling the remeshing lattice",
            got: p.len(),
            expected: n * n * n,
        });
    }
    let cell: Vec<usize> = p.x.par_iter().map(|&x| lattice_cell(x, pbox, n)).collect();
    let taker: Vec<AtomicUsize> = (0..cell.len())
        .into_par_iter()
        .map(|_| AtomicUsize::new(usize::MAX))
        .collect();
    let twice = cell
        .par_iter()
        .enumerate()
        .find_any(|&(i, &c)| taker[c].swap(i, Ordering::Relaxed) != usize::MAX);
    if let Some((i, &c)) = twice {
        return Err(taken(i, c));
    }
    // As many particles as cells, none taken twice: each cell has one.
    let at = taker.into_par_iter().map(AtomicUsize::into_inner).collect();
    Ok((cell, at))
}

/// The wavenumber of mode `j` (indices `0..n` a side, those past `n / 2`
/// the negative ones) of a lattice of `n` a side in a box of side `side`,
/// in the box's units.
pub(crate) fn wavenumber(j: [usize; 3], n: usize, side: f64) -> [f64; 3] {
    let unit = std::f64::consts::TAU / side;
    j.map(|j| signed(j, n) * unit)
}

/// The cell of the `n^3` lattice of cell centres of `pbox` (index `(z n
/// + y) n + x`) nearest to `x`, wrapped into the box.
pub(crate) fn lattice_cell(x: [f64; 3], pbox: &PeriodicBox, n: usize) -> usize {
    let h = pbox.side / n as f64;
    let idx = [0, 1, 2].map(|a| {
        let s = (x[a] - pbox.origin[a]) / h - 0.5;
        (s.round() as i64).rem_euclid(n as i64) as usize
    });
    (idx[2] * n + idx[1]) * n + idx[0]
}

/// Particle `i`'s cell `c` is another's.
fn taken(i: usize, c: usize) -> VortexError {
    VortexError::BadParticle {
        index: i,
        what: "a particle's cell on the remeshing lattice",
        value: c as f64,
        why: "taken by another particle: the particles must fill the lattice, one a cell",
    }
}

/// [`filter_lattice`] making the vorticity divergence-free, nothing else.
pub fn project_divergence_free(
    p: &mut VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
) -> Result<f64, VortexError> {
    let filter = LatticeFilter {
        project: true,
        diffuse: 0.0,
    };
    filter_lattice(p, pbox, n, filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eigenvalues by axes equal the 3-D transform of the blob's
    /// lattice values, every image summed in 3-D (the circulant's first
    /// column, made point by point).
    #[test]
    fn the_blobs_eigenvalues_by_axes_are_the_3d_transform_of_the_column() {
        use rustfft::num_complex::Complex64;
        let (n, side) = (10, 2.0);
        for sigma in [0.13, 0.2, 0.45] {
            let h = side / n as f64;
            let images = (6.0 * sigma / side).ceil() as i64 + 2;
            let norm = h * h * h / (std::f64::consts::TAU.powf(1.5) * sigma * sigma * sigma);
            let mut column: Vec<Complex64> = (0..n * n * n)
                .map(|c| {
                    let j = [c % n, (c / n) % n, c / (n * n)].map(|j| j as f64 * h);
                    let mut sum = 0.0;
                    for a in -images..=images {
                        for b in -images..=images {
                            for d in -images..=images {
                                let m = [a, b, d];
                                let r2: f64 =
                                    (0..3).map(|x| (j[x] + m[x] as f64 * side).powi(2)).sum();
                                sum += (-0.5 * r2 / (sigma * sigma)).exp();
                            }
                        }
                    }
                    Complex64::new(norm * sum, 0.0)
                })
                .collect();
            crate::spectral::Fft3::new(n).forward(&mut column);
            let eigen = blob_eigenvalues(sigma, side, n);
            // Rounding of the transform, beside its largest value (the
            // mean, about 1).
            let round = 1e-14 * column[0].re;
            for (i, e) in column.iter().enumerate() {
                assert!(e.im.abs() < round, "mode {i}: {e}");
                let by_axes = eigen.at(i);
                assert!(
                    (by_axes - e.re).abs() <= round,
                    "sigma {sigma}, mode {i}: {by_axes} by axes, {} in 3-D",
                    e.re
                );
            }
        }
    }

    #[test]
    fn m4p_interpolates_sums_to_one_and_reproduces_quadratics() {
        assert_eq!(m4p(0.0), 1.0);
        for k in [1.0, 2.0, 3.0] {
            assert_eq!(m4p(k), 0.0);
        }
        for s in [0.0, 0.13, 0.5, 0.77] {
            let pts = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0];
            let moment = |m: i32| {
                pts.iter()
                    .map(|&j| m4p(s - j) * (j - s).powi(m))
                    .sum::<f64>()
            };
            assert!((moment(0) - 1.0).abs() < 1e-15);
            assert!(moment(1).abs() < 1e-15 && moment(2).abs() < 1e-15);
        }
    }

    /// The filter on the half spectrum of the lattice's real vorticity
    /// (`apply_half`, [`crate::spectral::HalfFft3`]) gives what it gave on
    /// the full complex spectrum, the filter on every mode and the real
    /// part taken after the inverse (written here as it was): for even and
    /// odd sides, white noise (the Nyquist modes as full as any), the
    /// projection and the diffusion.
    #[test]
    fn the_half_spectrum_filters_as_the_full_one() {
        let full = |p: &mut VortexParticles, pbox: &PeriodicBox, n: usize, f: LatticeFilter| {
            let cell = lattice_cells(p, pbox, n).unwrap();
            let fft = crate::spectral::Fft3::new(n);
            let mut w = to_modes(p, &cell, &fft);
            let (mut removed, mut total) = (0.0, 0.0);
            let [wx, wy, wz] = &mut w;
            for (c, ((a, b), e)) in wx
                .iter_mut()
                .zip(wy.iter_mut())
                .zip(wz.iter_mut())
                .enumerate()
            {
                let k = wavenumber([c % n, (c / n) % n, c / (n * n)], n, pbox.side);
                let (r, t) = f.apply(k, [a, b, e]);
                removed += r;
                total += t;
            }
            from_modes(p, &cell, &fft, w);
            LatticeFilter::took_out(removed, total)
        };
        for n in [6, 7, 8] {
            let pbox = PeriodicBox::cube([0.3, -0.2, 0.1], 1.7);
            let h = pbox.side / n as f64;
            let m = n * n * n;
            let x: Vec<[f64; 3]> = (0..m)
                .rev()
                .map(|c| [c % n, (c / n) % n, c / (n * n)].map(|j| (j as f64 + 0.5) * h + 0.3))
                .collect();
            let alpha: Vec<[f64; 3]> = (0..m)
                .map(|i| [0, 1, 2].map(|d| ((3 * i + d) as f64 * 0.618_033_988_75).fract() - 0.5))
                .collect();
            let p = VortexParticles::new(x, alpha, vec![h; m], vec![h * h * h; m]).unwrap();
            for filter in [
                LatticeFilter {
                    project: true,
                    diffuse: 0.0,
                },
                LatticeFilter {
                    project: true,
                    diffuse: 0.01,
                },
            ] {
                let (mut half, mut whole) = (p.clone(), p.clone());
                let took = filter_lattice(&mut half, &pbox, n, filter).unwrap();
                let took_full = full(&mut whole, &pbox, n, filter);
                let worst = half
                    .alpha
                    .iter()
                    .zip(&whole.alpha)
                    .flat_map(|(a, b)| (0..3).map(move |d| (a[d] - b[d]).abs()))
                    .fold(0.0f64, f64::max);
                assert!(worst < 1e-14, "{n} {filter:?}: {worst:e}");
                assert!((took - took_full).abs() < 1e-13, "{took} {took_full}");
                assert!(
                    took > 0.3,
                    "white noise is far from divergence-free: {took}"
                );
                if filter.diffuse > 0.0 {
                    continue;
                }
                // Divergence-free after: every mode of an odd lattice, every
                // mode without a Nyquist index (the same index for the
                // wavenumbers n / 2 and -n / 2) of an even one.
                let (_, at) = lattice_permutation(&half, &pbox, n).unwrap();
                let fft = crate::spectral::HalfFft3::new(n);
                let hw = fft.h();
                let w = [0, 1, 2].map(|a| {
                    fft.forward(&at.iter().map(|&i| half.alpha[i][a]).collect::<Vec<_>>())
                });
                let size = w.iter().flatten().map(|v| v.norm()).fold(0.0, f64::max);
                let div = (0..w[0].len())
                    .map(|i| (i, [i % hw, (i / hw) % n, i / (hw * n)]))
                    .filter(|(_, j)| n % 2 == 1 || j.iter().all(|&j| 2 * j != n))
                    .map(|(i, j)| {
                        let k = wavenumber(j, n, pbox.side);
                        (w[0][i] * k[0] + w[1][i] * k[1] + w[2][i] * k[2]).norm()
                    })
                    .fold(0.0, f64::max);
                assert!(div < 1e-12 * size, "{n}: divergence {div:e} of {size:e}");
            }
        }
    }
}
