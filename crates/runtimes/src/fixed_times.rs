//! A device whose clock is fixed: every launch runs on the real backend
//! (so outputs, faults and checks are real) but reports a time computed
//! from the launch alone, `factor x (2 us + 0.5 ns per thread)`, where a
//! module's factor is the number after `kevo-fixed-time:` in its source
//! (1 where there is none). Every median, spread and ratio is then the
//! same on every run and machine, which is what kevo's golden test needs
//! to compare whole searches decision by decision. Chosen with
//! `KEVO_FIXED_DEVICE_TIMES=1`; the device is named "fixed-time test
//! device", so no result made on it passes for a real measurement.

use std::collections::HashMap;

use kevo_backend::*;

/// The variable that selects this clock (any value but empty or "0").
pub const FIXED_TIMES_VAR: &str = "KEVO_FIXED_DEVICE_TIMES";

/// Seconds a launch costs before its threads: a launch's fixed overhead.
const LAUNCH_S: f64 = 2e-6;
/// Seconds each thread of a launch adds.
const THREAD_S: f64 = 0.5e-9;

/// Whether the environment asks for fixed times.
pub fn fixed_times_requested() -> bool {
    std::env::var(FIXED_TIMES_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `inner` with its clock replaced (see the module doc).
pub struct FixedTimes<B> {
    inner: B,
    info: DeviceInfo,
    module_factor: HashMap<ModuleId, f64>,
    kernel_factor: HashMap<KernelId, f64>,
}

impl<B: Backend> FixedTimes<B> {
    pub fn new(inner: B) -> Self {
        let mut info = inner.info().clone();
        // What the memory sweep and the ceilings are derived from, fixed
        // too, so they come out the same on every machine; the limits a
        // launch must respect stay the real device's.
        info.name = "fixed-time test device".into();
        info.vendor = "kevo".into();
        info.compute_units = 2;
        info.global_mem_bytes = 4 << 30;
        info.cache_bytes = 32 << 20;
        info.clock_mhz = 1000;
        info.arch = "fixed".into();
        info.driver_version = "fixed".into();
        FixedTimes {
            inner,
            info,
            module_factor: HashMap::new(),
            kernel_factor: HashMap::new(),
        }
    }

    fn launch_seconds(&self, launch: &Launch) -> f64 {
        let factor = self
            .kernel_factor
            .get(&launch.kernel)
            .copied()
            .unwrap_or(1.0);
        let threads: u64 = launch.global.iter().map(|&g| g.max(1)).product();
        factor * (LAUNCH_S + THREAD_S * threads as f64)
    }
}

/// The factor a source declares (`kevo-fixed-time: 0.5`), else 1.
pub fn declared_factor(source: &str) -> f64 {
    source
        .split("kevo-fixed-time:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(1.0)
}

impl<B: Backend> Backend for FixedTimes<B> {
    // Vendor libraries keep the trait's "unsupported": their times would
    // be the real device's.
    kevo_backend::forward_backend!(self.inner;
        except info, compile, compile_entry_points, kernel, release_module, run_timed;
        default vendor_library, run_vendor, release_vendor);

    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn compile(
        &mut self,
        source: &str,
        options: &CompileOptions,
    ) -> Result<ModuleId, BackendError> {
        let module = self.inner.compile(source, options)?;
        self.module_factor.insert(module, declared_factor(source));
        Ok(module)
    }
    fn compile_entry_points(
        &mut self,
        source: &str,
        options: &CompileOptions,
        entry_points: &[EntryPoint],
    ) -> Result<ModuleId, BackendError> {
        let module = self
            .inner
            .compile_entry_points(source, options, entry_points)?;
        self.module_factor.insert(module, declared_factor(source));
        Ok(module)
    }
    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError> {
        let kernel = self.inner.kernel(module, name)?;
        let factor = self.module_factor.get(&module).copied().unwrap_or(1.0);
        self.kernel_factor.insert(kernel, factor);
        Ok(kernel)
    }
    fn release_module(&mut self, module: ModuleId) {
        self.module_factor.remove(&module);
        self.inner.release_module(module)
    }
    /// Runs the launches for real; the time is the launches' fixed cost.
    fn run_timed(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError> {
        self.inner.run_timed(launches)?;
        Ok(DeviceTime(
            launches.iter().map(|l| self.launch_seconds(l)).sum(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device with views that alias, a vendor library and a slow clock.
    struct Device(DeviceInfo);

    impl Backend for Device {
        fn info(&self) -> &DeviceInfo {
            &self.0
        }
        fn compile(&mut self, _: &str, _: &CompileOptions) -> Result<ModuleId, BackendError> {
            Ok(ModuleId(1))
        }
        fn kernel(&mut self, _: ModuleId, _: &str) -> Result<KernelId, BackendError> {
            Ok(KernelId(2))
        }
        fn kernel_info(&self, _: KernelId) -> Result<KernelInfo, BackendError> {
            Ok(KernelInfo::default())
        }
        fn release_module(&mut self, _: ModuleId) {}
        fn alloc(&mut self, _: usize) -> Result<BufferId, BackendError> {
            Ok(BufferId(3))
        }
        fn free(&mut self, _: BufferId) {}
        fn upload(&mut self, _: BufferId, _: &[u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn download(&mut self, _: BufferId, _: &mut [u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn views_alias(&self) -> bool {
            true
        }
        fn run_timed(&mut self, _: &[Launch]) -> Result<DeviceTime, BackendError> {
            Ok(DeviceTime(1.0))
        }
        fn vendor_library(&mut self, _: VendorKind) -> Result<VendorLibrary, VendorError> {
            Ok(VendorLibrary {
                name: "cuBLAS".into(),
                version: "1".into(),
            })
        }
    }

    #[test]
    fn the_clock_is_fixed_and_everything_else_is_the_devices() {
        let mut info = DeviceInfo {
            backend: BackendName::Cuda,
            dialect: Dialect::Cuda,
            platform: String::new(),
            name: "real".into(),
            vendor: String::new(),
            compute_units: 132,
            global_mem_bytes: 80 << 30,
            max_work_group_size: 1024,
            local_mem_bytes: 0,
            clock_mhz: 1980,
            arch: "sm_90".into(),
            driver_version: String::new(),
            is_cpu: false,
            cache_bytes: 0,
            integrated: false,
            details: Default::default(),
        };
        let mut b = FixedTimes::new(Device(info.clone()));
        let module = b
            .compile("// kevo-fixed-time: 0.5", &CompileOptions::default())
            .unwrap();
        let kernel = b.kernel(module, "k").unwrap();
        let launch = Launch {
            kernel,
            global: [1000, 1, 1],
            local: [100, 1, 1],
            dynamic_shared_bytes: 0,
            args: Vec::new(),
        };
        let t = b.run_timed(&[launch]).unwrap().seconds();
        assert!(
            (t - 0.5 * (LAUNCH_S + THREAD_S * 1000.0)).abs() < 1e-15,
            "{t}"
        );
        info.name = "fixed-time test device".into();
        assert_eq!(b.info().name, info.name);
        assert_eq!(b.info().max_work_group_size, 1024, "the real limits");
        // Forwarded to the device.
        assert_eq!(b.dialect(), Dialect::Cuda);
        assert!(b.views_alias());
        assert_eq!(b.alloc(4).unwrap(), BufferId(3));
        // A vendor library's time would be a real one: none here.
        assert!(matches!(
            b.vendor_library(VendorKind::Saxpy),
            Err(VendorError::Unsupported { .. })
        ));
    }

    #[test]
    fn a_source_declares_its_factor_or_gets_one() {
        assert_eq!(declared_factor("// kevo-fixed-time: 0.25\n__kernel"), 0.25);
        assert_eq!(declared_factor("__kernel void k() {}"), 1.0);
        // Nonsense, zero and negative factors are ignored.
        assert_eq!(declared_factor("// kevo-fixed-time: fast"), 1.0);
        assert_eq!(declared_factor("// kevo-fixed-time: 0"), 1.0);
        assert_eq!(declared_factor("// kevo-fixed-time: -2"), 1.0);
    }
}
