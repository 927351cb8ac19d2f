// `cross` needs two vectors; `m` is a scalar source field.
fmm_macros::kernel! {
    kernel ScalarWhereVec3Needed {
        source m;
        output u: vec3;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        u += inv * cross(m, d);
    }
}

fn main() {}
