// Two vectors cannot be multiplied: use dot, cross or a component.
fmm_macros::kernel! {
    kernel VectorTimesVector {
        source m;
        output phi;
        phi += m * (d * d);
    }
}

fn main() {}
