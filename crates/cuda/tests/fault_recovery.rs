//! A faulting candidate is a typed error, never a crash or a hang, and the
//! device keeps working for the next candidate. Skipped on machines without
//! CUDA.
//!
//! The driver does not let a process use CUDA again after a sticky fault
//! (see `CudaBackend`'s documentation), so each faulting kernel runs in a
//! child process: this test binary started again with `KEVO_FAULT_CHILD`
//! naming the kernel. The child checks the typed fault and what the backend
//! does afterwards; the parent, which never faults, then checks that the
//! device runs the conformance kernels, as the next worker process would.

mod common;

use std::process::Command;
use std::sync::Mutex;

use kevo_backend::{
    Backend, BackendError, CompileOptions, FaultKind, KernelArg, KernelId, Launch, conformance,
};
use kevo_cuda::{CudaBackend, CudaOptions};

const FAULTS: &str = include_str!("kernels/faults.cu");

/// One child at a time: faults of several processes at once would make a
/// failure hard to attribute.
static SERIAL: Mutex<()> = Mutex::new(());

/// Names the kernel the child process runs; `KEVO_FAULT_GRAPH` set runs it
/// with graphs and the L2 flush on.
const CHILD_ENV: &str = "KEVO_FAULT_CHILD";
const GRAPH_ENV: &str = "KEVO_FAULT_GRAPH";

fn launch(kernel: KernelId, threads: u64, args: Vec<KernelArg>) -> Launch {
    Launch {
        kernel,
        global: [threads, 1, 1],
        local: [threads.min(128) as u32, 1, 1],
        dynamic_shared_bytes: 0,
        args,
    }
}

/// The fault kinds a kernel of `faults.cu` may end in.
fn expected_kinds(kernel: &str) -> &'static [FaultKind] {
    match kernel {
        "wild_write" => &[FaultKind::IllegalAddress, FaultKind::LaunchFailure],
        "misaligned_write" => &[FaultKind::MisalignedAddress, FaultKind::LaunchFailure],
        "trap" => &[
            FaultKind::LaunchFailure,
            FaultKind::IllegalInstruction,
            FaultKind::Other,
        ],
        other => panic!("no fault kernel {other}"),
    }
}

/// The child's side: fault, check the error, check the backend afterwards.
#[test]
fn child() {
    let Ok(kernel) = std::env::var(CHILD_ENV) else {
        return; // not a child: nothing to do
    };
    let options = CudaOptions {
        use_graph: std::env::var_os(GRAPH_ENV).is_some(),
        flush_l2: std::env::var_os(GRAPH_ENV).is_some(),
    };
    let mut b = common::open(options).expect("the parent saw a device");
    let before = b.alloc(1024).unwrap();
    let m = b
        .compile(FAULTS, &CompileOptions::default())
        .expect("fault kernels compile");
    let k = b.kernel(m, &kernel).expect("fault kernel");
    let args = match kernel.as_str() {
        "wild_write" => vec![KernelArg::U32(0x10), KernelArg::U32(1024)],
        _ => vec![KernelArg::Buffer(before)],
    };
    let result = b.run_timed(&[launch(k, 1024, args)]);
    let kinds = expected_kinds(&kernel);
    match &result {
        Err(BackendError::Fault { kind, message }) => {
            eprintln!("fault reported: {kind:?}: {message}");
            assert!(
                kinds.contains(kind),
                "fault {kind:?}, expected one of {kinds:?}"
            );
            assert!(
                message.contains("CUDA_ERROR_"),
                "no CUDA error name in {message:?}"
            );
        }
        other => panic!("expected a fault in {kinds:?}, got {other:?}"),
    }
    if b.is_lost() {
        // The driver refused a new context: every call says to restart, and
        // so does opening the device again.
        eprintln!("device lost for this process, as the driver requires");
        let unavailable = |r: Result<(), BackendError>| match r {
            Err(BackendError::Unavailable { reason, .. }) => {
                assert!(reason.contains("new process"), "{reason}")
            }
            other => panic!("expected Unavailable after the fault, got {other:?}"),
        };
        unavailable(b.upload(before, &[0u8; 4]));
        unavailable(b.alloc(64).map(drop));
        unavailable(b.compile(FAULTS, &CompileOptions::default()).map(drop));
        unavailable(b.run_timed(&[launch(k, 32, vec![])]).map(drop));
        assert!(matches!(
            b.kernel_info(k),
            Err(BackendError::InvalidHandle { .. })
        ));
        unavailable(CudaBackend::open(&Default::default()).map(drop));
    } else {
        // The driver allowed the reset: old handles are gone, new work runs.
        eprintln!("context reset succeeded");
        assert_eq!(b.context_resets(), 1);
        assert!(matches!(
            b.upload(before, &[0u8; 4]),
            Err(BackendError::InvalidHandle { .. })
        ));
        conformance::launch_sequence_is_ordered(&mut b);
        conformance::argument_types_are_passed(&mut b);
    }
}

/// Run `kernel` in a child process, then check the device in this one.
fn fault_in_child(kernel: &str, graph: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Skips (with the reason printed) where there is no device.
    let Some(mut b) = common::open(CudaOptions::default()) else {
        return;
    };
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, kernel);
    if graph {
        cmd.env(GRAPH_ENV, "1");
    } else {
        cmd.env_remove(GRAPH_ENV);
    }
    let out = cmd.output().expect("start the child process");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("child running `{kernel}`:\n{log}");
    assert!(out.status.success(), "the child process failed: {log}");
    assert!(
        log.contains("fault reported"),
        "the child did not fault: {log}"
    );
    // This process never faulted: the device works for the next candidate.
    assert!(!b.is_lost());
    conformance::launch_sequence_is_ordered(&mut b);
    conformance::argument_types_are_passed(&mut b);
}

#[test]
fn wild_write_is_an_illegal_address() {
    fault_in_child("wild_write", false);
}

#[test]
fn misaligned_store_is_a_misaligned_address() {
    fault_in_child("misaligned_write", false);
}

#[test]
fn trap_is_a_launch_failure() {
    fault_in_child("trap", false);
}

#[test]
fn a_fault_in_a_captured_graph_is_reported_too() {
    fault_in_child("wild_write", true);
}
