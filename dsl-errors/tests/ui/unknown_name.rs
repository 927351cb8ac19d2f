// A name that is neither declared nor built in.
fmm_macros::kernel! {
    kernel UnknownName {
        source m;
        output phi;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi += mass * inv;
    }
}

fn main() {}
