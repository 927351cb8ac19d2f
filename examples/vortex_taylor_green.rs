//! The Taylor-Green vortex at Re 1600 in a periodic box by the vortex
//! particle method against the repository's pseudo-spectral solver
//! (`fmm_vortex::spectral`) from the same field at the same resolution:
//! `u = (sin x cos y cos z, -cos x sin y cos z, 0)` in `[0, 2 pi)^3`, `nu =
//! 1 / Re`. The loop and its settings (remeshing, the lattice's
//! projection and diffusion, the sums) are `common::periodic_flow`'s:
//! every `--every` steps the kinetic energy `K` and `-dK/dt` of both, at
//! the end the energy spectra `E(k)`; a CSV and a PNG.
//!
//! `cargo run --release --example vortex_taylor_green -- --n 16 --t-end 2`

mod common;

use clap::Parser;
use common::periodic_flow::{run, Case, RunArgs};
use fmm_vortex::spectral::SpectralNs;

#[derive(Parser, Debug)]
#[command(about = "The Taylor-Green vortex: vortex particles against a spectral solver")]
struct Args {
    /// Particles (and spectral grid points) a side.
    #[arg(long, default_value_t = 16)]
    n: usize,
    #[arg(long, default_value_t = 1600.0)]
    re: f64,
    #[arg(long, default_value_t = 0.05)]
    dt: f64,
    #[arg(long, default_value_t = 2.0)]
    t_end: f64,
    #[command(flatten)]
    run: RunArgs,
}

/// The Taylor-Green velocity.
fn velocity(x: [f64; 3]) -> [f64; 3] {
    let ([sx, sy, _], [cx, cy, cz]) = (x.map(f64::sin), x.map(f64::cos));
    [sx * cy * cz, -cx * sy * cz, 0.0]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let nu = 1.0 / args.re;
    let spectral = SpectralNs::from_fn(args.n, std::f64::consts::TAU, nu, velocity)?;
    let case = Case {
        name: "vortex_taylor_green",
        title: format!("Taylor-Green vortex, Re {}", args.re),
        nu,
        dt: args.dt,
        t_end: args.t_end,
        unit: (1.0, "t"),
    };
    run(&args.run, &case, spectral)
}
