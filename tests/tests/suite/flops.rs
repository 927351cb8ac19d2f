//! The flop counter on the built-in kernels, against counts made by hand
//! from the declarations (see the README's table for the papers' counts).

use fmm_core::kernels::*;
use fmm_core::Kernel;

fn ops<K: Kernel>() -> Vec<(&'static str, u32)> {
    K::flops().by_op.into_iter().collect()
}

#[test]
fn gravity_counts_as_nyland() {
    // d: 3 subtractions; r2: 3 multiplications and 2 additions; + eps^2
    // (eps^2 itself is hoisted); one rsqrt; m * inv, inv * (inv * m inv):
    // 3 multiplications; d * that: 3; four accumulations (subtractions).
    // nyland2007 counts 20 for the acceleration with sqrt and a division
    // in place of the rsqrt; the potential costs the same one flop here.
    let fc = Gravity::flops();
    assert_eq!(
        ops::<Gravity>(),
        vec![("*", 9), ("+", 3), ("-", 7), ("rsqrt", 1)]
    );
    assert_eq!((fc.plain, fc.weighted), (20, 23));
}

#[test]
fn weighted_counts_follow_yokota2009_table_2() {
    // Weighted = plain + 3 per rsqrt/sqrt, + 4 per division, + 7 per exp/erf.
    for (name, fc) in [
        ("gravity", Gravity::flops()),
        ("coulomb", Coulomb::flops()),
        ("biot-savart", BiotSavart::flops()),
        ("stretching", Stretching::flops()),
        ("velocity+stretching", VelocityStretching::flops()),
        ("hu2011", HuBiotSavart::flops()),
        ("stokeslet", Stokeslet::flops()),
        ("stokeslet-singular", StokesletSingular::flops()),
        ("yukawa", Yukawa::flops()),
    ] {
        let n = |op: &str| fc.by_op.get(op).copied().unwrap_or(0);
        let expected = fc.plain
            + 3 * (n("sqrt") + n("rsqrt"))
            + 4 * n("/")
            + 7 * (n("exp") + n("erf") + n("log"));
        assert_eq!(fc.weighted, expected, "{name}: {fc}");
        assert!(fc.plain > 0);
        println!("{name:22} {fc}");
    }
}

#[test]
fn fused_kernel_costs_less_than_its_parts() {
    // yokota2009 section 4.2: velocity and stretching share g, exp and the
    // powers of 1/r.
    let fused = VelocityStretching::flops().weighted;
    let parts = BiotSavart::flops().weighted + Stretching::flops().weighted;
    assert!(fused < parts, "fused {fused} vs separate {parts}");
    assert!(fused < Stretching::flops().weighted + 20);
}
