//! The adversarial suite and the 100-candidate session, instantiated once
//! per backend (`opencl::...`, `cuda::...`). A backend this machine lacks
//! is skipped unless it is required: OpenCL under `CI` (PoCL there),
//! CUDA under `KEVO_REQUIRE_CUDA=1` (set by scripts/gpu-check on the GPU
//! machine).

mod common;

use std::time::Duration;

use kevo_backend::Dialect;
use kevo_runtimes::BackendKind;

/// Whether a missing `kind` device fails the suite instead of skipping it.
fn required(kind: BackendKind) -> bool {
    match kind {
        BackendKind::Cuda => std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
        _ => std::env::var_os("CI").is_some(),
    }
}

/// The suite for one backend. `hang` bounds a hanging candidate in the
/// exploit tests, `stress_hang` in the 100-candidate session: a GPU
/// context takes longer to rebuild after a kill than PoCL's.
macro_rules! adversarial_suite {
    ($module:ident, $kind:expr, $dialect:expr, hang: $hang:expr, stress_hang: $stress:expr) => {
        mod $module {
            use super::*;

            const KIND: BackendKind = $kind;
            const DIALECT: Dialect = $dialect;

            fn worker() -> Option<(kevo_worker::Worker, tempfile::TempDir)> {
                common::worker(KIND, required(KIND))
            }

            #[test]
            fn exploits_are_rejected_with_the_right_outcome() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::exploits_are_rejected(&mut w, DIALECT, Duration::from_secs($hang));
            }

            #[test]
            fn a_kernel_tuned_to_the_shown_sizes_fails_the_held_out_size() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::tuned_to_shown_sizes_fails_held_out(&mut w, DIALECT);
            }

            #[test]
            fn unusual_but_correct_kernels_are_accepted() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::unusual_kernels_are_accepted(&mut w, DIALECT);
            }

            #[test]
            fn a_hundred_candidates_with_a_third_hanging_or_faulting_are_all_classified() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::stress(&mut w, DIALECT, 100, Duration::from_secs($stress));
            }

            #[test]
            fn a_worker_that_cannot_open_its_device_fails_to_start_with_the_reason() {
                let dir = tempfile::tempdir().unwrap();
                let config = kevo_worker::WorkerConfig::new(
                    KIND,
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

            #[test]
            fn class1_forged_replies_never_become_results() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::forged_replies_never_become_results(&mut w, DIALECT);
            }

            #[test]
            fn class2_and_3_no_state_survives_between_runs() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::state_does_not_survive_between_runs(&mut w, DIALECT);
            }

            #[test]
            fn class7_a_compile_bomb_is_a_bounded_compile_error() {
                common::compile_bombs_are_bounded(KIND, DIALECT, required(KIND));
            }

            #[test]
            fn class4_a_replayed_answer_fails_verification() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::a_replayed_answer_fails_verification(&mut w, DIALECT);
            }

            #[test]
            fn class5_under_computing_fails_the_audited_tolerance() {
                let Some((mut w, _dir)) = worker() else {
                    return;
                };
                common::under_computing_fails(&mut w, DIALECT);
            }

            #[test]
            fn class6_faster_than_the_hardware_is_suspicious() {
                common::faster_than_the_hardware_is_suspicious(KIND, DIALECT, required(KIND));
            }

            #[test]
            fn sandbox_a_candidate_reads_no_file() {
                common::a_candidate_reads_no_file(KIND, DIALECT, required(KIND));
            }

            #[test]
            fn sandbox_a_confined_worker_reads_nothing_of_the_users() {
                common::a_confined_worker_reads_nothing_of_the_users(KIND, required(KIND));
            }
        }
    };
}

adversarial_suite!(opencl, BackendKind::Opencl, Dialect::OpenCl, hang: 3, stress_hang: 2);
adversarial_suite!(cuda, BackendKind::Cuda, Dialect::Cuda, hang: 5, stress_hang: 3);
