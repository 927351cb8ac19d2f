//! Times the stages of remeshing one part of `n^3` particles (a lattice
//! of a periodic box, each particle moved by up to 0.15 spacings, random
//! strengths) onto the same lattice by M4', and the serial remeshing of
//! them, in seconds: `remesh_bench [n] [gpu]` (default 128; `gpu`: the
//! part's spreading on the GPU too; docs/VORTEX.md has figures). One part
//! holds every lattice point, so none is shared.

use std::time::Instant;

use fmm_core::PeriodicBox;
use fmm_vortex::remesh::{remesh, Lattice};
use fmm_vortex::remesh_parts::{floor, PartRemesh};
use fmm_vortex::VortexParticles;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let on_gpu = std::env::args().nth(2).is_some_and(|a| a == "gpu");
    let n: usize = match std::env::args().nth(1) {
        Some(v) => v.parse().map_err(|_| format!("n: a count, not {v:?}"))?,
        None => 128,
    };
    let side = 2.0 * std::f64::consts::PI;
    let h = side / n as f64;
    let mut s = 12345u64;
    let mut r = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let mut p = VortexParticles {
        x: Vec::new(),
        alpha: Vec::new(),
        sigma: Vec::new(),
        volume: Vec::new(),
    };
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let at = |g: usize, d: f64| (g as f64 + 0.5 + 0.3 * d) * h;
                p.x.push([at(i, r()), at(j, r()), at(k, r())]);
                p.alpha.push([r(), r(), r()]);
                p.sigma.push(h);
                p.volume.push(h * h * h);
            }
        }
    }
    let lattice = Lattice::Periodic {
        pbox: PeriodicBox::cube([0.0; 3], side),
        n,
    };
    let clock = Instant::now();
    let mut part = PartRemesh::spread(&p, &lattice)?;
    let spread = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let out = part.shared(&[part.claim()], 0);
    let shared = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let largest = part.largest();
    let largest_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let q = part.particles(floor(0.0, largest)?, h)?;
    let made = clock.elapsed().as_secs_f64();
    println!(
        "n {n}: spread {spread:.3} s, shared {shared:.3} s ({} points), largest {largest_s:.3} s, \
         particles {made:.3} s ({} particles)",
        out.dest.len(),
        q.len()
    );
    if on_gpu {
        let gpu = fmm_core::cuda::Gpu::shared()?;
        for run in ["first (the module compiled or loaded)", "second"] {
            let clock = Instant::now();
            let part = PartRemesh::spread_on(Some(gpu), &p, &lattice)?;
            println!(
                "spread on the GPU, {run}: {:.3} s (largest {:.6e} against {largest:.6e})",
                clock.elapsed().as_secs_f64(),
                part.largest()
            );
        }
    }
    let clock = Instant::now();
    let whole = remesh(&p, &lattice, 0.0)?;
    println!(
        "serial remeshing {:.3} s ({} particles)",
        clock.elapsed().as_secs_f64(),
        whole.len()
    );
    Ok(())
}
