//! The vortex layer's tests, one binary (each test file a module: one
//! link instead of one a file, which CI's time on 2 cores feels).

mod axisymmetric;
mod checkpoint;
mod grid;
mod integrals;
mod no_slip;
mod passive;
mod reinit;
mod remesh;
mod ring;
mod rotor;
mod solenoidal;
mod spectral;
mod stretching;
mod vtk;
mod wall;
