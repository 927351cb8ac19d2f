//! Remeshing particles held in parts (one a process under MPI:
//! [`crate::distributed::remesh_partitioned`]), the same lattice points and
//! strengths as [`crate::remesh::remesh`] of every particle at once, to
//! round-off.
//!
//! Each part spreads its own particles onto the lattice points its
//! stencils reach ([`PartRemesh::spread`], on a GPU
//! [`PartRemesh::spread_on`]); a lattice point reached by
//! several parts belongs to the lowest-numbered of them, which the others
//! send what they spread there ([`PartRemesh::shared`]) and which adds it
//! ([`PartRemesh::absorb`]); each part then makes the particles of the
//! points it owns ([`PartRemesh::particles`]). Only the points near a
//! part's faces travel: the rest stay where they were spread.

use rayon::prelude::*;

use fmm_core::cuda::Gpu;

use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::remesh::{check_cull, lattice_particles, stencil, stencil_base, strength, Lattice};

/// The lattice points a part's stencils reach: an index box, not wrapped
/// (a periodic lattice's axis that the part spans whole: `0..n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    pub lo: [i64; 3],
    pub hi: [i64; 3],
}

impl Reach {
    /// Nothing reached (a part with no particles).
    pub const NONE: Reach = Reach {
        lo: [0; 3],
        hi: [-1; 3],
    };

    fn is_empty(&self) -> bool {
        (0..3).any(|a| self.lo[a] > self.hi[a])
    }

    /// Whether lattice point `g` (wrapped, for a lattice of `n` a side) is
    /// in the box.
    fn holds(&self, g: [i64; 3], n: Option<i64>) -> bool {
        !self.is_empty()
            && (0..3).all(|a| match n {
                Some(n) => (g[a] - self.lo[a]).rem_euclid(n) <= self.hi[a] - self.lo[a],
                None => (self.lo[a]..=self.hi[a]).contains(&g[a]),
            })
    }
}

/// What a part claims of the lattice: the points its stencils reach (its
/// box) and its core, the box of the points nearest its particles. A
/// point belongs to the lowest-numbered part whose core holds it, else to
/// the lowest-numbered part that reaches it: by the reaches alone the
/// lower-numbered parts took their neighbours' faces at each remeshing
/// (the stencils reach two points past the particles), and the parts had
/// to be cut again by ORB each time (2.2 s of a 2.8 s remeshing at 256^3
/// on 4 processes sharing an H200).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub reach: Reach,
    pub core: Reach,
}

impl Claim {
    /// The claim as six plus six integers, for the processes' exchange.
    pub fn to_flat(&self) -> Vec<i64> {
        [self.reach.lo, self.reach.hi, self.core.lo, self.core.hi].concat()
    }

    /// [`Claim::to_flat`]'s claim back.
    pub fn from_flat(f: &[i64]) -> Claim {
        let three = |at: usize| [f[at], f[at + 1], f[at + 2]];
        Claim {
            reach: Reach {
                lo: three(0),
                hi: three(3),
            },
            core: Reach {
                lo: three(6),
                hi: three(9),
            },
        }
    }
}

/// What a part sends the owners of the lattice points it shares: for each
/// point, its owner, its index and the five sums spread there (alpha,
/// the weights times sigma^2, the weights).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shared {
    pub dest: Vec<i32>,
    pub index: [Vec<i64>; 3],
    pub sums: [Vec<f64>; 5],
}

/// A part's box on the lattice: the spacing, the corner the points are
/// offset from, a periodic lattice's points a side, the box's first
/// index and size, and which of its axes are a periodic lattice's whole
/// axis (wrapped onto itself).
pub(crate) struct BoxFrame {
    pub h: f64,
    pub origin: [f64; 3],
    pub n: Option<i64>,
    pub lo: [i64; 3],
    pub size: [i64; 3],
    pub wraps: [bool; 3],
}

/// One part's spreading onto the lattice.
#[derive(Clone, Debug)]
pub struct PartRemesh {
    h: f64,
    origin: [f64; 3],
    /// A periodic lattice's points a side.
    n: Option<i64>,
    reach: Reach,
    /// The box of the points nearest the particles ([`Claim`]).
    core: Reach,
    size: [i64; 3],
    /// Alpha (3), the weights times sigma^2, the weights, a point of the
    /// box each (x fastest).
    acc: Vec<[f64; 5]>,
    /// Sigma summed over the part's particles, and their count (the
    /// serial remeshing's fallback core is the mean of every particle's).
    pub sigma_sum: f64,
    pub count: usize,
}

impl PartRemesh {
    /// Spreads the particles `p` of one part onto `lattice` (checked as
    /// [`crate::remesh::remesh`] checks them).
    pub fn spread(p: &VortexParticles, lattice: &Lattice) -> Result<PartRemesh, VortexError> {
        Self::spread_on(None, p, lattice)
    }

    /// [`PartRemesh::spread`] on `gpu` where one is given (the sums added
    /// there in another order: the same to round-off).
    pub fn spread_on(
        gpu: Option<&Gpu>,
        p: &VortexParticles,
        lattice: &Lattice,
    ) -> Result<PartRemesh, VortexError> {
        p.check()?;
        let (h, origin, n) = lattice.frame()?;
        let stencils: Vec<([i64; 3], [[f64; 4]; 3])> = match gpu {
            Some(_) => Vec::new(),
            None => p.x.par_iter().map(|x| stencil(*x, origin, h)).collect(),
        };
        let bases = |i: usize| match gpu {
            Some(_) => stencil_base(p.x[i], origin, h),
            None => stencils[i].0,
        };
        let none = Reach {
            lo: [i64::MAX; 3],
            hi: [i64::MIN; 3],
        };
        let join = |x: Reach, y: Reach| Reach {
            lo: [0, 1, 2].map(|a| x.lo[a].min(y.lo[a])),
            hi: [0, 1, 2].map(|a| x.hi[a].max(y.hi[a])),
        };
        let (mut reach, mut core) = (0..p.len())
            .into_par_iter()
            .map(|i| {
                let b = bases(i);
                // Point j lies at origin + (j + 1/2) h: the nearest is
                // floor((x - origin) / h).
                let near = [0, 1, 2].map(|a| ((p.x[i][a] - origin[a]) / h).floor() as i64);
                let reach = Reach {
                    lo: b,
                    hi: b.map(|v| v + 3),
                };
                (reach, Reach { lo: near, hi: near })
            })
            .reduce(|| (none, none), |x, y| (join(x.0, y.0), join(x.1, y.1)));
        if let (Some(n), false) = (n, p.is_empty()) {
            // An axis the part spans whole wraps onto itself: 0..n.
            for r in [&mut reach, &mut core] {
                for a in 0..3 {
                    if r.hi[a] - r.lo[a] + 1 >= n {
                        (r.lo[a], r.hi[a]) = (0, n - 1);
                    }
                }
            }
        }
        if p.is_empty() {
            (reach, core) = (Reach::NONE, Reach::NONE);
        }
        let size = [0, 1, 2].map(|a| (reach.hi[a] - reach.lo[a] + 1).max(0));
        let mut part = PartRemesh {
            h,
            origin,
            n,
            reach,
            core,
            size,
            acc: vec![[0.0; 5]; (size[0] * size[1] * size[2]) as usize],
            sigma_sum: p.sigma.iter().sum(),
            count: p.len(),
        };
        if p.is_empty() {
            return Ok(part);
        }
        if let Some(gpu) = gpu {
            crate::remesh_gpu::spread(gpu, p, &mut part)?;
            return Ok(part);
        }
        // By the layer (z) of the box a stencil starts at: a layer receives
        // from its own and the three below (wrapped where the axis is), so
        // the layers fill in parallel.
        let mut by_layer: Vec<Vec<usize>> = vec![Vec::new(); size[2] as usize];
        for (i, (base, _)) in stencils.iter().enumerate() {
            by_layer[part.local(2, base[2]) as usize].push(i);
        }
        let layer = (size[0] * size[1]) as usize;
        let mut acc = std::mem::take(&mut part.acc);
        let this = &part;
        acc.par_chunks_mut(layer).enumerate().for_each(|(iz, out)| {
            for kz in 0..4usize {
                let from = iz as i64 - kz as i64;
                let from = match this.wraps(2) {
                    true => from.rem_euclid(size[2]),
                    false if from < 0 => continue,
                    false => from,
                };
                for &i in &by_layer[from as usize] {
                    let (base, w) = &stencils[i];
                    let s2 = p.sigma[i] * p.sigma[i];
                    // The stencil's four points along x and y in the box
                    // (a division each, not one a point: the remainders
                    // took most of the spreading).
                    let (xs, ys) = (this.run(0, base[0]), this.run(1, base[1]));
                    for ky in 0..4 {
                        for kx in 0..4 {
                            let wt = w[0][kx] * w[1][ky] * w[2][kz];
                            // As the serial remeshing: a particle on a
                            // lattice point makes no particles of rounding.
                            if wt.abs() < 1e-12 {
                                continue;
                            }
                            let c = &mut out[(ys[ky] * size[0] + xs[kx]) as usize];
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
        part.acc = acc;
        Ok(part)
    }

    /// The lattice points this part reached.
    pub fn reach(&self) -> Reach {
        self.reach
    }

    /// What this part claims of the lattice ([`Claim`]).
    pub fn claim(&self) -> Claim {
        Claim {
            reach: self.reach,
            core: self.core,
        }
    }

    /// The lattice and the part's box, as the GPU's spreading takes them.
    pub(crate) fn frame(&self) -> BoxFrame {
        BoxFrame {
            h: self.h,
            origin: self.origin,
            n: self.n,
            lo: self.reach.lo,
            size: self.size,
            wraps: [0, 1, 2].map(|a| self.wraps(a)),
        }
    }

    /// The sums at the box's points (x fastest), to be filled.
    pub(crate) fn sums_mut(&mut self) -> &mut [[f64; 5]] {
        &mut self.acc
    }

    /// Whether axis `a` of the box is a periodic lattice's whole axis.
    fn wraps(&self, a: usize) -> bool {
        self.n.is_some() && self.reach.lo[a] == 0 && self.size[a] == self.n.unwrap_or(0)
    }

    /// Index `j` (not wrapped) along axis `a`, in the box.
    fn local(&self, a: usize, j: i64) -> i64 {
        match (self.wraps(a), self.n) {
            (true, Some(n)) => j.rem_euclid(n),
            (_, Some(n)) => (j - self.reach.lo[a]).rem_euclid(n),
            (_, None) => j - self.reach.lo[a],
        }
    }

    /// Indices `j` to `j + 3` along axis `a`, in the box ([`Self::local`]).
    fn run(&self, a: usize, j: i64) -> [i64; 4] {
        let first = self.local(a, j);
        match self.n {
            Some(n) => [0, 1, 2, 3].map(|k| {
                let mut j = first + k;
                while j >= n {
                    j -= n;
                }
                j
            }),
            None => [0, 1, 2, 3].map(|k| first + k),
        }
    }

    /// The lattice index (wrapped) of the box's point `cell`.
    fn global(&self, cell: usize) -> [i64; 3] {
        let c = cell as i64;
        let l = [
            c % self.size[0],
            (c / self.size[0]) % self.size[1],
            c / (self.size[0] * self.size[1]),
        ];
        [0, 1, 2].map(|a| {
            let j = self.reach.lo[a] + l[a];
            self.n.map_or(j, |n| j.rem_euclid(n))
        })
    }

    /// The box's point of lattice index `g`, which it must hold.
    fn cell(&self, g: [i64; 3]) -> usize {
        let l = [0, 1, 2].map(|a| self.local(a, g[a]));
        ((l[2] * self.size[1] + l[1]) * self.size[0] + l[0]) as usize
    }

    /// The part a lattice point belongs to: the lowest-numbered of the
    /// parts whose core holds it, else of those whose reach does
    /// (`claims`, one a part).
    fn owner(&self, g: [i64; 3], claims: &[Claim]) -> usize {
        claims
            .iter()
            .position(|c| c.core.holds(g, self.n))
            .or_else(|| claims.iter().position(|c| c.reach.holds(g, self.n)))
            .expect("a point of a part's own reach")
    }

    /// The points this part (`me` of the parts of `claims`) spread onto
    /// that belong to another part, taken out of it: what it sends.
    pub fn shared(&mut self, claims: &[Claim], me: usize) -> Shared {
        let mut acc = std::mem::take(&mut self.acc);
        let layer = ((self.size[0] * self.size[1]) as usize).max(1);
        let this = &*self;
        // Each z layer's apart, in parallel, then joined in order.
        let layers: Vec<Shared> = acc
            .par_chunks_mut(layer)
            .enumerate()
            .map(|(z, chunk)| {
                let mut out = Shared::default();
                for (k, c) in chunk.iter_mut().enumerate() {
                    if *c == [0.0; 5] {
                        continue;
                    }
                    let g = this.global(z * layer + k);
                    let owner = this.owner(g, claims);
                    if owner == me {
                        continue;
                    }
                    out.dest.push(owner as i32);
                    for (to, &j) in out.index.iter_mut().zip(&g) {
                        to.push(j);
                    }
                    for (to, &v) in out.sums.iter_mut().zip(c.iter()) {
                        to.push(v);
                    }
                    *c = [0.0; 5];
                }
                out
            })
            .collect();
        self.acc = acc;
        let mut out = Shared::default();
        for l in layers {
            out.dest.extend(l.dest);
            for (to, from) in out.index.iter_mut().zip(l.index) {
                to.extend(from);
            }
            for (to, from) in out.sums.iter_mut().zip(l.sums) {
                to.extend(from);
            }
        }
        out
    }

    /// Adds what the other parts sent this one (points it owns).
    pub fn absorb(&mut self, index: &[Vec<i64>; 3], sums: &[Vec<f64>; 5]) {
        for i in 0..index[0].len() {
            let cell = self.cell([index[0][i], index[1][i], index[2][i]]);
            for (c, s) in self.acc[cell].iter_mut().zip(sums) {
                *c += s[i];
            }
        }
    }

    /// The largest strength at the points this part holds.
    pub fn largest(&self) -> f64 {
        self.acc.par_iter().map(strength).reduce(|| 0.0, f64::max)
    }

    /// The particles of the points this part holds: those whose strength is
    /// not 0 nor below `floor` (the cull times the largest over every
    /// part); `fallback` the core where the weights sum to little (the mean
    /// of every part's cores).
    pub fn particles(&self, floor: f64, fallback: f64) -> Result<VortexParticles, VortexError> {
        let q = lattice_particles(
            &self.acc,
            (self.size[0] * self.size[1]) as usize,
            |c| {
                let s = strength(c);
                s != 0.0 && s >= floor
            },
            |cell| self.global(cell),
            (self.origin, self.h, fallback),
        );
        q.check()?;
        Ok(q)
    }
}

/// The cull checked, and the floor it sets from the largest strength.
pub fn floor(cull: f64, largest: f64) -> Result<f64, VortexError> {
    check_cull(cull)?;
    Ok(cull * largest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remesh::remesh;
    use fmm_core::PeriodicBox;

    /// `p` cut into `parts` slabs along x (a part may be empty), remeshed
    /// part by part with the sends routed by hand, against the serial
    /// remeshing: the same points, strengths and cores to round-off.
    fn check(
        p: &VortexParticles,
        lattice: &Lattice,
        parts: usize,
        cut: impl Fn(&[f64; 3]) -> usize,
    ) {
        let mut pieces: Vec<VortexParticles> = (0..parts)
            .map(|_| VortexParticles {
                x: vec![],
                alpha: vec![],
                sigma: vec![],
                volume: vec![],
            })
            .collect();
        for i in 0..p.len() {
            let q = &mut pieces[cut(&p.x[i])];
            q.x.push(p.x[i]);
            q.alpha.push(p.alpha[i]);
            q.sigma.push(p.sigma[i]);
            q.volume.push(p.volume[i]);
        }
        let mut spread: Vec<PartRemesh> = pieces
            .iter()
            .map(|q| PartRemesh::spread(q, lattice).unwrap())
            .collect();
        let claims: Vec<Claim> = spread.iter().map(|s| s.claim()).collect();
        let sent: Vec<Shared> = (0..parts)
            .map(|me| spread[me].shared(&claims, me))
            .collect();
        for s in &sent {
            for i in 0..s.dest.len() {
                let to = s.dest[i] as usize;
                let index = [0, 1, 2].map(|a| vec![s.index[a][i]]);
                let sums = [0, 1, 2, 3, 4].map(|k| vec![s.sums[k][i]]);
                spread[to].absorb(&index, &sums);
            }
        }
        let largest = spread.iter().map(|s| s.largest()).fold(0.0, f64::max);
        let (sum, count) = spread
            .iter()
            .fold((0.0, 0), |(a, b), s| (a + s.sigma_sum, b + s.count));
        let cull = 1e-3;
        let floor = floor(cull, largest).unwrap();
        let mut got: Vec<([f64; 3], [f64; 3], f64)> = Vec::new();
        for s in &spread {
            let q = s.particles(floor, sum / count as f64).unwrap();
            got.extend((0..q.len()).map(|i| (q.x[i], q.alpha[i], q.sigma[i])));
        }
        let want = remesh(p, lattice, cull).unwrap();
        let mut want: Vec<([f64; 3], [f64; 3], f64)> = (0..want.len())
            .map(|i| (want.x[i], want.alpha[i], want.sigma[i]))
            .collect();
        let key = |v: &([f64; 3], [f64; 3], f64)| [v.0[2], v.0[1], v.0[0]];
        got.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap());
        want.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap());
        assert_eq!(got.len(), want.len(), "{parts} parts: the points");
        let scale = largest.max(1e-300);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (0..3).all(|a| (g.0[a] - w.0[a]).abs() < 1e-12),
                "{g:?} {w:?}"
            );
            assert!(
                (0..3).all(|a| (g.1[a] - w.1[a]).abs() < 1e-12 * scale),
                "{g:?} {w:?}"
            );
            assert!((g.2 - w.2).abs() < 1e-12, "{g:?} {w:?}");
        }
    }

    fn particles(n: usize, side: f64, seed: u64) -> VortexParticles {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut p = VortexParticles {
            x: vec![],
            alpha: vec![],
            sigma: vec![],
            volume: vec![],
        };
        for _ in 0..n {
            p.x.push([side * next(), side * next(), side * next()]);
            p.alpha.push([next() - 0.5, next() - 0.5, next() - 0.5]);
            p.sigma.push(0.1 + 0.05 * next());
            p.volume.push(1e-3);
        }
        p
    }

    #[test]
    fn a_lattice_remeshed_in_slabs_keeps_its_slabs() {
        // Particles near the points of a periodic 16^3 lattice, cut into 4
        // slabs of 4 planes along x: each part's remeshed particles are its
        // own slab's points, where by the reaches alone part 0 took the two
        // planes past each of its faces (8 planes) and part 3 none of its
        // own.
        let n = 16;
        let (side, h) = (2.0, 2.0 / 16.0);
        let lattice = Lattice::Periodic {
            pbox: PeriodicBox::cube([0.0; 3], side),
            n,
        };
        let mut wobble = particles(n * n * n, side, 7);
        let mut pieces: Vec<VortexParticles> = (0..4).map(|_| particles(0, side, 1)).collect();
        for k in 0..n * n * n {
            let g = [k % n, (k / n) % n, k / (n * n)];
            let jitter = wobble.x[k].map(|v| 0.3 * (v / side - 0.5));
            let x = [0, 1, 2].map(|a| (g[a] as f64 + 0.5 + jitter[a]) * h);
            let q = &mut pieces[g[0] / 4];
            q.x.push(x);
            q.alpha.push(std::mem::take(&mut wobble.alpha[k]));
            q.sigma.push(h);
            q.volume.push(h * h * h);
        }
        let mut spread: Vec<PartRemesh> = pieces
            .iter()
            .map(|q| PartRemesh::spread(q, &lattice).unwrap())
            .collect();
        let claims: Vec<Claim> = spread.iter().map(|s| s.claim()).collect();
        for me in 0..4 {
            let out = spread[me].shared(&claims, me);
            for i in 0..out.dest.len() {
                let index = [0, 1, 2].map(|a| vec![out.index[a][i]]);
                let sums = [0, 1, 2, 3, 4].map(|k| vec![out.sums[k][i]]);
                spread[out.dest[i] as usize].absorb(&index, &sums);
            }
        }
        for (q, part) in spread.iter().enumerate() {
            let got = part.particles(0.0, h).unwrap();
            assert_eq!(got.len(), 4 * n * n, "part {q}");
            let planes: std::collections::BTreeSet<i64> =
                got.x.iter().map(|x| (x[0] / h).floor() as i64).collect();
            let own: std::collections::BTreeSet<i64> = (4 * q as i64..4 * q as i64 + 4).collect();
            assert_eq!(planes, own, "part {q}'s planes");
        }
    }

    /// Slabs and blocks of a periodic box (points across its faces wrap
    /// to other parts' points), a part with no particles, one part, and an
    /// open lattice.
    #[test]
    fn parts_remesh_as_the_whole_does() {
        let side = 2.0;
        let p = particles(3000, side, 3);
        let lattice = Lattice::Periodic {
            pbox: PeriodicBox::cube([0.0; 3], side),
            n: 12,
        };
        for parts in 1..=4 {
            check(&p, &lattice, parts, |x| {
                ((x[0] / side * parts as f64) as usize).min(parts - 1)
            });
        }
        // Blocks: x then y halves; a fifth part empty.
        check(&p, &lattice, 5, |x| {
            usize::from(x[0] > 1.0) + 2 * usize::from(x[1] > 0.7)
        });
        let open = Lattice::Open {
            origin: [0.1, -0.2, 0.0],
            h: 0.23,
        };
        for parts in [1, 3] {
            check(&p, &open, parts, |x| {
                ((x[2] / side * parts as f64) as usize).min(parts - 1)
            });
        }
    }
}
