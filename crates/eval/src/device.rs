//! The device side of one size: guarded working buffers, snapshots of the
//! first timed run's outputs, and the evaluator's own utility kernels that
//! re-arm and check the guards and compare outputs after every run.
//!
//! Nothing a candidate can write survives from one run to the next: every
//! working buffer is restored, every guard region is re-armed before each
//! run and checked after it, and every allocation is a whole number of
//! [`GRANULE`]s whose every byte is either a buffer the kernel was given or
//! a guard, so there is no mapped-but-unowned slack to hide a result in.

use kevo_backend::{
    Backend, BackendError, BufferId, CompileOptions, Dialect, KernelArg, KernelId, Launch, ModuleId,
};
use kevo_tasks::{Arg, BufferInit, Problem};

/// Allocation granule: every device allocation the evaluator makes is a
/// multiple of this. GPU drivers map memory in 2 MiB pages; an allocation
/// that ended mid-page would leave mapped memory nobody resets.
pub const GRANULE: usize = 2 << 20;
/// Bytes of guard region before every buffer (where the backend can hand a
/// kernel an interior pointer). After the buffer, the guard runs to the end
/// of the allocation: at least this much, up to the next granule.
pub const GUARD_BYTES: usize = 64 << 10;
/// Guard bytes hold this pattern; any other value after a run is an
/// out-of-bounds write.
pub const CANARY: u8 = 0xA5;
const CANARY_WORD: u32 = u32::from_ne_bytes([CANARY; 4]);

/// Counter slots of the utility buffer.
pub const SLOT_GUARDS: u32 = 0;
pub const SLOT_OUTPUTS: u32 = 1;
pub const SLOT_INPUTS: u32 = 2;
pub const SLOT_CHECKSUM: u32 = 3;
const SLOTS: usize = 4;

pub fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m) * m
}

/// The allocation granule on `backend`: [`GRANULE`] on GPUs; a page on CPU
/// devices, whose buffers are host memory a kernel could reach anyway and
/// where re-arming and checking 2 MiB of guard per buffer per run would
/// cost milliseconds.
pub fn granule(backend: &impl Backend) -> usize {
    if backend.info().is_cpu { 4096 } else { GRANULE }
}

/// The evaluator's own kernels (`kernels/utility.{cu,cl}`) and a counter
/// buffer, compiled and allocated once per backend.
pub struct Utility {
    module: ModuleId,
    count_differences: KernelId,
    fill_words: KernelId,
    count_not_equal: KernelId,
    scrub: KernelId,
    keyed_sum: KernelId,
    /// Key of the pristine checksums: drawn once per evaluator.
    pub key: u32,
    scrub_block: u32,
    scrub_blocks: u64,
    pub counters: BufferId,
}

impl Utility {
    pub fn new(backend: &mut impl Backend) -> Result<Utility, BackendError> {
        let source = match backend.dialect().native() {
            Dialect::OpenCl => include_str!("../kernels/utility.cl"),
            Dialect::Cuda => include_str!("../kernels/utility.cu"),
            Dialect::Metal | Dialect::Triton => {
                return Err(BackendError::Runtime(
                    "the evaluator has no utility kernels for Metal yet".into(),
                ));
            }
        };
        let options = CompileOptions {
            fast_math: false,
            ..CompileOptions::default()
        };
        let module = backend
            .compile(source, &options)
            .map_err(|e| BackendError::Runtime(format!("the evaluator's utility kernels: {e}")))?;
        let mut kernel = |name: &str| backend.kernel(module, name);
        let count_differences = kernel("count_differences")?;
        let fill_words = kernel("fill_words")?;
        let count_not_equal = kernel("count_not_equal")?;
        let scrub = kernel("scrub")?;
        let keyed_sum = kernel("keyed_sum")?;
        let limit = backend.kernel_info(scrub)?.max_threads_per_block.max(1);
        let scrub_block = limit.min(256) as u32;
        let scrub_blocks = u64::from(backend.info().compute_units.max(1)) * 8;
        let counters = backend.alloc(GRANULE)?;
        Ok(Utility {
            module,
            count_differences,
            fill_words,
            count_not_equal,
            scrub,
            keyed_sum,
            key: rand::random(),
            scrub_block,
            scrub_blocks,
            counters,
        })
    }

    pub fn release(self, backend: &mut impl Backend) {
        backend.free(self.counters);
        backend.release_module(self.module);
    }

    fn launch(kernel: KernelId, items: u64, args: Vec<KernelArg>) -> Launch {
        let local = 256u32;
        Launch {
            kernel,
            global: [
                items.max(1).div_ceil(u64::from(local)) * u64::from(local),
                1,
                1,
            ],
            local: [local, 1, 1],
            dynamic_shared_bytes: 0,
            args,
        }
    }

    pub fn fill(&self, base: BufferId, offset_words: usize, words: usize) -> Launch {
        Self::launch(
            self.fill_words,
            words as u64,
            vec![
                KernelArg::Buffer(base),
                KernelArg::U32(offset_words as u32),
                KernelArg::U32(words as u32),
                KernelArg::U32(CANARY_WORD),
            ],
        )
    }

    pub fn count_changed_guard(&self, base: BufferId, offset_words: usize, words: usize) -> Launch {
        Self::launch(
            self.count_not_equal,
            words as u64,
            vec![
                KernelArg::Buffer(base),
                KernelArg::U32(offset_words as u32),
                KernelArg::U32(words as u32),
                KernelArg::U32(CANARY_WORD),
                KernelArg::Buffer(self.counters),
                KernelArg::U32(SLOT_GUARDS),
            ],
        )
    }

    pub fn count_differences(&self, a: BufferId, b: BufferId, words: usize, slot: u32) -> Launch {
        Self::launch(
            self.count_differences,
            words as u64,
            vec![
                KernelArg::Buffer(a),
                KernelArg::Buffer(b),
                KernelArg::U32(words as u32),
                KernelArg::Buffer(self.counters),
                KernelArg::U32(slot),
            ],
        )
    }

    pub fn scrub(&self, pattern: u32) -> Launch {
        Launch {
            kernel: self.scrub,
            global: [self.scrub_blocks * u64::from(self.scrub_block), 1, 1],
            local: [self.scrub_block, 1, 1],
            dynamic_shared_bytes: 0,
            args: vec![KernelArg::U32(pattern), KernelArg::U32(7)],
        }
    }

    /// The keyed checksum of the first `words` words of `buffer` into the
    /// checksum slot (see [`keyed_checksum`] for the host's side).
    pub fn keyed_sum(&self, buffer: BufferId, words: usize) -> Launch {
        Launch {
            kernel: self.keyed_sum,
            global: [self.scrub_blocks * u64::from(self.scrub_block), 1, 1],
            local: [self.scrub_block, 1, 1],
            dynamic_shared_bytes: 0,
            args: vec![
                KernelArg::Buffer(buffer),
                KernelArg::U32(words as u32),
                KernelArg::U32(self.key),
                KernelArg::Buffer(self.counters),
                KernelArg::U32(SLOT_CHECKSUM),
            ],
        }
    }

    pub fn zero_counters(&self, backend: &mut impl Backend) -> Result<(), BackendError> {
        backend.fill_buffer(self.counters, 0, 4 * SLOTS)
    }

    pub fn read_counters(&self, backend: &mut impl Backend) -> Result<[u32; SLOTS], BackendError> {
        let mut raw = [0u8; 4 * SLOTS];
        backend.download(self.counters, &mut raw)?;
        let mut out = [0u32; SLOTS];
        for (o, c) in out.iter_mut().zip(raw.chunks_exact(4)) {
            *o = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(out)
    }
}

/// murmur3's 32-bit finaliser.
fn fmix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The host's side of the `keyed_sum` utility kernel over `data`'s whole
/// 32-bit words.
pub fn keyed_checksum(data: &[u8], key: u32) -> u32 {
    use rayon::prelude::*;
    data.par_chunks(4 << 20)
        .enumerate()
        .map(|(c, chunk)| {
            let base = (c * (1 << 20)) as u32;
            chunk.chunks_exact(4).enumerate().fold(0u32, |acc, (k, w)| {
                let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                acc.wrapping_add(fmix(word ^ fmix(base.wrapping_add(k as u32) ^ key)))
            })
        })
        .reduce(|| 0, u32::wrapping_add)
}

/// Guard regions of one buffer inside its allocation `parent`: `lo_bytes`
/// before the kernel's window (zero when the backend cannot hand a kernel an
/// interior pointer) and everything from `hi_offset` to the allocation's end.
pub struct Guards {
    pub parent: BufferId,
    pub lo_bytes: usize,
    pub hi_offset: usize,
    pub total: usize,
}

impl Guards {
    /// (offset, words) of each guard region, in 32-bit words.
    fn regions(&self) -> impl Iterator<Item = (usize, usize)> {
        let lo = (self.lo_bytes > 0).then_some((0, self.lo_bytes / 4));
        let hi = Some((self.hi_offset / 4, (self.total - self.hi_offset) / 4));
        lo.into_iter().chain(hi)
    }
}

/// An allocation of `bytes` with canary-filled guard regions: on both sides
/// when the backend's views alias their parent (CUDA), after it otherwise
/// (the kernel then gets the allocation itself). Buffer sizes must be whole
/// 32-bit words (every task's are).
pub fn guarded(
    backend: &mut impl Backend,
    bytes: usize,
) -> Result<(BufferId, Guards), BackendError> {
    if !bytes.is_multiple_of(4) {
        return Err(BackendError::Runtime(format!(
            "buffer of {bytes} bytes is not a whole number of 32-bit words"
        )));
    }
    if backend.views_alias() {
        let total = round_up(GUARD_BYTES + bytes + GUARD_BYTES, granule(backend));
        let parent = backend.alloc(total)?;
        match backend.view(parent, GUARD_BYTES, bytes) {
            Ok(working) => {
                let guards = Guards {
                    parent,
                    lo_bytes: GUARD_BYTES,
                    hi_offset: GUARD_BYTES + bytes,
                    total,
                };
                return Ok((working, guards));
            }
            Err(_) => backend.free(parent),
        }
    }
    let total = round_up(bytes + GUARD_BYTES, granule(backend));
    let parent = backend.alloc(total)?;
    let guards = Guards {
        parent,
        lo_bytes: 0,
        hi_offset: bytes,
        total,
    };
    Ok((parent, guards))
}

/// The device side of one size: a working buffer per problem buffer (the
/// middle of a guarded allocation when the backend has views), the pristine
/// copy of its initial contents to restore it from, and a snapshot of each
/// output after the first timed run.
#[derive(Default)]
pub struct DeviceBuffers {
    pub working: Vec<BufferId>,
    pub pristine: Vec<Option<BufferId>>,
    pub guards: Vec<Guards>,
    pub snapshots: Vec<BufferId>,
    /// (buffer, first word, words) of other canary regions checked after
    /// every run: the tails of the pristine copies in use.
    pub watched: Vec<(BufferId, usize, usize)>,
}

impl DeviceBuffers {
    pub fn allocate(
        &mut self,
        backend: &mut impl Backend,
        problem: &Problem,
    ) -> Result<(), BackendError> {
        for spec in &problem.buffers {
            let (working, guards) = guarded(backend, spec.bytes)?;
            self.working.push(working);
            self.guards.push(guards);
        }
        for &i in &problem.outputs {
            let snapshot = backend.alloc(round_up(problem.buffers[i].bytes, granule(backend)))?;
            self.snapshots.push(snapshot);
        }
        Ok(())
    }

    /// Restore every buffer, inputs included (so a kernel that scribbles on
    /// its inputs cannot speed up the next run), every module-scope
    /// variable, re-arm every guard region and zero the counters.
    pub fn reset(
        &self,
        backend: &mut impl Backend,
        utility: &Utility,
        problem: &Problem,
        module: ModuleId,
    ) -> Result<(), BackendError> {
        backend.reset_module_state(module)?;
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
        let fills: Vec<Launch> = self
            .guards
            .iter()
            .flat_map(|g| g.regions().map(|(at, n)| utility.fill(g.parent, at, n)))
            .collect();
        backend.run_timed(&fills)?;
        utility.zero_counters(backend)
    }

    /// After a run: count changed guard words (slot 0), and for timed runs
    /// after the first, output words that differ from the snapshot (slot 1);
    /// then overwrite shared and local memory when the candidate uses them.
    pub fn after_run(
        &self,
        backend: &mut impl Backend,
        utility: &Utility,
        problem: &Problem,
        compare_outputs: bool,
        scrub: Option<u32>,
    ) -> Result<(u32, u32), BackendError> {
        let mut launches: Vec<Launch> = self
            .guards
            .iter()
            .flat_map(|g| {
                g.regions()
                    .map(|(at, n)| utility.count_changed_guard(g.parent, at, n))
            })
            .chain(
                self.watched
                    .iter()
                    .map(|&(b, at, n)| utility.count_changed_guard(b, at, n)),
            )
            .collect();
        if compare_outputs {
            for (k, &i) in problem.outputs.iter().enumerate() {
                let words = problem.buffers[i].bytes / 4;
                launches.push(utility.count_differences(
                    self.working[i],
                    self.snapshots[k],
                    words,
                    SLOT_OUTPUTS,
                ));
            }
        }
        if let Some(pattern) = scrub {
            launches.push(utility.scrub(pattern));
        }
        backend.run_timed(&launches)?;
        let c = utility.read_counters(backend)?;
        Ok((c[SLOT_GUARDS as usize], c[SLOT_OUTPUTS as usize]))
    }

    /// The first buffer whose guards changed, with the changed bytes (the
    /// slow path after `after_run` counted a hit).
    pub fn guard_owner(
        &self,
        backend: &mut impl Backend,
        utility: &Utility,
        problem: &Problem,
    ) -> Result<Option<(String, usize)>, BackendError> {
        for (i, g) in self.guards.iter().enumerate() {
            utility.zero_counters(backend)?;
            let launches: Vec<Launch> = g
                .regions()
                .map(|(at, n)| utility.count_changed_guard(g.parent, at, n))
                .collect();
            backend.run_timed(&launches)?;
            let words = utility.read_counters(backend)?[SLOT_GUARDS as usize] as usize;
            if words > 0 {
                return Ok(Some((problem.buffers[i].name.clone(), 4 * words)));
            }
        }
        Ok(None)
    }

    /// Keep the outputs of this run for comparison with later runs.
    pub fn take_snapshot(
        &self,
        backend: &mut impl Backend,
        problem: &Problem,
    ) -> Result<(), BackendError> {
        for (k, &i) in problem.outputs.iter().enumerate() {
            backend.copy_buffer(self.working[i], self.snapshots[k], problem.buffers[i].bytes)?;
        }
        Ok(())
    }

    /// Download the outputs (of the working buffers, or of the snapshots),
    /// reusing host buffers from `pool`.
    pub fn download_outputs(
        &self,
        backend: &mut impl Backend,
        problem: &Problem,
        from_snapshot: bool,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut outputs = Vec::new();
        for (k, &i) in problem.outputs.iter().enumerate() {
            let bytes = problem.buffers[i].bytes;
            // The smallest pooled buffer that fits, else a new one.
            let pick = pool
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= bytes)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(k, _)| k);
            let mut out = pick.map(|k| pool.swap_remove(k)).unwrap_or_default();
            out.resize(bytes, 0);
            out.truncate(bytes);
            let source = if from_snapshot {
                self.snapshots[k]
            } else {
                self.working[i]
            };
            backend.download(source, &mut out)?;
            outputs.push(out);
        }
        Ok(outputs)
    }

    /// The first read-only input that differs from what was uploaded, with
    /// the number of changed 32-bit words, compared on the device against
    /// the pristine copy.
    pub fn modified_input(
        &self,
        backend: &mut impl Backend,
        utility: &Utility,
        problem: &Problem,
    ) -> Result<Option<(String, usize)>, BackendError> {
        for (i, spec) in problem.buffers.iter().enumerate() {
            let (kevo_tasks::Access::ReadOnly, BufferInit::Data(_)) = (spec.access, &spec.init)
            else {
                continue;
            };
            let Some(pristine) = self.pristine.get(i).copied().flatten() else {
                continue;
            };
            utility.zero_counters(backend)?;
            backend.run_timed(&[utility.count_differences(
                self.working[i],
                pristine,
                spec.bytes / 4,
                SLOT_INPUTS,
            )])?;
            let changed = utility.read_counters(backend)?[SLOT_INPUTS as usize] as usize;
            if changed > 0 {
                return Ok(Some((spec.name.clone(), changed)));
            }
        }
        Ok(None)
    }

    /// Views first, then the allocations they live in.
    pub fn free(&mut self, backend: &mut impl Backend) {
        for (working, guards) in self.working.drain(..).zip(self.guards.drain(..)) {
            if guards.parent != working {
                backend.free(working);
            }
            backend.free(guards.parent);
        }
        for s in self.snapshots.drain(..) {
            backend.free(s);
        }
        self.watched.clear();
        // The pristine buffers belong to the evaluator's cache.
        self.pristine.clear();
    }
}

/// A launch whose buffer arguments still refer to the problem's buffer list.
pub struct PendingLaunch {
    pub kernel: KernelId,
    pub global: [u64; 3],
    pub local: [u32; 3],
    pub args: Vec<Arg>,
}

impl DeviceBuffers {
    pub fn bind(&self, pending: &[PendingLaunch]) -> Result<Vec<Launch>, BackendError> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyed_checksum_sees_any_change_and_depends_on_the_key() {
        let data: Vec<u8> = (0..(9 << 20) + 12).map(|i| (i * 7 % 251) as u8).collect();
        let sum = keyed_checksum(&data, 42);
        assert_eq!(
            sum,
            keyed_checksum(&data, 42),
            "deterministic across chunks"
        );
        assert_ne!(sum, keyed_checksum(&data, 43));
        // Flipping the top bit of two words cancels in a plain sum; not here.
        let mut two = data.clone();
        two[3] ^= 0x80;
        two[7] ^= 0x80;
        assert_ne!(sum, keyed_checksum(&two, 42));
        // Swapping two words is seen: the index is mixed in.
        let mut swapped = data.clone();
        swapped.swap(0, 4);
        swapped.swap(1, 5);
        swapped.swap(2, 6);
        swapped.swap(3, 7);
        assert_ne!(data[0..4], data[4..8]);
        assert_ne!(sum, keyed_checksum(&swapped, 42));
    }
}
