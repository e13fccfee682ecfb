//! Mapping driver results to typed backend errors.

use std::ffi::CStr;

use cudarc::driver::sys::{self as cu, CUresult};
use kevo_backend::{BackendError, FaultKind};

/// What the failing call was doing; the same code means different things
/// in different places (`CUDA_ERROR_INVALID_VALUE` from `cuLaunchKernel` is a
/// malformed launch, from a copy it is a bug here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Launch,
    Alloc(usize),
    Other,
}

/// Errors after which the context is unusable: every later call in it
/// returns the same error until the context is destroyed.
pub(crate) fn is_sticky(r: CUresult) -> bool {
    use CUresult::*;
    matches!(
        r,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// The fault a result stands for, if it is a device fault.
pub(crate) fn fault_kind(r: CUresult) -> Option<FaultKind> {
    use CUresult::*;
    Some(match r {
        CUDA_ERROR_ILLEGAL_ADDRESS | CUDA_ERROR_INVALID_ADDRESS_SPACE => FaultKind::IllegalAddress,
        CUDA_ERROR_MISALIGNED_ADDRESS => FaultKind::MisalignedAddress,
        CUDA_ERROR_LAUNCH_FAILED => FaultKind::LaunchFailure,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => FaultKind::OutOfResources,
        CUDA_ERROR_LAUNCH_TIMEOUT => FaultKind::LaunchTimeout,
        CUDA_ERROR_ILLEGAL_INSTRUCTION => FaultKind::IllegalInstruction,
        CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_ECC_UNCORRECTABLE => FaultKind::Other,
        _ => return None,
    })
}

/// The kind of typed error a result becomes, without its message; kept
/// apart from [`to_error`] so it can be tested without a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Fault(FaultKind),
    InvalidLaunch,
    OutOfMemory(usize),
    Runtime,
}

pub(crate) fn classify(r: CUresult, op: Op) -> Class {
    if let Some(kind) = fault_kind(r) {
        return Class::Fault(kind);
    }
    match (r, op) {
        (CUresult::CUDA_ERROR_INVALID_VALUE, Op::Launch) => Class::InvalidLaunch,
        // Launches whose block asks for more than the device has (shared
        // memory, cluster size, cooperative grid) are malformed, not faults.
        (
            CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
            | CUresult::CUDA_ERROR_NOT_SUPPORTED
            | CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE,
            Op::Launch,
        ) => Class::InvalidLaunch,
        (CUresult::CUDA_ERROR_OUT_OF_MEMORY, Op::Alloc(bytes)) => Class::OutOfMemory(bytes),
        _ => Class::Runtime,
    }
}

/// `CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)`.
pub(crate) fn describe(r: CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver library is loaded before any call can fail; the
    // string it returns is static.
    let text = unsafe {
        if cu::cuGetErrorString(r, &mut p) == CUresult::CUDA_SUCCESS && !p.is_null() {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        } else {
            String::new()
        }
    };
    if text.is_empty() {
        format!("{r:?}")
    } else {
        format!("{r:?} ({text})")
    }
}

/// A driver result as a `Result`, so calls chain with `?` and `map_err`.
pub(crate) fn ok(r: CUresult) -> Result<(), CUresult> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(r)
    }
}

/// The typed error for a failed driver call `what`.
pub(crate) fn to_error(r: CUresult, op: Op, what: &str) -> BackendError {
    let message = format!("{what}: {}", describe(r));
    match classify(r, op) {
        Class::Fault(kind) => BackendError::Fault { kind, message },
        Class::InvalidLaunch => BackendError::InvalidLaunch(message),
        Class::OutOfMemory(bytes) => BackendError::OutOfMemory { bytes, message },
        Class::Runtime => BackendError::Runtime(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CUresult::*;

    #[test]
    fn faults_are_classified() {
        for (r, kind) in [
            (CUDA_ERROR_ILLEGAL_ADDRESS, FaultKind::IllegalAddress),
            (CUDA_ERROR_MISALIGNED_ADDRESS, FaultKind::MisalignedAddress),
            (CUDA_ERROR_LAUNCH_FAILED, FaultKind::LaunchFailure),
            (
                CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                FaultKind::OutOfResources,
            ),
            (CUDA_ERROR_LAUNCH_TIMEOUT, FaultKind::LaunchTimeout),
            (
                CUDA_ERROR_ILLEGAL_INSTRUCTION,
                FaultKind::IllegalInstruction,
            ),
            (CUDA_ERROR_HARDWARE_STACK_ERROR, FaultKind::Other),
        ] {
            assert_eq!(classify(r, Op::Other), Class::Fault(kind), "{r:?}");
            assert_eq!(classify(r, Op::Launch), Class::Fault(kind), "{r:?}");
        }
    }

    #[test]
    fn sticky_errors_are_faults_and_resource_errors_are_not_sticky() {
        assert!(is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_sticky(CUDA_ERROR_ASSERT));
        assert!(!is_sticky(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
        assert!(!is_sticky(CUDA_ERROR_INVALID_VALUE));
        assert!(!is_sticky(CUDA_ERROR_OUT_OF_MEMORY));
        for r in [
            CUDA_ERROR_ILLEGAL_ADDRESS,
            CUDA_ERROR_MISALIGNED_ADDRESS,
            CUDA_ERROR_LAUNCH_FAILED,
            CUDA_ERROR_ILLEGAL_INSTRUCTION,
            CUDA_ERROR_HARDWARE_STACK_ERROR,
            CUDA_ERROR_INVALID_PC,
            CUDA_ERROR_LAUNCH_TIMEOUT,
        ] {
            assert!(is_sticky(r), "{r:?}");
            assert!(fault_kind(r).is_some(), "{r:?}");
        }
    }

    #[test]
    fn invalid_value_depends_on_the_call() {
        assert_eq!(
            classify(CUDA_ERROR_INVALID_VALUE, Op::Launch),
            Class::InvalidLaunch
        );
        assert_eq!(
            classify(CUDA_ERROR_INVALID_VALUE, Op::Other),
            Class::Runtime
        );
        assert_eq!(
            classify(CUDA_ERROR_OUT_OF_MEMORY, Op::Alloc(7)),
            Class::OutOfMemory(7)
        );
        assert_eq!(
            classify(CUDA_ERROR_OUT_OF_MEMORY, Op::Other),
            Class::Runtime
        );
    }

    #[test]
    fn error_names_are_the_cuda_names() {
        assert_eq!(
            format!("{CUDA_ERROR_ILLEGAL_ADDRESS:?}"),
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        );
    }
}
