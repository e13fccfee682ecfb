//! The backend conformance suite: one set of checks that every backend must
//! pass, run against that backend's own dialect of the same kernels
//! (`conformance/conformance.{cl,cu}`).
//!
//! A backend crate instantiates it in its integration tests with
//! [`conformance_suite!`](crate::conformance_suite), giving an expression that
//! yields `Option<impl Backend>`; `None` (no device on this machine) skips
//! every check with the reason printed by the expression.

use crate::{Backend, BackendError, CompileOptions, Dialect, KernelArg, KernelId, Launch};

/// The conformance kernels in `dialect`'s native language
/// ([`Dialect::native`]: `compile` on a Triton backend takes CUDA C++).
pub fn kernels_source(dialect: Dialect) -> &'static str {
    match dialect.native() {
        Dialect::OpenCl => include_str!("../conformance/conformance.cl"),
        Dialect::Cuda | Dialect::Triton => include_str!("../conformance/conformance.cu"),
        Dialect::Metal => unimplemented!("no Metal backend yet"),
    }
}

/// A kernel with a single error on [`SYNTAX_ERROR_LINE`].
pub fn syntax_error_source(dialect: Dialect) -> &'static str {
    match dialect.native() {
        Dialect::OpenCl => include_str!("../conformance/syntax_error.cl"),
        Dialect::Cuda | Dialect::Triton => include_str!("../conformance/syntax_error.cu"),
        Dialect::Metal => unimplemented!("no Metal backend yet"),
    }
}

/// The line of the deliberate error in [`syntax_error_source`].
pub const SYNTAX_ERROR_LINE: u32 = 5;

fn kernel(b: &mut dyn Backend, name: &str) -> KernelId {
    let src = kernels_source(b.dialect());
    let module = b
        .compile(src, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("conformance kernels must compile: {e}"));
    b.kernel(module, name)
        .unwrap_or_else(|e| panic!("kernel {name}: {e}"))
}

fn launch_1d(kernel: KernelId, n: u64, local: u32, args: Vec<KernelArg>) -> Launch {
    Launch {
        kernel,
        global: [n.div_ceil(u64::from(local)) * u64::from(local), 1, 1],
        local: [local, 1, 1],
        dynamic_shared_bytes: 0,
        args,
    }
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A source with an error is rejected with the compiler's log and a
/// diagnostic that points at the right line.
pub fn compile_error_is_reported(b: &mut dyn Backend) {
    let err = b
        .compile(syntax_error_source(b.dialect()), &CompileOptions::default())
        .expect_err("a kernel with an undeclared identifier must not compile");
    let BackendError::Compile(diag) = err else {
        panic!("expected a compile error, got {err:?}");
    };
    assert!(!diag.log.trim().is_empty(), "compile log is empty");
    assert!(
        diag.log.contains("undeclared_value"),
        "log does not name the offending identifier: {}",
        diag.log
    );
    let first = diag
        .errors()
        .next()
        .unwrap_or_else(|| panic!("no error diagnostic parsed from the log:\n{}", diag.log));
    assert_eq!(first.line, Some(SYNTAX_ERROR_LINE), "diagnostic: {first:?}");
}

/// Asking for an entry point the module does not have is a `MissingKernel`.
pub fn missing_kernel_is_reported(b: &mut dyn Backend) {
    let module = b
        .compile(kernels_source(b.dialect()), &CompileOptions::default())
        .expect("conformance kernels compile");
    match b.kernel(module, "no_such_kernel") {
        Err(BackendError::MissingKernel { name }) => assert_eq!(name, "no_such_kernel"),
        other => panic!("expected MissingKernel, got {other:?}"),
    }
    b.release_module(module);
}

/// Bytes uploaded come back unchanged, at several sizes including odd ones.
pub fn buffer_round_trip(b: &mut dyn Backend) {
    for len in [1usize, 3, 4096, 1 << 20, (1 << 20) + 7] {
        let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
        let buf = b.alloc(len).expect("alloc");
        b.upload(buf, &data).expect("upload");
        let mut back = vec![0u8; len];
        b.download(buf, &mut back).expect("download");
        assert!(back == data, "round trip of {len} bytes differs");
        b.free(buf);
    }
}

/// Device-side copies and fills land exactly where asked.
pub fn copy_and_fill_buffers(b: &mut dyn Backend) {
    let len = (1 << 20) + 12;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
    let src = b.alloc(len).unwrap();
    let dst = b.alloc(len).unwrap();
    b.upload(src, &data).unwrap();
    b.fill_buffer(dst, 0xFF, len).unwrap();
    let mut back = vec![0u8; len];
    b.download(dst, &mut back).unwrap();
    assert!(
        back.iter().all(|&x| x == 0xFF),
        "fill did not set every byte"
    );
    b.copy_buffer(src, dst, len - 12).unwrap();
    b.download(dst, &mut back).unwrap();
    assert!(back[..len - 12] == data[..len - 12], "copied bytes differ");
    assert!(
        back[len - 12..].iter().all(|&x| x == 0xFF),
        "copy wrote past its length"
    );
    b.free(src);
    b.free(dst);
}

/// A view reads and writes the right window of its parent, also from a kernel.
pub fn views_address_a_window_of_the_parent(b: &mut dyn Backend) {
    let align = crate::VIEW_ALIGN;
    let parent = b.alloc(3 * align).unwrap();
    b.fill_buffer(parent, 0xA5, 3 * align).unwrap();
    let view = b.view(parent, align, 64 * 4).expect("views are supported");
    b.fill_buffer(view, 0, 64 * 4).unwrap();
    let k = kernel(b, "increment");
    let launch = launch_1d(k, 64, 64, vec![KernelArg::Buffer(view), KernelArg::U32(64)]);
    b.run_timed(&[launch]).unwrap();
    let mut all = vec![0u8; 3 * align];
    b.download(parent, &mut all).unwrap();
    let mut window = vec![0u8; 256];
    b.download_range(parent, align, &mut window).unwrap();
    assert_eq!(
        window,
        all[align..align + 256],
        "download_range reads the wrong bytes"
    );
    assert!(
        all[..align].iter().all(|&x| x == 0xA5),
        "bytes before the view changed"
    );
    assert!(
        u32s(&all[align..align + 256]).iter().all(|&v| v == 1),
        "the kernel did not write through the view"
    );
    assert!(
        all[align + 256..].iter().all(|&x| x == 0xA5),
        "bytes after the view changed"
    );
    b.free(view);
    let mut again = vec![0u8; 16];
    b.download(parent, &mut again)
        .expect("freeing a view leaves the parent usable");
    b.free(parent);
}

/// Every access outside a buffer is an error naming the sizes, never a
/// wrapped offset or a driver fault, and the buffer stays usable after it.
pub fn out_of_range_accesses_are_refused(b: &mut dyn Backend) {
    let align = crate::VIEW_ALIGN;
    let buf = b.alloc(2 * align).unwrap();
    let other = b.alloc(align).unwrap();
    let too_long = vec![0u8; 2 * align + 1];
    let mut out = vec![0u8; 16];
    let refused = [
        b.upload(buf, &too_long).err(),
        b.download_range(buf, usize::MAX - 8, &mut out).err(),
        b.download_range(buf, 2 * align - 8, &mut out).err(),
        b.fill_buffer(buf, 0, 2 * align + 1).err(),
        b.copy_buffer(buf, other, align + 1).err(),
        b.copy_buffer(buf, buf, 16).err(),
        b.view(buf, usize::MAX - (usize::MAX % align), align).err(),
        b.view(buf, 1, 16).err(),
        b.view(buf, align, 0).err(),
        b.alloc(0).err(),
    ];
    for (i, e) in refused.iter().enumerate() {
        assert!(
            matches!(e, Some(BackendError::Runtime(_))),
            "access {i} outside its buffer: {e:?}"
        );
    }
    b.upload(buf, &[7u8; 16]).unwrap();
    b.download(buf, &mut out)
        .expect("the buffer is still usable");
    assert_eq!(out, [7u8; 16]);
    b.free(buf);
    b.free(other);
}

/// Using a freed buffer is an error, not a crash.
pub fn freed_buffer_is_rejected(b: &mut dyn Backend) {
    let buf = b.alloc(64).expect("alloc");
    b.free(buf);
    assert!(matches!(
        b.upload(buf, &[0u8; 64]),
        Err(BackendError::InvalidHandle { .. })
    ));
    let mut out = [0u8; 64];
    assert!(b.download(buf, &mut out).is_err());
}

/// Every argument type reaches the kernel bit-exactly, buffers included.
pub fn argument_types_are_passed(b: &mut dyn Backend) {
    let k = kernel(b, "args_probe");
    let n = 1000u32;
    let input: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 100.0).collect();
    let out_u = b.alloc(16).unwrap();
    let out_f = b.alloc(4 * n as usize).unwrap();
    let inp = b.alloc(4 * n as usize).unwrap();
    b.upload(inp, &f32s_to_bytes(&input)).unwrap();
    let (u, i, f) = (0xDEAD_BEEFu32, -123_456i32, -2.75f32);
    let launch = launch_1d(
        k,
        u64::from(n),
        64,
        vec![
            KernelArg::Buffer(out_u),
            KernelArg::Buffer(out_f),
            KernelArg::Buffer(inp),
            KernelArg::U32(u),
            KernelArg::I32(i),
            KernelArg::F32(f),
            KernelArg::U32(n),
        ],
    );
    b.run_timed(&[launch]).expect("launch");
    let mut raw = vec![0u8; 12];
    b.download(out_u, &mut raw).unwrap();
    let got = u32s(&raw);
    assert_eq!(got[0], u, "u32 argument");
    assert_eq!(got[1] as i32, i, "i32 argument");
    assert_eq!(got[2], f.to_bits(), "f32 argument");
    let mut raw = vec![0u8; 4 * n as usize];
    b.download(out_f, &mut raw).unwrap();
    for (idx, c) in raw.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes(c.try_into().unwrap());
        let want = input[idx] * f + i as f32;
        assert!(
            (v - want).abs() <= 1e-3 * want.abs().max(1.0),
            "out_f[{idx}] = {v}, want {want}"
        );
    }
    for buf in [out_u, out_f, inp] {
        b.free(buf);
    }
}

/// A launch with the wrong number of arguments is an error, not a crash.
pub fn wrong_argument_count_is_rejected(b: &mut dyn Backend) {
    let k = kernel(b, "increment");
    let buf = b.alloc(256).unwrap();
    let launch = launch_1d(k, 64, 64, vec![KernelArg::Buffer(buf)]);
    let err = b
        .run_timed(&[launch])
        .expect_err("one argument for a two-argument kernel must be rejected");
    assert!(
        matches!(err, BackendError::InvalidLaunch(_)),
        "expected InvalidLaunch, got {err:?}"
    );
    b.free(buf);
}

/// 1-D, 2-D and 3-D launches cover exactly the requested index space,
/// including grids padded past the problem size.
pub fn launch_geometry_covers_the_grid(b: &mut dyn Backend) {
    let k = kernel(b, "probe_index");
    for (dims, local) in [
        ([1000u32, 1, 1], [128u32, 1, 1]),
        ([37, 50, 1], [16, 16, 1]),
        ([20, 9, 7], [8, 8, 4]),
    ] {
        let n: usize = dims.iter().map(|&d| d as usize).product();
        let buf = b.alloc(4 * n).unwrap();
        b.upload(buf, &vec![0u8; 4 * n]).unwrap();
        let global = [0, 1, 2].map(|d| u64::from(dims[d].div_ceil(local[d]) * local[d]));
        let launch = Launch {
            kernel: k,
            global,
            local,
            dynamic_shared_bytes: 0,
            args: vec![
                KernelArg::Buffer(buf),
                KernelArg::U32(dims[0]),
                KernelArg::U32(dims[1]),
                KernelArg::U32(dims[2]),
            ],
        };
        b.run_timed(&[launch]).expect("launch");
        let mut raw = vec![0u8; 4 * n];
        b.download(buf, &mut raw).unwrap();
        for (lin, v) in u32s(&raw).into_iter().enumerate() {
            assert_eq!(
                v,
                lin as u32 ^ 0xA5A5_A5A5,
                "element {lin} of grid {dims:?}"
            );
        }
        b.free(buf);
    }
}

/// Launches in one sequence run in order, each seeing the previous writes.
pub fn launch_sequence_is_ordered(b: &mut dyn Backend) {
    let k = kernel(b, "increment");
    let n = 4096u32;
    let buf = b.alloc(4 * n as usize).unwrap();
    b.upload(buf, &vec![0u8; 4 * n as usize]).unwrap();
    let one = launch_1d(
        k,
        u64::from(n),
        256,
        vec![KernelArg::Buffer(buf), KernelArg::U32(n)],
    );
    let seq = vec![one; 100];
    b.run_timed(&seq).expect("sequence");
    let mut raw = vec![0u8; 4 * n as usize];
    b.download(buf, &mut raw).unwrap();
    assert!(
        u32s(&raw).iter().all(|&v| v == 100),
        "not every element was incremented 100 times"
    );
    b.free(buf);
}

/// Device times are positive, repeatable, and grow with the work timed.
pub fn timing_is_positive_and_consistent(b: &mut dyn Backend) {
    let k = kernel(b, "busy");
    let n = 1u32 << 16;
    let buf = b.alloc(4 * n as usize).unwrap();
    b.upload(buf, &vec![0u8; 4 * n as usize]).unwrap();
    let one = launch_1d(
        k,
        u64::from(n),
        64,
        vec![
            KernelArg::Buffer(buf),
            KernelArg::U32(n),
            KernelArg::U32(2000),
        ],
    );
    let median = |b: &mut dyn Backend, seq: &[Launch]| {
        b.run_timed(seq).unwrap(); // warm-up
        let mut t: Vec<f64> = (0..5)
            .map(|_| b.run_timed(seq).unwrap().seconds())
            .collect();
        assert!(
            t.iter().all(|&x| x > 0.0 && x.is_finite()),
            "non-positive time: {t:?}"
        );
        t.sort_by(f64::total_cmp);
        (t[2], t[0], t[4])
    };
    let (t1, min1, max1) = median(b, std::slice::from_ref(&one));
    assert!(
        max1 <= 10.0 * min1,
        "repeat times of one launch spread too far: {min1}..{max1}"
    );
    let (t8, _, _) = median(b, &vec![one; 8]);
    let ratio = t8 / t1;
    assert!(
        (3.0..=24.0).contains(&ratio),
        "8 launches took {ratio:.2}x the time of 1 ({t8:e} s vs {t1:e} s)"
    );
    b.free(buf);
}

/// The runtime reports a usable launch limit for every kernel.
pub fn kernel_info_is_reported(b: &mut dyn Backend) {
    let k = kernel(b, "busy");
    let info = b.kernel_info(k).expect("kernel info");
    assert!(info.max_threads_per_block >= 1, "{info:?}");
    assert!(
        info.max_threads_per_block <= b.info().max_work_group_size.max(1),
        "{info:?}"
    );
}

/// Device information is filled in.
pub fn device_info_is_reported(b: &mut dyn Backend) {
    let info = b.info();
    assert!(!info.name.is_empty(), "{info:?}");
    assert!(info.compute_units >= 1, "{info:?}");
    assert!(info.global_mem_bytes > 0, "{info:?}");
    assert!(info.max_work_group_size >= 1, "{info:?}");
}

/// Instantiate the conformance suite as `#[test]` functions.
///
/// `$make` is an expression of type `Option<B>` with `B: Backend`; when it is
/// `None` each test returns early (the expression should print why).
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@tests $make;
            compile_error_is_reported,
            missing_kernel_is_reported,
            buffer_round_trip,
            copy_and_fill_buffers,
            views_address_a_window_of_the_parent,
            out_of_range_accesses_are_refused,
            freed_buffer_is_rejected,
            argument_types_are_passed,
            wrong_argument_count_is_rejected,
            launch_geometry_covers_the_grid,
            launch_sequence_is_ordered,
            timing_is_positive_and_consistent,
            kernel_info_is_reported,
            device_info_is_reported
        );
    };
    (@tests $make:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                if let Some(mut backend) = $make {
                    $crate::conformance::$name(&mut backend);
                }
            }
        )*
    };
}
