//! The Triton helper with a real Triton (installed by `scripts/setup
//! --triton` into its own virtual environment; `$KEVO_TEST_TRITON_PYTHON`
//! names another interpreter): candidates compiled to sm_90 cubins on a
//! machine without a GPU, and every kind of bad candidate rejected with
//! the reason, before any of its code runs.

mod common;

use std::collections::BTreeMap;

use common::triton_python;
use kevo_triton::{Compiled, Helper, HelperConfig, KernelRequest};

const SAXPY: &str = r#"import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(n, BLOCK),)
@triton.jit
def saxpy(x, y, out, a, n, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
"#;

fn saxpy_request() -> KernelRequest {
    KernelRequest {
        name: "saxpy".into(),
        params: [
            ("x", "*fp32"),
            ("y", "*fp32"),
            ("out", "*fp32"),
            ("a", "fp32"),
            ("n", "i32"),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect(),
        num_warps: 4,
        num_stages: 3,
        constexprs: BTreeMap::new(),
    }
}

fn helper() -> Option<(tempfile::TempDir, Helper)> {
    let python = triton_python()?;
    let dir = tempfile::tempdir().unwrap();
    let helper = Helper::start(HelperConfig::new(&python, dir.path())).unwrap();
    Some((dir, helper))
}

fn rejected(helper: &mut Helper, source: &str) -> (String, String) {
    match helper.compile(source, &[saxpy_request()], 90).unwrap() {
        Compiled::Rejected { stage, reason } => (stage, reason),
        Compiled::Kernels { .. } => panic!("compiled: {source}"),
    }
}

#[test]
fn a_kernel_compiles_to_an_sm90_cubin_without_a_gpu() {
    let Some((_dir, mut helper)) = helper() else {
        return;
    };
    assert!(!helper.versions().triton.is_empty());
    let Compiled::Kernels { kernels, .. } = helper.compile(SAXPY, &[saxpy_request()], 90).unwrap()
    else {
        panic!("saxpy was rejected");
    };
    let k = &kernels[0];
    assert_eq!(k.name, "saxpy");
    assert_eq!(&k.cubin[..4], b"\x7fELF", "a cubin is an ELF file");
    assert_eq!(k.num_warps, 4);
    assert_eq!(k.constexprs["BLOCK"], 1024);
    // The grid directive, in the candidate's names, for n = 1000.
    let directives = kevo_triton::directives::parse(SAXPY, &["saxpy"]).unwrap();
    let values = k.grid_values(&[None, None, None, None, Some(1000)]);
    assert_eq!(
        kevo_triton::directives::grid(&directives["saxpy"], &values).unwrap(),
        [1, 1, 1]
    );
    let values = k.grid_values(&[None, None, None, None, Some(5000)]);
    assert_eq!(
        kevo_triton::directives::grid(&directives["saxpy"], &values).unwrap(),
        [5, 1, 1]
    );
    // A tuner's value replaces the default, and warps are the request's.
    let mut tuned = saxpy_request();
    tuned.constexprs.insert("BLOCK".into(), 256);
    tuned.num_warps = 2;
    let Compiled::Kernels { kernels, .. } = helper.compile(SAXPY, &[tuned], 90).unwrap() else {
        panic!("tuned saxpy was rejected");
    };
    assert_eq!(kernels[0].constexprs["BLOCK"], 256);
    assert_eq!(kernels[0].num_warps, 2);
}

/// Python that would run at import, or a kernel body that reaches outside
/// the kernel language, is refused before any of it runs: no torch (the
/// "calls a PyTorch operator instead of a kernel" hack), no files, no
/// state kept across runs.
#[test]
fn code_outside_the_kernel_language_is_refused_before_it_runs() {
    let Some((dir, mut helper)) = helper() else {
        return;
    };
    let marker = dir.path().join("ran");
    let cases = [
        (format!("import torch\n{SAXPY}"), "`import torch`"),
        (
            format!("{SAXPY}\nopen({:?}, 'w').write('x')\n", marker.display()),
            "at module level",
        ),
        (format!("{SAXPY}\nCACHE = {{}}\n"), "must be a constant"),
        (format!("{SAXPY}\nCACHE = []\n"), "must be a constant"),
        (format!("import os\n{SAXPY}"), "`import os`"),
        (
            format!("from triton.runtime import driver\n{SAXPY}"),
            "imports only from",
        ),
        (
            SAXPY.replace(
                "BLOCK: tl.constexpr = 1024",
                &format!(
                    "BLOCK: tl.constexpr = len(open({:?}, 'w').write('x'))",
                    marker.display()
                ),
            ),
            "a default of `saxpy` must be a constant",
        ),
        (
            SAXPY.replace("a * tl", "a * open('/etc/hostname') * tl"),
            "`open` is not",
        ),
        (SAXPY.replace("a * tl", "a.__class__ * tl"), "`__class__`"),
        // Triton's front end calls whatever Python a body names while it
        // compiles: paths through modules that lead to Python are refused.
        (
            SAXPY.replace(
                "a * tl",
                &format!(
                    "tl.core.builtins.len(tl.core.builtins.open({:?}, 'w').write('x')) * a * tl",
                    marker.display()
                ),
            ),
            "reaches the module triton.language.core",
        ),
        (
            SAXPY.replace("a * tl", "tl.core.knobs.os.getpid() * a * tl"),
            "reaches the module",
        ),
        (
            format!(
                "from triton.language import core
{}",
                SAXPY.replace("a * tl", "core.builtins.len('x') * a * tl")
            ),
            "is the module triton.language.core",
        ),
        (
            SAXPY.replace("a * tl", "tl._private * a * tl"),
            "private names",
        ),
        (
            SAXPY.replace("@triton.jit", "@triton.jit\n@print"),
            "exactly @triton.jit",
        ),
        (
            format!("class Sneaky:\n    pass\n{SAXPY}"),
            "ClassDef at module level",
        ),
    ];
    for (source, want) in cases {
        let (stage, reason) = rejected(&mut helper, &source);
        assert_eq!(stage, "module", "{reason}");
        assert!(reason.contains(want), "{want}: {reason}");
    }
    assert!(!marker.exists(), "a refused module ran");
}

/// Mistakes in a kernel are rejected candidates with Triton's diagnostics
/// trimmed to the line and the message.
#[test]
fn syntax_entry_and_signature_mistakes_are_rejections_with_reasons() {
    let Some((_dir, mut helper)) = helper() else {
        return;
    };
    let (stage, reason) = rejected(&mut helper, &SAXPY.replace("m = i < n", "m = i < n +"));
    assert_eq!(stage, "syntax");
    assert!(reason.starts_with("line 8"), "{reason}");
    let (stage, reason) = rejected(&mut helper, &SAXPY.replace("def saxpy", "def other"));
    assert_eq!(stage, "entry");
    assert!(
        reason.contains("no @triton.jit function named `saxpy`"),
        "{reason}"
    );
    let (stage, reason) = rejected(
        &mut helper,
        &SAXPY.replace("out, a, n,", "out, a, n, extra,"),
    );
    assert_eq!(stage, "signature");
    assert!(reason.contains("takes 6 arguments"), "{reason}");
    assert!(reason.contains("the task passes 5"), "{reason}");
    // A name the body uses but the kernel does not take is the module
    // check's: nothing outside the parameters is reachable.
    let (stage, reason) = rejected(&mut helper, &SAXPY.replace("out, a, n,", "out, a,"));
    assert_eq!(stage, "module");
    assert!(reason.contains("`n` is not a parameter"), "{reason}");
    let (stage, reason) = rejected(
        &mut helper,
        &SAXPY.replace("BLOCK: tl.constexpr = 1024", "BLOCK: tl.constexpr"),
    );
    assert_eq!(stage, "signature");
    assert!(reason.contains("no default value"), "{reason}");
    let (stage, reason) = rejected(
        &mut helper,
        &SAXPY.replace("tl.load(y + i, mask=m)", "tl.load(y + i + x, mask=m)"),
    );
    assert_eq!(stage, "compile");
    assert!(reason.starts_with("line 9: "), "{reason}");
    assert!(reason.contains("cannot add pointers together"), "{reason}");
    assert!(reason.len() < 1400, "{reason}");
    // The helper is still serving after all of that.
    assert!(matches!(
        helper.compile(SAXPY, &[saxpy_request()], 90).unwrap(),
        Compiled::Kernels { .. }
    ));
}

#[test]
fn an_interpreter_without_triton_is_an_error_that_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("python-without-triton");
    std::fs::write(
        &fake,
        "#!/bin/sh\nread line\necho '{\"ok\": false, \"stage\": \"helper\", \"reason\": \"ModuleNotFoundError: No module named triton\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = Helper::start(HelperConfig::new(
        fake.to_str().unwrap(),
        &dir.path().join("s"),
    ))
    .err()
    .expect("no triton");
    let text = e.to_string();
    assert!(text.contains("No module named triton"), "{text}");
    assert!(text.contains("pip install triton"), "{text}");
    let e = Helper::start(HelperConfig::new(
        "/nonexistent/python",
        &dir.path().join("t"),
    ))
    .err()
    .expect("no interpreter");
    assert!(
        e.to_string().contains("cannot start the Triton helper"),
        "{e}"
    );
}
