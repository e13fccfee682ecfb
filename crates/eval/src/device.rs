//! The device side of one size: guarded working buffers, snapshots of the
//! first timed run's outputs, and the evaluator's own utility kernels that
//! re-arm and check the guards and compare outputs after every run.
//!
//! Nothing a candidate can write survives from one run to the next: every
//! working buffer is restored, every guard region is re-armed before each
//! run and checked after it, and every allocation is a whole number of
//! [`GRANULE`]s whose every byte is either a buffer the kernel was given or
//! a guard, so there is no mapped-but-unowned slack to hide a result in.

use std::cell::{Cell, RefCell};

use kevo_backend::{
    Backend, BackendError, BufferId, CompileOptions, DeviceInfo, Dialect, KernelArg, KernelId,
    KernelInfo, Launch, ModuleId,
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
/// The scrub kernel's rendezvous counter (OpenCL on a CPU device, see
/// `kernels/utility.cl`), past the slots `read_counters` reads back; its
/// top bit says that some work-group gave up waiting.
const SLOT_ARRIVALS: u32 = SLOTS as u32;
const GAVE_UP: u32 = 1 << 31;
/// Polls a scrub work-group waits for the others on its first try (about
/// 10 ms on a 2020s CPU), and tries in all: each retry waits 4 times
/// longer, up to about a second.
const RENDEZVOUS_POLLS: u32 = 1 << 20;
const RENDEZVOUS_TRIES: u32 = 4;

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

/// What the scrub after a run must overwrite: the most shared/local memory
/// per block and private memory per thread that any kernel of the run
/// declares (static and dynamic shared memory on CUDA, as
/// `KernelInfo::static_shared_bytes` reports both for Triton).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrubNeed {
    pub local_bytes: u64,
    pub private_bytes: u64,
}

impl ScrubNeed {
    pub fn include(&mut self, info: &KernelInfo) {
        self.local_bytes = self.local_bytes.max(info.static_shared_bytes.unwrap_or(0));
        self.private_bytes = self
            .private_bytes
            .max(info.local_bytes_per_thread.unwrap_or(0));
    }
}

/// The smallest local scrub (16 KB) and private scrub (1 KB per thread).
const MIN_SCRUB_LOCAL: u64 = 16 << 10;
const MIN_SCRUB_PRIVATE: u64 = 1 << 10;

/// Bytes of local memory per block the scrub overwrites for kernels that
/// declare `need`. On a GPU, all a block can have: one block's window can
/// sit anywhere in a multiprocessor's shared memory, so nothing smaller is
/// sure to cover where the candidate's blocks were. On a CPU device (PoCL)
/// every work-group's local variables start at the beginning of its worker
/// thread's arena of `local_mem_bytes`, so covering what the candidate
/// declares suffices, rounded up to a power of two so that few sizes are
/// compiled; scrubbing the whole arena (1 MiB a thread on PoCL) would cost
/// milliseconds a run.
pub fn scrub_local_bytes(info: &DeviceInfo, need: u64) -> u64 {
    let all = info.local_mem_bytes / 4 * 4;
    if info.is_cpu {
        need.max(MIN_SCRUB_LOCAL).next_power_of_two().min(all)
    } else {
        all
    }
}

/// Bytes of private memory per thread the scrub overwrites for kernels that
/// declare `need`: rounded up to a power of two, at least 1 KB (CUDA's
/// default stack), where the thread's next kernel finds it again.
pub fn scrub_private_bytes(need: u64) -> u64 {
    need.max(MIN_SCRUB_PRIVATE).next_power_of_two()
}

/// A scrub kernel compiled for some words of local and private memory,
/// with its launch shape. OpenCL has one kernel, `scrub`, that overwrites
/// both in one launch (one rendezvous of the worker threads on a CPU
/// device); CUDA has `scrub_local`, whose dynamic shared memory takes any
/// size, and `scrub_private`, launched apart because the two fill a
/// multiprocessor differently (see `kernels/utility.cu`).
#[derive(Debug, Clone, Copy)]
struct ScrubKernel {
    local_words: u32,
    private_words: u32,
    kernel: KernelId,
    block: u32,
    blocks: u64,
}

/// The evaluator's own kernels (`kernels/utility.{cu,cl}`) and a counter
/// buffer, compiled and allocated once per backend.
pub struct Utility {
    module: ModuleId,
    count_differences: KernelId,
    fill_words: KernelId,
    count_not_equal: KernelId,
    /// CUDA's shared-memory scrub (dynamic shared memory, any size).
    cuda_scrub_local: Option<ScrubKernel>,
    /// Scrub kernels by size, compiled when a candidate first needs them,
    /// and the modules they came from.
    scrubs: RefCell<Vec<ScrubKernel>>,
    scrub_modules: RefCell<Vec<ModuleId>>,
    /// Whether the device reports the local memory a kernel declares: PoCL
    /// 5 reports 0 local and 0 private bytes for every kernel, so after
    /// every run the scrub covers all of its local memory.
    reports_local_memory: bool,
    keyed_sum: KernelId,
    /// Key of the pristine checksums: drawn once per evaluator.
    pub key: u32,
    scrub_block: u32,
    scrub_blocks: u64,
    pub counters: BufferId,
}

impl Utility {
    fn source(backend: &impl Backend) -> Result<&'static str, BackendError> {
        match backend.dialect().native() {
            Dialect::OpenCl => Ok(include_str!("../kernels/utility.cl")),
            Dialect::Cuda => Ok(include_str!("../kernels/utility.cu")),
            Dialect::Metal | Dialect::Triton => Err(BackendError::Runtime(
                "the evaluator has no utility kernels for Metal yet".into(),
            )),
        }
    }

    fn options(defines: Vec<String>) -> CompileOptions {
        CompileOptions {
            fast_math: false,
            extra_flags: defines,
            ..CompileOptions::default()
        }
    }

    fn is_cuda(backend: &impl Backend) -> bool {
        backend.dialect().native() == Dialect::Cuda
    }

    pub fn new(backend: &mut impl Backend) -> Result<Utility, BackendError> {
        let source = Self::source(backend)?;
        let module = backend
            .compile(source, &Self::options(Vec::new()))
            .map_err(|e| BackendError::Runtime(format!("the evaluator's utility kernels: {e}")))?;
        let cuda = Self::is_cuda(backend);
        let mut kernel = |name: &str| backend.kernel(module, name);
        let count_differences = kernel("count_differences")?;
        let fill_words = kernel("fill_words")?;
        let count_not_equal = kernel("count_not_equal")?;
        let keyed_sum = kernel("keyed_sum")?;
        // The smallest scrub, compiled with the defaults of utility.{cl,cu}.
        let scrub = kernel(if cuda { "scrub_private" } else { "scrub" })?;
        let scrub_local = if cuda {
            Some(kernel("scrub_local")?)
        } else {
            None
        };
        let probe = if cuda {
            None
        } else {
            Some(kernel("local_memory_probe")?)
        };
        let reports_local_memory = match probe {
            Some(probe) => backend.kernel_info(probe)?.static_shared_bytes.unwrap_or(0) >= 256,
            None => true,
        };
        let limit = backend.kernel_info(keyed_sum)?.max_threads_per_block.max(1);
        let scrub_block = limit.min(256) as u32;
        let compute_units = u64::from(backend.info().compute_units.max(1));
        let scrub_blocks = compute_units * 8;
        let local_words = if cuda { 0 } else { MIN_SCRUB_LOCAL / 4 };
        let smallest = Self::shape(
            backend,
            local_words as u32,
            (MIN_SCRUB_PRIVATE / 4) as u32,
            scrub,
        )?;
        let cuda_scrub_local = match scrub_local {
            // One block of all the shared memory a block can have fills a
            // multiprocessor: a block per multiprocessor, twice over in case
            // one is still busy when the first wave is placed.
            Some(kernel) => Some(ScrubKernel {
                local_words: 0,
                private_words: 0,
                kernel,
                block: backend
                    .kernel_info(kernel)?
                    .max_threads_per_block
                    .clamp(1, 1024) as u32,
                blocks: compute_units * 2,
            }),
            None => None,
        };
        let counters = backend.alloc(GRANULE)?;
        Ok(Utility {
            module,
            count_differences,
            fill_words,
            count_not_equal,
            cuda_scrub_local,
            scrubs: RefCell::new(vec![smallest]),
            scrub_modules: RefCell::new(Vec::new()),
            reports_local_memory,
            keyed_sum,
            key: rand::random(),
            scrub_block,
            scrub_blocks,
            counters,
        })
    }

    /// The launch shape of a scrub kernel: blocks of up to 256. On a CPU
    /// device one per compute unit (a worker thread each: the rendezvous
    /// in utility.cl puts one on each). CUDA's private-memory scrub fills
    /// every thread slot of every multiprocessor, each of which has its own
    /// local memory (the occupancy calculator says how many blocks that
    /// takes). Otherwise 8 per compute unit.
    fn shape(
        backend: &impl Backend,
        local_words: u32,
        private_words: u32,
        kernel: KernelId,
    ) -> Result<ScrubKernel, BackendError> {
        let block = backend
            .kernel_info(kernel)?
            .max_threads_per_block
            .clamp(1, 256) as u32;
        let per_unit = if backend.info().is_cpu {
            1
        } else if Self::is_cuda(backend) {
            backend
                .occupancy(kernel, block, 0)?
                .map(|o| o.active_blocks_per_sm)
                .filter(|&b| b > 0)
                .unwrap_or(8)
        } else {
            8
        };
        Ok(ScrubKernel {
            local_words,
            private_words,
            kernel,
            block,
            blocks: u64::from(backend.info().compute_units.max(1)) * u64::from(per_unit),
        })
    }

    /// The scrub kernel for these sizes, compiled now if no earlier
    /// candidate needed them (`local_words` is 0 on CUDA: see
    /// `cuda_scrub_local`).
    fn scrub_kernel(
        &self,
        backend: &mut impl Backend,
        local_words: u32,
        private_words: u32,
    ) -> Result<ScrubKernel, BackendError> {
        if let Some(k) = self
            .scrubs
            .borrow()
            .iter()
            .find(|k| k.local_words == local_words && k.private_words == private_words)
        {
            return Ok(*k);
        }
        let failed = |e: BackendError| {
            BackendError::Runtime(format!(
                "the evaluator's scrub kernel for {} bytes of local and {} bytes of private memory: {e}",
                4 * u64::from(local_words),
                4 * u64::from(private_words),
            ))
        };
        let source = Self::source(backend)?;
        let defines = vec![
            format!("-DKEVO_SCRUB_LOCAL_WORDS={local_words}"),
            format!("-DKEVO_SCRUB_PRIVATE_WORDS={private_words}"),
        ];
        let module = backend
            .compile(source, &Self::options(defines))
            .map_err(failed)?;
        self.scrub_modules.borrow_mut().push(module);
        let name = if Self::is_cuda(backend) {
            "scrub_private"
        } else {
            "scrub"
        };
        let kernel = backend.kernel(module, name).map_err(failed)?;
        let k = Self::shape(backend, local_words, private_words, kernel).map_err(failed)?;
        self.scrubs.borrow_mut().push(k);
        Ok(k)
    }

    /// The launches that overwrite, with values drawn from `pattern`, every
    /// byte of local and private memory that kernels declaring `need` could
    /// read back in their next run: local memory when they declare any
    /// (see [`scrub_local_bytes`]), private memory likewise
    /// ([`scrub_private_bytes`]).
    pub fn scrub(
        &self,
        backend: &mut impl Backend,
        need: ScrubNeed,
        pattern: u32,
    ) -> Result<Vec<Launch>, BackendError> {
        self.scrub_try(backend, need, pattern, 0)
    }

    /// What the scrub must cover for kernels that report `need`, and the
    /// pattern to scrub with: `scrub` from the evaluator, which asks for a
    /// scrub when the candidate's kernels report local or private memory.
    /// A device that reports none for any kernel (PoCL 5) is scrubbed
    /// after every run, all of its local memory and the smallest private
    /// scrub.
    pub fn plan(
        &self,
        backend: &impl Backend,
        need: ScrubNeed,
        scrub: Option<u32>,
    ) -> Option<(ScrubNeed, u32)> {
        if self.reports_local_memory {
            return scrub.map(|pattern| (need, pattern));
        }
        let need = ScrubNeed {
            local_bytes: need.local_bytes.max(backend.info().local_mem_bytes),
            private_bytes: need.private_bytes.max(MIN_SCRUB_PRIVATE),
        };
        Some((need, scrub.unwrap_or_else(rand::random)))
    }

    /// Whether the scrub's work-groups meet so that each of a CPU device's
    /// worker threads runs one (see `kernels/utility.cl`).
    pub fn meets(&self, backend: &impl Backend) -> bool {
        self.cuda_scrub_local.is_none() && backend.info().is_cpu
    }

    /// After a scrub that met (`arrivals` is its counter): scrub again, with
    /// longer waits, while some work-group gave up waiting for the others,
    /// so some worker thread may have run none. An error if the last try
    /// still did.
    pub fn confirm_scrub(
        &self,
        backend: &mut impl Backend,
        need: ScrubNeed,
        pattern: u32,
        mut arrivals: u32,
    ) -> Result<(), BackendError> {
        for attempt in 1..RENDEZVOUS_TRIES {
            if arrivals & GAVE_UP == 0 {
                return Ok(());
            }
            let launches = self.scrub_try(backend, need, pattern, attempt)?;
            backend.run_timed(&launches)?;
            arrivals = self.read_words::<{ SLOTS + 1 }>(backend)?[SLOTS];
        }
        if arrivals & GAVE_UP == 0 {
            return Ok(());
        }
        Err(BackendError::Runtime(format!(
            "the scrub after a run reached only some of the device's {} worker threads in {RENDEZVOUS_TRIES} tries: what the run left in local memory could reach the next run",
            backend.info().compute_units
        )))
    }

    fn scrub_try(
        &self,
        backend: &mut impl Backend,
        need: ScrubNeed,
        pattern: u32,
        attempt: u32,
    ) -> Result<Vec<Launch>, BackendError> {
        let info = backend.info();
        let local_words = match need.local_bytes {
            0 => 0,
            n => (scrub_local_bytes(info, n) / 4) as u32,
        };
        let private_words = match need.private_bytes {
            0 => 0,
            n => (scrub_private_bytes(n) / 4) as u32,
        };
        // OpenCL: the worker threads to wait for (CPU devices: one per
        // compute unit; none on GPUs).
        let threads = if info.is_cpu {
            info.compute_units.max(1)
        } else {
            0
        };
        let launch = |k: &ScrubKernel, dynamic_shared_bytes: u32, args: Vec<KernelArg>| Launch {
            kernel: k.kernel,
            global: [k.blocks * u64::from(k.block), 1, 1],
            local: [k.block, 1, 1],
            dynamic_shared_bytes,
            args,
        };
        let mut launches = Vec::new();
        match &self.cuda_scrub_local {
            Some(shared) => {
                if local_words > 0 {
                    let args = vec![KernelArg::U32(pattern), KernelArg::U32(local_words)];
                    launches.push(launch(shared, 4 * local_words, args));
                }
                if private_words > 0 {
                    let k = self.scrub_kernel(backend, 0, private_words)?;
                    let args = vec![KernelArg::U32(pattern), KernelArg::U32(7)];
                    launches.push(launch(&k, 0, args));
                }
            }
            None if local_words > 0 || private_words > 0 => {
                let k = self.scrub_kernel(backend, local_words, private_words)?;
                // The rendezvous counter starts at 0.
                launches.push(Self::launch(
                    self.fill_words,
                    1,
                    vec![
                        KernelArg::Buffer(self.counters),
                        KernelArg::U32(SLOT_ARRIVALS),
                        KernelArg::U32(1),
                        KernelArg::U32(0),
                    ],
                ));
                let args = vec![
                    KernelArg::U32(pattern),
                    KernelArg::U32(7),
                    KernelArg::Buffer(self.counters),
                    KernelArg::U32(SLOT_ARRIVALS),
                    KernelArg::U32(threads),
                    KernelArg::U32(RENDEZVOUS_POLLS << (2 * attempt)),
                ];
                launches.push(launch(&k, 0, args));
            }
            None => {}
        }
        Ok(launches)
    }

    pub fn release(self, backend: &mut impl Backend) {
        backend.free(self.counters);
        for m in self.scrub_modules.into_inner() {
            backend.release_module(m);
        }
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
        self.read_words(backend)
    }

    /// The first `N` words of the counter buffer.
    fn read_words<const N: usize>(
        &self,
        backend: &mut impl Backend,
    ) -> Result<[u32; N], BackendError> {
        let mut raw = vec![0u8; 4 * N];
        backend.download(self.counters, &mut raw)?;
        let mut out = [0u32; N];
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
    /// The kernels `bind` gave these buffers to, and what the scrub after
    /// their runs must cover (asked of the backend at the first scrub).
    pub(crate) bound: RefCell<Vec<KernelId>>,
    pub(crate) scrub_need: Cell<Option<ScrubNeed>>,
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
    /// then overwrite shared/local and private memory when the candidate
    /// uses them (`scrub`, from the kernels' reports) or the device does
    /// not report them (see [`Utility::plan`]), as much as the kernels bound
    /// to these buffers declare (see [`Utility::scrub`]).
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
        let mut met = None;
        let reported = match scrub {
            Some(_) => self.scrub_need(backend)?,
            None => ScrubNeed::default(),
        };
        if let Some((need, pattern)) = utility.plan(backend, reported, scrub) {
            let scrubs = utility.scrub(backend, need, pattern)?;
            if !scrubs.is_empty() && utility.meets(backend) {
                met = Some((need, pattern));
            }
            launches.extend(scrubs);
        }
        backend.run_timed(&launches)?;
        let c = utility.read_words::<{ SLOTS + 1 }>(backend)?;
        if let Some((need, pattern)) = met {
            utility.confirm_scrub(backend, need, pattern, c[SLOTS])?;
        }
        Ok((c[SLOT_GUARDS as usize], c[SLOT_OUTPUTS as usize]))
    }

    /// What the kernels bound to these buffers could read back from their
    /// previous run: the most local and private memory any of them declares.
    fn scrub_need(&self, backend: &impl Backend) -> Result<ScrubNeed, BackendError> {
        if let Some(need) = self.scrub_need.get() {
            return Ok(need);
        }
        let mut need = ScrubNeed::default();
        for &k in self.bound.borrow().iter() {
            need.include(&backend.kernel_info(k)?);
        }
        self.scrub_need.set(Some(need));
        Ok(need)
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
        self.bound.get_mut().clear();
        self.scrub_need.set(None);
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
    /// The launches of `pending` on these buffers. The kernels are kept:
    /// the scrub after each run covers what they declare.
    pub fn bind(&self, pending: &[PendingLaunch]) -> Result<Vec<Launch>, BackendError> {
        {
            let mut bound = self.bound.borrow_mut();
            for p in pending {
                if !bound.contains(&p.kernel) {
                    bound.push(p.kernel);
                }
            }
            self.scrub_need.set(None);
        }
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

    /// The scrub kernel kevo used before it was sized to the device and the
    /// candidate: 16 KB of local memory per work-group on OpenCL, 48 KB of
    /// shared memory per block on CUDA, and 1 KB of private memory per
    /// thread, in 8 blocks of 256 per compute unit.
    const OLD_SCRUB_CL: &str = "__kernel void scrub(uint pattern, uint stride) {
        __local volatile uint tile[4096];
        volatile uint stack[256];
        for (uint i = get_local_id(0); i < 4096; i += get_local_size(0)) tile[i] = pattern ^ i;
        for (uint i = 0; i < 256; ++i) stack[(i * stride) & 255u] = pattern + i;
    }";
    const OLD_SCRUB_CU: &str =
        "extern \"C\" __global__ void scrub(unsigned int pattern, unsigned int stride) {
        volatile __shared__ unsigned int tile[12288];
        volatile unsigned int stack[256];
        for (unsigned int i = threadIdx.x; i < 12288; i += blockDim.x) tile[i] = pattern ^ i;
        for (unsigned int i = 0; i < 256; ++i) stack[(i * stride) & 255u] = pattern + i;
    }";

    /// Mean wall time of `launches` (after a warm-up), in microseconds.
    fn mean_us(backend: &mut impl Backend, launches: &[Launch], runs: u32) -> f64 {
        backend.run_timed(launches).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..runs {
            backend.run_timed(launches).unwrap();
        }
        t.elapsed().as_secs_f64() * 1e6 / f64::from(runs)
    }

    /// What the scrub after each run costs, the old one against the new
    /// for candidates that declare some local memory, much of it, or only
    /// private memory: `cargo test -p kevo-eval --lib scrub_cost --
    /// --ignored --nocapture` (each backend that has a device here).
    #[test]
    #[ignore = "a measurement"]
    fn scrub_cost() {
        use kevo_runtimes::BackendKind;
        use kevo_runtimes::testing::UnderTest;
        for kind in [BackendKind::Opencl, BackendKind::Cuda] {
            let Some(mut backend) = UnderTest::new(kind).open() else {
                continue;
            };
            let b = &mut backend;
            let info = b.info().clone();
            let utility = Utility::new(b).unwrap();
            let old = match info.dialect {
                Dialect::OpenCl => OLD_SCRUB_CL,
                _ => OLD_SCRUB_CU,
            };
            let module = b.compile(old, &Utility::options(Vec::new())).unwrap();
            let kernel = b.kernel(module, "scrub").unwrap();
            let blocks = u64::from(info.compute_units.max(1)) * 8;
            let old = [Launch {
                kernel,
                global: [blocks * 256, 1, 1],
                local: [256, 1, 1],
                dynamic_shared_bytes: 0,
                args: vec![KernelArg::U32(1), KernelArg::U32(7)],
            }];
            let runs = 200;
            println!(
                "{} ({} compute units, {} KB of local memory per block): old scrub {:.1} us",
                info.name,
                info.compute_units,
                info.local_mem_bytes >> 10,
                mean_us(b, &old, runs)
            );
            for (what, need) in [
                ("4 KB local, 1 KB private", (4 << 10, 1 << 10)),
                ("4 KB local", (4 << 10, 0)),
                ("48 KB local", (48 << 10, 0)),
                ("256 KB local, 1 KB private", (256 << 10, 1 << 10)),
                ("1 KB private", (0, 1 << 10)),
            ] {
                if need.0 > info.local_mem_bytes {
                    continue;
                }
                let need = ScrubNeed {
                    local_bytes: need.0,
                    private_bytes: need.1,
                };
                let launches = utility.scrub(b, need, 1).unwrap();
                let scrubbed = match need.local_bytes {
                    0 => 0,
                    n => scrub_local_bytes(&info, n) >> 10,
                };
                println!(
                    "  new scrub, {what}: {:.1} us ({scrubbed} KB of local memory per block)",
                    mean_us(b, &launches, runs),
                );
            }
            b.release_module(module);
            utility.release(b);
        }
    }
}
