//! [`forward_backend!`](crate::forward_backend): the forwarding half of a
//! backend that wraps another.

/// Writes, inside `impl Backend for Wrapper`, every method of
/// [`Backend`](crate::Backend) as a call to the wrapped backend except
/// those named, so a wrapper (the Triton backend, the fixed-time clock,
/// `Box<dyn Backend>`) spells out only what it changes. Why: by hand, a
/// forward left out still compiles, and the method silently answers with
/// the trait's default (no views, no occupancy) instead of the wrapped
/// backend's.
///
/// `self.FIELD` forwards to a field, `**self` to what a `Box` holds.
/// After `except` come the methods the wrapper writes itself; after
/// `default` those it leaves to the trait's default body. A method added
/// to the trait must be added to the table below.
///
/// ```
/// use kevo_backend::{Backend, DeviceInfo};
///
/// /// `inner` under another name.
/// struct Renamed<B> {
///     inner: B,
///     info: DeviceInfo,
/// }
///
/// impl<B: Backend> Backend for Renamed<B> {
///     kevo_backend::forward_backend!(self.inner; except info; default vendor_library);
///     fn info(&self) -> &DeviceInfo {
///         &self.info
///     }
/// }
/// ```
///
/// A name that is not a method of the trait is a compile error (a
/// misspelt `default` would otherwise forward after all):
///
/// ```compile_fail
/// struct Typo {
///     inner: Box<dyn kevo_backend::Backend>,
/// }
///
/// impl kevo_backend::Backend for Typo {
///     kevo_backend::forward_backend!(self.inner; except infoo);
/// }
/// ```
#[macro_export]
macro_rules! forward_backend {
    (self.$field:ident $(; except $($own:ident),+ $(,)?)? $(; default $($default:ident),+ $(,)?)? $(;)?) => {
        $crate::forward_backend!(@start [field $field] [$($($own)+)? $($($default)+)?]);
    };
    (**self $(; except $($own:ident),+ $(,)?)? $(; default $($default:ident),+ $(,)?)? $(;)?) => {
        $crate::forward_backend!(@start [deref] [$($($own)+)? $($($default)+)?]);
    };
    // The trait, one method a line: name, receiver, parameters, result.
    (@start $to:tt [$($skip:ident)*]) => {
        $crate::forward_backend!(@run $to [$($skip)*] [
            {dialect & () -> $crate::Dialect}
            {info & () -> &$crate::DeviceInfo}
            {compile &mut (source: &str, options: &$crate::CompileOptions) -> ::core::result::Result<$crate::ModuleId, $crate::BackendError>}
            {compile_entry_points &mut (source: &str, options: &$crate::CompileOptions, entry_points: &[$crate::EntryPoint]) -> ::core::result::Result<$crate::ModuleId, $crate::BackendError>}
            {load_binary &mut (image: &[u8]) -> ::core::result::Result<$crate::ModuleId, $crate::BackendError>}
            {kernel &mut (module: $crate::ModuleId, name: &str) -> ::core::result::Result<$crate::KernelId, $crate::BackendError>}
            {kernel_info & (kernel: $crate::KernelId) -> ::core::result::Result<$crate::KernelInfo, $crate::BackendError>}
            {occupancy & (kernel: $crate::KernelId, block_threads: u32, dynamic_shared_bytes: u64) -> ::core::result::Result<::core::option::Option<$crate::Occupancy>, $crate::BackendError>}
            {release_module &mut (module: $crate::ModuleId)}
            {module_info & (module: $crate::ModuleId) -> ::core::result::Result<$crate::ModuleInfo, $crate::BackendError>}
            {reset_module_state &mut (module: $crate::ModuleId) -> ::core::result::Result<(), $crate::BackendError>}
            {alloc &mut (bytes: usize) -> ::core::result::Result<$crate::BufferId, $crate::BackendError>}
            {free &mut (buffer: $crate::BufferId)}
            {upload &mut (buffer: $crate::BufferId, data: &[u8]) -> ::core::result::Result<(), $crate::BackendError>}
            {download &mut (buffer: $crate::BufferId, out: &mut [u8]) -> ::core::result::Result<(), $crate::BackendError>}
            {view &mut (parent: $crate::BufferId, offset: usize, bytes: usize) -> ::core::result::Result<$crate::BufferId, $crate::BackendError>}
            {views_alias & () -> bool}
            {download_range &mut (buffer: $crate::BufferId, offset: usize, out: &mut [u8]) -> ::core::result::Result<(), $crate::BackendError>}
            {copy_buffer &mut (src: $crate::BufferId, dst: $crate::BufferId, bytes: usize) -> ::core::result::Result<(), $crate::BackendError>}
            {fill_buffer &mut (buffer: $crate::BufferId, value: u8, bytes: usize) -> ::core::result::Result<(), $crate::BackendError>}
            {is_poisoned & () -> bool}
            {restart_helpers &mut ()}
            {run_timed &mut (launches: &[$crate::Launch]) -> ::core::result::Result<$crate::DeviceTime, $crate::BackendError>}
            {vendor_library &mut (kind: $crate::VendorKind) -> ::core::result::Result<$crate::VendorLibrary, $crate::VendorError>}
            {run_vendor &mut (op: &$crate::VendorOp) -> ::core::result::Result<$crate::DeviceTime, $crate::VendorError>}
            {release_vendor &mut ()}
        ]);
    };
    (@run $to:tt $skip:tt [$($method:tt)*]) => {
        $crate::forward_backend!(@known $skip [$($method)*]);
        $( $crate::forward_backend!(@unless $skip $method [$crate::forward_backend!(@fn $to $method);]); )*
    };
    // Every skipped name must be a method of the trait.
    (@known [] $table:tt) => {};
    (@known [$name:ident $($skip:ident)*] $table:tt) => {
        $crate::forward_backend!(@find $name $table);
        $crate::forward_backend!(@known [$($skip)*] $table);
    };
    (@find $name:ident []) => {
        compile_error!(concat!("forward_backend!: `", stringify!($name), "` is not a method of Backend"));
    };
    (@find $name:ident [{$method:ident $($sig:tt)*} $($rest:tt)*]) => {
        $crate::forward_backend!(@eq $name $method [] [$crate::forward_backend!(@find $name [$($rest)*]);]);
    };
    // `$then` unless the method is among the skipped names.
    (@unless [] $method:tt [$($then:tt)*]) => { $($then)* };
    (@unless [$name:ident $($skip:ident)*] {$method:ident $($sig:tt)*} $then:tt) => {
        $crate::forward_backend!(@eq $name $method [] [$crate::forward_backend!(@unless [$($skip)*] {$method} $then);]);
    };
    // The receiver and the call are written by the same arm, so the two
    // `self`s are one to the compiler's hygiene.
    (@fn $to:tt {$name:ident &mut ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?}) => {
        fn $name(&mut self $(, $arg: $ty)*) $(-> $ret)? {
            $crate::forward_backend!(@call $to self $name($($arg),*))
        }
    };
    (@fn $to:tt {$name:ident & ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?}) => {
        fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
            $crate::forward_backend!(@call $to self $name($($arg),*))
        }
    };
    (@call [field $field:ident] $recv:tt $name:ident $args:tt) => { $recv.$field.$name $args };
    (@call [deref] $recv:tt $name:ident $args:tt) => { (**$recv).$name $args };
    // Whether two names are the same method: `$yes` if so, else `$no`.
    (@eq dialect dialect [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq info info [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq compile compile [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq compile_entry_points compile_entry_points [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq load_binary load_binary [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq kernel kernel [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq kernel_info kernel_info [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq occupancy occupancy [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq release_module release_module [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq module_info module_info [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq reset_module_state reset_module_state [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq alloc alloc [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq free free [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq upload upload [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq download download [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq view view [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq views_alias views_alias [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq download_range download_range [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq copy_buffer copy_buffer [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq fill_buffer fill_buffer [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq is_poisoned is_poisoned [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq restart_helpers restart_helpers [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq run_timed run_timed [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq vendor_library vendor_library [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq run_vendor run_vendor [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq release_vendor release_vendor [$($yes:tt)*] $no:tt) => { $($yes)* };
    (@eq $a:ident $b:ident $yes:tt [$($no:tt)*]) => { $($no)* };
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use crate::*;

    /// Every method of the trait, in the table's order.
    const ALL: [&str; 26] = [
        "dialect",
        "info",
        "compile",
        "compile_entry_points",
        "load_binary",
        "kernel",
        "kernel_info",
        "occupancy",
        "release_module",
        "module_info",
        "reset_module_state",
        "alloc",
        "free",
        "upload",
        "download",
        "view",
        "views_alias",
        "download_range",
        "copy_buffer",
        "fill_buffer",
        "is_poisoned",
        "restart_helpers",
        "run_timed",
        "vendor_library",
        "run_vendor",
        "release_vendor",
    ];

    type Log = Rc<RefCell<Vec<&'static str>>>;

    /// A backend that writes down every method called on it.
    struct Recorder {
        log: Log,
        info: DeviceInfo,
    }

    fn recorder() -> (Recorder, Log) {
        let log = Log::default();
        let info = crate::test_device_info(BackendName::Cuda);
        (
            Recorder {
                log: log.clone(),
                info,
            },
            log,
        )
    }

    impl Recorder {
        fn hit(&self, name: &'static str) -> BackendError {
            self.log.borrow_mut().push(name);
            BackendError::Runtime(name.into())
        }
    }

    impl Backend for Recorder {
        fn dialect(&self) -> Dialect {
            self.hit("dialect");
            Dialect::OpenCl
        }
        fn info(&self) -> &DeviceInfo {
            self.hit("info");
            &self.info
        }
        fn compile(&mut self, _: &str, _: &CompileOptions) -> Result<ModuleId, BackendError> {
            Err(self.hit("compile"))
        }
        fn compile_entry_points(
            &mut self,
            _: &str,
            _: &CompileOptions,
            _: &[EntryPoint],
        ) -> Result<ModuleId, BackendError> {
            Err(self.hit("compile_entry_points"))
        }
        fn load_binary(&mut self, _: &[u8]) -> Result<ModuleId, BackendError> {
            Err(self.hit("load_binary"))
        }
        fn kernel(&mut self, _: ModuleId, _: &str) -> Result<KernelId, BackendError> {
            Err(self.hit("kernel"))
        }
        fn kernel_info(&self, _: KernelId) -> Result<KernelInfo, BackendError> {
            Err(self.hit("kernel_info"))
        }
        fn occupancy(
            &self,
            _: KernelId,
            _: u32,
            _: u64,
        ) -> Result<Option<Occupancy>, BackendError> {
            Err(self.hit("occupancy"))
        }
        fn release_module(&mut self, _: ModuleId) {
            self.hit("release_module");
        }
        fn module_info(&self, _: ModuleId) -> Result<ModuleInfo, BackendError> {
            Err(self.hit("module_info"))
        }
        fn reset_module_state(&mut self, _: ModuleId) -> Result<(), BackendError> {
            Err(self.hit("reset_module_state"))
        }
        fn alloc(&mut self, _: usize) -> Result<BufferId, BackendError> {
            Err(self.hit("alloc"))
        }
        fn free(&mut self, _: BufferId) {
            self.hit("free");
        }
        fn upload(&mut self, _: BufferId, _: &[u8]) -> Result<(), BackendError> {
            Err(self.hit("upload"))
        }
        fn download(&mut self, _: BufferId, _: &mut [u8]) -> Result<(), BackendError> {
            Err(self.hit("download"))
        }
        fn view(&mut self, _: BufferId, _: usize, _: usize) -> Result<BufferId, BackendError> {
            Err(self.hit("view"))
        }
        fn views_alias(&self) -> bool {
            self.hit("views_alias");
            true
        }
        fn download_range(
            &mut self,
            _: BufferId,
            _: usize,
            _: &mut [u8],
        ) -> Result<(), BackendError> {
            Err(self.hit("download_range"))
        }
        fn copy_buffer(&mut self, _: BufferId, _: BufferId, _: usize) -> Result<(), BackendError> {
            Err(self.hit("copy_buffer"))
        }
        fn fill_buffer(&mut self, _: BufferId, _: u8, _: usize) -> Result<(), BackendError> {
            Err(self.hit("fill_buffer"))
        }
        fn is_poisoned(&self) -> bool {
            self.hit("is_poisoned");
            true
        }
        fn restart_helpers(&mut self) {
            self.hit("restart_helpers");
        }
        fn run_timed(&mut self, _: &[Launch]) -> Result<DeviceTime, BackendError> {
            Err(self.hit("run_timed"))
        }
        fn vendor_library(&mut self, _: VendorKind) -> Result<VendorLibrary, VendorError> {
            Err(self.hit("vendor_library").into())
        }
        fn run_vendor(&mut self, _: &VendorOp) -> Result<DeviceTime, VendorError> {
            Err(self.hit("run_vendor").into())
        }
        fn release_vendor(&mut self) {
            self.hit("release_vendor");
        }
    }

    /// Calls every method of `b` once, in the table's order.
    fn call_every_method<B: Backend + ?Sized>(b: &mut B) {
        let options = CompileOptions::default();
        let (module, kernel, buffer) = (ModuleId(1), KernelId(2), BufferId(3));
        let _ = b.dialect();
        let _ = b.info();
        let _ = b.compile("", &options);
        let _ = b.compile_entry_points("", &options, &[]);
        let _ = b.load_binary(&[]);
        let _ = b.kernel(module, "k");
        let _ = b.kernel_info(kernel);
        let _ = b.occupancy(kernel, 32, 0);
        b.release_module(module);
        let _ = b.module_info(module);
        let _ = b.reset_module_state(module);
        let _ = b.alloc(4);
        b.free(buffer);
        let _ = b.upload(buffer, &[0]);
        let _ = b.download(buffer, &mut [0]);
        let _ = b.view(buffer, 0, 4);
        let _ = b.views_alias();
        let _ = b.download_range(buffer, 0, &mut [0]);
        let _ = b.copy_buffer(buffer, buffer, 1);
        let _ = b.fill_buffer(buffer, 0, 1);
        let _ = b.is_poisoned();
        b.restart_helpers();
        let _ = b.run_timed(&[]);
        let _ = b.vendor_library(VendorKind::Saxpy);
        let op = VendorOp::Saxpy {
            n: 1,
            alpha: 1.0,
            x: buffer,
            y: buffer,
        };
        let _ = b.run_vendor(&op);
        b.release_vendor();
    }

    #[test]
    fn a_box_forwards_every_method() {
        let (inner, log) = recorder();
        let mut boxed: Box<dyn Backend> = Box::new(inner);
        call_every_method::<Box<dyn Backend>>(&mut boxed);
        assert_eq!(*log.borrow(), ALL);
    }

    /// A wrapper that writes `info` and `compile` and keeps the trait's
    /// default `views_alias` and `run_vendor`.
    struct Wrapper {
        inner: Recorder,
        info: DeviceInfo,
    }

    impl Backend for Wrapper {
        crate::forward_backend!(self.inner; except info, compile; default views_alias, run_vendor);
        fn info(&self) -> &DeviceInfo {
            &self.info
        }
        fn compile(&mut self, _: &str, _: &CompileOptions) -> Result<ModuleId, BackendError> {
            Ok(ModuleId(7))
        }
    }

    #[test]
    fn a_wrapper_forwards_all_but_what_it_writes_or_leaves_to_the_default() {
        let (inner, log) = recorder();
        let mut w = Wrapper {
            inner,
            // Not the inner backend's: as Triton's wraps CUDA's.
            info: crate::test_device_info(BackendName::Triton),
        };
        call_every_method(&mut w);
        let skipped = ["info", "compile", "views_alias", "run_vendor"];
        let forwarded: Vec<&str> = ALL.into_iter().filter(|m| !skipped.contains(m)).collect();
        assert_eq!(*log.borrow(), forwarded);
        assert_eq!(w.info().backend, BackendName::Triton, "its own");
        assert_eq!(
            w.compile("", &CompileOptions::default()).unwrap(),
            ModuleId(7)
        );
        assert!(!w.views_alias(), "the trait's default");
        assert_eq!(w.dialect(), Dialect::OpenCl, "the inner backend's");
        let op = VendorOp::Saxpy {
            n: 1,
            alpha: 1.0,
            x: BufferId(1),
            y: BufferId(1),
        };
        assert!(matches!(
            w.run_vendor(&op),
            Err(VendorError::Unsupported {
                backend: BackendName::Triton,
                ..
            })
        ));
    }
}
