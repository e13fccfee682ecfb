//! The adversarial suite and the 100-candidate session, instantiated once
//! per backend by `kevo_runtimes::backend_tests!` (`opencl::...`,
//! `cuda::...`). A backend this machine lacks is skipped unless it is
//! required (`UnderTest::required`: OpenCL under `CI`, CUDA under
//! `KEVO_REQUIRE_CUDA=1`, Triton under `KEVO_REQUIRE_TRITON=1`, which
//! scripts/gpu-check sets). The kernels here are OpenCL C and CUDA C++, so
//! `triton::` runs only the suites that take none; the Triton exploits
//! are tests/triton.rs.

mod common;

use std::time::Duration;

use kevo_runtimes::BackendKind;
use kevo_runtimes::testing::UnderTest;

kevo_runtimes::backend_tests!(
    exploits_are_rejected_with_the_right_outcome,
    a_kernel_tuned_to_the_shown_sizes_fails_the_held_out_size,
    unusual_but_correct_kernels_are_accepted,
    a_hundred_candidates_with_a_third_hanging_or_faulting_are_all_classified,
    a_worker_that_cannot_open_its_device_fails_to_start_with_the_reason,
    class1_forged_replies_never_become_results,
    class2_and_3_no_state_survives_between_runs,
    class2_no_memo_survives_in_local_memory_past_48k,
    class7_a_compile_bomb_is_a_bounded_compile_error,
    class4_a_replayed_answer_fails_verification,
    class9_answers_tabulated_for_public_inputs_fail,
    class5_under_computing_fails_the_audited_tolerance,
    class6_faster_than_the_hardware_is_suspicious,
    sandbox_a_candidate_reads_no_file,
    sandbox_a_confined_worker_reads_nothing_of_the_users,
    sandbox_inline_assembly_is_refused,
    sandbox_a_confined_worker_connects_to_no_unix_socket,
    honest_kernels_pass_under_ceilings_measured_on_a_busy_machine,
    a_candidate_changed_on_the_way_or_for_another_compiler_is_refused;
    triton:
    a_candidate_changed_on_the_way_or_for_another_compiler_is_refused,
    a_worker_that_cannot_open_its_device_fails_to_start_with_the_reason,
    sandbox_a_confined_worker_reads_nothing_of_the_users,
);

/// How long a hanging candidate may run in the exploit tests and in the
/// 100-candidate session: a GPU context takes longer to rebuild after a
/// kill than PoCL's.
fn hang_limits(under: UnderTest) -> (Duration, Duration) {
    match under.kind {
        BackendKind::Cuda => (Duration::from_secs(5), Duration::from_secs(3)),
        _ => (Duration::from_secs(3), Duration::from_secs(2)),
    }
}

/// Runs `suite` on a worker on `under`'s device, if the machine has one.
fn on_worker(
    under: UnderTest,
    suite: impl FnOnce(&mut kevo_worker::Worker, kevo_backend::Dialect),
) {
    if let Some((mut w, _dir)) = common::worker(under) {
        suite(&mut w, under.dialect);
    }
}

fn exploits_are_rejected_with_the_right_outcome(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::exploits_are_rejected(w, dialect, hang_limits(under).0)
    });
}

fn class9_answers_tabulated_for_public_inputs_fail(under: UnderTest) {
    on_worker(under, common::tabulated_answers_fail);
}

fn a_kernel_tuned_to_the_shown_sizes_fails_the_held_out_size(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::tuned_to_shown_sizes_fails_held_out(w, dialect)
    });
}

fn unusual_but_correct_kernels_are_accepted(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::unusual_kernels_are_accepted(w, dialect)
    });
}

fn a_hundred_candidates_with_a_third_hanging_or_faulting_are_all_classified(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::stress(w, dialect, 100, hang_limits(under).1)
    });
}

fn a_worker_that_cannot_open_its_device_fails_to_start_with_the_reason(under: UnderTest) {
    let dir = tempfile::tempdir().unwrap();
    let config = kevo_worker::WorkerConfig::new(
        under.kind,
        kevo_backend::DeviceSelector {
            platform: None,
            device: Some("no-such-device".into()),
        },
    );
    let err = kevo_worker::Worker::start(common::command(dir.path()), config)
        .err()
        .expect("must not start");
    let text = err.to_string();
    assert!(
        text.contains("no-such-device") || text.contains("not available"),
        "{text}"
    );
}

fn class1_forged_replies_never_become_results(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::forged_replies_never_become_results(w, dialect)
    });
}

/// The worker evaluates only the candidate the caller will store: one
/// whose source no longer matches its hash, or written for another
/// compiler, is refused before it compiles; the seed as sent is correct
/// and its evaluation names its hash.
fn a_candidate_changed_on_the_way_or_for_another_compiler_is_refused(under: UnderTest) {
    on_worker(under, |w, dialect| {
        let saxpy = kevo_tasks::by_name("saxpy").unwrap();
        let seed = saxpy.seed(dialect).expect("saxpy has a seed").to_string();
        let sizes = common::in_distribution("saxpy");
        let refused = |e: &kevo_eval::Evaluation, why: &str| {
            assert!(
                matches!(&e.outcome, kevo_eval::Outcome::RuntimeError { message, .. }
                    if message.contains(why)),
                "{}",
                e.outcome.summary()
            );
        };
        let other = match dialect {
            kevo_backend::Dialect::OpenCl => kevo_backend::Dialect::Cuda,
            _ => kevo_backend::Dialect::OpenCl,
        };
        let foreign = kevo_eval::Candidate::new(seed.clone(), other);
        let e = w.evaluate_candidate(saxpy, &foreign, &sizes, common::TIMEOUT);
        refused(&e, "whose backend compiles");
        let mut changed = kevo_eval::Candidate::new(seed.clone(), dialect);
        changed.source.push_str("\n// changed on the way\n");
        let e = w.evaluate_candidate(saxpy, &changed, &sizes, common::TIMEOUT);
        refused(&e, "does not match its hash");
        let sent = kevo_eval::Candidate::new(seed, dialect);
        let e = w.evaluate_candidate(saxpy, &sent, &sizes, common::TIMEOUT);
        assert!(e.outcome.is_correct(), "{}", e.outcome.summary());
        assert_eq!(e.source_sha.as_deref(), Some(sent.sha.as_str()));
    });
}

fn class2_and_3_no_state_survives_between_runs(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::state_does_not_survive_between_runs(w, dialect)
    });
}

/// Class 2: a memo left in __local/shared memory past its first 48 KB
/// (`class2_memo_in_local_memory_past_48k`, which adds 1 to its result
/// when it finds one) must not survive the scrub after each run: evaluated
/// twice on one worker, so within one candidate's runs and from one
/// candidate to the next, it stays correct. A device whose work-groups
/// cannot have the OpenCL probe's 256 KB (GPUs: 48 to 64 KB) refuses it.
fn class2_no_memo_survives_in_local_memory_past_48k(under: UnderTest) {
    on_worker(under, |w, dialect| {
        let stem = "class2_memo_in_local_memory_past_48k";
        let source = common::kernel(dialect, stem);
        let fits =
            dialect == kevo_backend::Dialect::Cuda || w.device().local_mem_bytes >= 256 << 10;
        for evaluation in 0..2 {
            let sizes = common::in_distribution("saxpy");
            let e = w.evaluate(
                kevo_tasks::by_name("saxpy").unwrap(),
                &source,
                &sizes,
                common::TIMEOUT,
            );
            let o = &e.outcome;
            assert!(
                if fits {
                    o.is_correct()
                } else {
                    matches!(
                        o,
                        kevo_eval::Outcome::CompileError { .. }
                            | kevo_eval::Outcome::RuntimeError { .. }
                    )
                },
                "{stem}, evaluation {evaluation}: {}",
                o.summary()
            );
        }
    });
}

fn class7_a_compile_bomb_is_a_bounded_compile_error(under: UnderTest) {
    common::compile_bombs_are_bounded(under);
}

fn class4_a_replayed_answer_fails_verification(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::a_replayed_answer_fails_verification(w, dialect)
    });
}

fn class5_under_computing_fails_the_audited_tolerance(under: UnderTest) {
    on_worker(under, |w, dialect| {
        common::under_computing_fails(w, dialect)
    });
}

fn class6_faster_than_the_hardware_is_suspicious(under: UnderTest) {
    common::faster_than_the_hardware_is_suspicious(under);
}

fn sandbox_a_candidate_reads_no_file(under: UnderTest) {
    common::a_candidate_reads_no_file(under);
}

fn sandbox_a_confined_worker_reads_nothing_of_the_users(under: UnderTest) {
    common::a_confined_worker_reads_nothing_of_the_users(under);
}

fn sandbox_inline_assembly_is_refused(under: UnderTest) {
    common::inline_assembly_is_refused(under);
}

fn sandbox_a_confined_worker_connects_to_no_unix_socket(under: UnderTest) {
    common::a_confined_worker_connects_to_no_unix_socket(under.kind, under.required());
}

/// The connect probe on a Triton worker, whose child is the Triton
/// helper's interpreter. Named so that `adversarial cuda::` runs it
/// (scripts/gpu-check); required where CUDA is (`KEVO_REQUIRE_CUDA=1`).
mod triton_on_cuda {
    #[test]
    fn sandbox_a_confined_worker_connects_to_no_unix_socket() {
        super::common::a_confined_worker_connects_to_no_unix_socket(
            kevo_runtimes::BackendKind::Triton,
            std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
        );
    }
}

fn honest_kernels_pass_under_ceilings_measured_on_a_busy_machine(under: UnderTest) {
    common::honest_kernels_pass_under_ceilings_measured_on_a_busy_machine(under);
}
