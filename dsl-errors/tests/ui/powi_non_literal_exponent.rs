// The exponent of `powi` must be an integer literal.
fmm_macros::kernel! {
    kernel PowiNonLiteralExponent {
        param n;
        source m;
        output phi;
        phi += m * powi(r2, n);
    }
}

fn main() {}
