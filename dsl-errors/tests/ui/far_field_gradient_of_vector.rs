// The gradient term needs a scalar strength; `q` is a vec3.
fmm_macros::kernel! {
    kernel FarFieldGradientOfVector {
        source q: vec3;
        output u: vec3;
        strength q;
        far_field laplace {
            u = gradient;
        }
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        u += inv * inv * inv * cross(q, d);
    }
}

fn main() {}
