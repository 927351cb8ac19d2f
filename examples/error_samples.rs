//! How often the error a tolerance is met by (`Estimate::bound`: a
//! stratified sample's estimate plus three standard errors) is below the
//! error over every target, on the clustered case the tests check: half
//! of the points at one spot. For each FMM setting the whole error is
//! measured against the f64 direct sum at every target, then samples of
//! 64 and 256 targets are drawn, one at random within each stratum of the
//! sampler's Morton order, and the misses counted; "middle" is the
//! sample the front door takes (the middle of each stratum).
//!
//! `cargo run --release -p fmm-examples --example error_samples -- --n 10000 --draws 400`

use clap::Parser;
use fmm_core::kernels::Gravity;
use fmm_core::reference::{direct_f64_at, estimate, stratified, Estimate};
use fmm_core::{evaluate, Backend, Method, Particles};

#[derive(Parser)]
struct Args {
    /// Points (half of them in a cube a thousandth as wide).
    #[arg(long, default_value_t = 10_000)]
    n: usize,
    /// Random samples drawn per setting and size.
    #[arg(long, default_value_t = 400)]
    draws: usize,
}

/// The Morton key of `p` at `level` bits an axis in the box `lo..hi`.
fn morton(p: [f64; 3], lo: [f64; 3], hi: [f64; 3], level: u32) -> u64 {
    let side = (1u64 << level) as f64;
    let c: Vec<u64> = (0..3)
        .map(|a| (((p[a] - lo[a]) / (hi[a] - lo[a]) * side) as u64).min((1 << level) - 1))
        .collect();
    let mut key = 0;
    for b in (0..level).rev() {
        for x in &c {
            key = (key << 1) | ((x >> b) & 1);
        }
    }
    key
}

/// The estimate on the targets `idx`.
fn at(idx: &[usize], got: &[Vec<f64>], want: &[Vec<f64>]) -> Estimate {
    let pick = |v: &[Vec<f64>]| -> Vec<Vec<f64>> {
        v.iter()
            .map(|s| idx.iter().map(|&i| s[i]).collect())
            .collect()
    };
    estimate(&pick(got), &pick(want), false)
}

fn main() {
    let args = Args::parse();
    let mut pos = fmm_core::distributions::uniform_cube(args.n, 3);
    for p in pos.iter_mut().take(args.n / 2) {
        *p = [0.3 + 1e-3 * p[0], 0.3 + 1e-3 * p[1], 0.3 + 1e-3 * p[2]];
    }
    let m = pos.len();
    let mut s = Particles::sources::<Gravity>(&pos).unwrap();
    s.set("m", &vec![1.0 / m as f64; m]).unwrap();
    let t = Particles::targets::<Gravity>(&pos).unwrap();
    let every: Vec<usize> = (0..m).collect();
    let exact = direct_f64_at::<Gravity, f64>(&[0.0], &t, &every, &s);
    let (mut lo, mut hi) = ([f64::MAX; 3], [f64::MIN; 3]);
    for p in &pos {
        for a in 0..3 {
            lo[a] = lo[a].min(p[a]);
            hi[a] = hi[a].max(p[a]);
        }
    }
    // The sampler's order: the same level as `reference::stratified`'s.
    let order = |k: usize| -> Vec<usize> {
        let level = (((4 * k) as f64).log2() / 3.0).ceil().clamp(1.0, 10.0) as u32;
        let mut keyed: Vec<(u64, usize)> =
            (0..m).map(|i| (morton(pos[i], lo, hi, level), i)).collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, i)| i).collect()
    };
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as usize
    };
    println!("{m} points, {} random draws a size", args.draws);
    for p in [9, 11, 13] {
        for theta in [0.4, 0.48, 0.55] {
            let ev =
                evaluate::<Gravity, f64>(Backend::Cpu, &Method::fmm(p, theta), &[0.0][..], &t, &s)
                    .unwrap();
            let got: Vec<Vec<f64>> = ev.outputs.slots().iter().map(|v| v.to_vec()).collect();
            let whole = estimate(&got, &exact, true).value;
            let mut line = format!("p {p:2} theta {theta:.2} whole error {whole:.2e}");
            for k in [64, 256] {
                let middle = at(&stratified(&t, k), &got, &exact).bound() < whole;
                let ord = order(k);
                let (mut misses, mut over) = (0, 0.0);
                for _ in 0..args.draws {
                    let idx: Vec<usize> = (0..k)
                        .map(|st| {
                            let (a, b) = (st * m / k, (st + 1) * m / k);
                            ord[a + next() % (b - a)]
                        })
                        .collect();
                    let bound = at(&idx, &got, &exact).bound();
                    misses += usize::from(bound < whole);
                    over += bound / whole;
                }
                line += &format!(
                    " | {k}: middle {}, random missed {:.1}%, bound/whole {:.2}",
                    if middle { "missed" } else { "held" },
                    100.0 * misses as f64 / args.draws as f64,
                    over / args.draws as f64
                );
            }
            println!("{line}");
        }
    }
}
