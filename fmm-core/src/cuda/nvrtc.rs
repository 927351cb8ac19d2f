//! Run-time compilation of generated CUDA C with NVRTC, to CUBIN.
//!
//! CUBIN (machine code for the GPU's own architecture), not PTX: a PTX
//! from an NVRTC newer than the driver cannot be loaded, a CUBIN can (KeOps
//! users hit the PTX failure often). A compile failure shows NVRTC's log
//! with the generated lines it points at.

use std::ffi::{c_char, c_int, CString};

use cudarc::nvrtc::{result, sys};

use crate::error::Error;

/// Whether the NVRTC library can be loaded.
pub fn available() -> bool {
    // SAFETY: only tries to open the shared library; loads nothing else.
    unsafe { sys::is_culib_present() }
}

/// NVRTC's version, `(major, minor)`.
pub fn version() -> Result<(i32, i32), Error> {
    if !available() {
        return Err(Error::CudaUnavailable(
            "the NVRTC library (libnvrtc.so) was not found on the loader path".into(),
        ));
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is present; both pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcVersion: {e:?}")))?;
    Ok((major, minor))
}

/// The architectures (`90` for sm_90) this NVRTC can compile for.
pub fn supported_archs() -> Result<Vec<i32>, Error> {
    version()?;
    let mut n: c_int = 0;
    // SAFETY: the library is present; `n` is valid for writes.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcGetNumSupportedArchs: {e:?}")))?;
    let mut archs = vec![0 as c_int; n.max(0) as usize];
    // SAFETY: `archs` has room for the `n` entries NVRTC writes.
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcGetSupportedArchs: {e:?}")))?;
    Ok(archs)
}

/// The options every module is compiled with, besides the architecture.
///
/// The three single-precision switches (they leave f64 alone) drop the
/// denormal handling around `rsqrtf` and the IEEE-exact division and square
/// root: four extra instructions per interaction in the gravity kernel
/// otherwise (SASS, NVRTC 13.5, sm_90), for accuracy f32 does not keep in a
/// long sum anyway (`rsqrtf` stays within 2 ulp).
pub fn default_options() -> Vec<String> {
    [
        "-std=c++17",
        "--fmad=true",
        "--ftz=true",
        "--prec-div=false",
        "--prec-sqrt=false",
    ]
    .map(String::from)
    .to_vec()
}

/// Compiles `source` to a CUBIN for `sm_{arch}` (for example 90).
pub fn compile_cubin(
    kernel: &str,
    source: &str,
    arch: i32,
    options: &[String],
) -> Result<Vec<u8>, Error> {
    version()?;
    let src = CString::new(source)
        .map_err(|_| Error::Cuda("generated source contains a NUL byte".into()))?;
    let name = CString::new(format!("{kernel}.cu")).expect("kernel names have no NUL");
    let prog = result::create_program(&src, Some(&name))
        .map_err(|e| Error::Cuda(format!("nvrtcCreateProgram: {e:?}")))?;
    let mut opts = vec![format!("--gpu-architecture=sm_{arch}")];
    opts.extend(options.iter().cloned());
    // SAFETY: `prog` was just created and is destroyed below, once.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    // SAFETY: as above; the log exists whether or not compilation worked.
    let log = unsafe { result::get_program_log(prog) }
        .map(|l| c_chars_to_string(&l))
        .unwrap_or_default();
    let out = match compiled {
        Ok(()) => get_cubin(prog),
        Err(_) => Err(Error::Nvrtc {
            kernel: kernel.to_string(),
            log: annotate_log(&log, source, &format!("{kernel}.cu")),
        }),
    };
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

fn get_cubin(prog: sys::nvrtcProgram) -> Result<Vec<u8>, Error> {
    let mut size: usize = 0;
    // SAFETY: `prog` is a compiled program; `size` is valid for writes.
    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcGetCUBINSize: {e:?}")))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has the `size` bytes NVRTC writes.
    unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcGetCUBIN: {e:?}")))?;
    Ok(cubin)
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// NVRTC's log with each `file(line): ...` message followed by the
/// generated line it points at.
pub fn annotate_log(log: &str, source: &str, file: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = String::new();
    for msg in log.lines() {
        out.push_str(msg);
        out.push('\n');
        let Some(rest) = msg.strip_prefix(file).and_then(|r| r.strip_prefix('(')) else {
            continue;
        };
        let Some(n) = rest.split(')').next().and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if let Some(line) = n.checked_sub(1).and_then(|i| lines.get(i)) {
            out.push_str(&format!("  {n:>5} | {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::annotate_log;

    #[test]
    fn log_lines_point_at_the_generated_source() {
        let source = "line one\nconst T v3 = oops(x);\nline three\n";
        let log = "gravity.cu(2): error: identifier \"oops\" is undefined\n\n1 error detected";
        let out = annotate_log(log, source, "gravity.cu");
        assert!(out.contains("gravity.cu(2): error: identifier \"oops\" is undefined\n      2 | const T v3 = oops(x);\n"), "{out}");
        assert!(out.contains("1 error detected"));
    }
}
