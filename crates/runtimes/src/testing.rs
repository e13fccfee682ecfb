//! Test support shared by every crate whose integration tests run on real
//! devices: one macro instantiates a suite once per concrete backend
//! (`opencl::name`, `cuda::name`, and `triton::name` for the suites that
//! take Triton candidates), and one rule says when a missing device skips
//! a test and when it fails it. The suites themselves stay plain
//! functions, so rustfmt and the compiler see them as ordinary code.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use kevo_backend::{Backend, Dialect};

use crate::{BackendKind, OpenOptions};

/// The concrete backend one instantiation of a suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnderTest {
    pub kind: BackendKind,
    pub dialect: Dialect,
}

impl UnderTest {
    /// `kind` must be concrete (the macro only passes concrete kinds).
    pub fn new(kind: BackendKind) -> UnderTest {
        let dialect = kind
            .dialect()
            .unwrap_or_else(|| panic!("a suite runs on a concrete backend, not `{kind}`"));
        UnderTest { kind, dialect }
    }

    /// Whether a missing device fails the test instead of skipping it:
    /// OpenCL under `CI` (which installs PoCL), CUDA under
    /// `KEVO_REQUIRE_CUDA=1` and Triton (a CUDA device and Python with
    /// Triton) under `KEVO_REQUIRE_TRITON=1`, which scripts/gpu-check sets
    /// on the GPU machine. Elsewhere a machine without the device skips,
    /// saying why.
    pub fn required(self) -> bool {
        let set = |var: &str| std::env::var(var).as_deref() == Ok("1");
        match self.kind {
            BackendKind::Cuda => set("KEVO_REQUIRE_CUDA"),
            BackendKind::Triton => set("KEVO_REQUIRE_TRITON"),
            _ => std::env::var_os("CI").is_some(),
        }
    }

    /// What to do with a failure to get the device (or a worker on it):
    /// `None` with the reason printed where the backend is optional here,
    /// a panic naming it where it is required.
    pub fn or_skip<T, E: std::fmt::Display>(self, opened: Result<T, E>) -> Option<T> {
        match opened {
            Ok(value) => Some(value),
            Err(e) if !self.required() => {
                eprintln!("skipping {}: {e}", self.kind);
                None
            }
            Err(e) => panic!("{} must be available here: {e}", self.kind),
        }
    }

    /// The first device of this backend with the default options. A
    /// Triton backend gets a helper directory of its own, removed after
    /// it: helpers sharing the default one (one per process) would
    /// overwrite each other's candidate files when tests run in parallel.
    pub fn open(self) -> Option<Box<dyn Backend>> {
        if self.kind != BackendKind::Triton {
            return self.or_skip(crate::open(
                self.kind,
                &Default::default(),
                OpenOptions::default(),
            ));
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = RemovedOnDrop(std::env::temp_dir().join(format!(
            "kevo-test-triton-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )));
        let options = OpenOptions {
            scratch: Some(dir.0.clone()),
            ..OpenOptions::default()
        };
        let backend = self.or_skip(crate::open(self.kind, &Default::default(), options))?;
        Some(Box::new(WithDir { backend, _dir: dir }))
    }
}

/// A directory removed when dropped.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A backend and the directory it writes in, removed after it (fields
/// drop in order).
struct WithDir {
    backend: Box<dyn Backend>,
    _dir: RemovedOnDrop,
}

impl Backend for WithDir {
    kevo_backend::forward_backend!(self.backend);
}

/// Instantiates the named suite functions, each `fn(UnderTest)` in the
/// invoking module, once per concrete backend: `backend_tests!(a, b)`
/// makes the tests `opencl::a`, `opencl::b`, `cuda::a` and `cuda::b`, so a
/// filter such as `cuda::` runs one backend's half.
///
/// Triton runs only the suites named after `triton:`, since a Triton
/// candidate is a Python module and most suites' kernels exist only in
/// OpenCL C and CUDA C++: `backend_tests!(a, b; triton: a)` adds
/// `triton::a`. Name there only suites whose every kernel has a Triton
/// form (the tasks' seeds, `Dialect::Triton` sources), not ones that
/// return early on Triton.
#[macro_export]
macro_rules! backend_tests {
    ($($test:ident),+ $(,)? $(; triton: $($triton:ident),+ $(,)?)?) => {
        $crate::backend_tests!(@on opencl Opencl $($test),+);
        $crate::backend_tests!(@on cuda Cuda $($test),+);
        $($crate::backend_tests!(@on triton Triton $($triton),+);)?
    };
    (@on $module:ident $kind:ident $($test:ident),+) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::testing::UnderTest::new($crate::BackendKind::$kind));
                }
            )+
        }
    };
}
