// `sqrt` takes a scalar; `d` is the separation vector.
fmm_macros::kernel! {
    kernel Vec3WhereScalarNeeded {
        source m;
        output phi;
        phi += m * sqrt(d);
    }
}

fn main() {}
