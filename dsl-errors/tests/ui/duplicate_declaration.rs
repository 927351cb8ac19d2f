// `m` is declared twice, as a parameter and as a source field.
fmm_macros::kernel! {
    kernel DuplicateDeclaration {
        param m;
        source m;
        output phi;
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
