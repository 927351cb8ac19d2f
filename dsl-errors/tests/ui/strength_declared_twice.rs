// A kernel has one strength; a vector strength is one vec3 source field.
fmm_macros::kernel! {
    kernel StrengthDeclaredTwice {
        source m;
        source c;
        output phi;
        strength m;
        strength c;
        phi += (m + c) * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
