//! What the Triton tests share: finding an interpreter with Triton.

use std::path::PathBuf;
use std::process::Command;

/// An interpreter with triton: $KEVO_TEST_TRITON_PYTHON, the venv of
/// scripts/setup --triton, or python3. CI must have one.
pub fn triton_python() -> Option<String> {
    let venv = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/kevo/triton-venv/bin/python"))
        .map(|p| p.display().to_string());
    let candidates = std::env::var("KEVO_TEST_TRITON_PYTHON")
        .ok()
        .into_iter()
        .chain(venv)
        .chain(["python3".to_string()]);
    for python in candidates {
        let ok = Command::new(&python)
            .args(["-c", "import triton"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI needs a python with triton (scripts/setup --triton)");
    }
    None
}
