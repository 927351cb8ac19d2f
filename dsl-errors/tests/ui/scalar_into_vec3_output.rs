// `acc` is a vec3 output; `m * inv` is a scalar.
fmm_macros::kernel! {
    kernel ScalarIntoVec3Output {
        source m;
        output acc: vec3;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        acc += m * inv;
    }
}

fn main() {}
