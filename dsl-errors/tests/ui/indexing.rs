// Components are `d.x`, `d.y`, `d.z`, not `d[0]`.
fmm_macros::kernel! {
    kernel Indexing {
        source m;
        output phi;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi += m * d[0] * inv * inv * inv;
    }
}

fn main() {}
