//! The adversarial suite for Triton candidates (tests/adversarial/triton/),
//! through a supervised worker on `BackendKind::Triton`: the exploits of
//! the CUDA and OpenCL suites written as Triton modules, each with the
//! outcome it must get and no score, and the Triton-only ones: modules
//! whose Python would run at import (torch, files, host-side caches,
//! triton.runtime / triton.testing) must be refused by the helper's module
//! check as compile errors before any of their code runs, and kernel bodies
//! must not run host code while Triton compiles them; the `sandbox_*`
//! modules reach Python by other ways (a module bound to a constant or a
//! default, computed attribute names, dunder walks, str.format, the
//! decorator's arguments) or try to patch Triton in the long-lived helper,
//! and must be refused the same way. The `ok_*` modules are correct but
//! unusual and must be accepted.
//!
//! A Triton worker needs a CUDA device and an interpreter with Triton
//! (`$KEVO_TRITON_PYTHON`, `~/.cache/kevo/triton-venv` or `python3`);
//! where it cannot start the tests print "skipping triton: <reason>" and
//! pass, unless `KEVO_REQUIRE_CUDA=1` (scripts/gpu-check), where they fail.

mod common;

use std::time::{Duration, Instant};

use kevo_backend::{DeviceSelector, Dialect};
use kevo_eval::Outcome;
use kevo_runtimes::BackendKind;
use kevo_worker::{Worker, WorkerConfig};

use common::{TIMEOUT, in_distribution};

/// How long the hanging candidate may run (as for CUDA: a GPU context
/// takes a while to rebuild after a kill).
const HANG_TIMEOUT: Duration = Duration::from_secs(5);

fn required() -> bool {
    std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1")
}

/// A worker started with `config`, or None (with the reason printed) when
/// it cannot start here and Triton is not required.
fn start(config: WorkerConfig) -> Option<(Worker, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    match Worker::start(common::command(dir.path()), config) {
        Ok(w) => Some((w, dir)),
        Err(e) if !required() => {
            eprintln!("skipping triton: {e}");
            None
        }
        Err(e) => panic!("triton must be available here (KEVO_REQUIRE_CUDA=1): {e}"),
    }
}

fn config() -> WorkerConfig {
    WorkerConfig::new(BackendKind::Triton, DeviceSelector::default())
}

fn worker() -> Option<(Worker, tempfile::TempDir)> {
    start(config())
}

/// A Triton module of the suite, by stem: tests/adversarial/triton/<stem>.py
/// under `$KEVO_WORKER_TESTS_DIR` (test binaries carried to a GPU machine)
/// or this crate.
fn kernel(stem: &str) -> String {
    let root = std::env::var("KEVO_WORKER_TESTS_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let path = format!("{root}/tests/adversarial/triton/{stem}.py");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn seed(task: &str) -> &'static str {
    kevo_tasks::by_name(task)
        .unwrap()
        .seed(Dialect::Triton)
        .unwrap_or_else(|| panic!("{task} has no Triton seed"))
}

fn evaluate(w: &mut Worker, task: &str, source: &str) -> kevo_eval::Evaluation {
    w.evaluate(
        kevo_tasks::by_name(task).unwrap(),
        source,
        &in_distribution(task),
        TIMEOUT,
    )
}

fn wrong(o: &Outcome) -> bool {
    matches!(o, Outcome::WrongResult { .. })
}

fn guard_hit(o: &Outcome) -> bool {
    matches!(o, Outcome::WrongResult { metric, .. } if metric.starts_with("out_of_bounds_bytes(y)"))
}

fn assert_seed_is_correct(w: &mut Worker, when: &str) {
    let e = evaluate(w, "saxpy", seed("saxpy"));
    assert!(
        e.outcome.is_correct(),
        "the saxpy seed {when}: {}",
        e.outcome.summary()
    );
}

type Expect = fn(&Outcome) -> bool;

/// Every exploit that runs, with the task it attacks and the outcome it
/// must get (as tests/adversarial.rs has them for CUDA and OpenCL).
fn exploits() -> Vec<(&'static str, &'static str, Expect)> {
    vec![
        ("infinite_loop", "saxpy", |o| {
            matches!(o, Outcome::Timeout { .. })
        }),
        ("illegal_address", "saxpy", |o| {
            matches!(o, Outcome::RuntimeError { message, .. }
                if message.contains("SIGSEGV") || message.contains("ILLEGAL_ADDRESS") || message.contains("illegal address"))
        }),
        ("out_of_bounds_write", "saxpy", guard_hit),
        (
            "modifies_input",
            "saxpy",
            |o| matches!(o, Outcome::WrongResult { metric, .. } if metric == "input_modified_words(x)"),
        ),
        // 20 steps end in buffer A, which still holds the initial state.
        ("writes_nothing", "heat2d", wrong),
        ("writes_constant", "heat2d", wrong),
        ("returns_input", "heat2d", wrong),
    ]
}

#[test]
fn exploits_are_rejected_with_the_right_outcome() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    for (stem, task, expect) in exploits() {
        let timeout = if stem == "infinite_loop" {
            HANG_TIMEOUT
        } else {
            TIMEOUT
        };
        let e = w.evaluate(
            kevo_tasks::by_name(task).unwrap(),
            &kernel(stem),
            &in_distribution(task),
            timeout,
        );
        assert!(expect(&e.outcome), "{stem}: {}", e.outcome.summary());
        assert_eq!(e.outcome.score(), None, "{stem}");
    }
    assert_seed_is_correct(&mut w, "after the exploits");
    let s = w.stats();
    assert_eq!(s.timeouts, 1, "{s:?}");
    // The wild write poisons the device and has the worker replaced.
    assert_eq!(s.crashes + s.restarts, 1, "{s:?}");
    assert_eq!(
        s.spawns, 3,
        "one start and one respawn after each failure: {s:?}"
    );
}

/// Modules refused by the helper's module check, each with what the
/// reason must name. Nothing of them may run: `CANARY_PATH` is replaced
/// by a file holding a secret token, which must come back nowhere and
/// must be left as it was.
fn module_rejections() -> Vec<(&'static str, &'static str)> {
    vec![
        // The "calls a PyTorch operator instead of a kernel" hack.
        ("module_imports_torch", "import torch"),
        ("module_try_imports_torch", "Try at module level"),
        // File access at import.
        ("module_reads_file_at_import", "`SECRET` must be a constant"),
        ("module_open_at_import", "at module level"),
        // The os module from a kernel body.
        ("kernel_body_dunder_import", "__import__"),
        // Host-side caching in module state.
        ("module_host_cache_dict", "`CACHE` must be a constant"),
        ("module_host_cache_list", "`SEEN` must be a constant"),
        // Code that runs at import.
        ("module_level_call", "`CHUNK` must be a constant"),
        (
            "module_triton_runtime_attribute",
            "`DEVICE` must be a constant",
        ),
        (
            "module_triton_testing_attribute",
            "`BENCH` must be a constant",
        ),
        ("module_imports_triton_testing", "import triton.testing"),
        // Python reached from a kernel or a module by a name that is not
        // an import: a module constant bound to a module (`T = tl`), a
        // default that is one (`L: tl.constexpr = tl`, which once
        // returned a file's first line as the compile error), a tuple
        // default holding one, a module passed to a jit function.
        ("sandbox_alias_exec", "`T` must be a constant"),
        (
            "sandbox_constexpr_default_file_read",
            "a default of `saxpy` must be a constant",
        ),
        (
            "sandbox_tuple_default_module",
            "a default of `saxpy` must be a constant",
        ),
        ("sandbox_module_passed_to_jit_function", "`m.core`"),
        // Sabotage of later candidates: replacing triton.compile or
        // patching tl in the long-lived helper, from a kernel body, at
        // import, or in a default.
        (
            "sandbox_helper_poisoning",
            "assigning to `triton.compile` is not allowed",
        ),
        (
            "sandbox_helper_poisoning_module",
            "only `NAME = constant` assignments",
        ),
        (
            "sandbox_helper_poisoning_default",
            "reaches the module triton.language.core",
        ),
        // Other ways out: computed attribute names, dunder walks,
        // calls in the decorator's arguments, triton.runtime, open by
        // name, str.format's attribute walk, a jit function's Python
        // function, importlib's leftovers in triton.language.extra.
        ("sandbox_getattr_chain", "`getattr` is not part of a kernel"),
        ("sandbox_dunder_mro", "`__class__` is not part of a kernel"),
        (
            "sandbox_decorator_smuggles_call",
            "@triton.jit(do_not_specialize=...)",
        ),
        (
            "sandbox_from_triton_import_runtime",
            "`from triton import runtime` is not allowed",
        ),
        (
            "sandbox_kernel_calls_open",
            "`open` is not part of a kernel",
        ),
        ("sandbox_str_format_walk", "`format` is not an attribute"),
        ("sandbox_jit_function_internals", "`fn` is not an attribute"),
        (
            "sandbox_extra_module_leftovers",
            "not part of the kernel language",
        ),
    ]
}

#[test]
fn modules_that_run_python_at_import_are_refused_before_they_run() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let (_canary_dir, canary, token) = common::canary();
    let before = std::fs::read(&canary).unwrap();
    for (stem, reason) in module_rejections() {
        let source = kernel(stem).replace("CANARY_PATH", &canary.display().to_string());
        let e = evaluate(&mut w, "saxpy", &source);
        let Outcome::CompileError {
            message,
            diagnostics,
        } = &e.outcome
        else {
            panic!("{stem}: {}", e.outcome.summary());
        };
        assert!(message.contains(reason), "{stem}: {message}");
        assert!(
            diagnostics.errors().next().and_then(|d| d.line).is_some(),
            "{stem}: the rejection names the line: {}",
            diagnostics.log
        );
        assert!(
            diagnostics.log.contains("the module is refused"),
            "{stem}: refused by the module check, not by Triton's compiler: {}",
            diagnostics.log
        );
        assert_eq!(e.outcome.score(), None, "{stem}");
        assert!(e.sizes.is_empty(), "{stem}: nothing ran");
        let everything = serde_json::to_string(&e).unwrap();
        assert!(
            !everything.contains(&token),
            "{stem}: the token leaked: {everything}"
        );
    }
    assert_eq!(
        std::fs::read(&canary).unwrap(),
        before,
        "a refused module ran and wrote the canary file"
    );
    assert!(!w.stderr_tail().join("\n").contains(&token));
    assert_seed_is_correct(&mut w, "after the refused modules");
    assert_eq!(w.stats().spawns, 1, "no worker was lost: {:?}", w.stats());
}

/// Triton's front end calls any Python callable a kernel body names while
/// it compiles, and attributes of `tl` lead to Python's builtins and os
/// (`tl.core.builtins`, `tl.core.knobs.os`): a body that reaches them runs
/// host code in the helper (which persists across candidates), past the
/// module check. It must be refused, and what it computed or read must not
/// come back in the compile error.
#[test]
fn kernel_bodies_run_no_host_code_while_compiling() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let (_canary_dir, canary, token) = common::canary();
    // 7**23, which only running Python in the helper produces.
    let ran = "27368747340080916343";
    let mut problems = Vec::new();
    for (stem, marker) in [
        ("kernel_body_runs_python", ran),
        ("kernel_body_reads_file", token.as_str()),
    ] {
        let source = kernel(stem).replace("CANARY_PATH", &canary.display().to_string());
        let e = evaluate(&mut w, "saxpy", &source);
        eprintln!("{stem}: {}", e.outcome.summary());
        let everything = serde_json::to_string(&e).unwrap();
        if !matches!(e.outcome, Outcome::CompileError { .. }) {
            problems.push(format!("{stem}: not refused: {}", e.outcome.summary()));
        } else if everything.contains(marker) {
            problems.push(format!(
                "{stem}: the kernel body ran Python in the helper: {}",
                e.outcome.summary()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_seed_is_correct(&mut w, "after the kernel bodies");
}

/// Class 1: a kernel that prints well-formed replies (device_print and
/// print) for its own and later request ids gets its real (wrong) result,
/// and the next candidate its own.
#[test]
fn class1_forged_replies_never_become_results() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let e = evaluate(&mut w, "saxpy", &kernel("class1_forges_result_lines"));
    assert!(wrong(&e.outcome), "{}", e.outcome.summary());
    assert_ne!(e.device, "forged");
    for _ in 0..3 {
        let e = evaluate(&mut w, "saxpy", seed("saxpy"));
        let score = e
            .outcome
            .score()
            .unwrap_or_else(|| panic!("{}", e.outcome.summary()));
        assert!(
            score < 99.0 && e.device != "forged",
            "a forged line was taken: {score}"
        );
    }
    let e = evaluate(&mut w, "saxpy", &kernel("ok_unreachable_printf"));
    assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
    assert_eq!(w.stats().protocol_violations, 0, "{:?}", w.stats());
    assert_eq!(w.stats().spawns, 1, "no worker was lost: {:?}", w.stats());
}

/// Classes 2 and 3: state kept past the end of y between runs hits the
/// guard; a counter in a `.global` declared by inline PTX is restored
/// before every run (or the module refused), so it never reaches the runs
/// it would compute on; a kernel right only in some time windows differs
/// between timed runs.
#[test]
fn class2_and_3_no_state_survives_between_runs() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let stateful: [(&str, Expect); 4] = [
        ("class2_memo_in_guard_region", guard_hit),
        ("class3_counts_launches", guard_hit),
        ("class2_counts_in_device_global", |o| {
            wrong(o) || matches!(o, Outcome::CompileError { .. })
        }),
        ("class3_right_only_sometimes", wrong),
    ];
    for (stem, expect) in stateful {
        let e = evaluate(&mut w, "saxpy", &kernel(stem));
        eprintln!("{stem}: {}", e.outcome.summary());
        assert!(expect(&e.outcome), "{stem}: {}", e.outcome.summary());
        assert_eq!(e.outcome.score(), None, "{stem}");
    }
    assert_seed_is_correct(&mut w, "after the stateful exploits");
}

/// Class 2, Triton only: the two hidden scratch pointers Triton appends to
/// every kernel can be read with inline PTX (`ld.param`). What a kernel
/// leaves there must not survive to the next run: the probe is right on
/// every run that finds no mark of an earlier one. (A backend that passes
/// NULL, or a module check that refuses the read, is fine too.)
#[test]
fn class2_triton_scratch_keeps_no_state_between_runs() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let e = evaluate(&mut w, "saxpy", &kernel("class2_state_in_triton_scratch"));
    assert!(
        e.outcome.is_correct() || matches!(e.outcome, Outcome::CompileError { .. }),
        "state survived in Triton's scratch: {}",
        e.outcome.summary()
    );
}

/// Class 5: nbody with forces only every other step fails the audited
/// tolerance.
#[test]
fn class5_under_computing_fails_the_audited_tolerance() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let e = evaluate(
        &mut w,
        "nbody",
        &kernel("class5_nbody_forces_every_other_step"),
    );
    assert!(wrong(&e.outcome), "{}", e.outcome.summary());
}

/// Class 6: figures above the ceilings are suspicious, never scored:
/// bandwidth-bound (saxpy) and FP32-bound (the nbody seed) both, against
/// ceilings declared a million times below any real device.
#[test]
fn class6_faster_than_the_hardware_is_suspicious() {
    let Some((mut w, _dir)) = start(config().with_declared_ceilings(Some(
        kevo_worker::DeclaredCeilings {
            bandwidth_gbs: 1e-3,
            fp32_gflops: 1e-2,
        },
    ))) else {
        return;
    };
    assert_eq!(w.ceilings().source, kevo_roofline::CeilingSource::Declared);
    let class6 = kernel("class6_faster_than_the_hardware");
    for (what, task, source, ceiling) in [
        (
            "class6_faster_than_the_hardware",
            "saxpy",
            class6.as_str(),
            "DRAM bandwidth",
        ),
        ("the nbody seed", "nbody", seed("nbody"), "FP32 peak"),
    ] {
        let e = evaluate(&mut w, task, source);
        match &e.outcome {
            Outcome::Suspicious { reason, score, .. } => {
                assert!(reason.contains(ceiling), "{what}: {reason}");
                assert!(*score > 1.25, "{what}: {score}");
                assert_eq!(e.outcome.score(), None, "{what}: no score");
            }
            other => panic!("{what}: {}", other.summary()),
        }
    }
}

/// Class 7: a tl.static_range unrolling bomb ends as a compile error within
/// the compile limits, and the worker (with a fresh helper) goes on.
#[test]
fn class7_a_compile_bomb_is_a_bounded_compile_error() {
    let mut config = config();
    config.limits = kevo_worker::Limits {
        compile_memory_bytes: 1 << 30,
        worker_memory_bytes: 0,
        compile_timeout_s: 5.0,
    };
    let Some((mut w, _dir)) = start(config) else {
        return;
    };
    let started = Instant::now();
    let e = evaluate(&mut w, "saxpy", &kernel("class7_compile_bomb"));
    let Outcome::CompileError { message, .. } = &e.outcome else {
        panic!("{}", e.outcome.summary());
    };
    assert!(
        message.contains("compilation ran past")
            || message.contains("compil")
            || message.contains("MemoryError"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_seed_is_correct(&mut w, "after the compile bomb");
}

#[test]
fn a_kernel_tuned_to_the_shown_sizes_fails_the_held_out_size() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    let src = kernel("correct_only_in_distribution");
    let plan = kevo_tasks::by_name("heat2d")
        .unwrap()
        .sizes(kevo_tasks::SizeSet::Smoke);
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

#[test]
fn unusual_but_correct_kernels_are_accepted() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    for (stem, task) in [
        // A 2-D grid, several sub-blocks per program, a helper jit
        // function, a module tl.constexpr, declared warps and stages.
        ("ok_saxpy_2d_grid", "saxpy"),
        // 2-D tiles over a 2-D grid, boundary by selects.
        ("ok_heat2d_tiles", "heat2d"),
        // A device_print that never runs.
        ("ok_unreachable_printf", "saxpy"),
        // Corners of the kernel language the module check must accept:
        // libdevice, math constants, jit functions as arguments, dtype
        // and string constexprs, static_print, triton.jit(...) keywords.
        ("ok_kernel_language_corners", "saxpy"),
    ] {
        let e = evaluate(&mut w, task, &kernel(stem));
        assert!(e.outcome.is_correct(), "{stem}: {}", e.outcome.summary());
    }
}

/// Runs without a GPU: a Triton worker whose device cannot be opened fails
/// to start, saying why.
#[test]
fn a_worker_that_cannot_open_its_device_fails_to_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = WorkerConfig::new(
        BackendKind::Triton,
        DeviceSelector {
            platform: None,
            device: Some("no-such-device".into()),
        },
    );
    let err = Worker::start(common::command(dir.path()), config)
        .err()
        .expect("must not start");
    let text = err.to_string();
    assert!(
        text.contains("no-such-device") || text.contains("not available"),
        "{text}"
    );
}
