//! The per-size run protocol of the crate documentation, one step per
//! sentence: the size's inputs drawn and its launches resolved; every
//! buffer restored from its pristine copy and every guard re-armed before
//! each run; random warm-ups; timed runs until their spread is small, each
//! later one compared with the first on the device; one verification run
//! on fresh inputs whose outputs were pre-filled with NaN; then the checks
//! (outputs against their references, inputs and pristine copies
//! untouched) and the size's result.
//!
//! The order of these steps is what makes the protocol honest: keep it.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use kevo_backend::{Backend, BackendError, BufferId, KernelId, Launch, ModuleId};
use kevo_tasks::{BlockDeclarations, Problem, Reference, Size, Task, Verdict};
use rand::Rng;

use crate::ahead::CacheKey;
use crate::device::{self, DeviceBuffers, PendingLaunch, Utility};
use crate::pristine::PristineRecord;
use crate::{Evaluator, KernelResources, SizeResult, TimeStats, WallTimes, placement};

/// What every size of one evaluation shares: the compiled candidate and
/// how its runs are set up.
pub(crate) struct Candidate<'a> {
    pub(crate) task: &'a Task,
    pub(crate) module: ModuleId,
    pub(crate) kernels: &'a [KernelId],
    /// The blocks the candidate declares for its kernels.
    pub(crate) declared: &'a BlockDeclarations,
    /// The verification seed's index in the pool.
    pub(crate) seed_index: u64,
    /// Whether shared and local memory are overwritten after every run.
    pub(crate) scrub: bool,
}

/// What one size's runs need, drawn before the first of them.
struct SizeSetup {
    /// The timed inputs and their seed.
    timed: Arc<Problem>,
    tseed: u64,
    /// The verification inputs and their seed.
    verify: Arc<Problem>,
    vseed: u64,
    /// The launches, their blocks resolved.
    launches: Vec<PendingLaunch>,
    /// The timed inputs' reference.
    timed_reference: Reference,
    warmups: usize,
    /// What shared and local memory are overwritten with after each run.
    scrub_pattern: Option<u32>,
}

/// One size's runs in progress on the device: what the steps share.
struct Runs<'a> {
    task: &'a Task,
    module: ModuleId,
    size: &'a Size,
    setup: &'a SizeSetup,
    /// The evaluator's own kernels, out of the evaluator meanwhile.
    utility: &'a Utility,
    device: DeviceBuffers,
    /// Host time spent checking differing timed runs: not device time.
    check_s: f64,
}

/// What a step of the runs comes to: `Break` with the verdict of a run
/// that failed, which ends the size's runs, or `Continue` with what the
/// step made.
type RunStep<T> = Result<ControlFlow<Verdict, T>, BackendError>;

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

impl<B: Backend> Evaluator<B> {
    /// One size of the candidate, by the protocol: its setup, its runs on
    /// the device, the checks of what they left, and its result.
    pub(crate) fn run_size(
        &mut self,
        c: &Candidate<'_>,
        size: &Size,
        wall: &mut WallTimes,
        resources: &mut [KernelResources],
    ) -> Result<SizeResult, BackendError> {
        let setup = self.set_up_size(c, size, wall, resources)?;
        let mut run = self.run_on_device(c, size, &setup, wall)?;
        let mut verdict = match run.failed.take() {
            Some(v) => v,
            None => self.check_outputs(c.task, size, &setup, &run, wall)?,
        };
        fail_on_tampering(&mut verdict, &run);
        Ok(self.size_result(c.task, size, &setup.timed, verdict, run))
    }

    /// What is drawn before the size's first run: both input sets, the
    /// launches with their blocks resolved (and the kernels' occupancy at
    /// them), the timed inputs' reference, the warm-up count and the scrub
    /// pattern.
    fn set_up_size(
        &mut self,
        c: &Candidate<'_>,
        size: &Size,
        wall: &mut WallTimes,
        resources: &mut [KernelResources],
    ) -> Result<SizeSetup, BackendError> {
        let task = c.task;
        let tseed = self.timed_seed(task);
        let timed = self.problem(task, size, tseed, wall);
        let vseed = self.verify_seed(task, c.seed_index);
        let verify = self.problem(task, size, vseed, wall);
        let triton = self.backend.dialect() == kevo_backend::Dialect::Triton;
        let launches = self.resolve_launches(task, &timed, c.kernels, c.declared, triton)?;
        self.note_occupancy(c.kernels, &launches, resources);
        // Needed before the runs: a timed run whose outputs differ from the
        // first one's is checked on its own as soon as it is seen.
        let timed_reference = self.reference(task, size, tseed, &timed, wall)?;
        let mut rng = rand::rng();
        let warmups = self.config.draw_warmups();
        let scrub_pattern = c.scrub.then(|| rng.random::<u32>());
        Ok(SizeSetup {
            timed,
            tseed,
            verify,
            vseed,
            launches,
            timed_reference,
            warmups,
            scrub_pattern,
        })
    }

    /// The size's runs on the device, with the utility kernels out of
    /// `self` meanwhile; the working buffers are freed whatever happened,
    /// and the device time (less the host checks of differing timed runs)
    /// is added to `wall`.
    fn run_on_device(
        &mut self,
        c: &Candidate<'_>,
        size: &Size,
        setup: &SizeSetup,
        wall: &mut WallTimes,
    ) -> Result<RunOutcome, BackendError> {
        let t = Instant::now();
        let timed_key = (c.task.content_hash().to_string(), size.clone(), setup.tseed);
        let verify_key = (c.task.content_hash().to_string(), size.clone(), setup.vseed);
        let utility = self.utility.take().expect("compiled before the first size");
        let mut runs = Runs {
            task: c.task,
            module: c.module,
            size,
            setup,
            utility: &utility,
            device: DeviceBuffers::default(),
            check_s: 0.0,
        };
        let run = self.run_protocol(&mut runs, timed_key, verify_key);
        runs.device.free(&mut self.backend);
        let check_s = runs.check_s;
        self.utility = Some(utility);
        wall.device_s += t.elapsed().as_secs_f64() - check_s;
        wall.check_s += check_s;
        run
    }

    /// The runs in order, the first that fails ending them: buffers
    /// staged, warm-ups, timed runs, the first timed run's outputs kept,
    /// the verification run and its outputs, then what the runs may have
    /// changed (inputs, pristine copies).
    fn run_protocol(
        &mut self,
        r: &mut Runs<'_>,
        timed_key: CacheKey,
        verify_key: CacheKey,
    ) -> Result<RunOutcome, BackendError> {
        let (setup, utility) = (r.setup, r.utility);
        let (verify_pristine, records) = self.stage_buffers(r, timed_key, verify_key)?;
        let launches = r.device.bind(&setup.launches)?;
        if let ControlFlow::Break(failed) = self.warm_ups(r, &launches)? {
            return Ok(RunOutcome::failed(failed));
        }
        let samples = match self.timed_runs(r, &launches)? {
            ControlFlow::Continue(samples) => samples,
            ControlFlow::Break(failed) => return Ok(RunOutcome::failed(failed)),
        };
        // The first timed run is checked against the reference; every
        // later one equalled it or was checked itself.
        let timed_outputs =
            r.device
                .download_outputs(&mut self.backend, &setup.timed, true, &mut self.scratch)?;
        if let ControlFlow::Break(failed) = self.verification_run(r, verify_pristine, &launches)? {
            return Ok(RunOutcome::failed(failed));
        }
        let outputs = r.device.download_outputs(
            &mut self.backend,
            &setup.verify,
            false,
            &mut self.scratch,
        )?;
        let modified = r
            .device
            .modified_input(&mut self.backend, utility, &setup.verify)?;
        let pristine_changed = self.pristine_changed(utility, &records)?;
        Ok(RunOutcome {
            failed: None,
            samples,
            warmups: setup.warmups,
            timed_outputs,
            outputs,
            modified,
            pristine_changed,
        })
    }

    /// The pristine copies of both input sets (neither evicted for the
    /// other), the canary tails of every copy in use watched after each
    /// run, and the working buffers allocated. Returns the verification
    /// inputs' pristine copies and the records of every copy in use.
    fn stage_buffers(
        &mut self,
        r: &mut Runs<'_>,
        timed_key: CacheKey,
        verify_key: CacheKey,
    ) -> Result<(Vec<Option<BufferId>>, Vec<PristineRecord>), BackendError> {
        let (setup, utility) = (r.setup, r.utility);
        r.device.pristine = self.pristine.get(
            &mut self.backend,
            timed_key.clone(),
            &setup.timed,
            &[&verify_key],
            utility.key,
        )?;
        let verify_pristine = self.pristine.get(
            &mut self.backend,
            verify_key.clone(),
            &setup.verify,
            &[&timed_key],
            utility.key,
        )?;
        let mut in_use = r.device.pristine.clone();
        in_use.extend(verify_pristine.iter().copied());
        let records = self.pristine.records_of(&in_use);
        r.device.watched = records
            .iter()
            .map(|record| (record.buffer, record.tail_at, record.tail_words))
            .collect();
        r.device.allocate(&mut self.backend, &setup.timed)?;
        Ok((verify_pristine, records))
    }

    /// The warm-up runs, each on restored buffers and its guards checked.
    fn warm_ups(&mut self, r: &mut Runs<'_>, launches: &[Launch]) -> RunStep<()> {
        let (setup, utility) = (r.setup, r.utility);
        for k in 0..setup.warmups {
            r.device
                .reset(&mut self.backend, utility, &setup.timed, r.module)?;
            self.backend.run_timed(launches)?;
            let (guards, _) = r.device.after_run(
                &mut self.backend,
                utility,
                &setup.timed,
                false,
                setup.scrub_pattern,
            )?;
            if guards > 0 {
                let run = format!("warm-up {k}");
                let failed = self.guard_failure(r, &setup.timed, &run, guards)?;
                return Ok(ControlFlow::Break(failed));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The timed runs, until they are enough: each on restored buffers,
    /// timed on the device clock, its guards checked; the first one's
    /// outputs snapshotted, every later one's compared with them on the
    /// device. Returns the times.
    fn timed_runs(&mut self, r: &mut Runs<'_>, launches: &[Launch]) -> RunStep<Vec<f64>> {
        let (setup, utility) = (r.setup, r.utility);
        let mut samples: Vec<f64> = Vec::with_capacity(self.config.timed_runs);
        let mut timed_s = 0.0;
        loop {
            let k = samples.len();
            r.device
                .reset(&mut self.backend, utility, &setup.timed, r.module)?;
            let seconds = self.backend.run_timed(launches)?.seconds();
            samples.push(seconds);
            timed_s += seconds;
            let (guards, differing) = r.device.after_run(
                &mut self.backend,
                utility,
                &setup.timed,
                k > 0,
                setup.scrub_pattern,
            )?;
            if guards > 0 {
                let run = format!("timed run {k}");
                let failed = self.guard_failure(r, &setup.timed, &run, guards)?;
                return Ok(ControlFlow::Break(failed));
            }
            if k == 0 {
                r.device.take_snapshot(&mut self.backend, &setup.timed)?;
            } else if differing > 0
                && let ControlFlow::Break(failed) = self.check_differing_run(r, k)?
            {
                return Ok(ControlFlow::Break(failed));
            }
            if self.config.timing_done(&samples, timed_s) {
                break;
            }
        }
        Ok(ControlFlow::Continue(samples))
    }

    /// Timed run `k`, not bit-identical to the first one (atomics, or a
    /// kernel that is right only sometimes), checked on its own against
    /// the timed inputs' reference.
    fn check_differing_run(&mut self, r: &mut Runs<'_>, k: usize) -> RunStep<()> {
        let setup = r.setup;
        let outputs =
            r.device
                .download_outputs(&mut self.backend, &setup.timed, false, &mut self.scratch)?;
        let c = Instant::now();
        let verdict = r
            .task
            .check(r.size, &setup.timed, &setup.timed_reference, &outputs);
        r.check_s += c.elapsed().as_secs_f64();
        self.scratch.extend(outputs);
        if !verdict.passed {
            return Ok(ControlFlow::Break(Verdict {
                metric: format!("{} (timed run {k})", verdict.metric),
                ..verdict
            }));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The verification run: fresh inputs from their pristine copies,
    /// outputs pre-filled with NaN, its guards checked.
    fn verification_run(
        &mut self,
        r: &mut Runs<'_>,
        verify_pristine: Vec<Option<BufferId>>,
        launches: &[Launch],
    ) -> RunStep<()> {
        let (setup, utility) = (r.setup, r.utility);
        r.device.pristine = verify_pristine;
        r.device
            .reset(&mut self.backend, utility, &setup.verify, r.module)?;
        self.backend.run_timed(launches)?;
        let (guards, _) = r.device.after_run(
            &mut self.backend,
            utility,
            &setup.verify,
            false,
            setup.scrub_pattern,
        )?;
        if guards > 0 {
            let v = self.guard_failure(r, &setup.verify, "the verification run", guards)?;
            return Ok(ControlFlow::Break(v));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The verdict of `run`, which wrote past a buffer (`words` changed
    /// guard words in all): the buffer whose guard it hit, and how many
    /// bytes.
    fn guard_failure(
        &mut self,
        r: &Runs<'_>,
        problem: &Problem,
        run: &str,
        words: u32,
    ) -> Result<Verdict, BackendError> {
        let (name, bytes) = r
            .device
            .guard_owner(&mut self.backend, r.utility, problem)?
            .unwrap_or(("?".to_string(), 4 * words as usize));
        Ok(Verdict {
            passed: false,
            metric: format!("out_of_bounds_bytes({name}) in {run}"),
            value: bytes as f64,
            tolerance: Some(0.0),
        })
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

    /// The verification run's outputs checked against the reference of its
    /// inputs, then (if they pass) the first timed run's against theirs;
    /// the time taken is added to `wall`.
    fn check_outputs(
        &mut self,
        task: &Task,
        size: &Size,
        setup: &SizeSetup,
        run: &RunOutcome,
        wall: &mut WallTimes,
    ) -> Result<Verdict, BackendError> {
        let reference = self.reference(task, size, setup.vseed, &setup.verify, wall)?;
        let t = Instant::now();
        let mut verdict = task.check(size, &setup.verify, &reference, &run.outputs);
        if verdict.passed {
            let timed_verdict = task.check(
                size,
                &setup.timed,
                &setup.timed_reference,
                &run.timed_outputs,
            );
            if !timed_verdict.passed {
                verdict = Verdict {
                    metric: format!("{} (timed run 0)", timed_verdict.metric),
                    ..timed_verdict
                };
            }
        }
        wall.check_s += t.elapsed().as_secs_f64();
        Ok(verdict)
    }

    /// The size's result: the verdict, the timed runs' statistics, the
    /// achieved rate against the ceiling, and whether it is faster than
    /// the hardware allows. The runs' host buffers go back to the pool.
    fn size_result(
        &mut self,
        task: &Task,
        size: &Size,
        timed: &Problem,
        verdict: Verdict,
        run: RunOutcome,
    ) -> SizeResult {
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
        SizeResult {
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
        }
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
}

/// A size whose runs changed an input or a pristine copy fails, however
/// right its outputs; the first such change names the failure.
fn fail_on_tampering(verdict: &mut Verdict, run: &RunOutcome) {
    let failures = [
        run.modified
            .as_ref()
            .map(|(name, words)| (format!("input_modified_words({name})"), *words as f64)),
        (run.pristine_changed > 0).then(|| {
            (
                "pristine_copies_modified".to_string(),
                f64::from(run.pristine_changed),
            )
        }),
    ];
    for (metric, value) in failures.into_iter().flatten() {
        if verdict.passed {
            *verdict = Verdict {
                passed: false,
                metric,
                value,
                tolerance: Some(0.0),
            };
        }
    }
}
