use super::*;

const TASK: &str = r#"
name = "scale"
kernels = ["scale"]
dims = ["N", "n_steps = 2"]
ceiling = "bandwidth"
work = "8 * N * n_steps"
default_seed = 7
brief = "brief.md"
steps = "n_steps"
ping_pong = [["y", "z"]]

[sizes.smoke]
in_distribution = [{ label = "1K", dims = [1024] }, { label = "4K", dims = [4096] }]
held_out = { label = "2K", dims = [2048] }
[sizes.full]
in_distribution = [{ label = "1M", dims = [1048576] }]
held_out = { label = "2M", dims = [2097152] }

[dialects.opencl]
seed = "seed.cl"
signature = "signature.cl"

[derived]
TOTAL = "HALF * 2"
HALF = "N / 2"

[[buffers]]
name = "x"
type = "f32"
length = "TOTAL"
role = "input"
init = { uniform = [-1.0, 1.0] }

[[buffers]]
name = "y"
type = "f32"
length = "N"
role = "inout"
init = "iota"

[[buffers]]
name = "z"
type = "f32"
length = "N"
role = "output"

[[scalars]]
name = "a"
type = "f32"
value = "0.5 * step + 1"

[[scalars]]
name = "n"
type = "u32"
value = "N"

[[launches]]
kernel = "scale"
grid = ["N"]
block = { default = [128] }
args = ["x", "y", "z", "a", "n"]

[check.z]
rtol = 1e-5
atol = 1e-6
within = 0.99

[check.y]
exact = true

[reference]
command = ["python3", "reference.py"]
"#;

const SEED: &str = "__kernel void scale(__global const float* x, __global float* y, \
                    __global float* z, float a, uint n) {}\n";

/// A task folder with `task` as its task.toml and the files it names.
fn folder(task: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("task.toml", task),
        ("brief.md", "Scale x into z.\n"),
        ("seed.cl", SEED),
        ("signature.cl", SEED),
        ("reference.py", "print('reference')\n"),
        ("ref.cl", SEED),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[test]
fn a_folder_parses_with_its_defaults() {
    let dir = folder(TASK);
    let t = FolderTask::load(dir.path()).unwrap();
    assert_eq!(t.spec.name, "scale");
    assert_eq!(t.spec.regime, "custom");
    assert!(t.spec.min_traffic.is_none(), "the work model by default");
    // A lower byte count for the plausibility rule may be declared.
    let lower = TASK.replacen("work = ", "min_traffic = \"4 * N * n_steps\"\nwork = ", 1);
    let low = folder(&lower);
    let l = FolderTask::load(low.path()).unwrap();
    let values = l.spec.dim_values(&crate::Size::new("1K", &[1024]));
    assert_eq!(l.spec.min_traffic.as_ref().unwrap().eval(&values), 8192.0);
    // `large` defaults to the full table.
    assert_eq!(
        t.spec.sizes[&crate::SizeSet::Large].held_out.label,
        t.spec.sizes[&crate::SizeSet::Full].held_out.label
    );
    // Derived values resolve whatever their order in the file.
    assert_eq!(
        t.derived
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["HALF", "TOTAL"]
    );
    assert_eq!(t.buffers.len(), 3);
    assert_eq!(t.buffers[0].element.bytes(), 4);
    assert_eq!(
        t.buffers[0].init,
        Some(Init::Uniform {
            low: -1.0,
            high: 1.0
        })
    );
    assert_eq!(t.launches[0].block, BlockDef::Default([128, 1, 1]));
    assert_eq!(t.ping_pong, vec![["y".to_string(), "z".to_string()]]);
    assert_eq!(t.launches[0].stage, Stage::Step);
    assert_eq!(t.steps.eval(&[8.0, 3.0]), 3.0);
    // `a` uses the step index: dims N, n_steps, derived HALF, TOTAL, then step.
    assert_eq!(
        t.scalars[0].value.eval(&[1024.0, 2.0, 512.0, 1024.0, 3.0]),
        2.5
    );
    assert_eq!(t.checks["z"].within, 0.99);
    assert!(t.checks["y"].exact);
    assert_eq!(
        t.reference,
        ReferenceDef::Command(vec!["python3".into(), "reference.py".into()])
    );
    assert!(t.dialects["opencl"].0.contains("__kernel void scale"));
}

#[test]
fn vectors_and_types_have_their_sizes() {
    assert_eq!(ElementType::parse("f32x4").unwrap().bytes(), 16);
    assert_eq!(ElementType::parse("u8").unwrap().bytes(), 1);
    assert_eq!(ElementType::parse("f16x2").unwrap().bytes(), 4);
    assert!(ElementType::parse("f32x5").is_none());
    assert!(ElementType::parse("float").is_none());
}

/// Every kind of mistake, each an edit of the good folder: the error names
/// task.toml, the key, and what was expected.
#[test]
fn malformed_folders_name_the_file_the_key_and_what_was_expected() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "name = \"scale\"",
            "name = \"sc ale\"",
            "name",
            "non-empty ASCII",
        ),
        (
            "work = \"8 * N * n_steps\"",
            "work = \"8 * M\"",
            "work",
            "unknown name `M`",
        ),
        (
            "HALF = \"N / 2\"",
            "HALF = \"N / \"",
            "derived.HALF",
            "ends too early",
        ),
        (
            "HALF = \"N / 2\"",
            "HALF = \"TOTAL / 2\"",
            "derived.",
            "in a circle",
        ),
        (
            "type = \"f32\"\nlength = \"TOTAL\"\nrole = \"input\"",
            "type = \"float\"\nlength = \"TOTAL\"\nrole = \"input\"",
            "buffers[0].type",
            "expected f16, f32",
        ),
        (
            "length = \"TOTAL\"",
            "length = \"TOTAL * Q\"",
            "buffers[0].length",
            "unknown name `Q`",
        ),
        (
            "init = { uniform = [-1.0, 1.0] }",
            "init = { uniform = [1.0, -1.0] }",
            "buffers[0].init",
            "LOW < HIGH",
        ),
        (
            "init = { uniform = [-1.0, 1.0] }",
            "init = { gaussian = 1 }",
            "buffers[0].init",
            "expected \"iota\"",
        ),
        (
            "init = { uniform = [-1.0, 1.0] }",
            "init = { npy = \"x.npy\" }",
            "buffers[0].init",
            "`x.npy` is not a file",
        ),
        (
            "role = \"input\"\ninit = { uniform = [-1.0, 1.0] }",
            "role = \"input\"",
            "buffers[0].init",
            "needs an initialisation",
        ),
        (
            "role = \"output\"",
            "role = \"output\"\ninit = \"zero\"",
            "buffers[2].init",
            "takes no initialisation",
        ),
        (
            "role = \"output\"",
            "role = \"result\"",
            "task.toml",
            "unknown variant `result`",
        ),
        (
            "name = \"n\"",
            "name = \"x\"",
            "scalars[1].name",
            "new identifier",
        ),
        (
            "type = \"u32\"",
            "type = \"u8\"",
            "scalars[1].type",
            "expected f32, i32 or u32",
        ),
        (
            "value = \"0.5 * step + 1\"",
            "value = \"0.5 * stp\"",
            "scalars[0].value",
            "unknown name `stp`",
        ),
        (
            "kernel = \"scale\"",
            "kernel = \"scal\"",
            "launches[0].kernel",
            "not one of the task's kernels (scale)",
        ),
        (
            "grid = [\"N\"]",
            "grid = []",
            "launches[0].grid",
            "1 to 3 expressions",
        ),
        (
            "block = { default = [128] }",
            "block = { default = [0] }",
            "launches[0].block",
            "positive",
        ),
        (
            "args = [\"x\", \"y\", \"z\", \"a\", \"n\"]",
            "args = [\"x\", \"y\", \"w\", \"a\", \"n\"]",
            "launches[0].args[2]",
            "`w` is neither a buffer nor a scalar",
        ),
        (
            "args = [\"x\", \"y\", \"z\", \"a\", \"n\"]",
            "args = [\"y\", \"z\", \"a\", \"n\"]",
            "buffers",
            "`x` is passed to no launch",
        ),
        (
            "ping_pong = [[\"y\", \"z\"]]",
            "ping_pong = [[\"x\", \"z\"]]",
            "ping_pong[0]",
            "`x` is an input",
        ),
        (
            "ping_pong = [[\"y\", \"z\"]]",
            "ping_pong = [[\"y\", \"q\"]]",
            "ping_pong[0]",
            "`q` is not a buffer",
        ),
        (
            "name = \"z\"\ntype = \"f32\"",
            "name = \"z\"\ntype = \"f64\"",
            "ping_pong[0]",
            "same type and length",
        ),
        (
            "steps = \"n_steps\"",
            "steps = \"n_step\"",
            "steps",
            "unknown name `n_step`",
        ),
        (
            "length = \"TOTAL\"",
            "length = \"N / 3\"",
            "buffers[0].length",
            "at size `1K` it is 341.3",
        ),
        (
            "steps = \"n_steps\"",
            "steps = \"-1\"",
            "steps",
            "expected a whole number",
        ),
        (
            "args = [\"x\", \"y\", \"z\", \"a\", \"n\"]",
            "args = [\"x\", \"y\", \"z\", \"a\", \"n\"]\nstage = \"later\"",
            "task.toml",
            "unknown variant `later`",
        ),
        (
            "[check.z]",
            "[check.x]",
            "check.x",
            "not an output or inout buffer",
        ),
        (
            "[check.z]\nrtol = 1e-5\natol = 1e-6\nwithin = 0.99\n",
            "",
            "check",
            "the output `z` has no [check.z]",
        ),
        (
            "rtol = 1e-5\natol = 1e-6\n",
            "",
            "check.z",
            "expected a tolerance",
        ),
        (
            "within = 0.99",
            "within = 1.5",
            "check.z.within",
            "fraction in (0, 1]",
        ),
        (
            "within = 0.99",
            "within = 0.99\ncosine = 2.0",
            "check.z.cosine",
            "(0, 1]",
        ),
        (
            "within = 0.99",
            "within = 0.99\npeak_error = -1",
            "check.z.peak_error",
            "fraction of the peak > 0",
        ),
        (
            "[check.y]\nexact = true",
            "[check.y]\nexact = true\npeak_error = 0.01",
            "check.y.peak_error",
            "takes no peak_error",
        ),
        (
            "within = 0.99",
            "within = 0.99\natol_rms = -1e-5",
            "check.z.atol_rms",
            "finite number >= 0",
        ),
        (
            "[check.y]\nexact = true",
            "[check.y]\nexact = true\natol_rms = 1e-5",
            "check.y.atol_rms",
            "takes no atol_rms",
        ),
        (
            "command = [\"python3\", \"reference.py\"]",
            "command = []",
            "reference.command",
            "program",
        ),
        (
            "command = [\"python3\", \"reference.py\"]",
            "golden = \"golden\"",
            "reference.golden",
            "not a directory",
        ),
        (
            "command = [\"python3\", \"reference.py\"]",
            "command = [\"x\"]\ngolden = \"g\"",
            "reference",
            "exactly one of",
        ),
        (
            "command = [\"python3\", \"reference.py\"]",
            "kernel = { cuda = \"ref.cu\" }",
            "reference.kernel.cuda",
            "not a dialect the task offers",
        ),
        (
            "seed = \"seed.cl\"",
            "seed = \"missing.cl\"",
            "dialects.opencl.seed",
            "cannot read `missing.cl`",
        ),
        (
            "[dialects.opencl]",
            "[dialects.vulkan]",
            "dialects.vulkan",
            "unknown dialect",
        ),
        (
            "brief = \"brief.md\"",
            "brief = \"brief.md\"\nbogus = 1",
            "task.toml",
            "unknown field `bogus`",
        ),
        (
            "default_seed = 7",
            "default_seed = ",
            "line 7",
            "string values must be quoted",
        ),
    ];
    for (from, to, key, needle) in cases {
        assert!(TASK.contains(from), "the case edits nothing: {from}");
        let dir = folder(&TASK.replacen(from, to, 1));
        let e = match FolderTask::load(dir.path()) {
            Ok(_) => panic!("{from:?} -> {to:?} was accepted"),
            Err(e) => e,
        };
        assert!(e.file.ends_with("task.toml"), "{e}");
        assert!(
            e.key.starts_with(key),
            "{from:?} -> {to:?}: key {:?} in {e}",
            e.key
        );
        assert!(e.message.contains(needle), "{from:?} -> {to:?}: {e}");
    }
}

#[test]
fn a_reference_kernel_and_a_missing_task_file_are_handled() {
    let with_kernel = TASK.replacen(
        "command = [\"python3\", \"reference.py\"]",
        "kernel = { opencl = \"ref.cl\" }",
        1,
    );
    let dir = folder(&with_kernel);
    let t = FolderTask::load(dir.path()).unwrap();
    assert!(matches!(t.reference, ReferenceDef::Kernel(k) if k.contains_key("opencl")));
    let empty = tempfile::tempdir().unwrap();
    let e = FolderTask::load(empty.path()).unwrap_err();
    assert!(e.message.contains("a task folder holds a task.toml"), "{e}");
}

#[test]
fn a_link_to_a_file_outside_the_folder_is_refused_and_one_inside_is_read() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id_ed25519");
    std::fs::write(&secret, "PRIVATE KEY\n").unwrap();
    let real_secret = std::fs::canonicalize(&secret).unwrap();

    // brief.md pointing outside: refused, naming the link and its target,
    // and nothing of the target is read.
    let dir = folder(TASK);
    std::fs::remove_file(dir.path().join("brief.md")).unwrap();
    symlink(&secret, dir.path().join("brief.md")).unwrap();
    let e = FolderTask::load(dir.path()).unwrap_err();
    assert_eq!(e.key, "brief.md", "{e}");
    assert!(
        e.message.contains(&format!(
            "is a symbolic link to {}, outside the task folder",
            real_secret.display()
        )),
        "{e}"
    );
    assert!(!e.to_string().contains("PRIVATE KEY"));
    // A relative link that climbs out is the same.
    std::fs::remove_file(dir.path().join("brief.md")).unwrap();
    let climb = Path::new("..")
        .join(outside.path().file_name().unwrap())
        .join("id_ed25519");
    symlink(&climb, dir.path().join("brief.md")).unwrap();
    let e = FolderTask::load(dir.path()).unwrap_err();
    assert!(e.message.contains("outside the task folder"), "{e}");

    // A file the task does not name, or a directory, pointing outside is
    // refused too: the whole folder is shipped to workers and hashed.
    let dir = folder(TASK);
    symlink(outside.path(), dir.path().join("data")).unwrap();
    let e = FolderTask::load(dir.path()).unwrap_err();
    assert_eq!(e.key, "data", "{e}");
    assert!(e.message.contains("outside the task folder"), "{e}");

    // A link that stays inside is followed: the brief is the target's.
    let dir = folder(TASK);
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/brief.md"), "Scale x, linked.\n").unwrap();
    std::fs::remove_file(dir.path().join("brief.md")).unwrap();
    symlink("docs/brief.md", dir.path().join("brief.md")).unwrap();
    symlink("docs", dir.path().join("notes")).unwrap();
    let t = FolderTask::load(dir.path()).unwrap();
    assert_eq!(t.brief, "Scale x, linked.\n");
    assert_eq!(t.files["notes/brief.md"], b"Scale x, linked.\n");

    // The folder reached through a link of its own is read as usual.
    let via = outside.path().join("task-link");
    symlink(dir.path(), &via).unwrap();
    assert_eq!(FolderTask::load(&via).unwrap().brief, "Scale x, linked.\n");

    // A loop, and a link to nothing, are refused by name.
    symlink("..", dir.path().join("docs/up")).unwrap();
    let e = FolderTask::load(dir.path()).unwrap_err();
    assert!(
        e.key.ends_with("up") && e.message.contains("(a loop)"),
        "{e}"
    );
    std::fs::remove_file(dir.path().join("docs/up")).unwrap();
    symlink("missing.md", dir.path().join("dangling.md")).unwrap();
    let e = FolderTask::load(dir.path()).unwrap_err();
    assert_eq!(e.key, "dangling.md", "{e}");
    assert!(e.message.contains("missing.md"), "{e}");
}

fn loaded() -> (tempfile::TempDir, FolderTask) {
    let dir = folder(TASK);
    let t = FolderTask::load(dir.path()).unwrap();
    (dir, t)
}

#[test]
fn the_host_program_expands_steps_swaps_pairs_and_evaluates_step_scalars() {
    let (_dir, t) = loaded();
    let p = t.problem(&crate::Size::new("even", &[8]), 1);
    assert_eq!(p.buffers.len(), 3);
    assert_eq!(p.buffers[0].bytes, 32);
    assert_eq!(p.buffers[0].access, crate::Access::ReadOnly);
    assert!(matches!(p.buffers[2].init, crate::BufferInit::Sentinel));
    // n_steps defaults to 2: two launches, the second with y and z swapped
    // and a = 0.5 * step + 1.
    assert_eq!(p.launches.len(), 2);
    use crate::Arg::*;
    assert_eq!(
        p.launches[0].args,
        vec![Buffer(0), Buffer(1), Buffer(2), F32(1.0), U32(8)]
    );
    assert_eq!(
        p.launches[1].args,
        vec![Buffer(0), Buffer(2), Buffer(1), F32(1.5), U32(8)]
    );
    assert_eq!(p.launches[0].threads, [8, 1, 1]);
    assert_eq!(p.launches[0].block, crate::Block::Default([128, 1, 1]));
    // Checked outputs in name order (y, z); after an even number of steps
    // each name is its own buffer, after an odd number the other one.
    assert_eq!(p.outputs, vec![1, 2]);
    let odd = t.problem(&crate::Size::new("odd", &[8, 3]), 1);
    assert_eq!(odd.launches.len(), 3);
    assert_eq!(odd.outputs, vec![2, 1]);
    // iota, and seeded uniform values in range that follow the seed.
    let data = |p: &crate::Problem, i: usize| match &p.buffers[i].init {
        crate::BufferInit::Data(d) => crate::check::bytes_to_f32s(d),
        other => panic!("{other:?}"),
    };
    assert_eq!(data(&p, 1), (0..8).map(|i| i as f32).collect::<Vec<_>>());
    let x = data(&p, 0);
    assert!(x.iter().all(|v| (-1.0..1.0).contains(v)), "{x:?}");
    assert_eq!(x, data(&t.problem(&crate::Size::new("even", &[8]), 1), 0));
    assert_ne!(x, data(&t.problem(&crate::Size::new("even", &[8]), 2), 0));
}

#[test]
fn outputs_are_checked_by_their_tolerances_and_nan_always_fails() {
    let (_dir, t) = loaded();
    let f = |v: &[f32]| crate::check::f32s_to_bytes(v);
    let want = f(&[1.0, 2.0, 3.0, 4.0]);
    // z: rtol 1e-5, atol 1e-6, within 0.99.
    assert!(t.check_output("z", &f(&[1.0, 2.0, 3.0, 4.0]), &want).passed);
    assert!(
        t.check_output("z", &f(&[1.0, 2.0, 3.0, 4.000_01]), &want)
            .passed
    );
    let off = t.check_output("z", &f(&[1.0, 2.0, 3.0, 4.1]), &want);
    assert!(!off.passed);
    assert_eq!(off.value, 0.75);
    assert!(
        !t.check_output("z", &f(&[1.0, 2.0, 3.0, f32::NAN]), &want)
            .passed
    );
    assert!(
        !t.check_output("z", &f(&[1.0, 2.0, 3.0]), &want).passed,
        "short output"
    );
    // y: exact, element by element.
    let y = t.check_output("y", &f(&[1.0, 2.0, 3.0, 4.000_01]), &want);
    assert!(!y.passed);
    assert_eq!(y.value, 1.0);
    assert!(t.check_output("y", &want, &want).passed);
}

#[test]
fn within_and_cosine_floors_are_applied() {
    let task = TASK.replacen("within = 0.99", "within = 0.75\ncosine = 0.999", 1);
    let dir = folder(&task);
    let t = FolderTask::load(dir.path()).unwrap();
    let f = |v: &[f32]| crate::check::f32s_to_bytes(v);
    let want = f(&[1.0, 2.0, 3.0, 4.0]);
    // One element in four off: within 0.75 passes, the cosine stays high.
    assert!(
        t.check_output("z", &f(&[1.0, 2.0, 3.0, 4.01]), &want)
            .passed
    );
    // Two off: fails the fraction.
    assert!(!t.check_output("z", &f(&[1.0, 2.0, 3.1, 4.1]), &want).passed);
    // One far off: the fraction passes, the cosine does not.
    let far = t.check_output("z", &f(&[1.0, 2.0, 3.0, -40.0]), &want);
    assert!(!far.passed);
    assert!(far.metric.contains("cosine"), "{far:?}");
}

#[test]
fn the_peak_error_bounds_the_elements_the_fraction_lets_go() {
    // 1000 elements: one zeroed (0.1%) passes within 0.99 and a cosine
    // floor of 0.999; the peak ceiling does not let it through.
    let loose = TASK.replacen("within = 0.99", "within = 0.99\ncosine = 0.999", 1);
    let tight = TASK.replacen(
        "within = 0.99",
        "within = 0.99\ncosine = 0.999\npeak_error = 1e-2",
        1,
    );
    let f = |v: &[f32]| crate::check::f32s_to_bytes(v);
    let want: Vec<f32> = (0..1000).map(|i| 1.0 + (i % 7) as f32).collect();
    let mut skipped = want.clone();
    skipped[999] = 0.0;
    let mut noisy = want.clone();
    for (i, v) in noisy.iter_mut().enumerate() {
        // Accumulation-order noise, a few ulps, on every element.
        *v *= 1.0 + 1e-6 * (i % 3) as f32;
    }
    let (loose_dir, tight_dir) = (folder(&loose), folder(&tight));
    let loose = FolderTask::load(loose_dir.path()).unwrap();
    let tight = FolderTask::load(tight_dir.path()).unwrap();
    assert!(loose.check_output("z", &f(&skipped), &f(&want)).passed);
    let caught = tight.check_output("z", &f(&skipped), &f(&want));
    assert!(!caught.passed, "{caught:?}");
    assert!(caught.metric.contains("largest |ref|"), "{caught:?}");
    // want[999] = 6 of a peak of 7.
    assert!((caught.value - 6.0 / 7.0).abs() < 1e-6, "{caught:?}");
    assert!(tight.check_output("z", &f(&noisy), &f(&want)).passed);
    // An Inf in the reference does not lift the ceiling to Inf (with no
    // cosine floor behind it, that would let anything through).
    let peak_only = folder(&TASK.replacen("within = 0.99", "within = 0.99\npeak_error = 1e-2", 1));
    let peak_only = FolderTask::load(peak_only.path()).unwrap();
    let mut with_inf = want.clone();
    with_inf[0] = f32::INFINITY;
    let mut far = with_inf.clone();
    far[999] = 1e30;
    let caught = peak_only.check_output("z", &f(&far), &f(&with_inf));
    assert!(!caught.passed, "{caught:?}");
}

#[test]
fn atol_rms_binds_every_element_by_its_own_magnitude_and_the_outputs_scale() {
    // Every element within 1e-4 (|ref| + rms): the shortcuts of an
    // under-computing kernel each fail it, honest fp32 noise does not.
    let bound = TASK.replacen(
        "rtol = 1e-5\natol = 1e-6\nwithin = 0.99",
        "rtol = 1e-4\natol_rms = 1e-4\nwithin = 1.0",
        1,
    );
    let dir = folder(&bound);
    let t = FolderTask::load(dir.path()).unwrap();
    let f = |v: &[f32]| crate::check::f32s_to_bytes(v);
    // A sum-like output around 100 whose values cross zero rarely.
    let want: Vec<f32> = (0..4096)
        .map(|i| 100.0 * ((i as f32) * 0.37).sin())
        .collect();
    let check = |got: &[f32]| t.check_output("z", &f(got), &f(&want));
    let noisy: Vec<f32> = want
        .iter()
        .enumerate()
        .map(|(i, v)| v + 70.0 * 1e-6 * ((i % 5) as f32 - 2.0))
        .collect();
    assert!(check(&noisy).passed, "{:?}", check(&noisy));
    // Small elements zeroed (a ReLU that skips (0, 0.02 * peak)).
    let zeroed: Vec<f32> = want
        .iter()
        .map(|&v| if v > 0.0 && v < 2.0 { 0.0 } else { v })
        .collect();
    assert!(!check(&zeroed).passed);
    // Every element rounded to bf16 (8 bits of mantissa).
    let bf16: Vec<f32> = want
        .iter()
        .map(|v| f32::from_bits(v.to_bits() & 0xffff_0000))
        .collect();
    assert!(!check(&bf16).passed);
    // Two of 256 terms missing from every sum: off by about 1%.
    let partial: Vec<f32> = want.iter().map(|v| v * (254.0 / 256.0)).collect();
    assert!(!check(&partial).passed);
    // The slack follows the scale: the same output 1000x larger, with
    // noise 1000x larger, passes as well.
    let big_want: Vec<f32> = want.iter().map(|v| v * 1000.0).collect();
    let big_noisy: Vec<f32> = noisy.iter().map(|v| v * 1000.0).collect();
    assert!(t.check_output("z", &f(&big_noisy), &f(&big_want)).passed);
}

#[test]
fn structured_inputs_are_triangular_or_symmetric_matrices() {
    let with = |structure: &str| {
        TASK.replacen(
            "init = { uniform = [-1.0, 1.0] }",
            &format!("init = {{ uniform = [1.0, 2.0] }}\nstructure = {structure}"),
            1,
        )
    };
    let x = |t: &FolderTask| match &t.problem(&crate::Size::new("4K", &[4096]), 3).buffers[0].init {
        crate::BufferInit::Data(d) => crate::check::bytes_to_f32s(d),
        other => panic!("{other:?}"),
    };
    let at = |v: &[f32], m: usize, i: usize, j: usize| v[m * 1024 + i * 32 + j];
    for (kind, zero_below, zero_above) in [("upper", true, false), ("lower", false, true)] {
        let dir = folder(&with(&format!("{{ {kind} = \"32\" }}")));
        let v = x(&FolderTask::load(dir.path()).unwrap());
        // 4096 elements: four 32 x 32 matrices, each shaped.
        for m in 0..4 {
            for i in 0..32 {
                for j in 0..32 {
                    let e = at(&v, m, i, j);
                    let zero = (zero_below && j < i) || (zero_above && j > i);
                    assert!(
                        if zero {
                            e == 0.0
                        } else {
                            (1.0..=2.0).contains(&e)
                        },
                        "{kind}: matrix {m} ({i}, {j}) = {e}"
                    );
                }
            }
        }
    }
    let dir = folder(&with("{ symmetric = \"32\" }"));
    let v = x(&FolderTask::load(dir.path()).unwrap());
    for m in 0..4 {
        for i in 0..32 {
            for j in 0..32 {
                assert_eq!(at(&v, m, i, j), at(&v, m, j, i), "matrix {m} ({i}, {j})");
            }
        }
    }
    assert_ne!(
        at(&v, 0, 0, 1),
        at(&v, 0, 0, 2),
        "still drawn, not constant"
    );
    // An order whose square does not divide the buffer at some size, an
    // unknown kind, a structure without drawn values: errors that say so.
    for (structure, key, says) in [
        (
            "{ upper = \"64\" }",
            "buffers[0].structure",
            "not a whole number of 64 x 64",
        ),
        (
            "{ banded = \"32\" }",
            "buffers[0].structure",
            "expected upper, lower or symmetric",
        ),
        (
            "{ upper = \"32\", lower = \"32\" }",
            "buffers[0].structure",
            "expected one of",
        ),
        ("{ upper = \"M\" }", "buffers[0].structure.upper", "M"),
    ] {
        let dir = folder(&with(structure));
        let e = FolderTask::load(dir.path()).unwrap_err();
        assert_eq!(e.key, key, "{structure}: {e}");
        assert!(e.message.contains(says), "{structure}: {e}");
    }
}

#[test]
fn half_precision_round_trips() {
    use super::program::{f16_to_f32, f32_to_f16};
    for v in [
        0.0f32,
        -0.0,
        1.0,
        -2.5,
        65504.0,
        6.1035156e-5,
        5.9604645e-8,
        0.333_251_95,
    ] {
        assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
    }
    assert_eq!(f32_to_f16(1e6), 0x7c00, "overflow is infinity");
    assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
    assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
    assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
}

#[test]
fn npy_round_trips_every_element_type() {
    for (text, bytes) in [
        ("f32", crate::check::f32s_to_bytes(&[1.5, -2.0, 3.25])),
        (
            "f64",
            [1.5f64, -2.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        (
            "i32",
            [-7i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        (
            "u32",
            [7u32, 9].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        (
            "i64",
            [-7i64].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        ("u8", vec![1u8, 2, 255]),
        ("f16", vec![0x00, 0x3c, 0x00, 0xc0]),
        ("f32x2", crate::check::f32s_to_bytes(&[1.0, 2.0, 3.0, 4.0])),
    ] {
        let element = ElementType::parse(text).unwrap();
        let file = npy::write(&bytes, element);
        let header = String::from_utf8_lossy(&file[..file.len().min(128)]).to_string();
        assert!(
            header.contains(npy::descr(element.scalar)),
            "{text}: {header}"
        );
        let (back, count) = npy::read(&file, element).unwrap();
        assert_eq!(back, bytes, "{text}");
        assert_eq!(
            count as usize,
            bytes.len() / element.scalar.bytes(),
            "{text}"
        );
    }
    let f64_file = npy::write(&[0u8; 16], ElementType::parse("f64").unwrap());
    let e = npy::read(&f64_file, ElementType::parse("f32").unwrap()).unwrap_err();
    assert!(
        e.contains("holds dtype <f8, the buffer's type needs <f4"),
        "{e}"
    );
    assert!(npy::read(b"not npy", ElementType::parse("f32").unwrap()).is_err());
}

#[test]
fn an_npy_input_is_read_at_load_and_must_fit_every_size() {
    let fixed = TASK
        .replacen(
            "in_distribution = [{ label = \"1K\", dims = [1024] }, { label = \"4K\", dims = [4096] }]\nheld_out = { label = \"2K\", dims = [2048] }",
            "in_distribution = [{ label = \"1K\", dims = [1024] }]\nheld_out = { label = \"1Kb\", dims = [1024] }",
            1,
        )
        .replacen(
            "in_distribution = [{ label = \"1M\", dims = [1048576] }]\nheld_out = { label = \"2M\", dims = [2097152] }",
            "in_distribution = [{ label = \"1K\", dims = [1024] }]\nheld_out = { label = \"1Kb\", dims = [1024] }",
            1,
        )
        .replacen("init = { uniform = [-1.0, 1.0] }", "init = { npy = \"x.npy\" }", 1);
    assert!(
        fixed.contains("1Kb") && fixed.contains("x.npy"),
        "the edits missed"
    );
    let values: Vec<f32> = (0..1024).map(|i| i as f32 * 0.5).collect();
    let file = npy::write(
        &crate::check::f32s_to_bytes(&values),
        ElementType::parse("f32").unwrap(),
    );
    let dir = folder(&fixed);
    std::fs::write(dir.path().join("x.npy"), &file).unwrap();
    let t = FolderTask::load(dir.path()).unwrap();
    let p = t.problem(&crate::Size::new("1K", &[1024]), 3);
    match &p.buffers[0].init {
        crate::BufferInit::Data(d) => assert_eq!(crate::check::bytes_to_f32s(d), values),
        other => panic!("{other:?}"),
    }
    // The unedited folder's sizes do not fit a 1024-value file.
    let dir = folder(&TASK.replacen(
        "init = { uniform = [-1.0, 1.0] }",
        "init = { npy = \"x.npy\" }",
        1,
    ));
    std::fs::write(dir.path().join("x.npy"), &file).unwrap();
    let e = FolderTask::load(dir.path()).unwrap_err();
    assert_eq!(e.key, "buffers[0].init");
    assert!(
        e.message
            .contains("`x.npy` holds 1024 values; at size `4K` the buffer needs 4096"),
        "{e}"
    );
}
