//! The helper's second line of defence, tested by letting Python do what
//! the module check stops candidates from doing: an interpreter wrapper
//! (standing in for a candidate that found a way to run Python in the
//! helper) patches Triton while a marked candidate compiles, or from a
//! thread between two requests. The candidate that changed the helper
//! is refused, the helper is replaced, and honest candidates after it
//! compile on a fresh one. And the helper's own Landlock domain: what
//! Python in it can read.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::triton_python;
use kevo_triton::{Compiled, Helper, HelperConfig, KernelRequest};

const SAXPY: &str = r#"import triton
import triton.language as tl


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
"#;

fn request() -> KernelRequest {
    KernelRequest {
        name: "saxpy".into(),
        params: [("x", "*fp32"), ("y", "*fp32"), ("a", "fp32"), ("N", "u32")]
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect(),
        num_warps: 4,
        num_stages: 3,
        constexprs: BTreeMap::new(),
    }
}

/// Python run by the wrapper before the helper (no single quotes: it is
/// quoted for sh). It reports which of PROBE_PATHS it can read into
/// reads.txt of the scratch directory; replaces triton.compile with a
/// function that patches tl.load while a candidate marked
/// POISON_DURING_COMPILE compiles; and starts a thread that, when
/// poison-now appears in the scratch directory, starts another that
/// patches tl.store and stays (a thread left behind).
const WRAPPER_PY: &str = r#"
import os, runpy, sys, threading, time
import triton
import triton.language as tl
scratch = sys.argv[2]
reads = []
for path in PROBE_PATHS:
    try:
        with open(path) as f:
            f.read(1)
        reads.append(path + " readable")
    except OSError:
        reads.append(path + " refused")
with open(os.path.join(scratch, "reads.txt"), "w") as f:
    f.write(chr(10).join(reads))
real = triton.compile
def compile(src, *args, **kwargs):
    if "POISON_DURING_COMPILE" in getattr(getattr(src, "fn", None), "src", ""):
        tl.load = tl.store
    return real(src, *args, **kwargs)
triton.compile = compile
def poison():
    tl.store = tl.load
    while True:
        time.sleep(1)
def later():
    flag = os.path.join(scratch, "poison-now")
    while True:
        if os.path.exists(flag):
            threading.Thread(target=poison, daemon=True).start()
            os.remove(flag)
        time.sleep(0.01)
threading.Thread(target=later, daemon=True).start()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"#;

/// An executable that runs `python` with WRAPPER_PY before the helper
/// (and passes `-c` through, for the installation-path query).
fn wrapper(dir: &Path, python: &str, probe_paths: &[PathBuf]) -> String {
    // Not canonicalized: a venv's python finds its packages by its own path.
    let real = which(python).unwrap_or_else(|| PathBuf::from(python));
    let list = probe_paths
        .iter()
        .map(|p| format!("\"{}\"", p.display()))
        .collect::<Vec<_>>()
        .join(", ");
    let code = WRAPPER_PY.replace("PROBE_PATHS", &format!("[{list}]"));
    assert!(!code.contains('\''));
    let script = dir.join("python-wrapper");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"-c\" ]; then exec {real} \"$@\"; fi\nexec {real} -c '{code}' \"$@\"\n",
            real = real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

/// `python` as a path: itself where it has a slash, else found on PATH.
fn which(python: &str) -> Option<PathBuf> {
    if python.contains('/') {
        return Some(PathBuf::from(python));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(python))
        .find(|p| p.is_file())
}

fn compiled(helper: &mut Helper, source: &str) -> bool {
    match helper.compile(source, &[request()], 90).unwrap() {
        Compiled::Kernels { .. } => true,
        Compiled::Rejected { stage, reason } => panic!("refused at {stage}: {reason}"),
    }
}

#[test]
fn a_candidate_that_changes_the_helper_is_refused_and_the_next_gets_a_fresh_one() {
    let Some(python) = triton_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let python = wrapper(dir.path(), &python, &[]);
    let scratch = dir.path().join("scratch");
    let mut helper = Helper::start(HelperConfig::new(&python, &scratch)).unwrap();
    assert!(compiled(&mut helper, SAXPY));
    assert_eq!(helper.restarts(), 0);

    // Changed while this candidate compiled: it is refused, and says why.
    let poisoned = SAXPY.replace(
        "    i = tl.program_id",
        "    # POISON_DURING_COMPILE\n    i = tl.program_id",
    );
    match helper.compile(&poisoned, &[request()], 90).unwrap() {
        Compiled::Rejected { stage, reason } => {
            assert_eq!(stage, "module", "{reason}");
            assert!(
                reason.contains("changed the compiler's own state"),
                "{reason}"
            );
            assert!(reason.contains("triton.language.load"), "{reason}");
        }
        Compiled::Kernels { .. } => panic!("a candidate that patched Triton compiled"),
    }
    // The next candidate compiles on a fresh helper.
    assert!(compiled(&mut helper, SAXPY));
    assert_eq!(helper.restarts(), 1);
    assert!(compiled(&mut helper, SAXPY));
    assert_eq!(helper.restarts(), 1);

    // Changed between two requests by a thread left behind: the next
    // candidate is not blamed; it is compiled again on a fresh helper.
    let flag = scratch.join("poison-now");
    std::fs::write(&flag, "").unwrap();
    let started = Instant::now();
    while flag.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never poisoned"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(compiled(&mut helper, SAXPY));
    assert_eq!(helper.restarts(), 2);
    assert!(compiled(&mut helper, SAXPY));
    assert_eq!(helper.restarts(), 2);
}

/// The helper's Landlock domain (where the kernel has Landlock): Python
/// in the helper reads its interpreter and Triton, and not the files of
/// the user or of the rest of the system.
#[test]
fn the_helper_reads_only_what_compiling_needs() {
    let Some(python) = triton_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "kevo-secret").unwrap();
    let triton_init = {
        let out = std::process::Command::new(&python)
            .args(["-c", "import triton; print(triton.__file__)"])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    };
    let probes = [
        secret.clone(),
        PathBuf::from("/etc/passwd"),
        PathBuf::from("/proc/1/status"),
        triton_init.clone(),
    ];
    let python = wrapper(dir.path(), &python, &probes);
    let scratch = dir.path().join("scratch");
    let mut helper = Helper::start(HelperConfig::new(&python, &scratch)).unwrap();
    assert!(compiled(&mut helper, SAXPY));
    let confinement = helper.confinement().to_string();
    eprintln!("confinement: {confinement}");
    let reads = std::fs::read_to_string(scratch.join("reads.txt")).unwrap();
    assert!(
        reads.contains(&format!("{} readable", triton_init.display())),
        "{reads}"
    );
    if !confinement.starts_with("landlock") {
        eprintln!("skipping: no Landlock here ({confinement})");
        return;
    }
    for refused in [
        &secret,
        &PathBuf::from("/etc/passwd"),
        &PathBuf::from("/proc/1/status"),
    ] {
        assert!(
            reads.contains(&format!("{} refused", refused.display())),
            "{}: {reads}",
            refused.display()
        );
    }
}
