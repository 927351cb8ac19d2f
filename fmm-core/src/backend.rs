//! Choosing where an evaluation runs: the GPU when there is one, else the
//! CPU, with one log line saying which and why.

use std::sync::OnceLock;

use crate::cuda::Gpu;
use crate::error::Error;

/// Where to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// The GPU if one can be used, else the CPU (and a log line saying so).
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Backend::Auto),
            "cpu" => Ok(Backend::Cpu),
            "cuda" | "gpu" => Ok(Backend::Cuda),
            other => Err(Error::UnknownBackend(other.to_string())),
        }
    }
}

impl Backend {
    /// `FMM_BACKEND` (`cpu`, `cuda` or `auto`), else `Auto`.
    pub fn from_env() -> Result<Backend, Error> {
        match std::env::var("FMM_BACKEND") {
            Ok(v) => v.parse(),
            Err(_) => Ok(Backend::Auto),
        }
    }
}

/// A backend made concrete: where an evaluation runs.
#[derive(Clone, Copy, Debug)]
pub enum Device<'g> {
    Cpu,
    Cuda(&'g Gpu),
}

impl std::fmt::Display for Device<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "CPU ({} threads)", rayon::current_num_threads()),
            Device::Cuda(gpu) => write!(f, "CUDA on {}", gpu.info()),
        }
    }
}

/// Resolves `requested` (with `FMM_BACKEND` overriding `Auto`): `Cuda`
/// fails with the reason when no GPU can be used; `Auto` falls back to the
/// CPU. The first resolution logs one line on stderr.
pub fn resolve(requested: Backend) -> Result<Device<'static>, Error> {
    let requested = match requested {
        Backend::Auto => Backend::from_env()?,
        b => b,
    };
    let resolved = match requested {
        Backend::Cpu => (Device::Cpu, "CPU (requested)".to_string()),
        Backend::Cuda => {
            let gpu = Gpu::shared()?;
            (Device::Cuda(gpu), format!("CUDA on {}", gpu.info()))
        }
        Backend::Auto => match Gpu::shared() {
            Ok(gpu) => (Device::Cuda(gpu), format!("CUDA on {}", gpu.info())),
            Err(e) => (Device::Cpu, format!("CPU, because {e}")),
        },
    };
    static LOGGED: OnceLock<()> = OnceLock::new();
    LOGGED.get_or_init(|| {
        let threads = rayon::current_num_threads();
        eprintln!("[fmm] backend: {} ({threads} CPU threads)", resolved.1);
    });
    Ok(resolved.0)
}
