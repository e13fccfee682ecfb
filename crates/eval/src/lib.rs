//! The kevo evaluator: candidate source + task + sizes -> [`Evaluation`].
//!
//! It follows the Metal-Sci protocol, hardened against kernels that try to
//! pass without doing the work: per size, every buffer is restored and every
//! guard region re-armed before each run (outside the timed region); a
//! random number of warm-up runs; at least 10 timed runs on the device clock
//! around the whole launch sequence, repeated until their spread is small;
//! then one separate verification run on freshly drawn inputs whose outputs
//! were pre-filled with NaN. Every run's guards are checked, the first timed
//! run's outputs are checked against the reference and every later timed
//! run's outputs are compared with them on the device, so a kernel that is
//! right only on some launches fails. The first wrong size stops the
//! evaluation; the score is the geometric mean of achieved / ceiling and
//! exists only if every size passed and none ran faster than the hardware
//! allows.

mod ahead;
mod cache;
mod device;
pub mod json_f64;
mod outcome;
pub mod placement;
mod secret;
pub mod source_rules;
mod vendor;

use std::sync::Arc;
use std::time::Instant;

use device::{DeviceBuffers, PendingLaunch, Utility, round_up};
use kevo_backend::{
    Backend, BackendError, BufferId, CompileOptions, KernelId, ModuleId, VendorError, VendorOp,
};
use kevo_roofline::Ceilings;
use kevo_tasks::{Block, BlockDeclarations, BufferInit, Problem, Reference, Size, Task, Verdict};
use rand::Rng;

pub use cache::LruCache;
pub use kevo_backend::KernelInfo;
pub use outcome::*;
pub use placement::{
    CACHE_LEVEL_SUSPICIOUS_FACTOR, CACHE_RESIDENT_SUSPICIOUS_FRACTION, LevelFraction,
    SUSPICIOUS_FRACTION,
};
pub use secret::{InputSecret, ParseSecretError};
pub use vendor::{VendorBaseline, VendorRun, VendorSize, ratio_text};

/// How candidates are evaluated. The defaults are the Metal-Sci protocol
/// (3 warm-ups, 10 timed runs) made unpredictable and adaptive.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct EvalConfig {
    /// Warm-up runs per size, drawn uniformly from `warmups_min..=warmups_max`
    /// for every size of every evaluation: a kernel that counts its launches
    /// cannot tell the first timed run from a warm-up.
    pub warmups_min: usize,
    pub warmups_max: usize,
    /// Timed runs per size: at least this many ...
    pub timed_runs: usize,
    /// ... then more, until the robust spread (IQR / median) is at most
    /// `target_spread`, `max_timed_runs` were made, or the timed runs of the
    /// size took `timing_budget_s` of device time.
    pub max_timed_runs: usize,
    pub target_spread: f64,
    pub timing_budget_s: f64,
    pub compile: CompileOptions,
    /// Input seeds for verification runs, used in rotation: each candidate is
    /// verified on inputs other than the timed ones, so a kernel cannot pass
    /// by replaying an answer it computed during timing.
    ///
    /// A pool, not a fresh seed per evaluation: the seeds are secret, a
    /// kernel sees one of them per evaluation, and no state survives from
    /// one candidate to the next (modules, device buffers, scratch and
    /// pristine copies are scrubbed or checked: the adversarial suite's
    /// class 2). A channel between candidates, were one found, would let a
    /// later kernel replay the *timed* answers, which stay fixed per worker
    /// so their references are computed once; fresh verification seeds
    /// would not close it. They would cost a full reference per size and
    /// evaluation: up to 58.6% of a warm H100 evaluation (ising), seconds
    /// for an imported problem whose reference is a PyTorch module.
    pub verify_seed_pool: usize,
    /// The secret every input seed is derived from (see [`InputSecret`]);
    /// `None` draws a fresh one when the evaluator starts. A coordinator
    /// sets it, so that every worker of a run, and the coordinator's own
    /// reference runs, use the same inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs_secret: Option<InputSecret>,
    /// Memory budget for cached inputs and references.
    pub cache_bytes: usize,
}

impl EvalConfig {
    /// Warm-up runs for one size, drawn from the configured range: a kernel
    /// that counts its launches cannot tell the first timed run.
    fn draw_warmups(&self) -> usize {
        rand::rng().random_range(self.warmups_min..=self.warmups_max.max(self.warmups_min))
    }

    /// Whether `samples` (taking `timed_s` of device time) are enough: at
    /// least the minimum, then until the spread is small, the maximum
    /// count or the time budget.
    fn timing_done(&self, samples: &[f64], timed_s: f64) -> bool {
        let n = samples.len();
        n >= self.timed_runs
            && (n >= self.max_timed_runs
                || timed_s >= self.timing_budget_s
                || TimeStats::from_samples(samples.to_vec()).spread <= self.target_spread)
    }
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            warmups_min: 2,
            warmups_max: 5,
            timed_runs: 10,
            max_timed_runs: 50,
            target_spread: 0.01,
            timing_budget_s: 2.0,
            compile: CompileOptions::default(),
            verify_seed_pool: 4,
            inputs_secret: None,
            cache_bytes: 8 << 30,
        }
    }
}

use ahead::CacheKey;

/// Evaluates candidates on one backend. Inputs and CPU references are cached
/// across candidates, so a second candidate of the same task pays for neither.
pub struct Evaluator<B: Backend> {
    backend: B,
    ceilings: Ceilings,
    /// The ceilings "suspicious" is judged against: `ceilings` raised by
    /// every re-measurement this process made (scores keep `ceilings`, so
    /// a run's scores share one denominator).
    bounds: Ceilings,
    config: EvalConfig,
    problems: LruCache<CacheKey, Arc<Problem>>,
    references: LruCache<CacheKey, Reference>,
    /// Initial buffer contents kept on the device across candidates, so a
    /// warm candidate uploads nothing (saxpy 64M: 1 GiB per candidate).
    pristine: PristineCache,
    /// The evaluator's own device kernels (guards, compares, scrub),
    /// compiled on first use.
    utility: Option<Utility>,
    /// Host buffers for downloads, reused across candidates: a fresh 256 MiB
    /// allocation costs ~60k page faults on first touch.
    scratch: Vec<Vec<u8>>,
    evaluations: u64,
    /// The next evaluation's verification inputs and references, being
    /// prepared on spare cores (GPU devices only).
    ahead: ahead::Ahead,
    /// The verification seed (an index into the pool) of the next
    /// evaluation, where the caller chose it: a supervisor that computes a
    /// folder task's expected outputs ships only the seed it asks for.
    next_verify_index: Option<u64>,
}

/// Device buffers holding a problem's initial contents, per (task, size,
/// seed), bounded by a share of device memory and evicted least recently
/// used first. Each is a whole number of granules whose tail past the data
/// holds the canary, checked after every run, and whose contents have a
/// keyed checksum, checked after every size: a kernel that reaches the
/// pristine copies can neither hide anything in their slack nor have its
/// answer restored into its next run.
#[derive(Default)]
struct PristineCache {
    entries: Vec<(CacheKey, Vec<Option<BufferId>>, usize, u64)>,
    /// Every live pristine buffer.
    records: Vec<PristineRecord>,
    clock: u64,
}

#[derive(Debug, Clone, Copy)]
struct PristineRecord {
    buffer: BufferId,
    /// Whole 32-bit words of data.
    words: usize,
    /// First word and length of the canary tail.
    tail_at: usize,
    tail_words: usize,
    /// `device::keyed_checksum` of the data under the utility's key.
    checksum: u32,
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
        checksum_key: u32,
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
                self.records.retain(|r| r.buffer != b);
                backend.free(b);
            }
        }
        let mut buffers: Vec<Option<BufferId>> = Vec::with_capacity(problem.buffers.len());
        for spec in &problem.buffers {
            let BufferInit::Data(data) = &spec.init else {
                buffers.push(None);
                continue;
            };
            let total = round_up(spec.bytes + 4, device::granule(backend));
            let result = match backend.alloc(total) {
                Ok(b) => {
                    buffers.push(Some(b));
                    let first = spec.bytes.div_ceil(4);
                    self.records.push(PristineRecord {
                        buffer: b,
                        words: spec.bytes / 4,
                        tail_at: first,
                        tail_words: total / 4 - first,
                        checksum: device::keyed_checksum(data, checksum_key),
                    });
                    backend
                        .fill_buffer(b, device::CANARY, total)
                        .and_then(|_| backend.upload(b, data))
                }
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                for b in buffers.into_iter().flatten() {
                    self.records.retain(|r| r.buffer != b);
                    backend.free(b);
                }
                return Err(e);
            }
        }
        self.entries.push((key, buffers.clone(), bytes, self.clock));
        Ok(buffers)
    }

    /// The records of `buffers` (a problem's pristine list).
    fn records_of(&self, buffers: &[Option<BufferId>]) -> Vec<PristineRecord> {
        self.records
            .iter()
            .filter(|r| buffers.contains(&Some(r.buffer)))
            .copied()
            .collect()
    }

    fn clear(&mut self, backend: &mut impl Backend) {
        self.records.clear();
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
        if let Some(u) = self.utility.take() {
            u.release(&mut self.backend);
        }
    }
}

/// References are about as large as the output buffers.
fn reference_bytes(problem: &Problem) -> usize {
    problem
        .outputs
        .iter()
        .map(|&i| problem.buffers[i].bytes)
        .sum::<usize>()
        + 256
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
    pub fn new(backend: B, ceilings: Ceilings, mut config: EvalConfig) -> Self {
        let half = config.cache_bytes / 2;
        config.inputs_secret.get_or_insert_with(InputSecret::draw);
        Evaluator {
            backend,
            bounds: ceilings.clone(),
            ceilings,
            config,
            problems: LruCache::new(half),
            references: LruCache::new(half),
            pristine: PristineCache::default(),
            utility: None,
            scratch: Vec::new(),
            evaluations: 0,
            ahead: ahead::Ahead::default(),
            next_verify_index: None,
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

    /// The secret this evaluator's inputs are drawn from (recorded with a
    /// run's provenance; `KEVO_INPUTS_SECRET` reproduces it).
    pub fn inputs_secret(&self) -> InputSecret {
        self.config
            .inputs_secret
            .expect("set when the evaluator starts")
    }

    /// The seed of `task`'s timed inputs in this evaluator.
    pub fn timed_seed(&self, task: &Task) -> u64 {
        self.inputs_secret().timed_seed(task.default_seed())
    }

    /// The seed of `task`'s verification inputs number `k` of the pool.
    pub fn verify_seed(&self, task: &Task, k: u64) -> u64 {
        self.inputs_secret().verify_seed(task.default_seed(), k)
    }

    fn problem(
        &mut self,
        task: &Task,
        size: &Size,
        seed: u64,
        wall: &mut WallTimes,
    ) -> Arc<Problem> {
        let key = (task.content_hash().to_string(), size.clone(), seed);
        if let Some(p) = self.problems.get(&key) {
            return p;
        }
        if let Some((prepared, waited)) = self.ahead.take(&key) {
            wall.inputs_s += waited;
            return self.keep_prepared(key, prepared);
        }
        let t = Instant::now();
        let p = Arc::new(task.problem(size, seed));
        wall.inputs_s += t.elapsed().as_secs_f64();
        self.problems.insert(key, p.clone(), problem_bytes(&p));
        p
    }

    /// Caches a preparation made ahead; returns its problem.
    fn keep_prepared(&mut self, key: CacheKey, prepared: ahead::Prepared) -> Arc<Problem> {
        let p = prepared.problem;
        self.problems
            .insert(key.clone(), p.clone(), problem_bytes(&p));
        if let Some(r) = prepared.reference {
            self.references.insert(key, r, reference_bytes(&p));
        }
        p
    }

    /// Waits for the preparations still running and caches them: before a
    /// compile, whose memory limit is tighter than the worker's.
    fn settle_ahead(&mut self, wall: &mut WallTimes) {
        let (done, waited) = self.ahead.settle();
        wall.inputs_s += waited;
        for (key, prepared) in done {
            self.keep_prepared(key, prepared);
        }
    }

    /// Starts preparing the next evaluation's verification inputs and CPU
    /// references at `sizes` on spare cores, where the device is not the
    /// CPU and they are not cached yet (see [`ahead`]).
    fn prepare_next(&mut self, task: &Task, sizes: &[Size]) {
        if self.backend.info().is_cpu {
            return;
        }
        let pool = self.config.verify_seed_pool.max(1) as u64;
        let seed = self.verify_seed(task, (self.evaluations + 1) % pool);
        let with_reference = task
            .device_reference(self.backend.dialect().native())
            .is_none();
        let check_key = self.inputs_secret().check_key(seed);
        for size in sizes {
            let key = (task.content_hash().to_string(), size.clone(), seed);
            let cached =
                self.problems.contains(&key) && (!with_reference || self.references.contains(&key));
            if !cached {
                self.ahead
                    .start(key, task.code(), check_key, with_reference);
            }
        }
    }

    fn reference(
        &mut self,
        task: &Task,
        size: &Size,
        seed: u64,
        problem: &Problem,
        wall: &mut WallTimes,
    ) -> Result<Reference, BackendError> {
        let key = (task.content_hash().to_string(), size.clone(), seed);
        if let Some(r) = self.references.get(&key) {
            return Ok(r);
        }
        if let Some((prepared, waited)) = self.ahead.take(&key) {
            wall.reference_s += waited;
            if let Some(r) = prepared.reference {
                self.references
                    .insert(key, r.clone(), reference_bytes(problem));
                return Ok(r);
            }
        }
        let t = Instant::now();
        let r = match task.device_reference(self.backend.dialect().native()) {
            Some(source) => self.device_reference(task, source, problem)?,
            None => {
                let key = self.inputs_secret().check_key(seed);
                task.reference_keyed(size, problem, key)
            }
        };
        wall.reference_s += t.elapsed().as_secs_f64();
        self.references
            .insert(key, r.clone(), reference_bytes(problem));
        Ok(r)
    }

    /// The problem of `task` at (`size`, `seed`) and the reference a
    /// candidate's outputs are checked against (the CPU reference, or the
    /// task's reference kernel run on this device): for screening a task's
    /// check with null candidates (`kevo task check`).
    pub fn reference_at(
        &mut self,
        task: &Task,
        size: &Size,
        seed: u64,
    ) -> Result<(Arc<Problem>, Reference), BackendError> {
        let mut wall = WallTimes::default();
        let problem = self.problem(task, size, seed, &mut wall);
        let reference = self.reference(task, size, seed, &problem, &mut wall)?;
        Ok((problem, reference))
    }

    /// The expected outputs of `problem` from the task's reference kernel,
    /// run once on this device with the task's launches (its declared
    /// blocks, else the defaults). A failure is the task's, and says so.
    fn device_reference(
        &mut self,
        task: &Task,
        source: &str,
        problem: &Problem,
    ) -> Result<Reference, BackendError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            BackendError::Runtime(format!(
                "the task's reference kernel {what}: {e} (it is the task's, not the candidate's: \
                 run `kevo task check` on the folder)"
            ))
        };
        let prepared = source_rules::prepare(source, self.backend.dialect().native())
            .map_err(|r| fail("is refused", &format!("line {}: {}", r.line, r.reason)))?;
        let declared = BlockDeclarations::parse(source, task.kernel_names())
            .map_err(|e| fail("declares a bad block", &e))?;
        let module = self
            .backend
            .compile(&prepared, &self.config.compile)
            .map_err(|e| fail("does not compile", &e))?;
        let mut buffers: Vec<BufferId> = Vec::new();
        let run = (|| -> Result<Vec<Vec<u8>>, BackendError> {
            let mut kernels = Vec::new();
            for name in task.kernel_names() {
                kernels.push(self.backend.kernel(module, name)?);
            }
            let pending = self.resolve_launches(task, problem, &kernels, &declared, false)?;
            for spec in &problem.buffers {
                let b = self.backend.alloc(spec.bytes.max(4))?;
                buffers.push(b);
                match &spec.init {
                    BufferInit::Data(d) => self.backend.upload(b, d)?,
                    BufferInit::Zero => self.backend.fill_buffer(b, 0, spec.bytes)?,
                    BufferInit::Sentinel => self.backend.fill_buffer(b, 0xFF, spec.bytes)?,
                }
            }
            let device = DeviceBuffers {
                working: buffers.clone(),
                ..Default::default()
            };
            let launches = device.bind(&pending)?;
            self.backend.run_timed(&launches)?;
            let mut outputs = Vec::new();
            for &i in &problem.outputs {
                let mut out = vec![0u8; problem.buffers[i].bytes];
                self.backend.download(buffers[i], &mut out)?;
                outputs.push(out);
            }
            Ok(outputs)
        })();
        // Freed device memory may back a later candidate's allocation: the
        // expected outputs (and the states before them) are wiped first, so
        // no candidate finds the answer in memory it did not initialise.
        for (b, spec) in buffers.into_iter().zip(&problem.buffers) {
            let _ = self.backend.fill_buffer(b, 0, spec.bytes);
            self.backend.free(b);
        }
        self.backend.release_module(module);
        let outputs = run.map_err(|e| fail("failed", &e))?;
        Ok(Arc::new(kevo_tasks::folder::ExpectedOutputs(Arc::new(
            outputs,
        ))))
    }

    /// The utility kernels, compiled once.
    fn utility(&mut self) -> Result<&Utility, BackendError> {
        if self.utility.is_none() {
            self.utility = Some(Utility::new(&mut self.backend)?);
        }
        Ok(self.utility.as_ref().expect("set above"))
    }

    /// Verify the next evaluation on the pool's seed `index` (modulo the
    /// pool) instead of the next in rotation. The timed inputs stay those
    /// of [`Evaluator::timed_seed`]; a verification seed never equals it.
    pub fn verify_next_on(&mut self, index: u64) {
        self.next_verify_index = Some(index);
    }

    /// Evaluate `source` for `task` at `sizes`, in order.
    pub fn evaluate(&mut self, task: &Task, source: &str, sizes: &[Size]) -> Evaluation {
        self.evaluate_observed(task, source, sizes, &mut |_| {})
    }

    /// Like [`Evaluator::evaluate`], calling `on_stage` before compilation
    /// and before each size, so a supervisor can bound the compile on its
    /// own and knows where a hung candidate stopped.
    pub fn evaluate_observed(
        &mut self,
        task: &Task,
        source: &str,
        sizes: &[Size],
        on_stage: &mut dyn FnMut(Stage<'_>),
    ) -> Evaluation {
        let start = Instant::now();
        let mut wall = WallTimes::default();
        self.settle_ahead(&mut wall);
        let mut results = Vec::new();
        let mut kernels = Vec::new();
        let outcome = self.evaluate_inner(
            task,
            source,
            sizes,
            &mut wall,
            (&mut results, &mut kernels),
            on_stage,
        );
        wall.total_s = start.elapsed().as_secs_f64();
        self.evaluations += 1;
        // Chosen for this evaluation only, also where it failed before
        // verifying anything.
        self.next_verify_index = None;
        let info = self.backend.info();
        Evaluation {
            task: task.name().to_string(),
            device: info.name.clone(),
            backend: info.backend.clone(),
            outcome,
            sizes: results,
            wall,
            kernels,
        }
    }

    fn evaluate_inner(
        &mut self,
        task: &Task,
        source: &str,
        sizes: &[Size],
        wall: &mut WallTimes,
        (results, resources): (&mut Vec<SizeResult>, &mut Vec<KernelResources>),
        on_stage: &mut dyn FnMut(Stage<'_>),
    ) -> Outcome {
        if source.trim().is_empty() {
            return Outcome::NoCode {
                reason: "the kernel source is empty".into(),
            };
        }
        let extension = self.backend.dialect().extension();
        if let Some(outcome) = source_rejection(source, extension) {
            return outcome;
        }
        let prepared = match source_rules::prepare(source, self.backend.dialect()) {
            Ok(p) => p,
            Err(r) => {
                return Outcome::CompileError {
                    message: format!("line {}: {}", r.line, r.reason),
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(format!(
                        "candidate.{extension}:{}:1: error: {}",
                        r.line, r.reason
                    )),
                };
            }
        };
        let declared = match BlockDeclarations::parse(source, task.kernel_names()) {
            Ok(d) => d,
            Err(e) => {
                let log = format!("candidate.{extension}:{}:1: error: {e}", e.line);
                return Outcome::CompileError {
                    message: e.to_string(),
                    diagnostics: kevo_backend::CompileDiagnostics::from_log(log),
                };
            }
        };
        if let Err(e) = self.utility() {
            return runtime_error(None, e);
        }
        // A compiler that specializes per signature (Triton) gets the
        // task's typed entry points; the others need none.
        let entry_points = if self.backend.dialect() == kevo_backend::Dialect::Triton {
            match task.entry_points() {
                Ok(e) => e,
                Err(e) => {
                    return runtime_error(
                        None,
                        BackendError::Runtime(format!("the task's entry points: {e}")),
                    );
                }
            }
        } else {
            Vec::new()
        };
        on_stage(Stage::Compile);
        let t = Instant::now();
        let compiled =
            self.backend
                .compile_entry_points(&prepared, &self.config.compile, &entry_points);
        wall.compile_s += t.elapsed().as_secs_f64();
        let module = match compiled {
            Ok(m) => m,
            Err(BackendError::Compile(diagnostics)) => {
                let diagnostics = diagnostics.confined_to(&format!("candidate.{extension}"));
                return Outcome::CompileError {
                    message: diagnostics.summary(),
                    diagnostics,
                };
            }
            Err(e) => return runtime_error(None, e),
        };
        let outcome = (|| {
            match self.backend.module_info(module) {
                Ok(info) => {
                    if let Some(bytes) = info.writable_global_bytes.filter(|&b| b > 0) {
                        let names = if info.unresettable_names.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", info.unresettable_names.join(", "))
                        };
                        let message = format!(
                            "the module declares {bytes} bytes of writable module-scope state ({}{names}) \
                             that kevo cannot restore between runs; state that survives from one \
                             run to the next is not allowed: keep everything in the buffers the \
                             task passes",
                            match self.backend.dialect() {
                                kevo_backend::Dialect::Cuda =>
                                    "`__device__`/`__managed__` variables",
                                kevo_backend::Dialect::Triton => "global variables in the cubin",
                                _ => "program-scope `global` variables",
                            }
                        );
                        return Outcome::CompileError {
                            diagnostics: kevo_backend::CompileDiagnostics::from_log(format!(
                                "candidate.{extension}:1:1: error: {message}"
                            )),
                            message,
                        };
                    }
                }
                Err(e) => return runtime_error(None, e),
            }
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
            // Shared/local memory is undefined at a launch's start but may
            // still hold a previous launch's values: overwrite it after every
            // run when the candidate uses any.
            let mut scrub = false;
            for (&k, name) in kernels.iter().zip(task.kernel_names()) {
                match self.backend.kernel_info(k) {
                    Ok(info) => {
                        scrub |= info.static_shared_bytes.unwrap_or(0) > 0
                            || info.local_bytes_per_thread.unwrap_or(0) > 0;
                        resources.push(KernelResources {
                            name: name.clone(),
                            info,
                            occupancy: None,
                        });
                    }
                    Err(e) => return runtime_error(None, e),
                }
            }
            let seed_index = self.next_verify_index.unwrap_or(self.evaluations)
                % self.config.verify_seed_pool.max(1) as u64;
            // The device is about to work: the next evaluation's inputs
            // are prepared meanwhile.
            self.prepare_next(task, sizes);
            for size in sizes {
                on_stage(Stage::Size(&size.label));
                match self.run_size(
                    task, module, &kernels, &declared, size, seed_index, scrub, wall, resources,
                ) {
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
            let score = geometric_mean(results.iter().map(|r| r.fraction));
            self.recheck_implausible(task, sizes, results);
            match results.iter().find_map(|r| {
                r.suspicious
                    .as_ref()
                    .map(|why| (r.label.clone(), why.clone()))
            }) {
                Some((size, reason)) => Outcome::Suspicious {
                    size,
                    reason,
                    score,
                },
                None => Outcome::Correct { score },
            }
        })();
        self.backend.release_module(module);
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    fn run_size(
        &mut self,
        task: &Task,
        module: ModuleId,
        kernels: &[KernelId],
        declared: &BlockDeclarations,
        size: &Size,
        seed_index: u64,
        scrub: bool,
        wall: &mut WallTimes,
        resources: &mut [KernelResources],
    ) -> Result<SizeResult, BackendError> {
        let tseed = self.timed_seed(task);
        let timed = self.problem(task, size, tseed, wall);
        let vseed = self.verify_seed(task, seed_index);
        let verify = self.problem(task, size, vseed, wall);
        let triton = self.backend.dialect() == kevo_backend::Dialect::Triton;
        let launches = self.resolve_launches(task, &timed, kernels, declared, triton)?;
        self.note_occupancy(kernels, &launches, resources);
        // Needed before the runs: a timed run whose outputs differ from the
        // first one's is checked on its own as soon as it is seen.
        let timed_reference = self.reference(task, size, tseed, &timed, wall)?;
        let mut rng = rand::rng();
        let warmups = self.config.draw_warmups();
        let scrub_pattern = scrub.then(|| rng.random::<u32>());

        let t = Instant::now();
        let mut device = DeviceBuffers::default();
        let timed_key = (task.content_hash().to_string(), size.clone(), tseed);
        let verify_key = (task.content_hash().to_string(), size.clone(), vseed);
        let utility = self.utility.take().expect("compiled before the first size");
        let mut check_s = 0.0;
        let run = (|| -> Result<RunOutcome, BackendError> {
            device.pristine = self.pristine.get(
                &mut self.backend,
                timed_key.clone(),
                &timed,
                &[&verify_key],
                utility.key,
            )?;
            let verify_pristine = self.pristine.get(
                &mut self.backend,
                verify_key.clone(),
                &verify,
                &[&timed_key],
                utility.key,
            )?;
            let mut in_use = device.pristine.clone();
            in_use.extend(verify_pristine.iter().copied());
            let records = self.pristine.records_of(&in_use);
            device.watched = records
                .iter()
                .map(|r| (r.buffer, r.tail_at, r.tail_words))
                .collect();
            device.allocate(&mut self.backend, &timed)?;
            let launches = device.bind(&launches)?;
            let guard_failure = |device: &DeviceBuffers,
                                 backend: &mut B,
                                 problem: &Problem,
                                 run: &str,
                                 words: u32| {
                let (name, bytes) = device
                    .guard_owner(backend, &utility, problem)?
                    .unwrap_or(("?".to_string(), 4 * words as usize));
                Ok::<_, BackendError>(Verdict {
                    passed: false,
                    metric: format!("out_of_bounds_bytes({name}) in {run}"),
                    value: bytes as f64,
                    tolerance: Some(0.0),
                })
            };
            for k in 0..warmups {
                device.reset(&mut self.backend, &utility, &timed, module)?;
                self.backend.run_timed(&launches)?;
                let (guards, _) =
                    device.after_run(&mut self.backend, &utility, &timed, false, scrub_pattern)?;
                if guards > 0 {
                    let run = format!("warm-up {k}");
                    return Ok(RunOutcome::failed(guard_failure(
                        &device,
                        &mut self.backend,
                        &timed,
                        &run,
                        guards,
                    )?));
                }
            }
            let mut samples: Vec<f64> = Vec::with_capacity(self.config.timed_runs);
            let mut timed_s = 0.0;
            loop {
                let k = samples.len();
                device.reset(&mut self.backend, &utility, &timed, module)?;
                let seconds = self.backend.run_timed(&launches)?.seconds();
                samples.push(seconds);
                timed_s += seconds;
                let (guards, differing) =
                    device.after_run(&mut self.backend, &utility, &timed, k > 0, scrub_pattern)?;
                if guards > 0 {
                    let run = format!("timed run {k}");
                    return Ok(RunOutcome::failed(guard_failure(
                        &device,
                        &mut self.backend,
                        &timed,
                        &run,
                        guards,
                    )?));
                }
                if k == 0 {
                    device.take_snapshot(&mut self.backend, &timed)?;
                } else if differing > 0 {
                    // Not bit-identical to the first run (atomics, or a kernel
                    // that is right only sometimes): this run is checked on its own.
                    let outputs = device.download_outputs(
                        &mut self.backend,
                        &timed,
                        false,
                        &mut self.scratch,
                    )?;
                    let c = Instant::now();
                    let verdict = task.check(size, &timed, &timed_reference, &outputs);
                    check_s += c.elapsed().as_secs_f64();
                    self.scratch.extend(outputs);
                    if !verdict.passed {
                        return Ok(RunOutcome::failed(Verdict {
                            metric: format!("{} (timed run {k})", verdict.metric),
                            ..verdict
                        }));
                    }
                }
                if self.config.timing_done(&samples, timed_s) {
                    break;
                }
            }
            // The first timed run is checked against the reference; every
            // later one equalled it or was checked itself.
            let timed_outputs =
                device.download_outputs(&mut self.backend, &timed, true, &mut self.scratch)?;
            // Verification: fresh inputs, outputs pre-filled with NaN.
            device.pristine = verify_pristine;
            device.reset(&mut self.backend, &utility, &verify, module)?;
            self.backend.run_timed(&launches)?;
            let (guards, _) =
                device.after_run(&mut self.backend, &utility, &verify, false, scrub_pattern)?;
            if guards > 0 {
                let v = guard_failure(
                    &device,
                    &mut self.backend,
                    &verify,
                    "the verification run",
                    guards,
                )?;
                return Ok(RunOutcome::failed(v));
            }
            let outputs =
                device.download_outputs(&mut self.backend, &verify, false, &mut self.scratch)?;
            let modified = device.modified_input(&mut self.backend, &utility, &verify)?;
            let pristine_changed = self.pristine_changed(&utility, &records)?;
            Ok(RunOutcome {
                failed: None,
                samples,
                warmups,
                timed_outputs,
                outputs,
                modified,
                pristine_changed,
            })
        })();
        device.free(&mut self.backend);
        self.utility = Some(utility);
        wall.device_s += t.elapsed().as_secs_f64() - check_s;
        wall.check_s += check_s;
        let run = run?;

        let mut verdict = match run.failed {
            Some(v) => v,
            None => {
                let reference = self.reference(task, size, vseed, &verify, wall)?;
                let t = Instant::now();
                let mut verdict = task.check(size, &verify, &reference, &run.outputs);
                if verdict.passed {
                    let timed_verdict =
                        task.check(size, &timed, &timed_reference, &run.timed_outputs);
                    if !timed_verdict.passed {
                        verdict = Verdict {
                            metric: format!("{} (timed run 0)", timed_verdict.metric),
                            ..timed_verdict
                        };
                    }
                }
                wall.check_s += t.elapsed().as_secs_f64();
                verdict
            }
        };
        let failures = [
            run.modified
                .map(|(name, words)| (format!("input_modified_words({name})"), words as f64)),
            (run.pristine_changed > 0).then(|| {
                (
                    "pristine_copies_modified".to_string(),
                    f64::from(run.pristine_changed),
                )
            }),
        ];
        for (metric, value) in failures.into_iter().flatten() {
            if verdict.passed {
                verdict = Verdict {
                    passed: false,
                    metric,
                    value,
                    tolerance: Some(0.0),
                };
            }
        }

        self.scratch.extend(run.outputs);
        self.scratch.extend(run.timed_outputs);
        let time = TimeStats::from_samples(run.samples);
        let work = task.work(size);
        let achieved = work / time.median_s / 1e9;
        // Checked against the bytes a correct kernel must move, not the
        // scored work where that counts more (fft3d: 2x).
        // At the median time, the figure the score uses: a kernel that
        // slowed a quarter of its runs on purpose would move a quartile,
        // not the median it is scored by.
        let plausible = task.plausibility_work(size) / time.median_s / 1e9;
        let kind = task.ceiling();
        let ceiling = self.ceilings.for_kind(kind);
        let working_set: u64 = timed.buffers.iter().map(|b| b.bytes as u64).sum();
        Ok(SizeResult {
            label: size.label.clone(),
            correct: verdict.passed,
            metric: verdict.metric,
            error: verdict.value,
            tolerance: verdict.tolerance,
            time,
            warmups: run.warmups as u32,
            work,
            achieved,
            ceiling,
            fraction: achieved / ceiling,
            unit: kind.unit().to_string(),
            work_note: task.work_note().to_string(),
            suspicious: placement::suspicion(
                plausible,
                kind,
                &self.bounds,
                working_set,
                self.device_facts(),
            )
            .map(|s| s.why),
            working_set_bytes: working_set,
            level: placement::level_fraction(achieved, kind, &self.ceilings, working_set),
        })
    }

    fn device_facts(&self) -> placement::DeviceFacts {
        let info = self.backend.info();
        placement::DeviceFacts {
            driver_cache_bytes: info.cache_bytes,
            is_cpu: info.is_cpu,
        }
    }

    /// Before a size is called faster than the hardware, the ceiling it
    /// beat is measured again now, in this process, and the bound raised
    /// to it: a ceiling cached while the machine was busy (12.2 GB/s
    /// against 19.3 quiet on a 2-core VM) never condemns an honest kernel.
    /// A size that still beats the raised bound stays suspicious.
    fn recheck_implausible(&mut self, task: &Task, sizes: &[Size], results: &mut [SizeResult]) {
        let kind = task.ceiling();
        for r in results.iter_mut().filter(|r| r.suspicious.is_some()) {
            let Some(size) = sizes.iter().find(|s| s.label == r.label) else {
                continue;
            };
            let figure = task.plausibility_work(size) / r.time.median_s / 1e9;
            let facts = self.device_facts();
            let ws = r.working_set_bytes;
            let Some(first) = placement::suspicion(figure, kind, &self.bounds, ws, facts) else {
                r.suspicious = None;
                continue;
            };
            // A re-measurement that fails leaves the envelope's verdict.
            if let Ok(now) = kevo_roofline::remeasure(&mut self.backend, first.bound) {
                placement::raise(&mut self.bounds, first.bound, now);
            }
            r.suspicious = placement::suspicion(figure, kind, &self.bounds, ws, facts)
                .map(|s| format!("{} (its ceiling re-measured just now)", s.why));
        }
    }

    /// The vendor library's version of `task`'s job at each of `sizes`
    /// (cuFFT for fft3d on CUDA), on the same device and inputs as the
    /// kernels and timed by the same protocol: every buffer restored from
    /// its pristine copy before each run, random warm-ups, timed runs on
    /// the device clock until the spread is small. The output of one more
    /// run is checked by the task's own check, so the library is shown to
    /// do the same job (sign, normalisation, layout) before its time is.
    pub fn vendor_baseline(&mut self, task: &Task, sizes: &[Size]) -> VendorBaseline {
        self.vendor_baseline_observed(task, sizes, &mut |_| {})
    }

    /// [`Evaluator::vendor_baseline`], calling `on_size` before each size.
    pub fn vendor_baseline_observed(
        &mut self,
        task: &Task,
        sizes: &[Size],
        on_size: &mut dyn FnMut(&str),
    ) -> VendorBaseline {
        let ops: Vec<(&Size, VendorOp<usize>)> = sizes
            .iter()
            .filter_map(|s| task.vendor_op(s).map(|op| (s, op)))
            .collect();
        let Some((_, first)) = ops.first() else {
            return VendorBaseline::None {
                reason: format!("no vendor library does the job of `{}`", task.name()),
            };
        };
        let library = match self.backend.vendor_library(first.kind()) {
            Ok(l) => l,
            Err(VendorError::Missing { library, reason }) => {
                return VendorBaseline::Missing {
                    library: library.into(),
                    reason,
                };
            }
            Err(e @ VendorError::Unsupported { .. }) => {
                return VendorBaseline::None {
                    reason: e.to_string(),
                };
            }
            Err(e) => {
                return VendorBaseline::Failed {
                    library: None,
                    message: e.to_string(),
                };
            }
        };
        let mut results = Vec::new();
        for (size, op) in ops {
            on_size(&size.label);
            let run = self
                .vendor_size(task, size, op)
                .unwrap_or_else(|e| VendorRun::Failed {
                    message: e.to_string(),
                });
            results.push(VendorSize {
                label: size.label.clone(),
                op: op.describe(),
                run,
                kernel_over_library: None,
            });
            if self.backend.is_poisoned() {
                break;
            }
        }
        self.backend.release_vendor();
        VendorBaseline::Measured {
            library: library.name,
            version: library.version,
            sizes: results,
        }
    }

    /// One size of a vendor baseline (see [`Evaluator::vendor_baseline`]).
    fn vendor_size(
        &mut self,
        task: &Task,
        size: &Size,
        op: VendorOp<usize>,
    ) -> Result<VendorRun, VendorError> {
        let mut wall = WallTimes::default();
        let seed = self.timed_seed(task);
        let problem = self.problem(task, size, seed, &mut wall);
        let reference = self.reference(task, size, seed, &problem, &mut wall)?;
        let checksum_key = self.utility()?.key;
        let key = (task.content_hash().to_string(), size.clone(), seed);
        let pristine = self
            .pristine
            .get(&mut self.backend, key, &problem, &[], checksum_key)?;
        let mut working: Vec<BufferId> = Vec::with_capacity(problem.buffers.len());
        let run = (|| -> Result<VendorRun, VendorError> {
            for spec in &problem.buffers {
                working.push(self.backend.alloc(spec.bytes.max(4))?);
            }
            let op = op.map(|i| working[i]);
            let (backend, config) = (&mut self.backend, &self.config);
            // What kernels get before every run: inputs back, outputs NaN.
            let reset = |backend: &mut B| -> Result<(), BackendError> {
                for ((spec, &w), p) in problem.buffers.iter().zip(&working).zip(&pristine) {
                    match (&spec.init, p) {
                        (BufferInit::Data(_), Some(p)) => backend.copy_buffer(*p, w, spec.bytes)?,
                        (BufferInit::Data(d), None) => backend.upload(w, d)?,
                        (BufferInit::Zero, _) => backend.fill_buffer(w, 0, spec.bytes)?,
                        (BufferInit::Sentinel, _) => backend.fill_buffer(w, 0xFF, spec.bytes)?,
                    }
                }
                Ok(())
            };
            let warmups = config.draw_warmups();
            for _ in 0..warmups {
                reset(backend)?;
                backend.run_vendor(&op)?;
            }
            let mut samples = Vec::new();
            let mut timed_s = 0.0;
            while !config.timing_done(&samples, timed_s) {
                reset(backend)?;
                let t = backend.run_vendor(&op)?.seconds();
                samples.push(t);
                timed_s += t;
            }
            reset(backend)?;
            backend.run_vendor(&op)?;
            let mut outputs = Vec::with_capacity(problem.outputs.len());
            for &i in &problem.outputs {
                let mut out = vec![0u8; problem.buffers[i].bytes];
                backend.download(working[i], &mut out)?;
                outputs.push(out);
            }
            let verdict = task.check(size, &problem, &reference, &outputs);
            Ok(if verdict.passed {
                VendorRun::Correct {
                    time: TimeStats::from_samples(samples),
                    warmups: warmups as u32,
                    metric: verdict.metric,
                    error: verdict.value,
                    tolerance: verdict.tolerance,
                }
            } else {
                VendorRun::WrongResult {
                    metric: verdict.metric,
                    error: verdict.value,
                    tolerance: verdict.tolerance,
                }
            })
        })();
        // The library's outputs are the answer: wiped before the memory
        // can back a later candidate's allocation.
        for (b, spec) in working.into_iter().zip(&problem.buffers) {
            let _ = self.backend.fill_buffer(b, 0, spec.bytes);
            self.backend.free(b);
        }
        run
    }

    /// How many of the pristine copies in use no longer hold what was
    /// uploaded (a keyed checksum per buffer, on the device).
    fn pristine_changed(
        &mut self,
        utility: &Utility,
        records: &[PristineRecord],
    ) -> Result<u32, BackendError> {
        let mut changed = 0;
        for r in records {
            utility.zero_counters(&mut self.backend)?;
            self.backend
                .run_timed(&[utility.keyed_sum(r.buffer, r.words)])?;
            let sum = utility.read_counters(&mut self.backend)?[device::SLOT_CHECKSUM as usize];
            changed += u32::from(sum != r.checksum);
        }
        Ok(changed)
    }

    /// Each kernel's achievable occupancy at the block of its first launch,
    /// once (the first size sets it). A runtime that cannot say leaves it
    /// unset; an error there is not the candidate's.
    fn note_occupancy(
        &self,
        kernels: &[KernelId],
        launches: &[PendingLaunch],
        resources: &mut [KernelResources],
    ) {
        for (k, r) in kernels.iter().zip(resources.iter_mut()) {
            if r.occupancy.is_some() {
                continue;
            }
            if let Some(l) = launches.iter().find(|l| l.kernel == *k) {
                let threads = l.local.iter().product::<u32>();
                r.occupancy = self.backend.occupancy(*k, threads, 0).ok().flatten();
            }
        }
    }

    /// Turn the task's launch specs into launches with concrete block shapes.
    /// A block the candidate declares replaces the task's default and must
    /// fit the kernel's limit; an undeclared default block is halved (z
    /// first, then y, then x) while it exceeds the limit, as the Metal-Sci
    /// host does; a fixed block that exceeds it is an error.
    fn resolve_launches(
        &self,
        task: &Task,
        problem: &Problem,
        kernels: &[KernelId],
        declared: &BlockDeclarations,
        triton: bool,
    ) -> Result<Vec<PendingLaunch>, BackendError> {
        if triton {
            // A Triton kernel's grid is the candidate's own declaration,
            // in programs, and its block Triton's; the backend computes
            // both from the launch's arguments (kevo_triton::TritonBackend).
            return Ok(problem
                .launches
                .iter()
                .map(|spec| PendingLaunch {
                    kernel: kernels[spec.kernel],
                    global: spec.threads.map(|t| t.max(1)),
                    local: [1, 1, 1],
                    args: spec.args.clone(),
                })
                .collect());
        }
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
                let name = names[spec.kernel].as_str();
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

/// What one size's runs left for the checks.
struct RunOutcome {
    /// A run that already failed (a guard hit, a timed run that is wrong).
    failed: Option<Verdict>,
    samples: Vec<f64>,
    warmups: usize,
    timed_outputs: Vec<Vec<u8>>,
    outputs: Vec<Vec<u8>>,
    modified: Option<(String, usize)>,
    /// Pristine copies whose contents changed.
    pristine_changed: u32,
}

impl RunOutcome {
    fn failed(verdict: Verdict) -> Self {
        RunOutcome {
            failed: Some(verdict),
            samples: Vec::new(),
            warmups: 0,
            timed_outputs: Vec::new(),
            outputs: Vec::new(),
            modified: None,
            pristine_changed: 0,
        }
    }
}

/// Where an evaluation is, for a supervisor that bounds each stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage<'a> {
    Compile,
    Size(&'a str),
}

/// A candidate the compiler would see differently from kevo: a NUL byte
/// ends the source for NVRTC (kevo would still parse the declarations after
/// it), and a carriage return not followed by a line feed ends a line for
/// the compiler but not for kevo's line-based parsing. Either is rejected as
/// a compile error naming the line.
fn source_rejection(source: &str, extension: &str) -> Option<Outcome> {
    let bytes = source.as_bytes();
    let (at, what) = bytes.iter().enumerate().find_map(|(i, &b)| match b {
        0 => Some((i, "a NUL byte")),
        b'\r' if bytes.get(i + 1) != Some(&b'\n') => {
            Some((i, "a carriage return without a line feed"))
        }
        _ => None,
    })?;
    let line = source[..at].matches('\n').count() + 1;
    let message =
        format!("line {line}: the source contains {what}; kernel source must be plain text lines");
    Some(Outcome::CompileError {
        diagnostics: kevo_backend::CompileDiagnostics::from_log(format!(
            "candidate.{extension}:{line}:1: error: the source contains {what}"
        )),
        message,
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
    fn a_nul_byte_is_a_compile_error_naming_its_line() {
        let o = source_rejection("__kernel void f() {}\n// x\0 kevo: block 1024\n", "cl").unwrap();
        assert!(
            o.summary().contains("line 2") && o.summary().contains("NUL"),
            "{}",
            o.summary()
        );
        assert!(source_rejection("__kernel void f() {}\r\n// ok\r\n", "cl").is_none());
        let o = source_rejection("// a\r// kevo: block 64\n", "cl").unwrap();
        assert!(
            o.summary().contains("line 1") && o.summary().contains("carriage return"),
            "{}",
            o.summary()
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
    fn time_stats_report_quartiles_and_a_robust_spread() {
        // One outlier moves min-max, not the interquartile range.
        let t = TimeStats::from_samples(vec![1.0, 1.0, 1.0, 1.0, 1.02, 1.0, 1.0, 1.0, 1.0, 9.0]);
        assert_eq!(t.q1_s, 1.0);
        assert!((t.q3_s - 1.0).abs() < 1e-12, "{}", t.q3_s);
        assert!(t.spread < 0.01, "{}", t.spread);
        let t = TimeStats::from_samples(vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((t.q1_s, t.q3_s), (2.0, 4.0));
        assert!((t.spread - 2.0 / 3.0).abs() < 1e-12);
    }
}
