//! Mechanisms that stop kernels from passing without doing the work, on
//! every backend (PoCL in CI, the H100 under scripts/gpu-check): every
//! timed run is checked (class 3), the pristine copies are checked
//! (class 2), and a figure faster than the hardware allows is suspicious,
//! not a score (class 6).

mod common;

use std::collections::HashSet;

use kevo_backend::{
    Backend, BackendError, BufferId, DeviceTime, KernelArg, KernelId, Launch, ModuleId,
};
use kevo_eval::{EvalConfig, Evaluator, Outcome};
use kevo_runtimes::testing::UnderTest;

use common::{ceilings, seed, smoke, task};

kevo_runtimes::backend_tests!(
    class3_a_kernel_wrong_on_any_one_timed_run_fails,
    class6_faster_than_the_hardware_is_suspicious_and_unscored,
    class2_a_pristine_copy_changed_behind_the_evaluator_fails_the_size;
    // Every suite here runs the tasks' seeds, which Triton has.
    triton:
    class3_a_kernel_wrong_on_any_one_timed_run_fails,
    class6_faster_than_the_hardware_is_suspicious_and_unscored,
    class2_a_pristine_copy_changed_behind_the_evaluator_fails_the_size,
);

/// The device, except that after the `corrupt_at`-th launch sequence of the
/// candidate's `saxpy` (counting from 1) the first element of `y` is
/// zeroed: a stand-in for a kernel that is wrong on one run it expects to
/// go unchecked, without needing any state of its own. With
/// `corrupt_pristine`, it instead overwrites the pristine copy the timed
/// runs were restored from, during the verification run (the first run
/// restored from copies not seen before): a stand-in for a kernel that
/// reaches the evaluator's own buffers.
struct WrongOnOneRun {
    inner: Box<dyn Backend>,
    candidate: HashSet<KernelId>,
    runs: usize,
    corrupt_at: usize,
    corrupt_pristine: bool,
    /// Copy sources (pristine copies) in order of first use, and those of
    /// the reset since the last candidate run.
    sources: Vec<BufferId>,
    reset: Vec<BufferId>,
    /// Buffers that were copied into (working buffers, snapshots): never
    /// pristine copies.
    destinations: HashSet<BufferId>,
}

impl Backend for WrongOnOneRun {
    kevo_backend::forward_backend!(self.inner; except kernel, copy_buffer, run_timed);

    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError> {
        let k = self.inner.kernel(module, name)?;
        if name == "saxpy" {
            self.candidate.insert(k);
        }
        Ok(k)
    }
    fn copy_buffer(&mut self, s: BufferId, d: BufferId, bytes: usize) -> Result<(), BackendError> {
        self.destinations.insert(d);
        if !self.destinations.contains(&s) {
            self.reset.push(s);
        }
        self.inner.copy_buffer(s, d, bytes)
    }
    fn run_timed(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError> {
        let t = self.inner.run_timed(launches)?;
        if let Some(l) = launches.iter().find(|l| self.candidate.contains(&l.kernel)) {
            self.runs += 1;
            let reset = std::mem::take(&mut self.reset);
            let fresh = !self.sources.is_empty() && reset.iter().any(|b| !self.sources.contains(b));
            if self.corrupt_pristine && fresh {
                let first = self.sources[0];
                self.inner.fill_buffer(first, 0x5A, 4)?;
            }
            for b in reset {
                if !self.sources.contains(&b) {
                    self.sources.push(b);
                }
            }
            if self.runs == self.corrupt_at
                && let KernelArg::Buffer(y) = l.args[1]
            {
                self.inner.fill_buffer(y, 0, 4)?;
            }
        }
        Ok(t)
    }
}

fn saxpy_with_one_wrong_run(b: UnderTest, corrupt_at: usize) -> Option<Outcome> {
    saxpy_on(b, corrupt_at, false)
}

fn saxpy_on(b: UnderTest, corrupt_at: usize, corrupt_pristine: bool) -> Option<Outcome> {
    let backend = WrongOnOneRun {
        inner: b.open()?,
        candidate: HashSet::new(),
        runs: 0,
        corrupt_at,
        corrupt_pristine,
        sources: Vec::new(),
        reset: Vec::new(),
        destinations: HashSet::new(),
    };
    let mut ev = Evaluator::new(backend, ceilings(10.0, 100.0), EvalConfig::default());
    let task = task("saxpy");
    let sizes = smoke(task);
    Some(
        ev.evaluate(task, seed(task, b.dialect), &sizes[..1])
            .outcome,
    )
}

fn class3_a_kernel_wrong_on_any_one_timed_run_fails(b: UnderTest) {
    // Warm-ups are 2 to 5, so launch 7 is a timed run after the first,
    // launch 12 the last timed run of the old fixed protocol.
    for corrupt_at in [7, 9, 12] {
        let Some(outcome) = saxpy_with_one_wrong_run(b, corrupt_at) else {
            return;
        };
        let Outcome::WrongResult { metric, .. } = &outcome else {
            panic!("corrupting launch {corrupt_at}: {}", outcome.summary());
        };
        assert!(metric.contains("(timed run "), "{metric}");
    }
    // The same backend without corruption: the seed is correct.
    let outcome = saxpy_with_one_wrong_run(b, usize::MAX).unwrap();
    assert!(outcome.is_correct(), "{}", outcome.summary());
}

fn class6_faster_than_the_hardware_is_suspicious_and_unscored(b: UnderTest) {
    let Some(backend) = b.open() else { return };
    // A ceiling a thousand times too low makes an honest seed look like a
    // kernel that skips its work.
    let mut ev = Evaluator::new(backend, ceilings(1e-3, 1e-3), EvalConfig::default());
    for name in ["nbody", "saxpy"] {
        let task = task(name);
        let sizes = smoke(task);
        let e = ev.evaluate(task, seed(task, b.dialect), &sizes[..1]);
        let Outcome::Suspicious {
            size,
            reason,
            score,
        } = &e.outcome
        else {
            panic!("{name}: {}", e.outcome.summary());
        };
        assert_eq!(size, &sizes[0].label);
        assert!(*score > 1.0, "{score}");
        let ceiling = if name == "nbody" {
            "FP32 peak"
        } else {
            "DRAM bandwidth"
        };
        assert!(reason.contains(ceiling), "{reason}");
        assert_eq!(e.outcome.score(), None, "never scored");
        assert!(!e.outcome.is_correct());
    }
}

fn class2_a_pristine_copy_changed_behind_the_evaluator_fails_the_size(b: UnderTest) {
    let Some(outcome) = saxpy_on(b, usize::MAX, true) else {
        return;
    };
    let Outcome::WrongResult { metric, .. } = &outcome else {
        panic!("{}", outcome.summary());
    };
    assert_eq!(metric, "pristine_copies_modified");
}
