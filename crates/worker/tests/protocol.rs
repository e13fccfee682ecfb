//! The supervisor's side of the reply channel, against scripted fake
//! workers: a reply counts only if it arrives on the private pipe with the
//! request's id and nonce, once.

use std::time::Duration;

use kevo_backend::{BackendName, DeviceInfo, DeviceSelector};
use kevo_eval::{Evaluation, Outcome, VendorBaseline, WallTimes};
use kevo_roofline::{CeilingSource, Ceilings};
use kevo_runtimes::BackendKind;
use kevo_worker::{Reply, Worker, WorkerCommand, WorkerConfig};

/// A worker in bash: it announces itself on fd 3, then answers each request
/// as `$MODE` says. `ID` and `NONCE` in the templates are replaced with the
/// request's.
const FAKE: &str = r#"
printf '%s\n' "$FAKE_READY" >&3
while IFS= read -r line; do
    id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
    nonce=$(printf '%s' "$line" | sed -n 's/.*"nonce":"\([0-9a-f]*\)".*/\1/p')
    reply=${FAKE_RESULT//__ID__/$id}
    case "$line" in
        *'"type":"baseline"'*)
            reply=${FAKE_BASELINE//__ID__/$id}
            [ "$MODE" = segv ] && kill -SEGV $$ ;;
    esac
    case "$MODE" in
        honest) printf '%s\n' "${reply//__NONCE__/$nonce}" >&3 ;;
        wrong_nonce) printf '%s\n' "${reply//__NONCE__/0123456789abcdef0123456789abcdef}" >&3 ;;
        unknown_id)
            reply=${FAKE_RESULT//__ID__/$((id + 1000))}
            printf '%s\n' "${reply//__NONCE__/$nonce}" >&3 ;;
        twice)
            printf '%s\n' "${reply//__NONCE__/$nonce}" >&3
            sleep 0.2
            printf '%s\n' "${reply//__NONCE__/$nonce}" >&3 ;;
        stdout_only) printf '%s\n' "${reply//__NONCE__/$nonce}" ;;
        segv) printf '%s\n' "${reply//__NONCE__/$nonce}" >&3 ;;
        cross)
            reply=${FAKE_BASELINE//__ID__/$id}
            printf '%s\n' "${reply//__NONCE__/$nonce}" >&3 ;;
        other_source)
            reply=${FAKE_OTHER//__ID__/$id}
            printf '%s\n' "${reply//__NONCE__/$nonce}" >&3 ;;
    esac
done
"#;

fn device() -> DeviceInfo {
    DeviceInfo {
        backend: BackendName::Opencl,
        dialect: kevo_backend::Dialect::OpenCl,
        platform: "fake".into(),
        name: "fake device".into(),
        vendor: "kevo".into(),
        compute_units: 1,
        global_mem_bytes: 1 << 30,
        max_work_group_size: 256,
        local_mem_bytes: 1 << 15,
        clock_mhz: 1000,
        arch: "fake".into(),
        driver_version: "0".into(),
        is_cpu: true,
        cache_bytes: 0,
        integrated: false,
        details: Default::default(),
    }
}

fn fake(mode: &str) -> Worker {
    let ready = Reply::Ready {
        device: Box::new(device()),
        ceilings: Box::new(Ceilings {
            bandwidth_gbs: 1.0,
            fp32_gflops: 1.0,
            source: CeilingSource::Datasheet {
                entry: "fake".into(),
            },
            hierarchy: None,
            launch_overhead: None,
        }),
        startup_s: 0.0,
        sandbox: Default::default(),
        measured: None,
        self_test: None,
    };
    let result = Reply::Result {
        id: 0,
        nonce: "__NONCE__".into(),
        evaluation: Box::new(Evaluation {
            task: "saxpy".into(),
            device: "fake device".into(),
            backend: BackendName::Opencl,
            outcome: Outcome::Correct { score: 0.5 },
            sizes: Vec::new(),
            wall: WallTimes::default(),
            kernels: Vec::new(),
            source_sha: None,
        }),
        restart: false,
    };
    let mut other = result.clone();
    if let Reply::Result { evaluation, .. } = &mut other {
        evaluation.source_sha = Some(kevo_eval::source_sha256("another kernel"));
    }
    let [result, other] = [result, other].map(|r| {
        serde_json::to_string(&r)
            .unwrap()
            .replace("\"id\":0", "\"id\":__ID__")
    });
    let baseline = Reply::Baseline {
        id: 0,
        nonce: "__NONCE__".into(),
        baseline: Box::new(measured()),
        restart: false,
    };
    let baseline = serde_json::to_string(&baseline)
        .unwrap()
        .replace("\"id\":0", "\"id\":__ID__");
    let command = WorkerCommand {
        program: "bash".into(),
        args: vec!["-c".into(), FAKE.into(), "fake-worker".into()],
        env: vec![
            ("MODE".into(), mode.into()),
            ("FAKE_READY".into(), serde_json::to_string(&ready).unwrap()),
            ("FAKE_RESULT".into(), result),
            ("FAKE_OTHER".into(), other),
            ("FAKE_BASELINE".into(), baseline),
        ],
    };
    Worker::start(
        command,
        WorkerConfig::new(BackendKind::Opencl, DeviceSelector::default()),
    )
    .expect("the fake worker starts")
}

const LIMIT: Duration = Duration::from_secs(5);

fn violation(o: &Outcome) -> String {
    match o {
        Outcome::RuntimeError { message, .. } if message.contains("protocol violation") => {
            message.clone()
        }
        other => panic!("expected a protocol violation, got {}", other.summary()),
    }
}

#[test]
fn a_reply_with_the_right_id_and_nonce_is_the_result() {
    let mut w = fake("honest");
    for _ in 0..3 {
        let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
        assert_eq!(e.outcome, Outcome::Correct { score: 0.5 });
    }
    assert_eq!(w.stats().protocol_violations, 0);
}

#[test]
fn an_answer_names_the_source_sent_and_one_for_another_source_is_a_failure() {
    let saxpy = kevo_tasks::by_name("saxpy").unwrap();
    let e = fake("honest").evaluate(saxpy, "src", &[], LIMIT);
    let sent = kevo_eval::source_sha256("src");
    assert_eq!(e.source_sha.as_deref(), Some(sent.as_str()));
    let e = fake("other_source").evaluate(saxpy, "src", &[], LIMIT);
    assert!(
        matches!(&e.outcome, Outcome::RuntimeError { message, .. }
            if message.contains("not the candidate sent")),
        "{}",
        e.outcome.summary()
    );
    assert_eq!(e.source_sha.as_deref(), Some(sent.as_str()));
}

#[test]
fn a_reply_with_a_wrong_nonce_is_a_violation() {
    let mut w = fake("wrong_nonce");
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert!(violation(&e.outcome).contains("wrong nonce"));
    assert_eq!(w.stats().protocol_violations, 1);
}

#[test]
fn a_reply_for_an_unknown_request_is_a_violation() {
    let mut w = fake("unknown_id");
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert!(violation(&e.outcome).contains("unknown request 1001"));
}

#[test]
fn a_second_result_for_one_request_is_a_violation() {
    let mut w = fake("twice");
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert_eq!(e.outcome, Outcome::Correct { score: 0.5 });
    std::thread::sleep(Duration::from_millis(500));
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert!(
        violation(&e.outcome).contains("already answered"),
        "{}",
        e.outcome.summary()
    );
    // The worker was replaced: the next request is answered by a new one.
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert_eq!(e.outcome, Outcome::Correct { score: 0.5 });
    assert_eq!(w.stats().spawns, 2);
}

#[test]
fn a_reply_printed_on_stdout_is_never_read() {
    let mut w = fake("stdout_only");
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        "src",
        &[],
        Duration::from_secs(1),
    );
    assert!(
        matches!(e.outcome, Outcome::Timeout { .. }),
        "{}",
        e.outcome.summary()
    );
}

/// A baseline as a worker with cuFFT would send it.
fn measured() -> VendorBaseline {
    VendorBaseline::Measured {
        library: "cuFFT".into(),
        version: "12.0.0".into(),
        sizes: Vec::new(),
    }
}

#[test]
fn a_vendor_baseline_comes_back_on_the_private_channel() {
    let mut w = fake("honest");
    let b = w.vendor_baseline(kevo_tasks::by_name("fft3d").unwrap(), &[], LIMIT);
    assert_eq!(b, measured());
    // The same worker evaluates next.
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert_eq!(e.outcome, Outcome::Correct { score: 0.5 });
    assert_eq!((w.stats().spawns, w.stats().protocol_violations), (1, 0));
}

#[test]
fn a_library_that_crashes_the_worker_is_a_failed_baseline_not_kevos() {
    let mut w = fake("segv");
    match w.vendor_baseline(kevo_tasks::by_name("fft3d").unwrap(), &[], LIMIT) {
        VendorBaseline::Failed { message, .. } => {
            assert!(message.contains("SIGSEGV"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.stats().crashes, 1);
    // A fresh worker takes the next candidate.
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert_eq!(e.outcome, Outcome::Correct { score: 0.5 });
    assert_eq!(w.stats().spawns, 2);
}

#[test]
fn a_library_that_hangs_is_killed_at_the_limit() {
    let mut w = fake("stdout_only");
    match w.vendor_baseline(
        kevo_tasks::by_name("fft3d").unwrap(),
        &[],
        Duration::from_secs(1),
    ) {
        VendorBaseline::Failed { message, .. } => {
            assert!(message.contains("ran past the 1 s limit"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.stats().timeouts, 1);
}

#[test]
fn a_baseline_answering_an_evaluation_is_a_violation() {
    let mut w = fake("cross");
    let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), "src", &[], LIMIT);
    assert!(
        violation(&e.outcome).contains("a baseline reply, which request 1 does not ask for"),
        "{}",
        e.outcome.summary()
    );
}
