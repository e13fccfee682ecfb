//! The adversarial suite, written once and run per backend: each kernel in
//! tests/adversarial/<dialect>/ stands for an exploit and must be rejected
//! with the right outcome; the `ok_*` kernels are correct but unusual and
//! must be accepted. Everything runs through a supervised worker, so hangs
//! and crashes are survivable.
#![allow(dead_code)]

pub mod tables;

use std::time::{Duration, Instant};

use kevo_backend::{DeviceSelector, Dialect};
use kevo_eval::Outcome;
use kevo_runtimes::BackendKind;
use kevo_runtimes::testing::UnderTest;
use kevo_tasks::SizeSet;
use kevo_worker::{Worker, WorkerCommand, WorkerConfig, WorkerError};

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The worker binary: the one cargo built next to this test, unless
/// KEVO_WORKER_BIN points elsewhere (test binaries carried to a GPU machine).
pub fn command(cache_dir: &std::path::Path) -> WorkerCommand {
    let program = std::env::var_os("KEVO_WORKER_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kevo-worker").into());
    WorkerCommand {
        program: program.into(),
        args: Vec::new(),
        env: vec![("KEVO_CACHE_DIR".into(), cache_dir.display().to_string())],
    }
}

/// A worker whose timing stops at 10 runs a size: these tests judge
/// outcomes, not medians, and PoCL's spread seldom reaches the 1% that
/// ends timing early, so every correct candidate timed 50 runs a size.
pub fn start(kind: BackendKind, cache_dir: &std::path::Path) -> Result<Worker, WorkerError> {
    let timing = kevo_worker::TimingOptions {
        max_timed_runs: Some(10),
        ..Default::default()
    };
    Worker::start(
        command(cache_dir),
        WorkerConfig::new(kind, DeviceSelector::default()).with_timing(timing),
    )
}

/// A worker on the first device of `under`, or None (with the reason
/// printed) when this machine has none and the backend is not required
/// (`UnderTest::required`).
pub fn worker(under: UnderTest) -> Option<(Worker, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let w = under.or_skip(start(under.kind, dir.path()))?;
    Some((w, dir))
}

pub fn dir(d: Dialect) -> &'static str {
    match d {
        Dialect::Cuda => "cuda",
        _ => "opencl",
    }
}

/// An adversarial or unusual kernel of `dialect`, by stem.
pub fn kernel(dialect: Dialect, stem: &str) -> String {
    let root = std::env::var("KEVO_WORKER_TESTS_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let path = format!(
        "{root}/tests/adversarial/{}/{stem}.{}",
        dir(dialect),
        dialect.extension()
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn in_distribution(task: &str) -> Vec<kevo_tasks::Size> {
    kevo_tasks::by_name(task)
        .unwrap()
        .sizes(SizeSet::Smoke)
        .in_distribution
}

type Expect = fn(&Outcome) -> bool;

fn wrong(o: &Outcome) -> bool {
    matches!(o, Outcome::WrongResult { .. })
}

/// Every exploit with the task it attacks and the outcome it must get.
pub fn exploits() -> Vec<(&'static str, &'static str, Expect)> {
    vec![
        ("infinite_loop", "saxpy", |o| {
            matches!(o, Outcome::Timeout { .. })
        }),
        ("illegal_address", "saxpy", |o| {
            matches!(o, Outcome::RuntimeError { message, .. }
                if message.contains("SIGSEGV") || message.contains("ILLEGAL_ADDRESS") || message.contains("illegal address"))
        }),
        (
            "out_of_bounds_write",
            "saxpy",
            |o| matches!(o, Outcome::WrongResult { metric, .. } if metric.starts_with("out_of_bounds_bytes(y)")),
        ),
        (
            "modifies_input",
            "saxpy",
            |o| matches!(o, Outcome::WrongResult { metric, .. } if metric == "input_modified_words(x)"),
        ),
        // 20 steps end in buffer A, which still holds the initial state.
        ("writes_nothing", "heat2d", wrong),
        ("writes_constant", "heat2d", wrong),
        ("returns_input", "heat2d", wrong),
        ("race_missing_barrier", "heat2d", wrong),
        ("uninitialised_shared_memory", "heat2d", wrong),
    ]
}

/// Run the exploits, then check that the worker still evaluates the seed.
pub fn exploits_are_rejected(w: &mut Worker, dialect: Dialect, hang_timeout: Duration) {
    for (stem, task, expect) in exploits() {
        let timeout = if stem == "infinite_loop" {
            hang_timeout
        } else {
            TIMEOUT
        };
        let e = w.evaluate(
            kevo_tasks::by_name(task).unwrap(),
            &kernel(dialect, stem),
            &in_distribution(task),
            timeout,
        );
        assert!(expect(&e.outcome), "{stem}: {}", e.outcome.summary());
        assert_eq!(e.outcome.score(), None, "{stem}");
    }
    let seed = kevo_tasks::by_name("saxpy").unwrap().seed(dialect).unwrap();
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        seed,
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    assert!(
        e.outcome.is_correct(),
        "after the exploits: {}",
        e.outcome.summary()
    );
    let s = w.stats();
    assert_eq!(s.timeouts, 1, "{s:?}");
    // The wild write either kills the worker (PoCL: SIGSEGV) or poisons
    // the device and has the worker replaced (CUDA).
    assert_eq!(s.crashes + s.restarts, 1, "{s:?}");
    assert_eq!(
        s.spawns, 3,
        "one start and one respawn after each failure: {s:?}"
    );
}

/// Class 1: a kernel that prints well-formed replies for its own and later
/// request ids gets its real (wrong) result, and the next candidate its own.
pub fn forged_replies_never_become_results(w: &mut Worker, dialect: Dialect) {
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        &kernel(dialect, "class1_forges_result_lines"),
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    assert!(
        matches!(e.outcome, Outcome::WrongResult { .. }),
        "{}",
        e.outcome.summary()
    );
    assert_ne!(e.device, "forged");
    let seed = kevo_tasks::by_name("saxpy").unwrap().seed(dialect).unwrap();
    for _ in 0..3 {
        let e = w.evaluate(
            kevo_tasks::by_name("saxpy").unwrap(),
            seed,
            &in_distribution("saxpy"),
            TIMEOUT,
        );
        let score = e
            .outcome
            .score()
            .unwrap_or_else(|| panic!("{}", e.outcome.summary()));
        assert!(
            score < 99.0 && e.device != "forged",
            "a forged line was taken: {score}"
        );
    }
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        &kernel(dialect, "ok_unreachable_printf"),
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
    assert_eq!(w.stats().protocol_violations, 0, "{:?}", w.stats());
    assert_eq!(w.stats().spawns, 1, "no worker was lost: {:?}", w.stats());
}

/// The kernels that keep state from one run to the next (class 2) or count
/// launches to be right only on the checked ones (class 3), with what
/// stops each.
pub fn stateful_exploits(dialect: Dialect) -> Vec<(&'static str, Expect)> {
    fn guard_hit(o: &Outcome) -> bool {
        matches!(o, Outcome::WrongResult { metric, .. } if metric.starts_with("out_of_bounds_bytes(y)"))
    }
    let mut v: Vec<(&'static str, Expect)> = vec![
        ("class2_memo_in_guard_region", guard_hit),
        ("class3_counts_launches", guard_hit),
    ];
    match dialect {
        // Module variables are restored before every run: the counter
        // never reaches the runs it would compute on. (The memo kernel
        // cannot show it: a replayed saxpy is as fast and as right as one
        // that does the work.)
        Dialect::Cuda => {
            v.push(("class2_counts_in_device_global", wrong));
            v.push(("class3_right_only_sometimes", wrong));
        }
        // OpenCL C 1.2 has no program-scope variables (PoCL refuses them);
        // NVIDIA's OpenCL 3.0 builds them, and the memo then fails
        // verification like any wrong kernel.
        _ => {
            v.push(("class2_memo_in_device_global", |o| {
                matches!(o, Outcome::CompileError { .. }) || wrong(o)
            }));
            v.push(("class2_counts_in_device_global", |o| {
                matches!(o, Outcome::CompileError { .. }) || wrong(o)
            }));
        }
    }
    v
}

pub fn state_does_not_survive_between_runs(w: &mut Worker, dialect: Dialect) {
    for (stem, expect) in stateful_exploits(dialect) {
        let e = w.evaluate(
            kevo_tasks::by_name("saxpy").unwrap(),
            &kernel(dialect, stem),
            &in_distribution("saxpy"),
            TIMEOUT,
        );
        assert!(expect(&e.outcome), "{stem}: {}", e.outcome.summary());
    }
}

/// Class 6: figures above the ceilings are "suspicious": no score, so no
/// promotion. Bandwidth-bound (saxpy) and FP32-bound (nbody) tasks both,
/// against ceilings declared a million times below any real device.
pub fn faster_than_the_hardware_is_suspicious(under: UnderTest) {
    let UnderTest { kind, dialect } = under;
    let dir = tempfile::tempdir().unwrap();
    let config = WorkerConfig::new(kind, DeviceSelector::default()).with_declared_ceilings(Some(
        kevo_worker::DeclaredCeilings {
            bandwidth_gbs: 1e-3,
            fp32_gflops: 1e-2,
        },
    ));
    let Some(mut w) = under.or_skip(Worker::start(command(dir.path()), config)) else {
        return;
    };
    assert_eq!(w.ceilings().source, kevo_roofline::CeilingSource::Declared);
    for (stem, task, ceiling) in [
        ("class6_faster_than_the_hardware", "saxpy", "DRAM bandwidth"),
        ("ok_tiled_nbody", "nbody", "FP32 peak"),
    ] {
        let e = w.evaluate(
            kevo_tasks::by_name(task).unwrap(),
            &kernel(dialect, stem),
            &in_distribution(task),
            TIMEOUT,
        );
        match &e.outcome {
            Outcome::Suspicious { reason, score, .. } => {
                assert!(reason.contains(ceiling), "{stem}: {reason}");
                assert!(*score > 1.25, "{stem}: {score}");
                assert_eq!(
                    e.outcome.score(),
                    None,
                    "{stem}: a suspicious outcome has no score"
                );
            }
            other => panic!("{stem}: {}", other.summary()),
        }
    }
}

/// Class 7: a macro expansion bomb ends as a compile error within the
/// compile limits, and the worker goes on.
pub fn compile_bombs_are_bounded(under: UnderTest) {
    let UnderTest { kind, dialect } = under;
    let dir = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new(kind, DeviceSelector::default());
    config.limits = kevo_worker::Limits {
        compile_memory_bytes: 1 << 30,
        worker_memory_bytes: 0,
        compile_timeout_s: 5.0,
    };
    let Some(mut w) = under.or_skip(Worker::start(command(dir.path()), config)) else {
        return;
    };
    let started = Instant::now();
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        &kernel(dialect, "class7_compile_bomb"),
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    let Outcome::CompileError { message, .. } = &e.outcome else {
        panic!("{}", e.outcome.summary());
    };
    assert!(
        message.contains("compilation ran past") || message.contains("compiler"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let seed = kevo_tasks::by_name("saxpy").unwrap().seed(dialect).unwrap();
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        seed,
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
}

/// Class 4: a kernel that writes the answer for one set of inputs (here
/// the task's public seed, generated from the reference and embedded as a
/// table) must fail verification, whose inputs differ for every task.
pub fn a_replayed_answer_fails_verification(w: &mut Worker, dialect: Dialect) {
    let task = kevo_tasks::by_name("morton").unwrap();
    let size = in_distribution("morton")[0].clone();
    let problem = task.problem(&size, task.default_seed());
    let answer = task.reference(&size, &problem);
    let answer = answer.downcast_ref::<Vec<f32>>().expect("morton reference");
    let table: Vec<String> = answer.iter().map(|v| format!("{:e}f", v)).collect();
    let table = table.join(", ");
    let source = match dialect {
        Dialect::Cuda => format!(
            "// Class 4 exploit: the timed answer, replayed.\n__constant__ float ANSWER[{n}] = {{{table}}};\n\
             extern \"C\" __global__ void morton_stencil(const float* u_in, float* u_out, unsigned int N, unsigned int logN, float alpha) {{\n\
             unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;\n if (t < {n}u) u_out[t] = ANSWER[t];\n}}\n",
            n = answer.len()
        ),
        _ => format!(
            "// Class 4 exploit: the timed answer, replayed.\n__constant float ANSWER[{n}] = {{{table}}};\n\
             __kernel void morton_stencil(__global const float* u_in, __global float* u_out, uint N, uint logN, float alpha) {{\n\
             uint t = get_global_id(0);\n if (t < {n}u) u_out[t] = ANSWER[t];\n}}\n",
            n = answer.len()
        ),
    };
    let e = w.evaluate(
        kevo_tasks::by_name("morton").unwrap(),
        &source,
        std::slice::from_ref(&size),
        TIMEOUT,
    );
    assert!(
        matches!(e.outcome, Outcome::WrongResult { .. }),
        "{}",
        e.outcome.summary()
    );
}

/// Class 9: kernels carrying the answers for inputs computed in advance
/// (the tasks' public seeds, from which inputs were drawn before they came
/// from a secret) recognise nothing and fail: nbody (final states of all
/// bodies) and hmc (every chain's final state and accept count).
pub fn tabulated_answers_fail(w: &mut Worker, dialect: Dialect) {
    for task in ["nbody", "hmc"] {
        let size = in_distribution(task)[0].clone();
        let source =
            tables::tabulating_kernel(task, dialect == Dialect::Cuda, std::slice::from_ref(&size));
        let e = w.evaluate(
            kevo_tasks::by_name(task).unwrap(),
            &source,
            std::slice::from_ref(&size),
            TIMEOUT,
        );
        assert!(
            matches!(e.outcome, Outcome::WrongResult { .. }),
            "{task}: {}",
            e.outcome.summary()
        );
    }
}

/// Class 5: nbody with forces only every other step fails the audited
/// tolerance (positions and velocities).
pub fn under_computing_fails(w: &mut Worker, dialect: Dialect) {
    let e = w.evaluate(
        kevo_tasks::by_name("nbody").unwrap(),
        &kernel(dialect, "class5_nbody_forces_every_other_step"),
        &in_distribution("nbody"),
        TIMEOUT,
    );
    assert!(
        matches!(e.outcome, Outcome::WrongResult { .. }),
        "{}",
        e.outcome.summary()
    );
}

pub fn tuned_to_shown_sizes_fails_held_out(w: &mut Worker, dialect: Dialect) {
    let src = kernel(dialect, "correct_only_in_distribution");
    let plan = kevo_tasks::by_name("heat2d").unwrap().sizes(SizeSet::Smoke);
    let e = w.evaluate(
        kevo_tasks::by_name("heat2d").unwrap(),
        &src,
        &plan.in_distribution,
        TIMEOUT,
    );
    assert!(
        e.outcome.is_correct(),
        "passes what it was shown: {}",
        e.outcome.summary()
    );
    let e = w.evaluate(
        kevo_tasks::by_name("heat2d").unwrap(),
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

pub fn unusual_kernels_are_accepted(w: &mut Worker, dialect: Dialect) {
    for (stem, task) in [
        ("ok_tiled", "heat2d"),
        ("ok_branchless", "heat2d"),
        ("ok_declared_block", "saxpy"),
        ("ok_unreachable_printf", "saxpy"),
        ("ok_tiled_nbody", "nbody"),
        ("ok_shared_matrix_hmc", "hmc"),
    ] {
        let e = w.evaluate(
            kevo_tasks::by_name(task).unwrap(),
            &kernel(dialect, stem),
            &in_distribution(task),
            TIMEOUT,
        );
        assert!(e.outcome.is_correct(), "{stem}: {}", e.outcome.summary());
    }
}

/// `n` candidates in one session, every third one a hang or a wild write
/// (alternating), the rest the seed. Every candidate must get its right
/// outcome; prints the respawn figures as one JSON line.
pub fn stress(w: &mut Worker, dialect: Dialect, n: usize, hang_timeout: Duration) {
    let seed = kevo_tasks::by_name("saxpy")
        .unwrap()
        .seed(dialect)
        .unwrap()
        .to_string();
    let hang = kernel(dialect, "infinite_loop");
    let wild = kernel(dialect, "illegal_address");
    let sizes = in_distribution("saxpy");
    let started = Instant::now();
    let (mut hangs, mut faults, mut good) = (0, 0, 0);
    for k in 0..n {
        let (src, timeout) = match k % 3 {
            2 if (k / 3) % 2 == 0 => (&hang, hang_timeout),
            2 => (&wild, TIMEOUT),
            _ => (&seed, TIMEOUT),
        };
        let e = w.evaluate(kevo_tasks::by_name("saxpy").unwrap(), src, &sizes, timeout);
        match k % 3 {
            2 if (k / 3) % 2 == 0 => {
                assert!(
                    matches!(e.outcome, Outcome::Timeout { .. }),
                    "candidate {k}: {}",
                    e.outcome.summary()
                );
                hangs += 1;
            }
            2 => {
                assert!(
                    matches!(e.outcome, Outcome::RuntimeError { .. }),
                    "candidate {k}: {}",
                    e.outcome.summary()
                );
                faults += 1;
            }
            _ => {
                assert!(
                    e.outcome.is_correct(),
                    "candidate {k}: {}",
                    e.outcome.summary()
                );
                good += 1;
            }
        }
    }
    assert_eq!(hangs + faults + good, n, "no candidate lost");
    let s = w.stats();
    let respawn: Vec<f64> = s.spawn_s.iter().skip(1).copied().collect();
    let startup: Vec<f64> = s.startup_s.iter().skip(1).copied().collect();
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            f64::NAN
        } else {
            v[v.len() / 2]
        }
    };
    println!(
        "{}",
        serde_json::json!({
            "device": w.device().name,
            "candidates": n, "correct": good, "timeouts": hangs, "faults": faults,
            "spawns": s.spawns,
            "respawn_median_s": med(respawn.clone()),
            "respawn_max_s": respawn.iter().cloned().fold(0.0, f64::max),
            "backend_startup_median_s": med(startup.clone()),
            "respawn_minus_backend_startup_median_s": med(respawn.iter().zip(&startup).map(|(a, b)| a - b).collect()),
            "hang_timeout_s": hang_timeout.as_secs_f64(),
            "session_s": started.elapsed().as_secs_f64(),
        })
    );
}

/// A random token and a file holding it, outside anything the worker may
/// read: the canary every sandbox test looks for.
pub fn canary() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("kevo_canary_{:032x}", {
        let mut b = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
            .unwrap();
        u128::from_le_bytes(b)
    });
    let path = dir.path().join("secret.env");
    std::fs::write(&path, format!("OPENAI_API_KEY={token}\n{token}\n")).unwrap();
    (dir, path, token)
}

/// The sandbox issue's suite: kernels that reach a canary file by an
/// absolute include, a relative climb, a macro-built path, a
/// `__has_include` probe, a token-pasted probe and `#embed` are refused,
/// and the token appears in no outcome and no worker log; a kernel that
/// includes an allowed header passes.
pub fn a_candidate_reads_no_file(under: UnderTest) {
    let UnderTest { kind, dialect } = under;
    let cache = tempfile::tempdir().unwrap();
    let (_dir, path, token) = canary();
    let Some(mut w) = under.or_skip(Worker::start(
        command(cache.path()),
        WorkerConfig::new(kind, DeviceSelector::default()),
    )) else {
        return;
    };
    for stem in [
        "sandbox_include_absolute",
        "sandbox_include_relative",
        "sandbox_include_macro_built",
        "sandbox_has_include_probe",
        "sandbox_pasted_probe",
        "sandbox_embed",
    ] {
        let source = kernel(dialect, stem).replace("CANARY_PATH", &path.display().to_string());
        let e = w.evaluate(
            kevo_tasks::by_name("saxpy").unwrap(),
            &source,
            &in_distribution("saxpy"),
            TIMEOUT,
        );
        let Outcome::CompileError { message, .. } = &e.outcome else {
            panic!("{stem}: {}", e.outcome.summary());
        };
        assert!(
            ["not allowed", "literal", "filesystem probe"]
                .iter()
                .any(|n| message.contains(n)),
            "{stem}: {message}"
        );
        let everything = serde_json::to_string(&e).unwrap();
        assert!(
            !everything.contains(&token),
            "{stem}: the token leaked: {everything}"
        );
    }
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        &kernel(dialect, "ok_includes_kevo_header"),
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
    assert!(!w.stderr_tail().join("\n").contains(&token));
}

/// A confined worker cannot read the user's files even when asked to from
/// inside (as a compiler bug or native code on a CPU device would), and
/// its environment holds only allow-listed names.
pub fn a_confined_worker_reads_nothing_of_the_users(under: UnderTest) {
    let kind = under.kind;
    let cache = tempfile::tempdir().unwrap();
    let (_dir, canary_path, _token) = canary();
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let mut reads = vec![
        canary_path.clone(),
        // The coordinator's environment, where API keys live.
        std::path::PathBuf::from(format!("/proc/{}/environ", std::process::id())),
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"),
    ];
    let home_file = home.as_ref().map(|h| h.join(".kevo-sandbox-test"));
    if let Some(f) = &home_file {
        std::fs::write(f, "home").unwrap();
        reads.push(f.clone());
    }
    let mut config = WorkerConfig::new(kind, DeviceSelector::default());
    config.self_test_reads = reads.clone();
    let mut cmd = command(cache.path());
    cmd.env
        .push(("KEVO_TEST_API_KEY".into(), "sk-should-not-pass".into()));
    // SAFETY: single assignment before the worker starts; tests in this
    // binary do not read it.
    unsafe { std::env::set_var("OPENAI_API_KEY", "sk-from-the-parent") };
    let started = Worker::start(cmd, config);
    if let Some(f) = &home_file {
        let _ = std::fs::remove_file(f);
    }
    let Some(w) = under.or_skip(started) else {
        return;
    };
    let status = w.sandbox();
    assert!(status.environment_scrubbed);
    let test = w.self_test().expect("the worker answered the self-test");
    if status.filesystem.is_some() {
        for (path, result) in &test.reads {
            assert!(
                result.is_err(),
                "the confined worker read {}",
                path.display()
            );
        }
    } else {
        eprintln!("no Landlock here: {}", status.summary());
    }
    for name in &test.environment {
        assert!(
            kevo_sandbox::env::is_allowed(std::ffi::OsStr::new(name))
                || [
                    "TMPDIR",
                    "HOME",
                    "XDG_CACHE_HOME",
                    "POCL_CACHE_DIR",
                    "CUDA_CACHE_PATH"
                ]
                .contains(&name.as_str()),
            "{name} reached the worker"
        );
        assert!(!name.contains("API_KEY"), "{name} reached the worker");
    }
}

/// Kernels that make system calls through inline assembly (spelled out or
/// pasted together by a macro) or machine code placed in `.text` are
/// refused in OpenCL C before they compile, and the socket they aim at
/// accepts nothing. CUDA keeps inline PTX (it runs on the GPU): nothing to
/// check there.
pub fn inline_assembly_is_refused(under: UnderTest) {
    if under.dialect == Dialect::Cuda {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("outside.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let Some(mut w) = under.or_skip(Worker::start(
        command(cache.path()),
        WorkerConfig::new(under.kind, DeviceSelector::default()),
    )) else {
        return;
    };
    for (stem, needle) in [
        (
            "sandbox_inline_syscall",
            "`__asm__` is not allowed in OpenCL C",
        ),
        ("sandbox_inline_syscall_macro", "could make `__asm"),
        (
            "sandbox_section_shellcode",
            "`section` is not allowed in OpenCL C",
        ),
    ] {
        let source =
            kernel(under.dialect, stem).replace("SOCKET_PATH", &socket.display().to_string());
        let e = w.evaluate(
            kevo_tasks::by_name("saxpy").unwrap(),
            &source,
            &in_distribution("saxpy"),
            TIMEOUT,
        );
        let Outcome::CompileError { message, .. } = &e.outcome else {
            panic!("{stem}: {}", e.outcome.summary());
        };
        assert!(message.contains(needle), "{stem}: {message}");
    }
    assert!(
        listener.accept().is_err(),
        "the socket accepted a connection"
    );
    let seed = kevo_tasks::by_name("saxpy")
        .unwrap()
        .seed(under.dialect)
        .unwrap();
    // The worker goes on. (Suspicious counts: whether the seed beats the
    // ceilings measured at start depends on the machine's load.)
    let e = w.evaluate(
        kevo_tasks::by_name("saxpy").unwrap(),
        seed,
        &in_distribution("saxpy"),
        TIMEOUT,
    );
    assert!(
        e.outcome.is_correct() || matches!(e.outcome, Outcome::Suspicious { .. }),
        "{}",
        e.outcome.summary()
    );
}

/// What one confined worker's connect probe found: the worker's sandbox
/// status and, for the one socket asked about, the probe.
fn connect_probe(
    kind: BackendKind,
    required: bool,
    socket: &std::path::Path,
    skip: Vec<kevo_sandbox::Layer>,
) -> Option<(kevo_sandbox::Status, kevo_worker::ConnectProbe)> {
    let cache = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new(kind, DeviceSelector::default());
    config.self_test_connects = vec![socket.to_path_buf()];
    config.sandbox.skip = skip;
    let w = match Worker::start(command(cache.path()), config) {
        Ok(w) => w,
        Err(e) if !required => {
            eprintln!("skipping {kind}: {e}");
            return None;
        }
        Err(e) => panic!("{kind} must be available here: {e}"),
    };
    let mut test = w
        .self_test()
        .expect("the worker answered the self-test")
        .clone();
    assert_eq!(test.connects.len(), 1, "{test:?}");
    Some((w.sandbox().clone(), test.connects.remove(0)))
}

/// Connections the listener has queued.
fn accepted(listener: &std::os::unix::net::UnixListener) -> usize {
    std::iter::from_fn(|| listener.accept().ok()).count()
}

/// A worker confined as for any candidate, with its device open, cannot
/// connect to a listening Unix socket outside its allowed paths (Landlock
/// does not govern that): not from its main thread, not from a thread it
/// starts (as PoCL's work-item threads are), not from a child process (as
/// the Triton helper is), and the listener accepts nothing. The same
/// worker with the syscall filter left out (`--sandbox-skip syscalls`)
/// connects from all three: the probe works, and the filter is what
/// refuses.
pub fn a_confined_worker_connects_to_no_unix_socket(kind: BackendKind, required: bool) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("outside.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let Some((status, probe)) = connect_probe(kind, required, &socket, Vec::new()) else {
        return;
    };
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert!(
            status.syscalls.is_some(),
            "the filter is not in force: {}",
            status.summary()
        );
    }
    let python = probe.child.is_some();
    assert!(probe.main_thread.is_err(), "main thread: {probe:?}");
    assert!(probe.new_thread.is_err(), "new thread: {probe:?}");
    if let Some(child) = &probe.child {
        assert!(child.is_err(), "child process: {probe:?}");
    } else {
        eprintln!("no /usr/bin/python3 here: the child process was not tried");
    }
    assert_eq!(accepted(&listener), 0, "the listener accepted a connection");

    let (status, probe) = connect_probe(kind, true, &socket, vec![kevo_sandbox::Layer::Syscalls])
        .expect("the worker started");
    assert!(
        status.syscalls.is_none() && status.missing.iter().any(|m| m.contains("syscalls")),
        "{}",
        status.summary()
    );
    assert_eq!(probe.main_thread, Ok(()), "without the filter: {probe:?}");
    assert_eq!(probe.new_thread, Ok(()), "without the filter: {probe:?}");
    if python {
        assert_eq!(probe.child, Some(Ok(())), "without the filter: {probe:?}");
    }
    assert_eq!(
        accepted(&listener),
        if python { 3 } else { 2 },
        "without the filter every probe connects"
    );
}

/// The busy machine's share of the quiet ceilings: two busy loops on this
/// 2-core machine measured 9.5 GB/s copy and 66.7 GFLOPS FMA against 25.2
/// and 169.0 quiet (docs/BENCHMARKS.md, "Ceilings measured on a loaded
/// machine"), 0.38 and 0.39 of them.
pub const BUSY_SHARE: f64 = 0.38;

/// Every rate in the ceiling cache at `path` multiplied by `share`, as a
/// measurement made while other processes held the cores would leave it.
/// Written in place: the cache's own `put` only ever raises a ceiling.
pub fn lower_cached_ceilings(path: &std::path::Path, share: f64) {
    let cache = kevo_roofline::CeilingCache::new(path.to_path_buf());
    let mut all = cache
        .get_all()
        .expect("the first worker wrote its ceilings");
    assert!(
        !all.is_empty(),
        "{}: no measurement to lower",
        path.display()
    );
    let scale = |s: &mut kevo_roofline::Spread| {
        s.median *= share;
        s.min *= share;
        s.max *= share;
    };
    for m in all.values_mut() {
        for v in [
            &mut m.copy_gbs,
            &mut m.copy_gbs_min,
            &mut m.copy_gbs_max,
            &mut m.fma_gflops,
            &mut m.fma_gflops_min,
            &mut m.fma_gflops_max,
        ] {
            *v *= share;
        }
        if let Some(x) = m.extras.as_mut() {
            x.hierarchy
                .levels
                .iter_mut()
                .for_each(|l| scale(&mut l.gbs));
            x.hierarchy.sweep.iter_mut().for_each(|p| scale(&mut p.gbs));
            for r in [&mut x.shared_gbs, &mut x.fp64_gflops, &mut x.fp16_gflops] {
                if let Ok(s) = r.as_mut() {
                    scale(s);
                }
            }
        }
    }
    std::fs::write(path, serde_json::to_string_pretty(&all).unwrap()).unwrap();
}

/// Ceilings measured while the machine was busy must not make an honest
/// kernel "suspicious": a worker measures the device, its cached ceilings
/// are lowered to what two busy loops left of them (or replaced by the
/// cache named in `KEVO_TEST_LOADED_CEILINGS`, one really measured under
/// load: scripts/ceilings-under-load), and a second worker reading that
/// cache must score every task's seed and every `ok_*` kernel of the suite
/// as correct. A figure past a lowered bound is re-measured in the same
/// process before any verdict, which is what lets them through.
pub fn honest_kernels_pass_under_ceilings_measured_on_a_busy_machine(under: UnderTest) {
    let dir = tempfile::tempdir().unwrap();
    let Some(first) = under.or_skip(start(under.kind, dir.path())) else {
        return;
    };
    let measured_on = first.ceilings().clone();
    drop(first);
    let path = dir.path().join("ceilings.json");
    match std::env::var_os("KEVO_TEST_LOADED_CEILINGS") {
        Some(loaded) => {
            std::fs::copy(&loaded, &path).unwrap();
        }
        None => lower_cached_ceilings(&path, BUSY_SHARE),
    }
    let mut w = start(under.kind, dir.path()).unwrap();
    if matches!(
        measured_on.source,
        kevo_roofline::CeilingSource::Measured { .. }
    ) {
        assert!(
            w.ceilings().bandwidth_gbs < measured_on.bandwidth_gbs,
            "the second worker must start from the lowered cache: {} against {}",
            w.ceilings().bandwidth_gbs,
            measured_on.bandwidth_gbs
        );
    }
    let dialect = under.dialect;
    for task in kevo_tasks::all() {
        let Some(seed) = task.seed(dialect) else {
            continue;
        };
        let e = w.evaluate(task, seed, &in_distribution(task.name()), TIMEOUT);
        assert!(
            e.outcome.is_correct(),
            "seed of {}: {}",
            task.name(),
            e.outcome.summary()
        );
    }
    unusual_kernels_are_accepted(&mut w, dialect);
}
