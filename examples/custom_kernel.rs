//! A kernel of your own: the screened Coulomb (Yukawa) interaction,
//! declared in a few lines and evaluated with no change to any crate
//! (`fmm_core::kernels::Yukawa` is the same sum, built in).
//!
//! `cargo run --release --example custom_kernel`

use fmm_core::{evaluate, kernel, Backend, Kernel, Method, Particles};

kernel! {
    /// Screened Coulomb (Yukawa) potential and field, screening length 1/kappa:
    /// `phi_i = sum_j q_j exp(-kappa r) / r`,
    /// `e_i = -grad phi_i = sum_j q_j exp(-kappa r) (1 + kappa r) d / r^3`.
    pub kernel Yukawa {
        param kappa;
        source q;
        output phi;
        output e: vec3;
        strength q;
        require kappa >= 0.0;
        let inv_r = select(r2 > 0.0, rsqrt(r2), 0.0);
        let screened = q * exp(-kappa * r) * inv_r;
        phi += screened;
        e += screened * (1.0 + kappa * r) * inv_r * inv_r * d;
    }
}

fn main() -> Result<(), fmm_core::Error> {
    // A small ion cloud: charges of alternating sign on a jittered lattice.
    let mut positions = Vec::new();
    let mut charges = Vec::new();
    for i in 0..10 {
        for j in 0..10 {
            for k in 0..10 {
                let jitter = 0.1 * (((i * 7 + j * 13 + k * 29) % 17) as f64 / 17.0 - 0.5);
                positions.push([
                    i as f64 + jitter,
                    j as f64 - jitter,
                    k as f64 + 0.5 * jitter,
                ]);
                charges.push(if (i + j + k) % 2 == 0 { 1.0 } else { -1.0 });
            }
        }
    }
    let mut ions = Particles::sources::<Yukawa>(&positions)?;
    ions.set("q", &charges)?;
    let probes = Particles::targets::<Yukawa>(&positions)?;

    let kappa = 0.5;
    // The GPU if there is one, else the CPU (a log line says which).
    let out = evaluate::<Yukawa, f64>(Backend::Auto, &Method::direct(), &[kappa], &probes, &ions)?
        .outputs;
    let phi = out.scalar("phi")?;
    let [ex, ey, ez] = out.vec3("e")?;

    let fc = Yukawa::flops();
    println!("kernel {}: {fc}", Yukawa::name());
    println!("{} ions, kappa = {kappa}", positions.len());
    for i in [0, 555, 999] {
        println!(
            "ion {i:4} (q = {:+}): phi = {:+.6}, e = ({:+.6}, {:+.6}, {:+.6})",
            charges[i], phi[i], ex[i], ey[i], ez[i]
        );
    }
    let energy: f64 = 0.5 * phi.iter().zip(&charges).map(|(p, q)| p * q).sum::<f64>();
    println!("electrostatic energy = {energy:.6}");
    // One CUDA module per GPU method (direct sum, treecode walk, FMM P2P
    // lists), each compiled and cached on its own.
    let direct = fmm_core::fmm_codegen::emit::Module::Direct;
    println!("\nThe CUDA source generated for its direct sum starts with:");
    for line in Yukawa::cuda_source(direct).lines().take(9) {
        println!("  {line}");
    }
    Ok(())
}
