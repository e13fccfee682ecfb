//! Vendor-library equivalents of a task's job (cuFFT for fft3d, cuBLAS for
//! saxpy), described as data: a task says which job its kernels do, a
//! backend says which library does it and runs it. Then a kernel's time can
//! be put next to what the vendor ships, on the same device and inputs,
//! without tasks knowing any library or backends knowing any task.

use serde::{Deserialize, Serialize};

use crate::{BackendError, BufferId};

/// A job a vendor library does exactly as a task's host program does it.
/// `B` names buffers: an index into the problem's buffers where a task
/// describes it (`usize`), a device buffer where a backend runs it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum VendorOp<B = BufferId> {
    /// `repeats` forward, unnormalised 3-D complex-to-complex FFTs of an
    /// `n`³ cube of interleaved f32 (re, im), row-major with the last index
    /// fastest, alternating between the two buffers as the task's kernels
    /// do: the first reads `buffers[0]` and writes `buffers[1]`, the next
    /// reads `buffers[1]` and writes `buffers[0]`, so the result is in
    /// `buffers[repeats % 2]`.
    Fft3dC2c {
        n: u32,
        repeats: u32,
        buffers: [B; 2],
    },
    /// `y <- alpha * x + y` over `n` f32 values, in place on `y`.
    Saxpy { n: u64, alpha: f32, x: B, y: B },
}

/// A vendor library as loaded: what a baseline names, with the version
/// that produced its times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorLibrary {
    /// "cuFFT"
    pub name: String,
    /// "12.0.0", as the library reports it.
    pub version: String,
}

/// What kind of job an op is, without its sizes and buffers: what a
/// backend needs to say which library would run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VendorKind {
    Fft3dC2c,
    Saxpy,
}

impl<B> VendorOp<B> {
    pub fn kind(&self) -> VendorKind {
        match self {
            VendorOp::Fft3dC2c { .. } => VendorKind::Fft3dC2c,
            VendorOp::Saxpy { .. } => VendorKind::Saxpy,
        }
    }

    /// The same op with its buffers renamed by `f` (task indices to device
    /// buffers).
    pub fn map<C>(self, mut f: impl FnMut(B) -> C) -> VendorOp<C> {
        match self {
            VendorOp::Fft3dC2c {
                n,
                repeats,
                buffers: [a, b],
            } => VendorOp::Fft3dC2c {
                n,
                repeats,
                buffers: [f(a), f(b)],
            },
            VendorOp::Saxpy { n, alpha, x, y } => VendorOp::Saxpy {
                n,
                alpha,
                x: f(x),
                y: f(y),
            },
        }
    }

    /// The buffers the op reads or writes.
    pub fn buffers(&self) -> Vec<&B> {
        match self {
            VendorOp::Fft3dC2c { buffers, .. } => buffers.iter().collect(),
            VendorOp::Saxpy { x, y, .. } => vec![x, y],
        }
    }

    /// One line for people: "3-D C2C forward FFT of 256³, 4 times".
    pub fn describe(&self) -> String {
        match self {
            VendorOp::Fft3dC2c { n, repeats, .. } => {
                let times = if *repeats == 1 {
                    String::new()
                } else {
                    format!(", {repeats} times")
                };
                format!("3-D C2C forward FFT of {n}³{times}")
            }
            VendorOp::Saxpy { n, alpha, .. } => format!("saxpy of {n} f32, alpha {alpha}"),
        }
    }
}

/// Why a vendor library did not run an op. A missing library is a typed
/// answer, never a panic: kevo says which one and goes on without it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VendorError {
    /// This backend has no library for this kind of job (OpenCL has none
    /// wired in, or the op is one it does not know).
    #[error("the {backend} backend runs no vendor library for {kind:?}")]
    Unsupported {
        backend: crate::BackendName,
        kind: VendorKind,
    },
    /// The library is not installed, or cannot be loaded, here.
    #[error("{library} is not available: {reason}")]
    Missing {
        library: &'static str,
        reason: String,
    },
    /// The library refused or failed the call (plan creation, execution).
    #[error("{library}: {message}")]
    Failed {
        library: &'static str,
        message: String,
    },
    /// The device or the runtime failed around the call.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_rename_their_buffers_and_describe_themselves() {
        let op: VendorOp<usize> = VendorOp::Fft3dC2c {
            n: 256,
            repeats: 4,
            buffers: [0, 1],
        };
        let mapped = op.map(|i| BufferId(10 + i as u64));
        assert_eq!(
            mapped,
            VendorOp::Fft3dC2c {
                n: 256,
                repeats: 4,
                buffers: [BufferId(10), BufferId(11)]
            }
        );
        assert_eq!(mapped.kind(), VendorKind::Fft3dC2c);
        assert_eq!(op.describe(), "3-D C2C forward FFT of 256³, 4 times");
        let saxpy: VendorOp<usize> = VendorOp::Saxpy {
            n: 1 << 20,
            alpha: 2.5,
            x: 0,
            y: 1,
        };
        assert_eq!(saxpy.buffers(), vec![&0, &1]);
        assert_eq!(saxpy.describe(), "saxpy of 1048576 f32, alpha 2.5");
        let json = serde_json::to_value(saxpy).unwrap();
        assert_eq!(json["op"], "saxpy");
        assert_eq!(
            serde_json::from_value::<VendorOp<usize>>(json).unwrap(),
            saxpy
        );
    }

    #[test]
    fn a_missing_library_says_which() {
        let e = VendorError::Missing {
            library: "cuFFT",
            reason: "libcufft.so.12 could not be loaded".into(),
        };
        assert_eq!(
            e.to_string(),
            "cuFFT is not available: libcufft.so.12 could not be loaded"
        );
    }
}
