//! What this machine's CPU has: detected once for the whole project (the kernels choose their
//! code paths from it, and the JIT builds Cranelift's target ISA after checking it).

use std::sync::OnceLock;

/// CPU features that change which code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuFeatures {
    pub sse41: bool,
    pub avx: bool,
    pub avx2: bool,
    pub fma: bool,
    pub avx512f: bool,
}

impl CpuFeatures {
    /// This machine's features (read from CPUID on the first call).
    pub fn detect() -> CpuFeatures {
        static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
        *FEATURES.get_or_init(read)
    }

    /// 8-lane vectors with fused multiply-add.
    pub(crate) fn avx2_fma(&self) -> bool {
        self.avx2 && self.fma
    }
}

/// Which instructions the routines use (the direct and Winograd convolutions, their small
/// GEMM, the pooling routines), decided once when a routine is planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    Avx2Fma,
    Portable,
}

impl Isa {
    /// The best this machine has, or the one named by `TESSEL_CONV_ISA` (`avx512`, `avx2` or
    /// `portable`) when this machine has it: the switch for measuring one against another.
    pub fn detect() -> Isa {
        let available = Isa::available();
        let wanted = std::env::var("TESSEL_CONV_ISA").ok();
        available
            .iter()
            .copied()
            .find(|isa| wanted.as_deref() == Some(isa.name()))
            .unwrap_or(available[0])
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2Fma => "avx2",
            Isa::Portable => "portable",
        }
    }

    /// Every instruction set this machine can run, the best first.
    pub fn available() -> Vec<Isa> {
        let mut v = Vec::new();
        if cfg!(target_arch = "x86_64") {
            let cpu = CpuFeatures::detect();
            if cpu.avx512f {
                v.push(Isa::Avx512);
            }
            if cpu.avx2_fma() {
                v.push(Isa::Avx2Fma);
            }
        }
        v.push(Isa::Portable);
        v
    }
}

#[cfg(target_arch = "x86_64")]
fn read() -> CpuFeatures {
    CpuFeatures {
        sse41: std::is_x86_feature_detected!("sse4.1"),
        avx: std::is_x86_feature_detected!("avx"),
        avx2: std::is_x86_feature_detected!("avx2"),
        fma: std::is_x86_feature_detected!("fma"),
        avx512f: std::is_x86_feature_detected!("avx512f"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn read() -> CpuFeatures {
    CpuFeatures {
        sse41: false,
        avx: false,
        avx2: false,
        fma: false,
        avx512f: false,
    }
}

/// One line naming the CPU, from `/proc/cpuinfo` (family, model, model name) and the
/// detected features: `cpu family 25 model 97 "AMD Ryzen ..." avx512f yes avx2 yes`.
pub fn describe() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split_once(':'))
            .map_or("?".to_string(), |(_, v)| v.trim().to_string())
    };
    let f = CpuFeatures::detect();
    let yes = |b: bool| if b { "yes" } else { "no" };
    format!(
        "cpu family {} model {} \"{}\" avx512f {} avx2 {} fma {}",
        field("cpu family"),
        field("model"),
        field("model name"),
        yes(f.avx512f),
        yes(f.avx2),
        yes(f.fma),
    )
}
