// `d` is the built-in separation vector and cannot be declared.
fmm_macros::kernel! {
    kernel DeclaredBuiltinName {
        param d;
        source m;
        output phi;
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
