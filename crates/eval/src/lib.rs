//! The kevo evaluator: candidate source + task + sizes -> [`Evaluation`].
//!
//! It follows the Metal-Sci protocol: per size, every buffer is restored
//! before each run (outside the timed region), 3 warm-up runs, 10 timed runs
//! on the device clock around the whole launch sequence, then one separate
//! verification run on freshly drawn inputs whose outputs were pre-filled
//! with NaN. The first wrong size stops the evaluation; the score is the
//! geometric mean of achieved / ceiling and exists only if every size passed.

mod cache;
pub mod json_f64;
mod outcome;

use std::sync::Arc;
use std::time::Instant;

use kevo_backend::{Backend, BackendError, BufferId, CompileOptions, KernelArg, KernelId, Launch};
use kevo_roofline::Ceilings;
use kevo_tasks::{
    Access, Arg, Block, BlockDeclarations, BufferInit, CeilingKind, Problem, Reference, Size, Task,
    Verdict,
};
use rayon::prelude::*;

pub use cache::LruCache;
pub use outcome::*;

/// How candidates are evaluated. The defaults are the Metal-Sci protocol.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct EvalConfig {
    pub warmups: usize,
    pub timed_runs: usize,
    pub compile: CompileOptions,
    /// Input seeds for verification runs, used in rotation: each candidate is
    /// verified on inputs other than the timed ones, so a kernel cannot pass
    /// by replaying an answer it computed during timing.
    pub verify_seed_pool: usize,
    /// Memory budget for cached inputs and references.
    pub cache_bytes: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            warmups: 3,
            timed_runs: 10,
            compile: CompileOptions::default(),
            verify_seed_pool: 4,
            cache_bytes: 8 << 30,
        }
    }
}

type CacheKey = (&'static str, Size, u64);

/// Evaluates candidates on one backend. Inputs and CPU references are cached
/// across candidates, so a second candidate of the same task pays for neither.
pub struct Evaluator<B: Backend> {
    backend: B,
    ceilings: Ceilings,
    config: EvalConfig,
    problems: LruCache<CacheKey, Arc<Problem>>,
    references: LruCache<CacheKey, Reference>,
    /// Initial buffer contents kept on the device across candidates, so a
    /// warm candidate uploads nothing (saxpy 64M: 1 GiB per candidate).
    pristine: PristineCache,
    /// The evaluator's own device utility (a buffer compare), compiled on
    /// first use; `Some(None)` when this dialect has none or it failed.
    compare: Option<Option<KernelId>>,
    /// Host buffers for downloads, reused across candidates: a fresh 256 MiB
    /// allocation costs ~60k page faults on first touch.
    scratch: Vec<Vec<u8>>,
    evaluations: u64,
}

/// Device buffers holding a problem's initial contents, per (task, size,
/// seed), bounded by a share of device memory and evicted least recently
/// used first.
#[derive(Default)]
struct PristineCache {
    entries: Vec<(CacheKey, Vec<Option<BufferId>>, usize, u64)>,
    clock: u64,
}

impl PristineCache {
    /// The pristine buffers of `problem`, uploading them on a miss. Entries
    /// whose key is in `protect` are never evicted to make room.
    fn get(
        &mut self,
        backend: &mut impl Backend,
        key: CacheKey,
        problem: &Problem,
        protect: &[&CacheKey],
    ) -> Result<Vec<Option<BufferId>>, BackendError> {
        self.clock += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == key) {
            e.3 = self.clock;
            return Ok(e.1.clone());
        }
        let bytes: usize = problem
            .buffers
            .iter()
            .filter(|b| matches!(b.init, BufferInit::Data(_)))
            .map(|b| b.bytes)
            .sum();
        // A quarter of device memory: enough for every size of a task at two
        // seeds, and far from what the candidate's own buffers need.
        let budget = (backend.info().global_mem_bytes / 4) as usize;
        while self.entries.iter().map(|e| e.2).sum::<usize>() + bytes > budget {
            let victim = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !protect.contains(&&e.0))
                .min_by_key(|(_, e)| e.3)
                .map(|(i, _)| i);
            let Some(i) = victim else { break };
            let (_, buffers, _, _) = self.entries.swap_remove(i);
            for b in buffers.into_iter().flatten() {
                backend.free(b);
            }
        }
        let mut buffers: Vec<Option<BufferId>> = Vec::with_capacity(problem.buffers.len());
        for spec in &problem.buffers {
            let BufferInit::Data(data) = &spec.init else {
                buffers.push(None);
                continue;
            };
            let result = match backend.alloc(spec.bytes) {
                Ok(b) => {
                    buffers.push(Some(b));
                    backend.upload(b, data)
                }
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                for b in buffers.into_iter().flatten() {
                    backend.free(b);
                }
                return Err(e);
            }
        }
        self.entries.push((key, buffers.clone(), bytes, self.clock));
        Ok(buffers)
    }

    fn clear(&mut self, backend: &mut impl Backend) {
        for (_, buffers, _, _) in self.entries.drain(..) {
            for b in buffers.into_iter().flatten() {
                backend.free(b);
            }
        }
    }
}

impl<B: Backend> Drop for Evaluator<B> {
    fn drop(&mut self) {
        self.pristine.clear(&mut self.backend);
    }
}

/// Seed of verification input number `k` for a task whose timed inputs use `base`.
fn verify_seed(base: u64, k: u64) -> u64 {
    base.wrapping_add((k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn problem_bytes(p: &Problem) -> usize {
    p.buffers
        .iter()
        .map(|b| match &b.init {
            BufferInit::Data(d) => d.len(),
            _ => 0,
        })
        .sum::<usize>()
        + 256
}

impl<B: Backend> Evaluator<B> {
    pub fn new(backend: B, ceilings: Ceilings, config: EvalConfig) -> Self {
        let half = config.cache_bytes / 2;
        Evaluator {
            backend,
            ceilings,
            config,
            problems: LruCache::new(half),
            references: LruCache::new(half),
            pristine: PristineCache::default(),
            compare: None,
            scratch: Vec::new(),
            evaluations: 0,
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    pub fn ceilings(&self) -> &Ceilings {
        &self.ceilings
    }

    pub fn config(&self) -> &EvalConfig {
        &self.config
    }

    fn problem(
        &mut self,
        task: &'static dyn Task,
        size: &Size,
        seed: u64,
        wall: &mut WallTimes,
    ) -> Arc<Problem> {
        let key = (task.name(), size.clone(), seed);
        if let Some(p) = self.problems.get(&key) {
            return p;
        }
        let t = Instant::now();
        let p = Arc::new(task.problem(size, seed));
        wall.inputs_s += t.elapsed().as_secs_f64();
        self.problems.insert(key, p.clone(), problem_bytes(&p));
        p
    }

    fn reference(
        &mut self,
        task: &'static dyn Task,
        size: &Size,
        seed: u64,
        problem: &Problem,
        wall: &mut WallTimes,
    ) -> Reference {
        let key = (task.name(), size.clone(), seed);
        if let Some(r) = self.references.get(&key) {
            return r;
        }
        let t = Instant::now();
        let r = task.reference(size, problem);
        wall.reference_s += t.elapsed().as_secs_f64();
        // References are about as large as one output buffer.
        let bytes = problem
            .outputs
            .iter()
            .map(|&i| problem.buffers[i].bytes)
            .sum::<usize>()
            + 256;
        self.references.insert(key, r.clone(), bytes);
        r
    }

    /// The buffer-compare utility kernel, compiled once.
    fn compare_kernel(&mut self) -> Option<KernelId> {
        if let Some(k) = self.compare {
            return k;
        }
        let source = match self.backend.dialect() {
            kevo_backend::Dialect::OpenCl => Some(include_str!("../kernels/compare.cl")),
            kevo_backend::Dialect::Cuda => Some(include_str!("../kernels/compare.cu")),
            kevo_backend::Dialect::Metal => None,
        };
        let kernel = source.and_then(|src| {
            let module = self.backend.compile(src, &CompileOptions::default()).ok()?;
            self.backend.kernel(module, "count_differences").ok()
        });
        self.compare = Some(kernel);
        kernel
    }

    /// Evaluate `source` for `task` at `sizes`, in order.
    pub fn evaluate(
        &mut self,
        task: &'static dyn Task,
        source: &str,
        sizes: &[Size],
    ) -> Evaluation {
        self.evaluate_observed(task, source, sizes, &mut |_| {})
    }

    /// Like [`Evaluator::evaluate`], calling `on_size` with each size's label
    /// before it runs, so a supervisor knows where a hung candidate stopped.
    pub fn evaluate_observed(
        &mut self,
        task: &'static dyn Task,
        source: &str,
        sizes: &[Size],
        on_size: &mut dyn FnMut(&str),
    ) -> Evaluation {
        let start = Instant::now();
        let mut wall = WallTimes::default();
        let mut results = Vec::new();
        let outcome = self.evaluate_inner(task, source, sizes, &mut wall, &mut results, on_size);
        wall.total_s = start.elapsed().as_secs_f64();
        self.evaluations += 1;
        let info = self.backend.info();
        Evaluation {
            task: task.name().to_string(),
            device: info.name.clone(),
            backend: info.backend.clone(),
            outcome,
            sizes: results,
            wall,
        }
    }

    fn evaluate_inner(
        &mut self,
        task: &'static dyn Task,
        source: &str,
        sizes: &[Size],
        wall: &mut WallTimes,
        results: &mut Vec<SizeResult>,
        on_size: &mut dyn FnMut(&str),
    ) -> Outcome {
        if source.trim().is_empty() {
            return Outcome::NoCode {
                reason: "the kernel source is empty".into(),
            };
        }
        let declared = match BlockDeclarations::parse(source, task.kernel_names()) {
            Ok(d) => d,
            Err(e) => {
                let log = format!(
                    "candidate.{}:{}:1: error: {e}",
                    self.backend.dialect().extension(),
                    e.line
                );
                return Outcome::CompileError {
                    message: e.to_string(),
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(log),
                };
            }
        };
        let t = Instant::now();
        let compiled = self.backend.compile(source, &self.config.compile);
        wall.compile_s += t.elapsed().as_secs_f64();
        let module = match compiled {
            Ok(m) => m,
            Err(BackendError::Compile(diagnostics)) => {
                return Outcome::CompileError {
                    message: diagnostics.summary(),
                    diagnostics,
                };
            }
            Err(e) => return runtime_error(None, e),
        };
        let outcome = (|| {
            let mut kernels = Vec::new();
            for name in task.kernel_names() {
                match self.backend.kernel(module, name) {
                    Ok(k) => kernels.push(k),
                    Err(BackendError::MissingKernel { name }) => {
                        let message =
                            format!("the source does not define the entry point `{name}`");
                        return Outcome::CompileError {
                            diagnostics: kevo_backend::CompileDiagnostics::from_log(
                                message.clone(),
                            ),
                            message,
                        };
                    }
                    Err(e) => return runtime_error(None, e),
                }
            }
            let seed_index = self.evaluations % self.config.verify_seed_pool.max(1) as u64;
            for size in sizes {
                on_size(&size.label);
                match self.run_size(task, &kernels, &declared, size, seed_index, wall) {
                    Ok(result) => {
                        let ok = result.correct;
                        let failure = (!ok).then(|| Outcome::WrongResult {
                            size: size.label.clone(),
                            metric: result.metric.clone(),
                            value: result.error,
                            tolerance: result.tolerance,
                        });
                        results.push(result);
                        if let Some(f) = failure {
                            return f;
                        }
                    }
                    Err(e) => return runtime_error(Some(size.label.clone()), e),
                }
            }
            Outcome::Correct {
                score: geometric_mean(results.iter().map(|r| r.fraction)),
            }
        })();
        self.backend.release_module(module);
        outcome
    }

    fn run_size(
        &mut self,
        task: &'static dyn Task,
        kernels: &[KernelId],
        declared: &BlockDeclarations,
        size: &Size,
        seed_index: u64,
        wall: &mut WallTimes,
    ) -> Result<SizeResult, BackendError> {
        let timed = self.problem(task, size, task.default_seed(), wall);
        let vseed = verify_seed(task.default_seed(), seed_index);
        let verify = self.problem(task, size, vseed, wall);
        let launches = self.resolve_launches(task, &timed, kernels, declared)?;

        let t = Instant::now();
        let mut device = DeviceBuffers::default();
        let timed_key = (task.name(), size.clone(), task.default_seed());
        let verify_key = (task.name(), size.clone(), vseed);
        let run = (|| {
            device.pristine =
                self.pristine
                    .get(&mut self.backend, timed_key.clone(), &timed, &[&verify_key])?;
            let verify_pristine = self.pristine.get(
                &mut self.backend,
                verify_key.clone(),
                &verify,
                &[&timed_key],
            )?;
            device.allocate(&mut self.backend, &timed)?;
            let launches = device.bind(&launches)?;
            for _ in 0..self.config.warmups {
                device.reset(&mut self.backend, &timed)?;
                self.backend.run_timed(&launches)?;
            }
            let mut samples = Vec::with_capacity(self.config.timed_runs);
            for _ in 0..self.config.timed_runs {
                device.reset(&mut self.backend, &timed)?;
                samples.push(self.backend.run_timed(&launches)?.seconds());
            }
            // The last timed run's output is checked too, so a kernel cannot
            // be fast when timed and right only when verified.
            let timed_outputs =
                device.download_outputs(&mut self.backend, &timed, &mut self.scratch)?;
            // Verification: fresh inputs, outputs pre-filled with NaN.
            device.pristine = verify_pristine;
            device.reset(&mut self.backend, &verify)?;
            self.backend.run_timed(&launches)?;
            let outputs = device.download_outputs(&mut self.backend, &verify, &mut self.scratch)?;
            let guard = device.overwritten_guard(&mut self.backend, &verify)?;
            let compare = self.compare_kernel();
            let modified = device.modified_input(&mut self.backend, &verify, compare)?;
            Ok((samples, timed_outputs, outputs, guard, modified))
        })();
        device.free(&mut self.backend);
        wall.device_s += t.elapsed().as_secs_f64();
        let (samples, timed_outputs, outputs, guard, modified) = run?;

        let reference = self.reference(task, size, vseed, &verify, wall);
        let t = Instant::now();
        let mut verdict = task.check(size, &verify, &reference, &outputs);
        wall.check_s += t.elapsed().as_secs_f64();
        if verdict.passed {
            let timed_reference = self.reference(task, size, task.default_seed(), &timed, wall);
            let t = Instant::now();
            let timed_verdict = task.check(size, &timed, &timed_reference, &timed_outputs);
            wall.check_s += t.elapsed().as_secs_f64();
            if !timed_verdict.passed {
                verdict = Verdict {
                    metric: format!("{} (timed run)", timed_verdict.metric),
                    ..timed_verdict
                };
            }
        }
        if verdict.passed
            && let Some((name, bytes)) = guard
        {
            verdict = Verdict {
                passed: false,
                metric: format!("out_of_bounds_bytes({name})"),
                value: bytes as f64,
                tolerance: Some(0.0),
            };
        }
        if verdict.passed
            && let Some((name, bytes)) = modified
        {
            verdict = Verdict {
                passed: false,
                metric: format!("input_modified_words({name})"),
                value: bytes as f64,
                tolerance: Some(0.0),
            };
        }

        self.scratch.extend(outputs);
        self.scratch.extend(timed_outputs);
        let time = TimeStats::from_samples(samples);
        let work = task.work(size);
        let achieved = work / time.median_s / 1e9;
        let kind = task.ceiling();
        let ceiling = match kind {
            CeilingKind::Bandwidth => self.ceilings.bandwidth_gbs,
            CeilingKind::Fp32 => self.ceilings.fp32_gflops,
        };
        Ok(SizeResult {
            label: size.label.clone(),
            correct: verdict.passed,
            metric: verdict.metric,
            error: verdict.value,
            tolerance: verdict.tolerance,
            time,
            work,
            achieved,
            ceiling,
            fraction: achieved / ceiling,
            unit: kind.unit().to_string(),
            work_note: task.work_note().to_string(),
            suspicious: suspicion(achieved / ceiling, &timed, self.backend.info().cache_bytes),
        })
    }

    /// Turn the task's launch specs into launches with concrete block shapes.
    /// A block the candidate declares replaces the task's default and must
    /// fit the kernel's limit; an undeclared default block is halved (z
    /// first, then y, then x) while it exceeds the limit, as the Metal-Sci
    /// host does; a fixed block that exceeds it is an error.
    fn resolve_launches(
        &self,
        task: &dyn Task,
        problem: &Problem,
        kernels: &[KernelId],
        declared: &BlockDeclarations,
    ) -> Result<Vec<PendingLaunch>, BackendError> {
        let mut limits = Vec::with_capacity(kernels.len());
        for &k in kernels {
            limits.push(self.backend.kernel_info(k)?.max_threads_per_block.max(1));
        }
        let names = task.kernel_names();
        problem
            .launches
            .iter()
            .map(|spec| {
                let limit = limits[spec.kernel];
                let name = names[spec.kernel];
                let threads_of = |b: [u32; 3]| b.iter().map(|&x| u64::from(x)).product::<u64>();
                let block = match spec.block {
                    Block::Default(default) => match declared.for_kernel(name) {
                        Some(b) => {
                            let dims = (0..3).rev().find(|&d| default[d] > 1 || spec.threads[d] > 1).unwrap_or(0) + 1;
                            if b[dims..].iter().any(|&x| x != 1) {
                                return Err(BackendError::InvalidLaunch(format!(
                                    "declared block {b:?} for `{name}` has more dimensions than its {dims}-D grid"
                                )));
                            }
                            if threads_of(b) > limit {
                                return Err(BackendError::InvalidLaunch(format!(
                                    "declared block {b:?} for `{name}` has {} threads; this kernel allows at most {limit} on this device",
                                    threads_of(b)
                                )));
                            }
                            b
                        }
                        None => {
                            let mut b = default;
                            while threads_of(b) > limit {
                                let d = (0..3).rev().find(|&d| b[d] > 1).unwrap_or(0);
                                b[d] /= 2;
                            }
                            b
                        }
                    },
                    Block::Fixed(b) => {
                        if threads_of(b) > limit {
                            return Err(BackendError::InvalidLaunch(format!(
                                "`{name}` allows {limit} threads per block, the task requires {b:?}"
                            )));
                        }
                        b
                    }
                };
                let global = [0, 1, 2].map(|d| spec.threads[d].div_ceil(u64::from(block[d])) * u64::from(block[d]));
                Ok(PendingLaunch {
                    kernel: kernels[spec.kernel],
                    global,
                    local: block,
                    args: spec.args.clone(),
                })
            })
            .collect()
    }
}

/// A launch whose buffer arguments still refer to the problem's buffer list.
struct PendingLaunch {
    kernel: KernelId,
    global: [u64; 3],
    local: [u32; 3],
    args: Vec<Arg>,
}

/// Bytes of guard region on each side of every buffer. An out-of-bounds
/// write from a block that overruns the end of an f32 array lands within the
/// first 64 KiB (16K elements) in practice.
const GUARD_BYTES: usize = 64 << 10;
/// Guard bytes hold this pattern; any other value afterwards is an
/// out-of-bounds write.
const CANARY: u8 = 0xA5;

/// Guard regions of one buffer inside its allocation `parent`: `lo_bytes`
/// before the kernel's window (zero when the backend cannot hand a kernel an
/// interior pointer) and `GUARD_BYTES` after it, starting at `hi_offset`.
struct Guards {
    parent: BufferId,
    lo_bytes: usize,
    hi_offset: usize,
}

/// The device side of one size: a working buffer per problem buffer (the
/// middle of a guarded allocation when the backend has views) and a pristine
/// copy of its initial contents to restore it from.
#[derive(Default)]
struct DeviceBuffers {
    working: Vec<BufferId>,
    pristine: Vec<Option<BufferId>>,
    guards: Vec<Option<Guards>>,
}

impl DeviceBuffers {
    fn allocate(
        &mut self,
        backend: &mut impl Backend,
        problem: &Problem,
    ) -> Result<(), BackendError> {
        for spec in &problem.buffers {
            let (working, guards) = Self::guarded(backend, spec.bytes)?;
            self.working.push(working);
            self.guards.push(guards);
        }
        Ok(())
    }

    /// A buffer of `bytes` with canary-filled guard regions: on both sides
    /// when the backend's views alias their parent (CUDA), after it
    /// otherwise (the kernel then gets the allocation itself).
    fn guarded(
        backend: &mut impl Backend,
        bytes: usize,
    ) -> Result<(BufferId, Option<Guards>), BackendError> {
        let align = kevo_backend::VIEW_ALIGN;
        let body = bytes.div_ceil(align) * align;
        if backend.views_alias() {
            let total = GUARD_BYTES + body + GUARD_BYTES;
            let parent = backend.alloc(total)?;
            backend.fill_buffer(parent, CANARY, total)?;
            match backend.view(parent, GUARD_BYTES, bytes) {
                Ok(working) => {
                    let guards = Guards {
                        parent,
                        lo_bytes: GUARD_BYTES,
                        hi_offset: GUARD_BYTES + bytes,
                    };
                    return Ok((working, Some(guards)));
                }
                Err(_) => backend.free(parent),
            }
        }
        let parent = backend.alloc(bytes + GUARD_BYTES)?;
        backend.fill_buffer(parent, CANARY, bytes + GUARD_BYTES)?;
        let guards = Guards {
            parent,
            lo_bytes: 0,
            hi_offset: bytes,
        };
        Ok((parent, Some(guards)))
    }

    /// Restore every buffer, inputs included, so a kernel that scribbles on
    /// its inputs cannot speed up the next run.
    fn reset(&self, backend: &mut impl Backend, problem: &Problem) -> Result<(), BackendError> {
        for (i, spec) in problem.buffers.iter().enumerate() {
            match (&spec.init, self.pristine[i]) {
                (BufferInit::Data(_), Some(p)) => {
                    backend.copy_buffer(p, self.working[i], spec.bytes)?
                }
                (BufferInit::Zero, _) => backend.fill_buffer(self.working[i], 0, spec.bytes)?,
                // 0xFF bytes are a NaN in every f32 lane.
                _ => backend.fill_buffer(self.working[i], 0xFF, spec.bytes)?,
            }
        }
        Ok(())
    }

    fn download_outputs(
        &self,
        backend: &mut impl Backend,
        problem: &Problem,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut outputs = Vec::new();
        for &i in &problem.outputs {
            let bytes = problem.buffers[i].bytes;
            // The largest pooled buffer that fits, else a new one.
            let pick = pool
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= bytes)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(k, _)| k);
            let mut out = pick.map(|k| pool.swap_remove(k)).unwrap_or_default();
            out.resize(bytes, 0);
            out.truncate(bytes);
            backend.download(self.working[i], &mut out)?;
            outputs.push(out);
        }
        Ok(outputs)
    }

    /// The first buffer whose guard regions changed, with the number of
    /// changed guard bytes.
    fn overwritten_guard(
        &self,
        backend: &mut impl Backend,
        problem: &Problem,
    ) -> Result<Option<(&'static str, usize)>, BackendError> {
        for (i, guards) in self.guards.iter().enumerate() {
            let Some(g) = guards else { continue };
            let mut lo = vec![0u8; g.lo_bytes];
            backend.download_range(g.parent, 0, &mut lo)?;
            let mut hi = vec![0u8; GUARD_BYTES];
            backend.download_range(g.parent, g.hi_offset, &mut hi)?;
            let changed = lo.iter().chain(&hi).filter(|&&b| b != CANARY).count();
            if changed > 0 {
                return Ok(Some((problem.buffers[i].name, changed)));
            }
        }
        Ok(None)
    }

    /// The first read-only input that differs from what was uploaded, with
    /// the number of changed 32-bit words. Compared on the device against
    /// the pristine copy when the compare kernel is available (no download
    /// of the inputs), on the host otherwise.
    fn modified_input(
        &self,
        backend: &mut impl Backend,
        problem: &Problem,
        compare: Option<KernelId>,
    ) -> Result<Option<(&'static str, usize)>, BackendError> {
        for (i, spec) in problem.buffers.iter().enumerate() {
            let (Access::ReadOnly, BufferInit::Data(data)) = (spec.access, &spec.init) else {
                continue;
            };
            let words = spec.bytes / 4;
            let changed = match (compare, self.pristine.get(i).copied().flatten()) {
                (Some(kernel), Some(pristine)) if words > 0 => {
                    let count = backend.alloc(4)?;
                    let result = (|| {
                        backend.fill_buffer(count, 0, 4)?;
                        let local = 256u32;
                        backend.run_timed(&[Launch {
                            kernel,
                            global: [
                                (words as u64).div_ceil(u64::from(local)) * u64::from(local),
                                1,
                                1,
                            ],
                            local: [local, 1, 1],
                            dynamic_shared_bytes: 0,
                            args: vec![
                                KernelArg::Buffer(self.working[i]),
                                KernelArg::Buffer(pristine),
                                KernelArg::U32(words as u32),
                                KernelArg::Buffer(count),
                            ],
                        }])?;
                        let mut c = [0u8; 4];
                        backend.download(count, &mut c)?;
                        let mut tail = vec![0u8; spec.bytes % 4];
                        backend.download_range(self.working[i], words * 4, &mut tail)?;
                        let tail_changed = tail.iter().zip(&data[words * 4..]).any(|(a, b)| a != b);
                        Ok(u32::from_le_bytes(c) as usize + usize::from(tail_changed))
                    })();
                    backend.free(count);
                    result?
                }
                _ => {
                    let mut now = vec![0u8; spec.bytes];
                    backend.download(self.working[i], &mut now)?;
                    now.par_chunks(1 << 20)
                        .zip(data.par_chunks(1 << 20))
                        .map(|(a, b)| a.chunks(4).zip(b.chunks(4)).filter(|(a, b)| a != b).count())
                        .sum()
                }
            };
            if changed > 0 {
                return Ok(Some((spec.name, changed)));
            }
        }
        Ok(None)
    }

    fn bind(&self, pending: &[PendingLaunch]) -> Result<Vec<Launch>, BackendError> {
        pending
            .iter()
            .map(|p| {
                let args = p
                    .args
                    .iter()
                    .map(|a| match *a {
                        Arg::Buffer(i) => self
                            .working
                            .get(i)
                            .copied()
                            .map(KernelArg::Buffer)
                            .ok_or_else(|| {
                                BackendError::InvalidLaunch(format!(
                                    "task refers to buffer {i}, which it does not define"
                                ))
                            }),
                        Arg::U32(v) => Ok(KernelArg::U32(v)),
                        Arg::I32(v) => Ok(KernelArg::I32(v)),
                        Arg::F32(v) => Ok(KernelArg::F32(v)),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Launch {
                    kernel: p.kernel,
                    global: p.global,
                    local: p.local,
                    dynamic_shared_bytes: 0,
                    args,
                })
            })
            .collect()
    }

    /// Views first, then the allocations they live in.
    fn free(&mut self, backend: &mut impl Backend) {
        for (working, guards) in self.working.drain(..).zip(self.guards.drain(..)) {
            match guards {
                Some(g) if g.parent != working => {
                    backend.free(working);
                    backend.free(g.parent);
                }
                Some(g) => backend.free(g.parent),
                None => backend.free(working),
            }
        }
        // The pristine buffers belong to the evaluator's cache.
        self.pristine.clear();
    }
}

fn runtime_error(size: Option<String>, e: BackendError) -> Outcome {
    let fault = match &e {
        BackendError::Fault { kind, .. } => Some(*kind),
        _ => None,
    };
    Outcome::RuntimeError {
        size,
        fault,
        message: e.to_string(),
    }
}

/// Fractions above this with a working set past the last-level cache are
/// flagged: DRAM cannot deliver 1.5x its datasheet bandwidth, and no FP32
/// unit 1.5x its peak, so something is not doing the work it claims.
pub const SUSPICIOUS_FRACTION: f64 = 1.5;

fn suspicion(fraction: f64, problem: &Problem, cache_bytes: u64) -> Option<String> {
    let working_set: u64 = problem.buffers.iter().map(|b| b.bytes as u64).sum();
    (fraction > SUSPICIOUS_FRACTION && cache_bytes > 0 && working_set > cache_bytes).then(|| {
        format!(
            "{:.0}% of the ceiling with a {:.1} MiB working set, larger than the {:.1} MiB last-level cache",
            fraction * 100.0,
            working_set as f64 / (1 << 20) as f64,
            cache_bytes as f64 / (1 << 20) as f64
        )
    })
}

/// exp(mean(ln(max(f, 1e-12)))): the 1e-12 floor only protects the logarithm.
pub fn geometric_mean(fractions: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = fractions
        .into_iter()
        .fold((0.0, 0usize), |(s, n), f| (s + f.max(1e-12).ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (sum / n as f64).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometric_mean_matches_hand_values() {
        assert!((geometric_mean([0.5, 0.5, 0.5]) - 0.5).abs() < 1e-12);
        assert!((geometric_mean([0.25, 1.0]) - 0.5).abs() < 1e-12);
        // A zero fraction collapses the mean but stays finite.
        assert!(geometric_mean([0.0, 1.0]) > 0.0);
        assert!(geometric_mean(std::iter::empty()).is_nan());
    }

    #[test]
    fn implausible_fractions_past_the_cache_are_flagged() {
        let problem = Problem {
            buffers: vec![kevo_tasks::BufferSpec {
                name: "x",
                bytes: 64 << 20,
                init: BufferInit::Zero,
                access: Access::ReadWrite,
            }],
            launches: vec![],
            outputs: vec![],
        };
        assert!(suspicion(2.0, &problem, 50 << 20).is_some());
        assert!(
            suspicion(1.2, &problem, 50 << 20).is_none(),
            "within 1.5x is plausible"
        );
        assert!(
            suspicion(2.0, &problem, 128 << 20).is_none(),
            "cache-resident sizes may exceed 1"
        );
        assert!(
            suspicion(2.0, &problem, 0).is_none(),
            "unknown cache size: no claim"
        );
    }

    #[test]
    fn time_stats_take_the_median() {
        let t = TimeStats::from_samples(vec![3.0, 1.0, 2.0, 10.0, 4.0]);
        assert_eq!((t.median_s, t.min_s, t.max_s), (3.0, 1.0, 10.0));
        let t = TimeStats::from_samples(vec![1.0, 2.0]);
        assert_eq!(t.median_s, 1.5);
    }

    #[test]
    fn verify_seeds_differ_from_the_timed_seed_and_each_other() {
        let base = 0xBEEF;
        let seeds: Vec<u64> = (0..4).map(|k| verify_seed(base, k)).collect();
        assert!(!seeds.contains(&base));
        for i in 0..4 {
            for j in 0..i {
                assert_ne!(seeds[i], seeds[j]);
            }
        }
    }
}
