// Closures are not part of the DSL.
fmm_macros::kernel! {
    kernel Closure {
        source m;
        output phi;
        let f = |x| x * m;
        phi += f(select(r2 > 0.0, rsqrt(r2), 0.0));
    }
}

fn main() {}
