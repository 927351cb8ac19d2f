//! `FMM_BACKEND` steers `Backend::Auto`. One test in its own process, since
//! it sets an environment variable.

use fmm_core::{resolve, Backend, Error};

#[test]
fn fmm_backend_overrides_auto() {
    std::env::set_var("FMM_BACKEND", "cpu");
    assert_eq!(Backend::from_env().unwrap(), Backend::Cpu);
    assert!(matches!(
        resolve(Backend::Auto).unwrap(),
        fmm_core::Device::Cpu
    ));
    std::env::set_var("FMM_BACKEND", "tpu");
    assert_eq!(
        resolve(Backend::Auto).unwrap_err(),
        Error::UnknownBackend("tpu".into())
    );
    // An explicit choice is not overridden.
    assert!(matches!(
        resolve(Backend::Cpu).unwrap(),
        fmm_core::Device::Cpu
    ));
    std::env::remove_var("FMM_BACKEND");
}
