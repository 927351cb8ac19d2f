// A softened potential is finite at r = 0, so without a `select` guard the
// kernel adds a non-zero self-interaction.
fmm_macros::kernel! {
    kernel NonzeroAtRZero {
        param eps;
        source m;
        output phi;
        phi += m / sqrt(r2 + eps * eps);
    }
}

fn main() {}
