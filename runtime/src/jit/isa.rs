//! Cranelift's target ISA for this machine, built once per compile.
//!
//! What the CPU has comes from the kernels crate's detection (`tessel_kernels::cpu`), the
//! one for the whole project. `cranelift_native::builder()` reads CPUID and enables SSE4.1 (vector floor/ceil/nearest),
//! AVX and FMA (`fma.f32x4` as one instruction instead of four libcalls). `JITModule` needs
//! `is_pic=false`.

use super::JitError;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use tessel_kernels::cpu::CpuFeatures;

/// Builds the ISA for this machine. `opt_level` is Cranelift's `none`, `speed` or
/// `speed_and_size`.
pub(crate) fn host_isa(opt_level: &str) -> Result<(OwnedTargetIsa, CpuFeatures), JitError> {
    let features = CpuFeatures::detect();
    if cfg!(target_arch = "x86_64") && !features.sse41 {
        return Err(JitError::Unsupported(
            "the JIT needs SSE4.1 (vector floor/ceil/round)".into(),
        ));
    }
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| JitError::Codegen(format!("setting {k}={v}: {e}")))
    };
    set(&mut flags, "opt_level", opt_level)?;
    set(&mut flags, "is_pic", "false")?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(
        &mut flags,
        "enable_verifier",
        if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        },
    )?;
    let isa_builder = cranelift_native::builder()
        .map_err(|e| JitError::Unsupported(format!("host machine is not supported: {e}")))?;
    let isa = isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| JitError::Codegen(format!("building the host ISA: {e}")))?;
    Ok((isa, features))
}
