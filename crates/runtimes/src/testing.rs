//! Test support shared by every crate whose integration tests run on real
//! devices: one macro instantiates a suite once per concrete backend
//! (`opencl::name`, `cuda::name`), and one rule says when a missing device
//! skips a test and when it fails it. The suites themselves stay plain
//! functions, so rustfmt and the compiler see them as ordinary code.

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
    /// `KEVO_REQUIRE_CUDA=1` (which scripts/gpu-check sets on the GPU
    /// machine). Elsewhere a machine without the device skips, saying why.
    pub fn required(self) -> bool {
        match self.kind {
            BackendKind::Cuda => std::env::var("KEVO_REQUIRE_CUDA").as_deref() == Ok("1"),
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

    /// The first device of this backend with the default options.
    pub fn open(self) -> Option<Box<dyn Backend>> {
        self.or_skip(crate::open(
            self.kind,
            &Default::default(),
            OpenOptions::default(),
        ))
    }
}

/// Instantiates the named suite functions, each `fn(UnderTest)` in the
/// invoking module, once per concrete backend: `backend_tests!(a, b)`
/// makes the tests `opencl::a`, `opencl::b`, `cuda::a` and `cuda::b`, so a
/// filter such as `cuda::` runs one backend's half.
#[macro_export]
macro_rules! backend_tests {
    ($($test:ident),+ $(,)?) => {
        mod opencl {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::testing::UnderTest::new($crate::BackendKind::Opencl));
                }
            )+
        }
        mod cuda {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::testing::UnderTest::new($crate::BackendKind::Cuda));
                }
            )+
        }
    };
}
