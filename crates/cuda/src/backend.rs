//! kevo's [`Backend`] trait for [`CudaBackend`]: each call is handed to the
//! module of its concern (`module`, `memory`, `launch`).

use kevo_backend::{
    Backend, BackendError, BufferId, CompileOptions, DeviceInfo, DeviceTime, KernelId, KernelInfo,
    Launch, ModuleId, ModuleInfo, Occupancy, VendorError, VendorKind, VendorLibrary, VendorOp,
};

use crate::device::CudaBackend;
use crate::vendor;

impl Backend for CudaBackend {
    fn is_poisoned(&self) -> bool {
        self.is_lost()
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn compile(
        &mut self,
        source: &str,
        options: &CompileOptions,
    ) -> Result<ModuleId, BackendError> {
        self.compile_source(source, options)
    }

    fn load_binary(&mut self, image: &[u8]) -> Result<ModuleId, BackendError> {
        self.load_cubin(image)
    }

    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError> {
        self.lookup_kernel(module, name)
    }

    fn kernel_info(&self, kernel: KernelId) -> Result<KernelInfo, BackendError> {
        self.query_kernel_info(kernel)
    }

    /// The driver's occupancy calculator for this block size.
    fn occupancy(
        &self,
        kernel: KernelId,
        block_threads: u32,
        dynamic_shared_bytes: u64,
    ) -> Result<Option<Occupancy>, BackendError> {
        self.driver_occupancy(kernel, block_threads, dynamic_shared_bytes)
    }

    fn module_info(&self, module: ModuleId) -> Result<ModuleInfo, BackendError> {
        self.describe_module(module)
    }

    fn reset_module_state(&mut self, module: ModuleId) -> Result<(), BackendError> {
        self.restore_module_globals(module)
    }

    fn release_module(&mut self, module: ModuleId) {
        self.unload_module(module)
    }

    fn alloc(&mut self, bytes: usize) -> Result<BufferId, BackendError> {
        self.allocate(bytes)
    }

    fn view(
        &mut self,
        parent: BufferId,
        offset: usize,
        bytes: usize,
    ) -> Result<BufferId, BackendError> {
        self.make_view(parent, offset, bytes)
    }

    fn free(&mut self, buffer: BufferId) {
        self.release_buffer(buffer)
    }

    fn upload(&mut self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.copy_in(buffer, data)
    }

    fn download(&mut self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        self.copy_out(buffer, out)
    }

    fn views_alias(&self) -> bool {
        true
    }

    fn download_range(
        &mut self,
        buffer: BufferId,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.copy_out_range(buffer, offset, out)
    }

    fn copy_buffer(
        &mut self,
        src: BufferId,
        dst: BufferId,
        bytes: usize,
    ) -> Result<(), BackendError> {
        self.copy_between(src, dst, bytes)
    }

    fn fill_buffer(
        &mut self,
        buffer: BufferId,
        value: u8,
        bytes: usize,
    ) -> Result<(), BackendError> {
        self.fill(buffer, value, bytes)
    }

    fn run_timed(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError> {
        self.run_sequence(launches)
    }

    fn vendor_library(&mut self, kind: VendorKind) -> Result<VendorLibrary, VendorError> {
        vendor::load(vendor::library_for(kind)).cloned()
    }

    fn run_vendor(&mut self, op: &VendorOp) -> Result<DeviceTime, VendorError> {
        self.run_vendor_op(op)
    }

    fn release_vendor(&mut self) {
        self.release_vendor_state()
    }
}
