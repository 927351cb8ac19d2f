//! Reinitialisation of a vortex ring's particles onto a lattice
//! (`fmm_vortex::reinit`: RBF interpolation of the vorticity, solved by
//! conjugate gradients through the front door), against naive remeshing
//! (`alpha = w h^3`): for each resolution, overlap and tolerance, the
//! iterations, the residual at the lattice points and the vorticity's
//! error between them (at the cells' centres, against the old particles'
//! field, the f64 direct sum).
//!
//! `cargo run --release --example vortex_reinit`

use clap::Parser;
use fmm_core::Method;
use fmm_vortex::reinit::{reinitialise, Lattice};
use fmm_vortex::{Precision, Ring, Solver, VortexParticles};

#[derive(Parser, Debug)]
#[command(about = "RBF reinitialisation of a vortex ring against naive remeshing")]
struct Args {
    /// The ring's core width (the lattice's spacing is the core over
    /// `--layers`).
    #[arg(long, default_value_t = 0.2)]
    core: f64,
    /// Lattice spacings across the core, each a row of the table.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    layers: Vec<usize>,
    /// The new cores over the spacing.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    overlap: Vec<f64>,
    /// The interpolation's tolerances (relative residual).
    #[arg(long, value_delimiter = ',', default_value = "1e-2,1e-3,1e-4,1e-6")]
    tol: Vec<f64>,
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
}

mod common;

/// The relative l2 distance between the fields of `a` and `b` at `at`.
fn apart(
    solver: &Solver,
    a: &VortexParticles,
    b: &VortexParticles,
    at: &[[f64; 3]],
) -> Result<f64, Box<dyn std::error::Error>> {
    let (u, v) = (solver.vorticity(a, at)?, solver.vorticity(b, at)?);
    let (mut num, mut den) = (0.0, 0.0);
    for (u, v) in u.iter().zip(&v) {
        for c in 0..3 {
            num += (u[c] - v[c]).powi(2);
            den += v[c] * v[c];
        }
    }
    Ok((num / den).sqrt())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let solver = Solver {
        backend: args.backend.core(),
        method: Method::direct(),
        precision: Precision::F64,
        ..Solver::default()
    };
    println!(
        "{:>7} {:>6} {:>8} {:>7} {:>8} {:>6} {:>9} {:>10} {:>10}",
        "N", "h", "overlap", "tol", "lattice", "iters", "residual", "between", "naive"
    );
    for &layers in &args.layers {
        let old = Ring::resolved(1.0, 1.0, args.core, layers, 1.0).particles()?;
        let h = args.core / layers as f64;
        for &overlap in &args.overlap {
            for &tolerance in &args.tol {
                let lattice = Lattice {
                    overlap,
                    tolerance,
                    max_iterations: 1000,
                    ..Lattice::new(h)
                };
                let r = reinitialise(&old, &lattice, &solver)?;
                let new = &r.particles;
                // Every seventh cell's centre.
                let between: Vec<[f64; 3]> = new
                    .x
                    .iter()
                    .step_by(7)
                    .map(|x| x.map(|c| c + 0.5 * h))
                    .collect();
                let naive = VortexParticles {
                    alpha: solver
                        .vorticity(&old, &new.x)?
                        .iter()
                        .map(|w| w.map(|c| c * h * h * h))
                        .collect(),
                    ..new.clone()
                };
                println!(
                    "{:>7} {h:>6} {overlap:>8} {tolerance:>7.0e} {:>8} {:>6} {:>9.2e} {:>10.2e} {:>10.2e}",
                    old.len(),
                    new.len(),
                    r.iterations,
                    r.residual,
                    apart(&solver, new, &old, &between)?,
                    apart(&solver, &naive, &old, &between)?
                );
            }
        }
    }
    Ok(())
}
