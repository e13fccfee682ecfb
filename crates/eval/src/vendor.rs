//! Vendor baselines: the task's job done by the vendor's library (cuFFT for
//! fft3d, cuBLAS for saxpy) on the same device and inputs, timed as
//! kernels are timed and checked by the task's own check, so a kernel's
//! time reads against what the vendor ships as well as against the
//! roofline. A library that is missing is said once and skipped.

use kevo_backend::{Backend, BackendError, BufferId, VendorError, VendorOp};
use kevo_tasks::{BufferInit, Problem, Size, Task, Verdict};
use serde::{Deserialize, Serialize};

use crate::{Evaluation, Evaluator, TimeStats, WallTimes};

/// What the vendor library did at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum VendorRun {
    /// Its output passed the task's check; the times of its timed runs.
    Correct {
        time: TimeStats,
        warmups: u32,
        metric: String,
        #[serde(with = "crate::json_f64")]
        error: f64,
        tolerance: Option<f64>,
    },
    /// Its output failed the task's check: it did another job (a sign, a
    /// normalisation, a layout), so its time says nothing and is not shown.
    WrongResult {
        metric: String,
        #[serde(with = "crate::json_f64")]
        error: f64,
        tolerance: Option<f64>,
    },
    /// The library or the device failed at this size.
    Failed { message: String },
}

/// One size of a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VendorSize {
    pub label: String,
    /// What the library ran: "3-D C2C forward FFT of 256³, 4 times".
    pub op: String,
    pub run: VendorRun,
    /// The kernel's median time over the library's, where both were
    /// correct at this size ([`VendorBaseline::compare`]): above 1 the
    /// kernel is slower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_over_library: Option<f64>,
}

impl VendorSize {
    /// The library's median time, when its output was right.
    pub fn median_s(&self) -> Option<f64> {
        match &self.run {
            VendorRun::Correct { time, .. } => Some(time.median_s),
            _ => None,
        }
    }
}

/// A task's job done by the vendor library, at each size evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum VendorBaseline {
    /// No library does this task's job on this backend (OpenCL, or a task
    /// without one): nothing to compare, nothing to say.
    None { reason: String },
    /// The library that would is not installed: the comparison is skipped.
    Missing { library: String, reason: String },
    /// The library ran at each size (or failed there).
    Measured {
        library: String,
        /// As the library reports it ("12.0.0").
        #[serde(default)]
        version: String,
        sizes: Vec<VendorSize>,
    },
    /// The process running the library died or hung: the library's
    /// failure, reported, never kevo's.
    Failed {
        library: Option<String>,
        message: String,
    },
}

impl VendorBaseline {
    /// The library's name, where one was found or named.
    pub fn library(&self) -> Option<&str> {
        match self {
            VendorBaseline::Missing { library, .. } | VendorBaseline::Measured { library, .. } => {
                Some(library)
            }
            VendorBaseline::Failed { library, .. } => library.as_deref(),
            VendorBaseline::None { .. } => None,
        }
    }

    /// The size labelled `label`.
    pub fn size(&self, label: &str) -> Option<&VendorSize> {
        match self {
            VendorBaseline::Measured { sizes, .. } => sizes.iter().find(|s| s.label == label),
            _ => None,
        }
    }

    /// Fill in each size's kernel-over-library ratio from `kernel`'s
    /// correct sizes of the same label.
    pub fn compare(&mut self, kernel: &Evaluation) {
        let VendorBaseline::Measured { sizes, .. } = self else {
            return;
        };
        for s in sizes {
            s.kernel_over_library = kernel
                .sizes
                .iter()
                .find(|k| k.label == s.label && k.correct)
                .zip(s.median_s())
                .map(|(k, lib)| k.time.median_s / lib)
                .filter(|r| r.is_finite());
        }
    }

    /// The line shown under a size's roofline fraction: "vs cuFFT: 2.31x
    /// slower (cuFFT 0.0412 ms, IQR/med 0.40%)"; None where there is no
    /// such size.
    pub fn size_text(&self, label: &str) -> Option<String> {
        let library = self.library()?;
        let s = self.size(label)?;
        Some(match &s.run {
            VendorRun::Correct { time, .. } => {
                let own = format!(
                    "{library} {:.4} ms, IQR/med {:.2}%",
                    time.median_s * 1e3,
                    time.spread * 100.0
                );
                match s.kernel_over_library {
                    Some(r) => format!("vs {library}: {} ({own})", ratio_text(r)),
                    None => format!("vs {library}: kernel not timed here ({own})"),
                }
            }
            VendorRun::WrongResult {
                metric,
                error,
                tolerance,
            } => {
                let tol = tolerance
                    .map(|t| format!(" (tolerance {t:.3e})"))
                    .unwrap_or_default();
                format!(
                    "vs {library}: not compared, {library}'s output fails the task's check: \
                     {metric}={error:.3e}{tol}"
                )
            }
            VendorRun::Failed { message } => {
                format!("vs {library}: not compared, {library} failed: {message}")
            }
        })
    }

    /// One line about the baseline as a whole, where there is something to
    /// say besides the sizes: the library is missing, or failed.
    pub fn note(&self) -> Option<String> {
        match self {
            VendorBaseline::Missing { library, reason } => Some(format!(
                "vendor baseline: {library} is missing, comparison skipped ({reason})"
            )),
            VendorBaseline::Failed { library, message } => Some(format!(
                "vendor baseline: {} failed, comparison skipped: {message}",
                library.as_deref().unwrap_or("the library")
            )),
            _ => None,
        }
    }

    /// "32cube 2.31x slower, 64cube 1.10x faster" over the compared sizes:
    /// one line for a table of tasks.
    pub fn ratios_text(&self) -> Option<String> {
        let VendorBaseline::Measured { library, sizes, .. } = self else {
            return None;
        };
        let parts: Vec<String> = sizes
            .iter()
            .map(|s| match s.kernel_over_library {
                Some(r) => format!("{} {}", s.label, ratio_text(r)),
                None => format!("{} not compared", s.label),
            })
            .collect();
        (!parts.is_empty()).then(|| format!("vs {library}: {}", parts.join(", ")))
    }
}

/// "2.31x slower" for a kernel-over-library ratio of 2.31, "1.25x faster"
/// for 0.8.
pub fn ratio_text(kernel_over_library: f64) -> String {
    if kernel_over_library >= 1.0 {
        format!("{kernel_over_library:.2}x slower")
    } else {
        format!("{:.2}x faster", 1.0 / kernel_over_library)
    }
}

impl<B: Backend> Evaluator<B> {
    /// The vendor library's version of `task`'s job at each of `sizes`
    /// (cuFFT for fft3d on CUDA), on the same device and inputs as the
    /// kernels and timed by the same protocol: every buffer restored from
    /// its pristine copy before each run, random warm-ups, timed runs on
    /// the device clock until the spread is small. The output of one more
    /// run is checked by the task's own check, so the library is shown to
    /// do the same job (sign, normalisation, layout) before its time is.
    pub fn vendor_baseline(&mut self, task: &Task, sizes: &[Size]) -> VendorBaseline {
        self.vendor_baseline_observed(task, sizes, &mut |_| {})
    }

    /// [`Evaluator::vendor_baseline`], calling `on_size` before each size.
    pub fn vendor_baseline_observed(
        &mut self,
        task: &Task,
        sizes: &[Size],
        on_size: &mut dyn FnMut(&str),
    ) -> VendorBaseline {
        let ops: Vec<(&Size, VendorOp<usize>)> = sizes
            .iter()
            .filter_map(|s| task.vendor_op(s).map(|op| (s, op)))
            .collect();
        let Some((_, first)) = ops.first() else {
            return VendorBaseline::None {
                reason: format!("no vendor library does the job of `{}`", task.name()),
            };
        };
        let library = match self.backend.vendor_library(first.kind()) {
            Ok(l) => l,
            Err(VendorError::Missing { library, reason }) => {
                return VendorBaseline::Missing {
                    library: library.into(),
                    reason,
                };
            }
            Err(e @ VendorError::Unsupported { .. }) => {
                return VendorBaseline::None {
                    reason: e.to_string(),
                };
            }
            Err(e) => {
                return VendorBaseline::Failed {
                    library: None,
                    message: e.to_string(),
                };
            }
        };
        let mut results = Vec::new();
        for (size, op) in ops {
            on_size(&size.label);
            let run = self
                .vendor_size(task, size, op)
                .unwrap_or_else(|e| VendorRun::Failed {
                    message: e.to_string(),
                });
            results.push(VendorSize {
                label: size.label.clone(),
                op: op.describe(),
                run,
                kernel_over_library: None,
            });
            if self.backend.is_poisoned() {
                break;
            }
        }
        self.backend.release_vendor();
        VendorBaseline::Measured {
            library: library.name,
            version: library.version,
            sizes: results,
        }
    }

    /// One size of a vendor baseline (see [`Evaluator::vendor_baseline`]).
    fn vendor_size(
        &mut self,
        task: &Task,
        size: &Size,
        op: VendorOp<usize>,
    ) -> Result<VendorRun, VendorError> {
        let mut wall = WallTimes::default();
        let seed = self.timed_seed(task);
        let problem = self.problem(task, size, seed, &mut wall);
        let reference = self.reference(task, size, seed, &problem, &mut wall)?;
        let checksum_key = self.utility()?.key;
        let key = (task.content_hash().to_string(), size.clone(), seed);
        let pristine = self
            .pristine
            .get(&mut self.backend, key, &problem, &[], checksum_key)?;
        let mut working: Vec<BufferId> = Vec::with_capacity(problem.buffers.len());
        let run = (|| -> Result<VendorRun, VendorError> {
            for spec in &problem.buffers {
                working.push(self.backend.alloc(spec.bytes.max(4))?);
            }
            let op = op.map(|i| working[i]);
            let (backend, config) = (&mut self.backend, &self.config);
            // What kernels get before every run: inputs back, outputs NaN.
            let reset =
                |backend: &mut B| reset_vendor_buffers(backend, &problem, &working, &pristine);
            let warmups = config.draw_warmups();
            for _ in 0..warmups {
                reset(backend)?;
                backend.run_vendor(&op)?;
            }
            let mut samples = Vec::new();
            let mut timed_s = 0.0;
            while !config.timing_done(&samples, timed_s) {
                reset(backend)?;
                let t = backend.run_vendor(&op)?.seconds();
                samples.push(t);
                timed_s += t;
            }
            reset(backend)?;
            backend.run_vendor(&op)?;
            let mut outputs = Vec::with_capacity(problem.outputs.len());
            for &i in &problem.outputs {
                let mut out = vec![0u8; problem.buffers[i].bytes];
                backend.download(working[i], &mut out)?;
                outputs.push(out);
            }
            let verdict = task.check(size, &problem, &reference, &outputs);
            Ok(vendor_run(verdict, samples, warmups))
        })();
        // The library's outputs are the answer: wiped before the memory
        // can back a later candidate's allocation.
        for (b, spec) in working.into_iter().zip(&problem.buffers) {
            let _ = self.backend.fill_buffer(b, 0, spec.bytes);
            self.backend.free(b);
        }
        run
    }
}

/// The working buffers of a vendor op restored as a kernel's are before
/// every run: inputs from their pristine copies (or uploaded where there
/// are none), outputs NaN.
fn reset_vendor_buffers(
    backend: &mut impl Backend,
    problem: &Problem,
    working: &[BufferId],
    pristine: &[Option<BufferId>],
) -> Result<(), BackendError> {
    for ((spec, &w), p) in problem.buffers.iter().zip(working).zip(pristine) {
        match (&spec.init, p) {
            (BufferInit::Data(_), Some(p)) => backend.copy_buffer(*p, w, spec.bytes)?,
            (BufferInit::Data(d), None) => backend.upload(w, d)?,
            (BufferInit::Zero, _) => backend.fill_buffer(w, 0, spec.bytes)?,
            (BufferInit::Sentinel, _) => backend.fill_buffer(w, 0xFF, spec.bytes)?,
        }
    }
    Ok(())
}

/// What a vendor op's checked output shows: its times when it passed the
/// task's check, else only that it did another job.
fn vendor_run(verdict: Verdict, samples: Vec<f64>, warmups: usize) -> VendorRun {
    if verdict.passed {
        VendorRun::Correct {
            time: TimeStats::from_samples(samples),
            warmups: warmups as u32,
            metric: verdict.metric,
            error: verdict.value,
            tolerance: verdict.tolerance,
        }
    } else {
        VendorRun::WrongResult {
            metric: verdict.metric,
            error: verdict.value,
            tolerance: verdict.tolerance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Outcome, SizeResult, WallTimes};

    fn stats(median_s: f64) -> TimeStats {
        TimeStats::from_samples(vec![median_s * 0.99, median_s, median_s * 1.01])
    }

    fn kernel(label: &str, median_s: f64, correct: bool) -> SizeResult {
        SizeResult {
            label: label.into(),
            correct,
            metric: "max_abs".into(),
            error: 0.0,
            tolerance: Some(1e-3),
            time: stats(median_s),
            warmups: 3,
            work: 1.0,
            achieved: 1.0,
            ceiling: 1.0,
            fraction: 1.0,
            unit: "GB/s".into(),
            work_note: String::new(),
            suspicious: None,
            working_set_bytes: 0,
            level: None,
        }
    }

    fn measured() -> VendorBaseline {
        let correct = |label: &str, median_s: f64| VendorSize {
            label: label.into(),
            op: "3-D C2C forward FFT of 32³".into(),
            run: VendorRun::Correct {
                time: stats(median_s),
                warmups: 2,
                metric: "max_abs".into(),
                error: 1e-4,
                tolerance: Some(2e-2),
            },
            kernel_over_library: None,
        };
        VendorBaseline::Measured {
            library: "cuFFT".into(),
            version: "12.0.0".into(),
            sizes: vec![
                correct("32cube", 10e-6),
                correct("64cube", 40e-6),
                VendorSize {
                    label: "128cube".into(),
                    op: "3-D C2C forward FFT of 128³".into(),
                    run: VendorRun::WrongResult {
                        metric: "max_abs".into(),
                        error: f64::NAN,
                        tolerance: Some(8.0),
                    },
                    kernel_over_library: None,
                },
                VendorSize {
                    label: "256cube".into(),
                    op: "3-D C2C forward FFT of 256³".into(),
                    run: VendorRun::Failed {
                        message: "cufftPlan3d(256, 256, 256, C2C) failed: CUFFT_ALLOC_FAILED"
                            .into(),
                    },
                    kernel_over_library: None,
                },
            ],
        }
    }

    #[test]
    fn ratios_are_kernel_over_library_where_both_were_correct() {
        let mut b = measured();
        let e = Evaluation {
            sizes: vec![
                kernel("32cube", 23.1e-6, true),
                kernel("64cube", 32e-6, true),
                kernel("128cube", 1e-3, true),
            ],
            ..Evaluation::without_sizes(
                "fft3d",
                "H100",
                kevo_backend::BackendName::Cuda,
                Outcome::Correct { score: 0.5 },
                WallTimes::default(),
            )
        };
        b.compare(&e);
        assert!((b.size("32cube").unwrap().kernel_over_library.unwrap() - 2.31).abs() < 1e-9);
        assert_eq!(
            b.size_text("32cube").unwrap(),
            "vs cuFFT: 2.31x slower (cuFFT 0.0100 ms, IQR/med 1.00%)"
        );
        assert!(
            b.size_text("64cube")
                .unwrap()
                .starts_with("vs cuFFT: 1.25x faster"),
            "{}",
            b.size_text("64cube").unwrap()
        );
        // No time is shown for a library that did another job.
        let wrong = b.size_text("128cube").unwrap();
        assert!(
            wrong.contains("fails the task's check") && !wrong.contains(" ms"),
            "{wrong}"
        );
        assert_eq!(b.size("128cube").unwrap().kernel_over_library, None);
        assert!(
            b.size_text("256cube")
                .unwrap()
                .contains("CUFFT_ALLOC_FAILED")
        );
        assert_eq!(b.size_text("512cube"), None);
        assert_eq!(
            b.ratios_text().unwrap(),
            "vs cuFFT: 32cube 2.31x slower, 64cube 1.25x faster, 128cube not compared, \
             256cube not compared"
        );
        // A wrong kernel is not compared either.
        let mut b2 = measured();
        let wrong_kernel = Evaluation {
            sizes: vec![kernel("32cube", 23.1e-6, false)],
            ..e.clone()
        };
        b2.compare(&wrong_kernel);
        assert_eq!(b2.size("32cube").unwrap().kernel_over_library, None);
        assert!(
            b2.size_text("32cube")
                .unwrap()
                .contains("kernel not timed here")
        );
        assert_eq!(b.note(), None);
    }

    #[test]
    fn a_missing_library_is_one_note_and_no_size_lines() {
        let b = VendorBaseline::Missing {
            library: "cuFFT".into(),
            reason: "cuFFT (libcufft.so) could not be loaded".into(),
        };
        assert_eq!(
            b.note().unwrap(),
            "vendor baseline: cuFFT is missing, comparison skipped (cuFFT (libcufft.so) could \
             not be loaded)"
        );
        assert_eq!(b.size_text("32cube"), None);
        assert_eq!(b.ratios_text(), None);
        let none = VendorBaseline::None {
            reason: "the opencl backend runs no vendor library".into(),
        };
        assert_eq!(
            (none.note(), none.size_text("1M"), none.library()),
            (None, None, None)
        );
        let crashed = VendorBaseline::Failed {
            library: Some("cuBLAS".into()),
            message: "the worker died from signal 11 (SIGSEGV)".into(),
        };
        assert!(
            crashed
                .note()
                .unwrap()
                .starts_with("vendor baseline: cuBLAS failed")
        );
    }

    #[test]
    fn baselines_round_trip_through_json_with_nan_errors() {
        let mut b = measured();
        if let VendorBaseline::Measured { sizes, .. } = &mut b {
            sizes[0].kernel_over_library = Some(2.0);
        }
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["status"], "measured");
        assert_eq!(v["library"], "cuFFT");
        assert_eq!(v["version"], "12.0.0");
        assert_eq!(v["sizes"][0]["run"]["status"], "correct");
        assert_eq!(v["sizes"][0]["kernel_over_library"], 2.0);
        assert_eq!(v["sizes"][2]["run"]["error"], "NaN");
        assert!(v["sizes"][1].get("kernel_over_library").is_none());
        let back: VendorBaseline = serde_json::from_value(v).unwrap();
        assert_eq!(back.size("32cube"), b.size("32cube"));
        let missing = serde_json::to_value(VendorBaseline::Missing {
            library: "cuBLAS".into(),
            reason: "r".into(),
        })
        .unwrap();
        assert_eq!(missing["status"], "missing");
    }

    #[test]
    fn ratios_read_as_slower_or_faster() {
        assert_eq!(ratio_text(1.0), "1.00x slower");
        assert_eq!(ratio_text(0.5), "2.00x faster");
        assert_eq!(ratio_text(3.456), "3.46x slower");
    }
}
