//! Shared set-up for the evaluator's integration tests: an evaluator on the
//! first OpenCL device (PoCL in CI) with fixed ceilings, since these tests
//! are about correctness and outcomes, not the ceiling measurement (tested
//! in kevo-roofline).
#![allow(dead_code)]

use kevo_backend::DeviceSelector;
use kevo_eval::{EvalConfig, Evaluator};
use kevo_opencl::OpenClBackend;
use kevo_roofline::{CeilingSource, Ceilings};
use kevo_tasks::{Size, SizeSet, Task};

/// None (with the reason printed) where this machine has no OpenCL; a
/// missing platform fails the test in CI, which installs PoCL.
pub fn evaluator() -> Option<Evaluator<OpenClBackend>> {
    let backend = match OpenClBackend::open(&DeviceSelector::default()) {
        Ok(b) => b,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return None;
        }
        Err(e) => panic!("OpenCL must be available in CI: {e}"),
    };
    let ceilings = Ceilings {
        bandwidth_gbs: 10.0,
        fp32_gflops: 100.0,
        source: CeilingSource::Datasheet {
            entry: "test".into(),
        },
    };
    Some(Evaluator::new(backend, ceilings, EvalConfig::default()))
}

pub fn smoke(task: &Task) -> Vec<Size> {
    task.sizes(SizeSet::Smoke).in_distribution
}

/// The task's OpenCL seed with one deliberate bug: every `(from, to)`
/// replacement must match exactly once, so a change to the seed cannot
/// quietly turn the mutant back into the seed.
pub fn mutant(task: &str, edits: &[(&str, &str)]) -> String {
    let mut source = kevo_tasks::by_name(task)
        .unwrap()
        .seed(kevo_backend::Dialect::OpenCl)
        .unwrap()
        .to_string();
    for (from, to) in edits {
        assert_eq!(
            source.matches(from).count(),
            1,
            "{task} seed: `{from}` must occur once"
        );
        source = source.replacen(from, to, 1);
    }
    source
}
