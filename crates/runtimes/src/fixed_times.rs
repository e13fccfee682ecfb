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
    fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }
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
    fn load_binary(&mut self, image: &[u8]) -> Result<ModuleId, BackendError> {
        self.inner.load_binary(image)
    }
    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError> {
        let kernel = self.inner.kernel(module, name)?;
        let factor = self.module_factor.get(&module).copied().unwrap_or(1.0);
        self.kernel_factor.insert(kernel, factor);
        Ok(kernel)
    }
    fn kernel_info(&self, kernel: KernelId) -> Result<KernelInfo, BackendError> {
        self.inner.kernel_info(kernel)
    }
    fn occupancy(
        &self,
        kernel: KernelId,
        block_threads: u32,
        dynamic_shared_bytes: u64,
    ) -> Result<Option<Occupancy>, BackendError> {
        self.inner
            .occupancy(kernel, block_threads, dynamic_shared_bytes)
    }
    fn release_module(&mut self, module: ModuleId) {
        self.module_factor.remove(&module);
        self.inner.release_module(module)
    }
    fn module_info(&self, module: ModuleId) -> Result<ModuleInfo, BackendError> {
        self.inner.module_info(module)
    }
    fn reset_module_state(&mut self, module: ModuleId) -> Result<(), BackendError> {
        self.inner.reset_module_state(module)
    }
    fn alloc(&mut self, bytes: usize) -> Result<BufferId, BackendError> {
        self.inner.alloc(bytes)
    }
    fn free(&mut self, buffer: BufferId) {
        self.inner.free(buffer)
    }
    fn upload(&mut self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.inner.upload(buffer, data)
    }
    fn download(&mut self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        self.inner.download(buffer, out)
    }
    fn copy_buffer(
        &mut self,
        src: BufferId,
        dst: BufferId,
        bytes: usize,
    ) -> Result<(), BackendError> {
        self.inner.copy_buffer(src, dst, bytes)
    }
    fn fill_buffer(
        &mut self,
        buffer: BufferId,
        value: u8,
        bytes: usize,
    ) -> Result<(), BackendError> {
        self.inner.fill_buffer(buffer, value, bytes)
    }
    fn is_poisoned(&self) -> bool {
        self.inner.is_poisoned()
    }
    fn restart_helpers(&mut self) {
        self.inner.restart_helpers()
    }
    fn view(
        &mut self,
        parent: BufferId,
        offset: usize,
        bytes: usize,
    ) -> Result<BufferId, BackendError> {
        self.inner.view(parent, offset, bytes)
    }
    fn views_alias(&self) -> bool {
        self.inner.views_alias()
    }
    fn download_range(
        &mut self,
        buffer: BufferId,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.inner.download_range(buffer, offset, out)
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
