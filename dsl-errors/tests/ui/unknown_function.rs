// `tanh` is not a built-in function.
fmm_macros::kernel! {
    kernel UnknownFunction {
        source m;
        output phi;
        phi += m * tanh(r2);
    }
}

fn main() {}
