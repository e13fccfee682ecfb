//! Triton candidates on the CUDA backend. [`TritonBackend`] wraps a CUDA
//! backend: a candidate's module goes to the helper, which returns one cubin
//! per entry point; the cubins are loaded by the CUDA backend
//! ([`Backend::load_binary`]), and every launch is rewritten into the
//! launch Triton's kernel expects: the grid the candidate declared (in
//! programs), 32 x num_warps threads, Triton's dynamic shared memory, and
//! the two scratch pointers Triton appends. Everything else (buffers,
//! views, timing, faults) is the CUDA backend's own, so a Triton candidate
//! goes through the same evaluator, guards and checks as a CUDA one.
//!
//! [`Backend::compile`] compiles CUDA C++ on the wrapped backend: kevo's
//! own kernels (roofline probes, utilities, device references) are written
//! in the device's native language ([`Dialect::native`]).

use std::collections::BTreeMap;

use kevo_backend::{
    Backend, BackendError, BackendName, BufferId, CompileDiagnostics, CompileOptions, DeviceInfo,
    DeviceTime, Dialect, EntryPoint, HandleTable, KernelArg, KernelId, KernelInfo, Launch,
    ModuleId, ModuleInfo, Occupancy,
};

use crate::directives::{self, KernelDirectives};
use crate::{Compiled, CompiledKernel, Helper, HelperConfig, KernelRequest, TritonError};

/// The name of a candidate in diagnostics (`candidate.py:3:1: error: ...`).
const CANDIDATE: &str = "candidate.py";

/// A module this backend handed out: a Triton candidate's, or one of
/// kevo's own CUDA C++ modules ([`Backend::compile`]) that lives in the
/// wrapped backend. Both get ids from this backend's one table, so a
/// handle of one kind is never taken for the other.
enum Module {
    Triton {
        /// One CUDA module per entry point (Triton compiles each alone).
        inner: Vec<ModuleId>,
        /// Entry point name -> its module's index, compiled form and
        /// directives.
        kernels: BTreeMap<String, (usize, CompiledKernel, KernelDirectives)>,
    },
    Native(ModuleId),
}

enum Kernel {
    Triton {
        module: u64,
        inner: KernelId,
        compiled: Box<CompiledKernel>,
        directives: KernelDirectives,
    },
    Native {
        module: u64,
        inner: KernelId,
    },
}

impl Kernel {
    fn module(&self) -> u64 {
        match self {
            Kernel::Triton { module, .. } | Kernel::Native { module, .. } => *module,
        }
    }
    fn inner(&self) -> KernelId {
        match self {
            Kernel::Triton { inner, .. } | Kernel::Native { inner, .. } => *inner,
        }
    }
}

/// A CUDA backend that compiles Triton candidates through the helper.
pub struct TritonBackend {
    inner: Box<dyn Backend>,
    info: DeviceInfo,
    config: HelperConfig,
    helper: Option<Helper>,
    /// Compute capability to compile for (90 for an H100).
    arch: u32,
    modules: HandleTable<Module>,
    kernels: HandleTable<Kernel>,
    /// Triton's global scratch (bytes per program times programs), grown as
    /// launches need it; a small buffer stands in for the NULL pointers of
    /// kernels that need none.
    scratch: Option<(BufferId, usize)>,
}

/// The compute capability of a CUDA device's `arch` string (`sm_90` -> 90).
fn compute_capability(arch: &str) -> Option<u32> {
    arch.trim()
        .trim_start_matches("sm_")
        .trim_start_matches("compute_")
        .trim_end_matches(['a', 'f'])
        .parse()
        .ok()
}

/// A launch's integer arguments by position (None for buffers and
/// floats): the values a grid directive names.
fn scalars(launch: &Launch) -> Vec<Option<i64>> {
    launch
        .args
        .iter()
        .map(|a| match *a {
            KernelArg::U32(v) => Some(i64::from(v)),
            KernelArg::I32(v) => Some(i64::from(v)),
            KernelArg::F32(_) | KernelArg::Buffer(_) => None,
        })
        .collect()
}

/// A candidate-facing compile error: `candidate.py:LINE:1: error: ...`
/// where the message starts with `line N:`, else without a position.
fn rejection(stage: &str, reason: &str) -> BackendError {
    let located = reason.strip_prefix("line ").and_then(|rest| {
        let (line, message) = rest.split_once(':')?;
        let line: u32 = line.trim().parse().ok()?;
        Some(format!(
            "{CANDIDATE}:{line}:1: error: {}",
            message.trim_start()
        ))
    });
    let first = located.unwrap_or_else(|| format!("{CANDIDATE}:1:1: error: {reason}"));
    let label = match stage {
        "module" => "the module is refused",
        "syntax" => "a syntax error",
        "entry" => "a missing entry point",
        "signature" => "a signature that is not the task's",
        "directive" => "a kevo directive",
        _ => "Triton's compiler",
    };
    BackendError::Compile(CompileDiagnostics::from_log(format!("{first}\n({label})")))
}

impl TritonBackend {
    /// Wrap `inner` (a CUDA backend) and start the helper: a missing
    /// interpreter or Triton is an error saying how to get them.
    pub fn new(inner: Box<dyn Backend>, config: HelperConfig) -> Result<Self, BackendError> {
        if inner.dialect() != Dialect::Cuda {
            return Err(BackendError::Unavailable {
                backend: BackendName::Triton,
                reason: format!(
                    "Triton kernels run on a CUDA device; {} is a {} device",
                    inner.info().name,
                    inner.info().backend
                ),
            });
        }
        let arch =
            compute_capability(&inner.info().arch).ok_or_else(|| BackendError::Unavailable {
                backend: BackendName::Triton,
                reason: format!(
                    "cannot read a compute capability from the device's architecture `{}`",
                    inner.info().arch
                ),
            })?;
        let helper = Helper::start(config.clone()).map_err(|e| BackendError::Unavailable {
            backend: BackendName::Triton,
            reason: e.to_string(),
        })?;
        let mut info = inner.info().clone();
        info.backend = BackendName::Triton;
        info.dialect = Dialect::Triton;
        info.driver_version = format!(
            "{}; Triton {} (Python {})",
            info.driver_version,
            helper.versions().triton,
            helper.versions().python
        );
        Ok(TritonBackend {
            inner,
            info,
            config,
            helper: Some(helper),
            arch,
            modules: HandleTable::new("module"),
            kernels: HandleTable::new("kernel"),
            scratch: None,
        })
    }

    /// The helper, restarted if a timeout or a crash stopped the last one.
    fn helper(&mut self) -> Result<&mut Helper, BackendError> {
        if self.helper.is_none() {
            let helper = Helper::start(self.config.clone())
                .map_err(|e| BackendError::Runtime(format!("restarting the Triton helper: {e}")))?;
            self.helper = Some(helper);
        }
        Ok(self.helper.as_mut().expect("started above"))
    }

    /// Bytes of Triton's global scratch `launch` needs (0 for kevo's own
    /// kernels and for Triton kernels that need none).
    fn scratch_bytes(&self, launch: &Launch) -> Result<usize, BackendError> {
        let Ok(Kernel::Triton {
            compiled,
            directives,
            ..
        }) = self.kernels.get(launch.kernel.0)
        else {
            return Ok(0);
        };
        if compiled.global_scratch_size == 0 {
            return Ok(0);
        }
        let scalars = scalars(launch);
        let grid = directives::grid(directives, &compiled.grid_values(&scalars))
            .map_err(|e| BackendError::InvalidLaunch(format!("`{}`: {e}", compiled.name)))?;
        let programs: u64 = grid.iter().map(|&g| u64::from(g)).product();
        let per_program = compiled
            .global_scratch_size
            .next_multiple_of(compiled.global_scratch_align.max(1));
        usize::try_from(programs.saturating_mul(per_program)).map_err(|_| {
            BackendError::InvalidLaunch(format!("`{}`: scratch too large", compiled.name))
        })
    }

    /// A scratch buffer of at least `bytes` (at least 256).
    fn scratch(&mut self, bytes: usize) -> Result<BufferId, BackendError> {
        let bytes = bytes.max(256);
        match self.scratch {
            Some((id, have)) if have >= bytes => Ok(id),
            old => {
                if let Some((id, _)) = old {
                    self.inner.free(id);
                    self.scratch = None;
                }
                let id = self.inner.alloc(bytes)?;
                self.scratch = Some((id, bytes));
                Ok(id)
            }
        }
    }

    /// `launch` as the wrapped backend takes it: a Triton kernel's in
    /// Triton's form, kevo's own kernels with their inner handle.
    fn translate(&self, launch: &Launch, scratch: BufferId) -> Result<Launch, BackendError> {
        let (compiled, directives, inner) = match self.kernels.get(launch.kernel.0)? {
            Kernel::Native { inner, .. } => {
                return Ok(Launch {
                    kernel: *inner,
                    ..launch.clone()
                });
            }
            Kernel::Triton {
                compiled,
                directives,
                inner,
                ..
            } => (compiled, directives, *inner),
        };
        let name = compiled.name.clone();
        let scalars = scalars(launch);
        let values = compiled.grid_values(&scalars);
        let grid = directives::grid(directives, &values)
            .map_err(|e| BackendError::InvalidLaunch(format!("`{name}`: {e}")))?;
        if compiled.num_ctas != 1 {
            return Err(BackendError::InvalidLaunch(format!(
                "`{name}` asks for {} CTAs per program; kevo launches one",
                compiled.num_ctas
            )));
        }
        let threads = 32 * compiled.num_warps;
        let shared = compiled.shared;
        let mut args = launch.args.clone();
        // global_scratch, then profile_scratch (never instrumented here).
        args.push(KernelArg::Buffer(scratch));
        args.push(KernelArg::Buffer(scratch));
        Ok(Launch {
            kernel: inner,
            global: [0, 1, 2]
                .map(|d| u64::from(grid[d]) * if d == 0 { u64::from(threads) } else { 1 }),
            local: [threads, 1, 1],
            dynamic_shared_bytes: shared,
            args,
        })
    }
}

impl Backend for TritonBackend {
    // `dialect` keeps the trait's default, read from this backend's own
    // `info` (Triton); the wrapped backend would say CUDA.
    kevo_backend::forward_backend!(self.inner;
        except info, compile, compile_entry_points, load_binary, kernel, kernel_info, occupancy,
            release_module, module_info, reset_module_state, restart_helpers, run_timed;
        default dialect);

    fn restart_helpers(&mut self) {
        // Dropped: the next compile starts a fresh helper (`helper()`).
        self.helper = None;
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn compile(
        &mut self,
        source: &str,
        options: &CompileOptions,
    ) -> Result<ModuleId, BackendError> {
        let inner = self.inner.compile(source, options)?;
        Ok(ModuleId(self.modules.insert(Module::Native(inner))))
    }

    fn compile_entry_points(
        &mut self,
        source: &str,
        _options: &CompileOptions,
        entry_points: &[EntryPoint],
    ) -> Result<ModuleId, BackendError> {
        let names: Vec<&str> = entry_points.iter().map(|e| e.name.as_str()).collect();
        let declared =
            directives::parse(source, &names).map_err(|e| rejection("directive", &e.0))?;
        let requests: Vec<KernelRequest> = entry_points
            .iter()
            .map(|e| {
                let d = &declared[&e.name];
                KernelRequest {
                    name: e.name.clone(),
                    params: e
                        .params
                        .iter()
                        .map(|p| (p.name.clone(), p.triton_type()))
                        .collect(),
                    num_warps: d.warps,
                    num_stages: d.stages,
                    constexprs: BTreeMap::new(),
                }
            })
            .collect();
        let arch = self.arch;
        let answer = match self.helper()?.compile(source, &requests, arch) {
            Ok(a) => a,
            Err(e) => {
                // A timeout killed it; a crash left nothing to talk to.
                self.helper = None;
                return Err(match e {
                    TritonError::Timeout(_) => BackendError::Compile(CompileDiagnostics::from_log(
                        format!("{CANDIDATE}:1:1: error: compiling took too long: {e}"),
                    )),
                    other => BackendError::Runtime(format!("the Triton helper: {other}")),
                });
            }
        };
        let kernels = match answer {
            Compiled::Kernels { kernels, .. } => kernels,
            Compiled::Rejected { stage, reason } => return Err(rejection(&stage, &reason)),
        };
        let mut inner = Vec::new();
        let mut by_name = BTreeMap::new();
        for mut compiled in kernels {
            let cubin = std::mem::take(&mut compiled.cubin);
            match self.inner.load_binary(&cubin) {
                Ok(m) => inner.push(m),
                Err(e) => {
                    for m in inner.drain(..) {
                        self.inner.release_module(m);
                    }
                    return Err(e);
                }
            }
            let d = declared[&compiled.name].clone();
            by_name.insert(compiled.name.clone(), (inner.len() - 1, compiled, d));
        }
        Ok(ModuleId(self.modules.insert(Module::Triton {
            inner,
            kernels: by_name,
        })))
    }

    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<KernelId, BackendError> {
        let entry = match self.modules.get(module.0)? {
            Module::Native(inner) => {
                let inner = *inner;
                Kernel::Native {
                    module: module.0,
                    inner: self.inner.kernel(inner, name)?,
                }
            }
            Module::Triton { inner, kernels } => {
                let Some((index, compiled, directives)) = kernels.get(name) else {
                    return Err(BackendError::MissingKernel { name: name.into() });
                };
                let (inner_module, compiled, directives) =
                    (inner[*index], compiled.clone(), directives.clone());
                Kernel::Triton {
                    module: module.0,
                    inner: self.inner.kernel(inner_module, name)?,
                    compiled: Box::new(compiled),
                    directives,
                }
            }
        };
        Ok(KernelId(self.kernels.insert(entry)))
    }

    fn kernel_info(&self, kernel: KernelId) -> Result<KernelInfo, BackendError> {
        let k = self.kernels.get(kernel.0)?;
        let mut info = self.inner.kernel_info(k.inner())?;
        if let Kernel::Triton { compiled, .. } = k {
            // The block is Triton's (32 x num_warps), the shared memory all
            // dynamic, and the two scratch pointers are not the task's.
            info.max_threads_per_block = u64::from(32 * compiled.num_warps);
            info.static_shared_bytes =
                Some(info.static_shared_bytes.unwrap_or(0) + u64::from(compiled.shared));
            info.num_args = info.num_args.map(|n| n.saturating_sub(2));
        }
        Ok(info)
    }

    fn occupancy(
        &self,
        kernel: KernelId,
        block_threads: u32,
        dynamic_shared_bytes: u64,
    ) -> Result<Option<Occupancy>, BackendError> {
        match self.kernels.get(kernel.0)? {
            Kernel::Triton {
                inner, compiled, ..
            } => self
                .inner
                .occupancy(*inner, 32 * compiled.num_warps, u64::from(compiled.shared)),
            Kernel::Native { inner, .. } => {
                self.inner
                    .occupancy(*inner, block_threads, dynamic_shared_bytes)
            }
        }
    }

    fn release_module(&mut self, module: ModuleId) {
        let Some(m) = self.modules.remove(module.0) else {
            return;
        };
        self.kernels.retain(|k| k.module() != module.0);
        let inner = match m {
            Module::Triton { inner, .. } => inner,
            Module::Native(inner) => vec![inner],
        };
        for i in inner {
            self.inner.release_module(i);
        }
    }

    fn module_info(&self, module: ModuleId) -> Result<ModuleInfo, BackendError> {
        let inner = match self.modules.get(module.0)? {
            Module::Triton { inner, .. } => inner.clone(),
            Module::Native(inner) => return self.inner.module_info(*inner),
        };
        let mut out = ModuleInfo {
            writable_global_bytes: Some(0),
            ..ModuleInfo::default()
        };
        for m in inner {
            let i = self.inner.module_info(m)?;
            out.writable_global_bytes = match (out.writable_global_bytes, i.writable_global_bytes) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            out.reset_global_bytes += i.reset_global_bytes;
            out.unresettable_names.extend(i.unresettable_names);
        }
        Ok(out)
    }

    fn reset_module_state(&mut self, module: ModuleId) -> Result<(), BackendError> {
        let inner = match self.modules.get(module.0)? {
            Module::Triton { inner, .. } => inner.clone(),
            Module::Native(inner) => vec![*inner],
        };
        for m in inner {
            self.inner.reset_module_state(m)?;
        }
        Ok(())
    }

    fn load_binary(&mut self, image: &[u8]) -> Result<ModuleId, BackendError> {
        let inner = self.inner.load_binary(image)?;
        Ok(ModuleId(self.modules.insert(Module::Native(inner))))
    }

    fn run_timed(&mut self, launches: &[Launch]) -> Result<DeviceTime, BackendError> {
        // Triton's scratch is zeroed before every run, outside the timed
        // region: what one run leaves there (through inline assembly that
        // reads the hidden pointers) must not reach the next, nor the next
        // candidate.
        let mut bytes = 0;
        for l in launches {
            bytes = bytes.max(self.scratch_bytes(l)?);
        }
        let scratch = self.scratch(bytes)?;
        let have = self.scratch.map_or(0, |(_, b)| b);
        self.inner.fill_buffer(scratch, 0, have)?;
        let translated = launches
            .iter()
            .map(|l| self.translate(l, scratch))
            .collect::<Result<Vec<_>, _>>()?;
        self.inner.run_timed(&translated)
    }
}

impl Drop for TritonBackend {
    fn drop(&mut self) {
        if let Some((id, _)) = self.scratch.take() {
            self.inner.free(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_capabilities_are_read_from_arch_names() {
        assert_eq!(compute_capability("sm_90"), Some(90));
        assert_eq!(compute_capability("sm_90a"), Some(90));
        assert_eq!(compute_capability("sm_100f"), Some(100));
        assert_eq!(compute_capability("gfx90a"), None);
    }

    #[test]
    fn rejections_are_located_at_the_candidate_line() {
        let BackendError::Compile(d) = rejection("module", "line 3: `import os`: refused") else {
            panic!("a compile error")
        };
        assert!(
            d.log.starts_with("candidate.py:3:1: error: `import os`"),
            "{}",
            d.log
        );
        assert_eq!(d.errors().next().unwrap().line, Some(3));
        let BackendError::Compile(d) = rejection("compile", "CompilationError: boom") else {
            panic!("a compile error")
        };
        assert!(
            d.log.contains("boom") && d.log.contains("Triton's compiler"),
            "{}",
            d.log
        );
    }
}
