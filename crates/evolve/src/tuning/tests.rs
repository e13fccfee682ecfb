//! What the move into the library makes testable without a device: the
//! request's checks, the kernel's declarations, and the store serving a
//! measurement only to a session that measures with the same settings.

use kevo_eval::Evaluation;
use kevo_store::{NewEvaluation, NewRun, Store};
use kevo_tasks::SizeSet;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use super::cache::{Cache, MeasuredAt};
use super::error::{TuneError, chain};
use super::kernel::{GivenKernel, TunedKernel};
use super::record::record;
use super::request::check_budget;

#[test]
fn budgets_of_nothing_are_refused_with_the_flag_named() {
    assert!(check_budget(None, None).is_ok());
    assert!(check_budget(Some(1), Some(0.5)).is_ok());
    for seconds in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = check_budget(None, Some(seconds)).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("--budget-s: must be a positive number of seconds, not {seconds}")
        );
    }
    let e = check_budget(Some(0), None).unwrap_err();
    assert_eq!(e.to_string(), "--budget: must be at least 1");
}

#[test]
fn a_given_kernel_without_parameters_or_with_a_bad_one_is_refused_by_name() {
    let e = GivenKernel::parse("__kernel void k() {}".into(), "k.cl".into()).unwrap_err();
    assert!(matches!(e, TuneError::NoParameter { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("k.cl declares no parameter: add `// kevo: tune")
    );
    let bad = "// kevo: tune B\n__kernel void k() { int x = B; }";
    let e = GivenKernel::parse(bad.into(), "bad.cl".into()).unwrap_err();
    assert!(matches!(e, TuneError::Declaration { .. }), "{e:?}");
    assert!(e.to_string().starts_with("bad.cl: line 1: "), "{e}");
}

#[test]
fn a_given_kernel_is_tuned_against_the_tasks_naive_seed() {
    let task = kevo_tasks::resolve("saxpy").unwrap();
    let template = "// kevo: tune B 1 2\n__kernel void k() { int x = B; }";
    let given = GivenKernel::parse(template.into(), "k.cl".into()).unwrap();
    assert_eq!(given.space().valid().len(), 2);
    let dialect = kevo_backend::Dialect::OpenCl;
    let kernel = TunedKernel::resolve(task, dialect, Some(given)).unwrap();
    assert_eq!(kernel.name, "k.cl");
    assert_eq!(kernel.seed_source, task.seed(dialect).unwrap());
    let second = kernel.instantiate(&kernel.space.valid()[1]);
    assert!(second.contains("#define B 2\n"), "{second}");
    assert!(second.contains("int x = B;"), "{second}");
}

/// A correct evaluation of saxpy on device `dev` through OpenCL.
fn correct(score: f64) -> Evaluation {
    serde_json::from_value(json!({
        "task": "saxpy", "device": "dev", "backend": "opencl",
        "outcome": {"status": "correct", "score": score}, "sizes": [],
        "wall": {"compile_s": 0, "inputs_s": 0, "reference_s": 0, "device_s": 0,
                 "check_s": 0, "total_s": 1},
    }))
    .unwrap()
}

/// A tuning run measured with `measured_with`, holding `source` measured
/// at `score`.
fn stored_run(rt: &Runtime, store: &Store, measured_with: &Value, source: &str, score: f64) {
    let run = rt
        .block_on(store.create_run(&NewRun {
            task: "saxpy".into(),
            backend: "opencl".into(),
            device: "dev".into(),
            size_set: SizeSet::Smoke,
            strategy: "tune".into(),
            config: json!({ "measured_with": measured_with }),
            rng_state: None,
        }))
        .unwrap();
    let evaluation = NewEvaluation {
        evaluation: correct(score),
        reused_from: None,
    };
    let r = record(source, "tuner", Some("exhaustive"), evaluation, 0);
    rt.block_on(store.record_iteration(&run, &r)).unwrap();
}

fn at<'a>(device: &'a str, measured_with: &'a Value) -> MeasuredAt<'a> {
    MeasuredAt {
        task: "saxpy",
        backend: "opencl",
        device,
        size_set: SizeSet::Smoke,
        measured_with,
    }
}

#[test]
fn a_stored_measurement_is_served_only_under_the_same_settings() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new().unwrap();
    let store = rt.block_on(Store::open_workspace(dir.path())).unwrap();
    let ours = json!({"timing": {"repeats": 5}});
    let theirs = json!({"timing": {"repeats": 9}});
    stored_run(&rt, &store, &ours, "kernel A", 0.25);
    stored_run(&rt, &store, &theirs, "kernel B", 0.5);
    let mut cache = Cache::default();
    let score = |cache: &mut Cache, at: MeasuredAt, source: &str| {
        let served = cache.lookup(&rt, &store, &at, source).unwrap();
        served.map(|(_, e)| e.outcome.score())
    };
    assert_eq!(
        score(&mut cache, at("dev", &ours), "kernel A"),
        Some(Some(0.25))
    );
    // Measured, but under other settings: measured again.
    assert_eq!(score(&mut cache, at("dev", &ours), "kernel B"), None);
    assert_eq!(score(&mut cache, at("dev", &ours), "kernel C"), None);
    assert_eq!(score(&mut cache, at("other", &ours), "kernel A"), None);
    let mut fresh = Cache::default();
    assert_eq!(score(&mut fresh, at("dev", &theirs), "kernel A"), None);
    assert_eq!(
        score(&mut fresh, at("dev", &theirs), "kernel B"),
        Some(Some(0.5))
    );
}

#[test]
fn a_stopped_run_names_the_run_and_its_cause() {
    let cause = kevo_store::StoreError::RunNotFound(kevo_store::RunId("r1".into()));
    let e = TuneError::Stopped {
        run: kevo_store::RunId("r0".into()),
        source: cause,
    };
    assert_eq!(
        chain(&e),
        "tuning run r0 stopped: no run `r1` in the run store"
    );
}
