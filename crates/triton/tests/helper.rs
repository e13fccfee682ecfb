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

/// The probes of the worker's adversarial suite (tests/adversarial/triton/
/// of kevo-worker), read from there.
fn probe(stem: &str) -> String {
    let path = format!(
        "{}/../worker/tests/adversarial/triton/{stem}.py",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The worker's saxpy: x, y, a, N (the probes' signature).
fn task_saxpy_request() -> KernelRequest {
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

/// The sandbox probes, each with what the refusal must name. Each would
/// run Python in the helper while its module is imported or its kernel
/// compiled (read CANARY_PATH, write it, or patch Triton).
const SANDBOX_PROBES: &[(&str, &[&str])] = &[
    // `T = tl` passed as a constant once; `T.core.builtins.exec`.
    (
        "sandbox_alias_exec",
        &["`T` must be a constant", "the module triton.language"],
    ),
    // `L: tl.constexpr = tl`, then `L.core.builtins.open(...)`.
    (
        "sandbox_constexpr_default_file_read",
        &[
            "a default of `saxpy` must be a constant",
            "the module triton.language",
        ],
    ),
    (
        "sandbox_tuple_default_module",
        &[
            "a default of `saxpy` must be a constant",
            "the module triton.language",
        ],
    ),
    (
        "sandbox_helper_poisoning",
        &["assigning to `triton.compile` is not allowed"],
    ),
    (
        "sandbox_helper_poisoning_module",
        &["only `NAME = constant` assignments"],
    ),
    (
        "sandbox_helper_poisoning_default",
        &[
            "a default of `saxpy` must be a constant",
            "reaches the module triton.language.core",
        ],
    ),
    (
        "sandbox_getattr_chain",
        &["`getattr` is not part of a kernel"],
    ),
    (
        "sandbox_dunder_mro",
        &["`__class__` is not part of a kernel"],
    ),
    (
        "sandbox_decorator_smuggles_call",
        &[
            "@triton.jit(do_not_specialize=...)",
            "reaches the module triton.language.core",
        ],
    ),
    (
        "sandbox_from_triton_import_runtime",
        &["`from triton import runtime` is not allowed"],
    ),
    (
        "sandbox_kernel_calls_open",
        &["`open` is not part of a kernel"],
    ),
    (
        "sandbox_module_passed_to_jit_function",
        &[
            "`m.core`",
            "not an attribute of Triton's tensors, types or values",
        ],
    ),
    (
        "sandbox_str_format_walk",
        &["`format` is not an attribute of Triton's tensors"],
    ),
    (
        "sandbox_jit_function_internals",
        &["`tl.sum.fn`", "`fn` is not an attribute"],
    ),
    (
        "sandbox_extra_module_leftovers",
        &[
            "`tl.extra.module_from_spec`",
            "not part of the kernel language",
        ],
    ),
];

/// Every sandbox probe is refused by the module check, before any of it
/// runs, with a reason that names what is wrong and where; nothing it
/// would read or write is touched, and the helper goes on serving.
#[test]
fn sandbox_probes_are_refused_by_the_module_check_with_the_reason() {
    let Some((dir, mut helper)) = helper() else {
        return;
    };
    let canary = dir.path().join("canary");
    let token = "kevo-canary-3f9d1c";
    std::fs::write(&canary, token).unwrap();
    for (stem, wants) in SANDBOX_PROBES {
        let source = probe(stem).replace("CANARY_PATH", &canary.display().to_string());
        let answer = helper
            .compile(&source, &[task_saxpy_request()], 90)
            .unwrap();
        let Compiled::Rejected { stage, reason } = answer else {
            panic!("{stem}: compiled");
        };
        assert_eq!(stage, "module", "{stem}: {reason}");
        assert!(reason.starts_with("line "), "{stem}: the line: {reason}");
        for want in *wants {
            assert!(reason.contains(want), "{stem}: wants {want:?}: {reason}");
        }
        assert!(
            !reason.contains(token),
            "{stem}: the canary leaked: {reason}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&canary).unwrap(),
        token,
        "a probe ran"
    );
    assert_eq!(helper.restarts(), 0, "nothing needed a fresh helper");
    assert!(matches!(
        helper
            .compile(&probe("ok_saxpy_2d_grid"), &[task_saxpy_request()], 90)
            .unwrap(),
        Compiled::Kernels { .. }
    ));
}

/// Smaller variants of the same escapes, each refused with its reason.
#[test]
fn every_path_out_of_the_kernel_language_is_refused() {
    let Some((_dir, mut helper)) = helper() else {
        return;
    };
    let kernel = |pre: &str, params: &str, body: &str| {
        format!(
            "import triton\nimport triton.language as tl\n{pre}\n@triton.jit\ndef saxpy(x, y, out, a, n{params}):\n    {body}\n    i = tl.arange(0, 16)\n    tl.store(out + i, a * tl.load(x + i))\n"
        )
    };
    let cases = [
        // Names bound to modules, or to anything but constants.
        (
            kernel("x_core = tl.core\n", "", "pass"),
            "`x_core` must be a constant",
        ),
        (
            kernel("F = lambda: 0\n", "", "pass"),
            "`F` must be a constant",
        ),
        (
            kernel("F = len('abc')\n", "", "pass"),
            "`F` must be a constant",
        ),
        (
            kernel("F = [i for i in (1, 2)]\n", "", "pass"),
            "`F` must be a constant",
        ),
        (
            kernel("C = tl.constexpr(tl)\n", "", "pass"),
            "`C` must be a constant",
        ),
        (
            kernel("C = tl.load\n", "", "pass"),
            "the function load, not a constant",
        ),
        (kernel("tl = 1\n", "", "pass"), "`tl` is already bound"),
        (
            kernel("", ", *, L=tl", "pass"),
            "a default of `saxpy` must be a constant",
        ),
        (
            kernel("", ", f=lambda: 0", "pass"),
            "a default of `saxpy` must be a constant",
        ),
        (
            kernel("", ", L: tl.core.builtins.open = 1", "pass"),
            "reaches the module triton.language.core",
        ),
        // Modules as values in a body.
        (
            kernel("", "", "m = tl"),
            "not keep, pass or return the module",
        ),
        (
            kernel("", "", "(m := tl.math)"),
            "not keep, pass or return the module",
        ),
        (
            kernel("", "", "z = (tl,)[0]"),
            "not keep, pass or return the module",
        ),
        (
            kernel("", "", "tl.load(*tl)"),
            "not keep, pass or return the module",
        ),
        // Paths through modules outside the language, private and dunder names.
        (
            kernel("", "", "tl.math.core.builtins.exec('1')"),
            "reaches the module triton.language.core",
        ),
        (
            kernel(
                "from triton.language.extra.cuda import libdevice\n",
                "",
                "libdevice.core",
            ),
            "reaches the module triton.language.core",
        ),
        (
            kernel("", "", "tl.extra.pkgutil"),
            "reaches the module pkgutil",
        ),
        (
            kernel("", "", "tl.extra.spec.loader"),
            "not part of the kernel language",
        ),
        (
            kernel("", "", "triton.compile"),
            "`triton.compile` is not part of a kernel",
        ),
        (
            kernel("", "", "triton.runtime.driver"),
            "`triton.runtime` is not part of a kernel",
        ),
        (
            kernel("", "", "triton.knobs.compilation"),
            "`triton.knobs` is not part of a kernel",
        ),
        (
            kernel("", "", "triton.jit(saxpy)"),
            "is not part of a kernel",
        ),
        (kernel("", "", "tl._semantic"), "private names"),
        (kernel("", "", "tl.tensor.__init__"), "`__init__`"),
        (kernel("", "", "__builtins__"), "`__builtins__`"),
        (
            kernel("", "", "a.dtype.name.format"),
            "`format` is not an attribute",
        ),
        (
            kernel("", "", "tl.load(x).handle"),
            "`handle` is not an attribute",
        ),
        (
            kernel("", "", "tl.float32.to_ir(1)"),
            "`to_ir` is not an attribute",
        ),
        // Python by name, assignments to anything but local names.
        (
            kernel("", "", "eval('1')"),
            "`eval` is not part of a kernel",
        ),
        (
            kernel("", "", "exec('1')"),
            "`exec` is not part of a kernel",
        ),
        (
            kernel("", "", "getattr = 1"),
            "`getattr` is not part of a kernel",
        ),
        (
            kernel("", "", "tl.load = tl.store"),
            "assigning to `tl.load`",
        ),
        (kernel("", "", "tl.load += 1"), "assigning to `tl.load`"),
        (
            kernel("", "", "z = (1, 2)\n    z[0] = 3"),
            "assigning to `z[0]`",
        ),
        (kernel("X = 1\n", "", "global X"), "a `global` statement"),
        (kernel("", "", "import os"), "an import"),
        (kernel("", "", "z = {}"), "a dict"),
        (
            kernel("", "", "z = tuple(q for q in (1, 2))"),
            "a generator expression",
        ),
        (
            kernel("", "", "try:\n        pass\n    finally:\n        pass"),
            "`try`",
        ),
        (kernel("", ", tl=1", "pass"), "would hide the imported `tl`"),
        (
            kernel("@triton.jit\ndef h():\n    pass\n", "", "h.src"),
            "its attributes are not part of a kernel",
        ),
    ];
    for (source, want) in cases {
        let (stage, reason) = rejected(&mut helper, &source);
        assert_eq!(stage, "module", "{reason}\n{source}");
        assert!(reason.contains(want), "{want}: {reason}\n{source}");
    }
    // The decorator takes constant keywords only.
    for (decorator, want) in [
        (
            "@triton.jit(repr=print)",
            "@triton.jit(repr=...) is not allowed",
        ),
        ("@triton.jit(launch_metadata=tl.load)", "is not allowed"),
        ("@triton.jit(print)", "keyword arguments only"),
        ("@triton.jit(debug=len('x'))", "must be a constant"),
    ] {
        let (stage, reason) = rejected(&mut helper, &SAXPY.replace("@triton.jit", decorator));
        assert_eq!(stage, "module", "{reason}");
        assert!(reason.contains(want), "{want}: {reason}");
    }
}

/// Unusual but honest kernels pass the module check, compile, and leave
/// the helper's state as it was (no restart): libdevice two ways, math
/// constants, module constexprs, jit functions as arguments, dtype and
/// string constexprs, f-strings, static_print, PropagateNan, triton.cdiv,
/// @triton.jit(do_not_specialize=...).
#[test]
fn the_corners_of_the_kernel_language_are_accepted() {
    let Some((_dir, mut helper)) = helper() else {
        return;
    };
    for stem in [
        "ok_kernel_language_corners",
        "ok_saxpy_2d_grid",
        "ok_unreachable_printf",
        "class1_forges_result_lines",
    ] {
        match helper
            .compile(&probe(stem), &[task_saxpy_request()], 90)
            .unwrap()
        {
            Compiled::Kernels { kernels, .. } => assert_eq!(kernels[0].name, "saxpy"),
            Compiled::Rejected { stage, reason } => panic!("{stem}: {stage}: {reason}"),
        }
    }
    assert_eq!(helper.restarts(), 0);
    assert!(
        !helper.confinement().contains("did not start"),
        "{}",
        helper.confinement()
    );
    let spent = helper
        .integrity_seconds()
        .expect("the helper checked itself");
    assert!(spent < 0.5, "{spent}");
}
