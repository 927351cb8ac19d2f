// `acc` is declared but nothing is accumulated into it.
fmm_macros::kernel! {
    kernel OutputNeverAccumulated {
        source m;
        output phi;
        output acc: vec3;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi += m * inv;
    }
}

fn main() {}
