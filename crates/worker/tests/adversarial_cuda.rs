//! The adversarial suite and the 100-candidate session on CUDA. Skipped
//! where there is no CUDA device; KEVO_REQUIRE_CUDA=1 (set by
//! scripts/gpu-check on the GPU machine) makes a missing device a failure.

mod common;

use std::time::Duration;

use kevo_backend::Dialect;
use kevo_runtimes::BackendKind;

fn worker() -> Option<(kevo_worker::Worker, tempfile::TempDir)> {
    common::worker(
        BackendKind::Cuda,
        std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
    )
}

#[test]
fn exploits_are_rejected_with_the_right_outcome() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::exploits_are_rejected(&mut w, Dialect::Cuda, Duration::from_secs(5));
}

#[test]
fn a_kernel_tuned_to_the_shown_sizes_fails_the_held_out_size() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::tuned_to_shown_sizes_fails_held_out(&mut w, Dialect::Cuda);
}

#[test]
fn unusual_but_correct_kernels_are_accepted() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::unusual_kernels_are_accepted(&mut w, Dialect::Cuda);
}

#[test]
fn a_hundred_candidates_with_a_third_hanging_or_faulting_are_all_classified() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::stress(&mut w, Dialect::Cuda, 100, Duration::from_secs(3));
}

#[test]
fn class1_forged_replies_never_become_results() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::forged_replies_never_become_results(&mut w, Dialect::Cuda);
}

#[test]
fn class2_and_3_no_state_survives_between_runs() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::state_does_not_survive_between_runs(&mut w, Dialect::Cuda);
}

#[test]
fn class7_a_compile_bomb_is_a_bounded_compile_error() {
    common::compile_bombs_are_bounded(
        BackendKind::Cuda,
        Dialect::Cuda,
        std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
    );
}

#[test]
fn class4_a_replayed_answer_fails_verification() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::a_replayed_answer_fails_verification(&mut w, Dialect::Cuda);
}

#[test]
fn class5_under_computing_fails_the_audited_tolerance() {
    let Some((mut w, _dir)) = worker() else {
        return;
    };
    common::under_computing_fails(&mut w, Dialect::Cuda);
}

#[test]
fn class6_faster_than_the_hardware_is_suspicious() {
    common::faster_than_the_hardware_is_suspicious(
        BackendKind::Cuda,
        Dialect::Cuda,
        std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
    );
}

#[test]
fn sandbox_a_candidate_reads_no_file() {
    common::a_candidate_reads_no_file(
        BackendKind::Cuda,
        Dialect::Cuda,
        std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
    );
}

#[test]
fn sandbox_a_confined_worker_reads_nothing_of_the_users() {
    common::a_confined_worker_reads_nothing_of_the_users(
        BackendKind::Cuda,
        std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
    );
}
