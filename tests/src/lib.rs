//! Shared helpers of the integration tests in `tests/tests/`.

/// Relative L2 error of `got` against `want`: `|got - want| / |want|`.
pub fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}
