//! Device facts the runtime's device query leaves out but a proposer needs
//! to write a fast kernel: a CPU device's vector instruction set and the
//! cores this process may use, a GPU's warp size and register file.
//!
//! A CPU runtime (PoCL) reports compute units and a clock, never the SIMD
//! width its compiler targets, and its compute units can exceed the cores
//! a container or an affinity mask leaves the process; a kernel written
//! for the wrong width or core count leaves most of the machine idle.

use serde::{Deserialize, Serialize};

/// The widest vector instruction set a CPU's cores have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Simd {
    Sse,
    Avx,
    Avx2,
    Avx512,
    Neon,
}

impl Simd {
    /// 32-bit float lanes in one vector register.
    pub fn fp32_lanes(self) -> u32 {
        match self {
            Simd::Sse | Simd::Neon => 4,
            Simd::Avx | Simd::Avx2 => 8,
            Simd::Avx512 => 16,
        }
    }
}

impl std::fmt::Display for Simd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Simd::Sse => "SSE",
            Simd::Avx => "AVX",
            Simd::Avx2 => "AVX2",
            Simd::Avx512 => "AVX-512",
            Simd::Neon => "NEON",
        })
    }
}

/// What [`DeviceInfo`](crate::DeviceInfo) holds beyond the runtime's own
/// device query; each field `None` where unknown or meaningless for the
/// device (and in devices recorded before it was).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceDetails {
    /// CPU devices: the widest vector instruction set of the host's cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simd: Option<Simd>,
    /// CPU devices: the cores this process may run on (its affinity mask
    /// and CPU quota), which the runtime's compute units may exceed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_available: Option<u32>,
    /// GPUs: threads per warp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warp_size: Option<u32>,
    /// GPUs: 32-bit registers per multiprocessor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers_per_sm: Option<u32>,
    /// GPUs: resident threads per multiprocessor at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads_per_sm: Option<u32>,
}

impl DeviceDetails {
    /// Nothing known (skipped when serialised).
    pub fn is_empty(&self) -> bool {
        *self == DeviceDetails::default()
    }

    /// The host CPU's facts, for a CPU device that runs on it: the vector
    /// instruction set from `/proc/cpuinfo` (Linux; none elsewhere) and
    /// the cores [`std::thread::available_parallelism`] allows.
    pub fn host_cpu() -> DeviceDetails {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        DeviceDetails {
            simd: simd_from_cpuinfo(&cpuinfo),
            cores_available: std::thread::available_parallelism()
                .ok()
                .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
            ..DeviceDetails::default()
        }
    }
}

/// The first value of `/proc/cpuinfo`'s `key` line (`key<tabs>: value`).
fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The widest vector instruction set named in `/proc/cpuinfo` text: x86's
/// `flags` line (`avx512f`, `avx2`, `avx`, `sse2`) or Arm's `Features`
/// (`asimd`); None when neither line names one.
pub fn simd_from_cpuinfo(cpuinfo: &str) -> Option<Simd> {
    let flags = cpuinfo_field(cpuinfo, "flags").or_else(|| cpuinfo_field(cpuinfo, "Features"))?;
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    [
        ("avx512f", Simd::Avx512),
        ("avx2", Simd::Avx2),
        ("avx", Simd::Avx),
        ("sse2", Simd::Sse),
        ("asimd", Simd::Neon),
        ("neon", Simd::Neon),
    ]
    .into_iter()
    .find_map(|(flag, simd)| has(flag).then_some(simd))
}

/// The clock `/proc/cpuinfo` gives its first core (`cpu MHz`), rounded;
/// for a CPU device whose runtime reports none.
pub fn mhz_from_cpuinfo(cpuinfo: &str) -> Option<u32> {
    let mhz: f64 = cpuinfo_field(cpuinfo, "cpu MHz")?.parse().ok()?;
    (mhz.is_finite() && mhz >= 1.0).then(|| mhz.round() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPYC: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\
cpu MHz\t\t: 2445.426\nflags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx avx2 bmi2\n";
    const XEON: &str =
        "model name\t: Intel(R) Xeon(R)\nflags\t\t: sse2 avx avx2 avx512f avx512bw avx512vl\n";
    const GRAVITON: &str = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 sve\n";

    #[test]
    fn the_widest_vector_set_wins() {
        assert_eq!(simd_from_cpuinfo(XEON), Some(Simd::Avx512));
        assert_eq!(simd_from_cpuinfo(EPYC), Some(Simd::Avx2));
        assert_eq!(simd_from_cpuinfo(GRAVITON), Some(Simd::Neon));
        assert_eq!(
            simd_from_cpuinfo("flags\t: fpu sse sse2 avx\n"),
            Some(Simd::Avx)
        );
        assert_eq!(
            simd_from_cpuinfo("flags\t: fpu sse sse2\n"),
            Some(Simd::Sse)
        );
        assert_eq!(simd_from_cpuinfo("model name\t: ?\n"), None);
        assert_eq!(simd_from_cpuinfo(""), None);
    }

    #[test]
    fn flags_are_whole_words() {
        // `avx512_vnni` alone is no AVX-512F, `avx2x` no AVX2.
        assert_eq!(
            simd_from_cpuinfo("flags\t: sse2 avx512_vnni avx2x\n"),
            Some(Simd::Sse)
        );
    }

    #[test]
    fn lanes_follow_the_register_width() {
        assert_eq!(Simd::Avx512.fp32_lanes(), 16);
        assert_eq!(Simd::Avx2.fp32_lanes(), 8);
        assert_eq!(Simd::Neon.fp32_lanes(), 4);
        assert_eq!(Simd::Avx512.to_string(), "AVX-512");
    }

    #[test]
    fn the_clock_comes_from_the_first_core() {
        assert_eq!(mhz_from_cpuinfo(EPYC), Some(2445));
        assert_eq!(mhz_from_cpuinfo(GRAVITON), None);
        assert_eq!(mhz_from_cpuinfo("cpu MHz\t: nan\n"), None);
    }

    #[test]
    fn empty_details_are_not_serialised_and_old_records_read() {
        let json = serde_json::to_value(DeviceDetails::default()).unwrap();
        assert_eq!(json, serde_json::json!({}));
        let d: DeviceDetails = serde_json::from_str(r#"{"simd":"avx512"}"#).unwrap();
        assert_eq!(d.simd, Some(Simd::Avx512));
        assert!(!d.is_empty());
    }
}
