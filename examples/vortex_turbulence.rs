//! Decaying isotropic turbulence in a periodic box (yokota2009 section 5,
//! yokota2012): a solenoidal velocity field with random phases and the
//! Passot-Pouquet spectrum `E(k) ~ (k/kp)^4 exp(-2 (k/kp)^2)`, made in
//! Fourier space (`SpectralNs::isotropic`), moved by the vortex particle
//! method and by the repository's pseudo-spectral solver from the same
//! field at the same resolution. Times in eddy turnover times `T = L /
//! u'` (yokota2009 eqs 40-41: `L = pi / (2 u'^2) int E(k) / k dk`, `u' =
//! sqrt(2 K / 3)`); `K(t)` and `-dK/dt` of both every `--every` steps,
//! `E(k)` of both at the end (`common::periodic_flow`).
//!
//! `cargo run --release --example vortex_turbulence -- --n 32 --turnovers 0.5`

mod common;

use clap::Parser;
use common::periodic_flow::{run, Case, Isotropic, RunArgs};

#[derive(Parser, Debug)]
#[command(about = "Decaying isotropic turbulence: vortex particles against a spectral solver")]
struct Args {
    #[command(flatten)]
    field: Isotropic,
    /// How long, in eddy turnover times.
    #[arg(long, default_value_t = 1.0)]
    turnovers: f64,
    /// The step; by default a Courant number of 0.8 of the spectral
    /// solver at the start.
    #[arg(long)]
    dt: Option<f64>,
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let spectral = args.field.field()?;
    let (n, nu) = (args.field.n, args.field.nu);
    // The integral scale and the turnover time from the discrete
    // spectrum, the Taylor microscale's Reynolds number and k_max eta.
    let e = spectral.spectrum();
    let k = spectral.energy();
    let u1 = (2.0 * k / 3.0).sqrt();
    let integral = std::f64::consts::PI / (2.0 * u1 * u1)
        * e.iter()
            .enumerate()
            .skip(1)
            .map(|(j, ej)| ej / j as f64)
            .sum::<f64>();
    let turnover = integral / u1;
    let eps = spectral.dissipation();
    let lambda = (15.0 * nu * u1 * u1 / eps).sqrt();
    let eta = (nu.powi(3) / eps).powf(0.25);
    let kmax = (n / 2 - 1) as f64;
    let dt = match args.dt {
        Some(dt) => dt,
        None => {
            let stable = spectral.stable_dt(0.8);
            turnover / (turnover / stable).ceil()
        }
    };
    println!(
        "initial field: K {k:.4}, u' {u1:.4}, L {integral:.4}, T {turnover:.4}, epsilon {eps:.4}, Re_lambda {:.1}, k_max eta {:.2}",
        u1 * lambda / nu,
        kmax * eta
    );
    let case = Case {
        name: "vortex_turbulence",
        title: format!(
            "Decaying isotropic turbulence, {}^3, Re_lambda {:.0} at the start",
            n,
            u1 * lambda / nu
        ),
        nu,
        dt,
        t_end: args.turnovers * turnover,
        unit: (turnover, "t/T"),
    };
    run(&args.run, &case, spectral)
}
