//! The open-space divergence filter (`solenoidal::make_solenoidal`): a
//! gradient field is taken out, a solenoidal one kept, against closed
//! forms sampled on the lattice; bad lattices and particles named.

use fmm_core::{Backend, Method};
use fmm_vortex::remesh::Lattice;
use fmm_vortex::solenoidal::make_solenoidal;
use fmm_vortex::{Precision, Solver, VortexParticles};

fn solver() -> Solver {
    Solver {
        backend: Backend::Cpu,
        method: Method::tolerance(1e-8),
        precision: Precision::F64,
        domain: fmm_core::Domain::FreeSpace,
        stretching: Default::default(),
    }
}

const H: f64 = 0.1;
const S: f64 = 0.35;

/// Particles on the lattice points within 4 S of the origin carrying the
/// vorticity `w(x)` sampled there.
fn sampled(w: impl Fn([f64; 3]) -> [f64; 3]) -> VortexParticles {
    let m = (4.0 * S / H).ceil() as i64;
    let mut x = Vec::new();
    for i in -m..m {
        for j in -m..m {
            for k in -m..m {
                x.push([i, j, k].map(|c| (c as f64 + 0.5) * H));
            }
        }
    }
    let alpha: Vec<[f64; 3]> = x.iter().map(|&p| w(p).map(|c| c * H * H * H)).collect();
    let n = x.len();
    VortexParticles::new(x, alpha, vec![H; n], vec![H * H * H; n]).unwrap()
}

fn gaussian(x: [f64; 3]) -> f64 {
    (-(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]) / (2.0 * S * S)).exp()
}

/// The r.m.s. of `a - b` over the r.m.s. of `b`, by lattice point (`a`'s
/// points not in `b` counted whole).
fn rms_change(a: &VortexParticles, b: &VortexParticles) -> f64 {
    let key = |x: &[f64; 3]| x.map(|c| (c / H - 0.5).round() as i64);
    let old: std::collections::HashMap<_, _> = b.x.iter().map(key).zip(&b.alpha).collect();
    let mut d2 = 0.0;
    for (x, v) in a.x.iter().zip(&a.alpha) {
        let o = old.get(&key(x)).map_or([0.0; 3], |o| **o);
        d2 += (0..3).map(|c| (v[c] - o[c]).powi(2)).sum::<f64>();
    }
    let b2: f64 = b.alpha.iter().flatten().map(|c| c * c).sum();
    (d2 / b2).sqrt()
}

#[test]
fn a_gradient_field_is_taken_out() {
    // w = grad exp(-r^2 / (2 S^2)): all gradient, nothing should stay.
    let p = sampled(|x| {
        let g = gaussian(x) / (S * S);
        [-x[0] * g, -x[1] * g, -x[2] * g]
    });
    let lattice = Lattice::Open {
        origin: [0.0; 3],
        h: H,
    };
    let f = make_solenoidal(&p, &lattice, 0.0, &solver()).unwrap();
    let left = f
        .particles
        .alpha
        .iter()
        .flatten()
        .map(|c| c * c)
        .sum::<f64>()
        .sqrt()
        / p.alpha.iter().flatten().map(|c| c * c).sum::<f64>().sqrt();
    println!(
        "gradient: divergence {:.2e} -> {:.2e}, what is left {left:.2e}",
        f.divergence_before, f.divergence_after
    );
    assert!(left < 0.1, "{left}");
    assert!(f.divergence_after < 0.1 * f.divergence_before);
}

#[test]
fn a_solenoidal_field_is_kept() {
    // w = curl (0, 0, psi) = (d psi/dy, -d psi/dx, 0), psi Gaussian.
    let p = sampled(|x| {
        let g = gaussian(x) / (S * S);
        [-x[1] * g, x[0] * g, 0.0]
    });
    let lattice = Lattice::Open {
        origin: [0.0; 3],
        h: H,
    };
    let f = make_solenoidal(&p, &lattice, 0.0, &solver()).unwrap();
    let change = rms_change(&f.particles, &p);
    println!(
        "solenoidal: divergence {:.2e} -> {:.2e}, changed by {change:.2e}",
        f.divergence_before, f.divergence_after
    );
    // The field is solenoidal in the continuum, its central differences
    // to O(h^2): the filter moves it by about that.
    assert!(change < 1e-2, "{change}");
    assert!(f.divergence_after < 0.5 * f.divergence_before);
}

#[test]
fn bad_lattices_and_particles_are_named() {
    let p = sampled(|_| [1.0, 0.0, 0.0]);
    let periodic = Lattice::Periodic {
        pbox: fmm_core::PeriodicBox::cube([0.0; 3], 1.0),
        n: 8,
    };
    let e = make_solenoidal(&p, &periodic, 0.0, &solver()).unwrap_err();
    assert!(e.to_string().contains("open"), "{e}");
    let off = Lattice::Open {
        origin: [0.03, 0.0, 0.0],
        h: H,
    };
    let e = make_solenoidal(&p, &off, 0.0, &solver()).unwrap_err();
    assert!(e.to_string().contains("lattice"), "{e}");
}
