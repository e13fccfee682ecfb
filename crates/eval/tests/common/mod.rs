//! Shared set-up for the evaluator's integration tests, which run once per
//! backend (`kevo_runtimes::backend_tests!`): an evaluator on the first
//! device with fixed ceilings, since these tests are about correctness and
//! outcomes, not the ceiling measurement (tested in kevo-roofline); test
//! kernels in both dialects; seeds with one deliberate bug.
#![allow(dead_code)]

use kevo_backend::{Backend, Dialect};
use kevo_eval::{EvalConfig, Evaluator};
use kevo_roofline::{CeilingSource, Ceilings};
use kevo_runtimes::testing::UnderTest;
use kevo_tasks::{Size, SizeSet, Task};

/// Ceilings stated for the test, not measured.
pub fn ceilings(bandwidth_gbs: f64, fp32_gflops: f64) -> Ceilings {
    Ceilings {
        bandwidth_gbs,
        fp32_gflops,
        source: CeilingSource::Datasheet {
            entry: "test".into(),
        },
        hierarchy: None,
        launch_overhead: None,
    }
}

/// An evaluator on the first device of `under`, or None (with the reason
/// printed) where this machine has none and the backend is not required.
/// Its ceilings (1 PB/s, 1 EFLOP/s) are above any device, so no honest
/// kernel here is suspicious on an H100 any more than on PoCL; the
/// suspicious rule has its own tests (reward_hacks.rs).
pub fn evaluator(under: UnderTest) -> Option<Evaluator<Box<dyn Backend>>> {
    // Ten timed runs a size: what these suites check does not depend on
    // the count, and on PoCL, whose spread rarely reaches the 1% that ends
    // timing early, the default of up to 50 made them minutes longer.
    evaluator_with(
        under,
        EvalConfig {
            max_timed_runs: 10,
            ..EvalConfig::default()
        },
    )
}

/// An evaluator with `config` (the timing rule's own test uses the
/// default).
#[allow(dead_code)]
pub fn evaluator_with(under: UnderTest, config: EvalConfig) -> Option<Evaluator<Box<dyn Backend>>> {
    let backend = under.open()?;
    Some(Evaluator::new(backend, ceilings(1e6, 1e9), config))
}

pub fn smoke(task: &Task) -> Vec<Size> {
    task.sizes(SizeSet::Smoke).in_distribution
}

pub fn task(name: &str) -> &'static Task {
    kevo_tasks::by_name(name).unwrap()
}

/// The task's seed in `dialect`.
pub fn seed(task: &Task, dialect: Dialect) -> &str {
    task.seed(dialect)
        .unwrap_or_else(|| panic!("{} has no {dialect:?} seed", task.name()))
}

/// A test kernel from tests/kernels/, `<stem>.cl` or `<stem>.cu` by
/// dialect; both are compiled into the test binary, so it runs wherever it
/// is copied.
#[macro_export]
macro_rules! kernel {
    ($dialect:expr, $stem:literal) => {
        match $dialect {
            kevo_backend::Dialect::Cuda => include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/kernels/",
                $stem,
                ".cu"
            )),
            _ => include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/kernels/",
                $stem,
                ".cl"
            )),
        }
    };
}

/// The task's seed in `dialect` with one deliberate bug: every
/// `(from, to)` replacement must match exactly once, so a change to the
/// seed cannot quietly turn the mutant back into the seed.
pub fn mutant(task: &str, dialect: Dialect, edits: &[(&str, &str)]) -> String {
    let mut source = seed(self::task(task), dialect).to_string();
    for (from, to) in edits {
        assert_eq!(
            source.matches(from).count(),
            1,
            "{task} {dialect:?} seed: `{from}` must occur once"
        );
        source = source.replacen(from, to, 1);
    }
    source
}
