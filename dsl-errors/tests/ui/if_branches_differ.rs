// Both branches of an `if` must have the same shape.
fmm_macros::kernel! {
    kernel IfBranchesDiffer {
        source m;
        output acc: vec3;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        acc += m * if r2 > 1.0 { inv * d } else { inv };
    }
}

fn main() {}
