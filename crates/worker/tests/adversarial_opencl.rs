//! The adversarial suite on OpenCL (PoCL in CI): each kernel stands for an
//! exploit and must be rejected with the right outcome; a set of correct but
//! unusual kernels must be accepted. Everything runs through a supervised
//! worker, so hangs and crashes are survivable.

mod common;

use std::time::Duration;

use kevo_backend::Dialect;
use kevo_eval::Outcome;
use kevo_tasks::SizeSet;
use kevo_worker::backends::BackendKind;

const TIMEOUT: Duration = Duration::from_secs(20);

fn worker() -> Option<(kevo_worker::Worker, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    match common::worker(BackendKind::Opencl, dir.path()) {
        Ok(w) => Some((w, dir)),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("OpenCL must be available in CI: {e}"),
    }
}

fn in_distribution(task: &str) -> Vec<kevo_tasks::Size> {
    kevo_tasks::by_name(task)
        .unwrap()
        .sizes(SizeSet::Smoke)
        .in_distribution
}

#[test]
fn exploits_are_rejected_with_the_right_outcome() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let k = |name: &str| common::kernel("opencl", name);
    type Expect = fn(&Outcome) -> bool;
    let cases: Vec<(&str, &str, Duration, Expect)> = vec![
        ("infinite_loop.cl", "saxpy", Duration::from_secs(3), |o| {
            matches!(o, Outcome::Timeout { .. })
        }),
        (
            "illegal_address.cl",
            "saxpy",
            TIMEOUT,
            |o| matches!(o, Outcome::RuntimeError { message, .. } if message.contains("SIGSEGV") || message.contains("illegal")),
        ),
        (
            "out_of_bounds_write.cl",
            "saxpy",
            TIMEOUT,
            |o| matches!(o, Outcome::WrongResult { metric, .. } if metric == "out_of_bounds_bytes(y)"),
        ),
        (
            "modifies_input.cl",
            "saxpy",
            TIMEOUT,
            |o| matches!(o, Outcome::WrongResult { metric, .. } if metric == "input_modified_bytes(x)"),
        ),
        (
            "writes_nothing.cl",
            "heat2d",
            TIMEOUT,
            // 20 steps end in buffer A, which still holds the initial state.
            |o| matches!(o, Outcome::WrongResult { .. }),
        ),
        ("writes_constant.cl", "heat2d", TIMEOUT, |o| {
            matches!(o, Outcome::WrongResult { .. })
        }),
        ("returns_input.cl", "heat2d", TIMEOUT, |o| {
            matches!(o, Outcome::WrongResult { .. })
        }),
        ("race_missing_barrier.cl", "heat2d", TIMEOUT, |o| {
            matches!(o, Outcome::WrongResult { .. })
        }),
        ("uninitialised_local.cl", "heat2d", TIMEOUT, |o| {
            matches!(o, Outcome::WrongResult { .. })
        }),
    ];
    for (file, task, timeout, expect) in cases {
        let e = w.evaluate(task, &k(file), &in_distribution(task), timeout);
        assert!(expect(&e.outcome), "{file}: {}", e.outcome.summary());
        assert_eq!(e.outcome.score(), None, "{file}");
    }
    // After a hang and a crash the worker still evaluates correctly.
    let seed = kevo_tasks::by_name("saxpy")
        .unwrap()
        .seed(Dialect::OpenCl)
        .unwrap();
    let e = w.evaluate("saxpy", seed, &in_distribution("saxpy"), TIMEOUT);
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
    let stats = w.stats();
    assert_eq!(stats.timeouts, 1);
    assert_eq!(stats.crashes, 1);
    assert_eq!(
        stats.spawns, 3,
        "one start and one respawn after each failure"
    );
}

#[test]
fn a_kernel_tuned_to_the_shown_sizes_fails_the_held_out_size() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let src = common::kernel("opencl", "correct_only_in_distribution.cl");
    let plan = kevo_tasks::by_name("heat2d").unwrap().sizes(SizeSet::Smoke);
    let e = w.evaluate("heat2d", &src, &plan.in_distribution, TIMEOUT);
    assert!(
        e.outcome.is_correct(),
        "passes what it was shown: {}",
        e.outcome.summary()
    );
    let e = w.evaluate(
        "heat2d",
        &src,
        std::slice::from_ref(&plan.held_out),
        TIMEOUT,
    );
    assert!(
        matches!(&e.outcome, Outcome::WrongResult { size, .. } if *size == plan.held_out.label),
        "{}",
        e.outcome.summary()
    );
}

#[test]
fn unusual_but_correct_kernels_are_accepted() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    for (file, task) in [
        ("ok_local_tile.cl", "heat2d"),
        ("ok_branchless.cl", "heat2d"),
        ("ok_vector_width_declared.cl", "saxpy"),
    ] {
        let e = w.evaluate(
            task,
            &common::kernel("opencl", file),
            &in_distribution(task),
            TIMEOUT,
        );
        assert!(e.outcome.is_correct(), "{file}: {}", e.outcome.summary());
    }
}

#[test]
fn a_worker_that_cannot_open_its_device_fails_to_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let command = kevo_worker::WorkerCommand {
        program: env!("CARGO_BIN_EXE_kevo-worker").into(),
        args: Vec::new(),
        env: vec![("KEVO_CACHE_DIR".into(), dir.path().display().to_string())],
    };
    let config = kevo_worker::WorkerConfig::new(
        BackendKind::Opencl,
        kevo_backend::DeviceSelector {
            platform: None,
            device: Some("no-such-device".into()),
        },
    );
    let err = kevo_worker::Worker::start(command, config)
        .err()
        .expect("must not start");
    let text = err.to_string();
    assert!(
        text.contains("no-such-device") || text.contains("not available"),
        "{text}"
    );
}
