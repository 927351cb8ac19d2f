// There is no `pow`; the error suggests `powi`.
fmm_macros::kernel! {
    kernel PowSuggestsPowi {
        source m;
        output phi;
        phi += m * pow(r2, 2.0);
    }
}

fn main() {}
