//! A size's inputs and references, per (task, size, seed): drawn from the
//! task, cached across candidates within a memory budget, prepared ahead on
//! spare cores while the device works, and for a task with a reference
//! kernel computed on this device.

use std::sync::Arc;
use std::time::Instant;

use kevo_backend::{Backend, BackendError, BufferId, ModuleId};
use kevo_tasks::{BlockDeclarations, BufferInit, Problem, Reference, Size, Task};

use crate::ahead::{self, CacheKey};
use crate::device::DeviceBuffers;
use crate::{Evaluator, WallTimes, source_rules};

/// References are about as large as the output buffers.
fn reference_bytes(problem: &Problem) -> usize {
    problem
        .outputs
        .iter()
        .map(|&i| problem.buffers[i].bytes)
        .sum::<usize>()
        + 256
}

/// Problems are about as large as their initial contents.
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
    /// The problem of `task` at (`size`, `seed`): cached, prepared ahead,
    /// or drawn now (its time added to `wall`).
    pub(crate) fn problem(
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
    pub(crate) fn settle_ahead(&mut self, wall: &mut WallTimes) {
        let (done, waited) = self.ahead.settle();
        wall.inputs_s += waited;
        for (key, prepared) in done {
            self.keep_prepared(key, prepared);
        }
    }

    /// Starts preparing the next evaluation's verification inputs and CPU
    /// references at `sizes` on spare cores, where the device is not the
    /// CPU and they are not cached yet (see [`ahead`]).
    pub(crate) fn prepare_next(&mut self, task: &Task, sizes: &[Size]) {
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

    /// The reference of `problem`: cached, prepared ahead, or computed now
    /// (on the CPU, or by the task's reference kernel on this device).
    pub(crate) fn reference(
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
        let run = self.run_reference_kernel(task, module, problem, &declared, &mut buffers);
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

    /// One run of the reference kernel on buffers initialised as the task
    /// says, each pushed to `buffers` for the caller to wipe and free
    /// whatever happens; its outputs.
    fn run_reference_kernel(
        &mut self,
        task: &Task,
        module: ModuleId,
        problem: &Problem,
        declared: &BlockDeclarations,
        buffers: &mut Vec<BufferId>,
    ) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut kernels = Vec::new();
        for name in task.kernel_names() {
            kernels.push(self.backend.kernel(module, name)?);
        }
        let pending = self.resolve_launches(task, problem, &kernels, declared, false)?;
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
    }
}
