//! The pristine copies: every problem's initial contents kept on the
//! device across candidates, so every run is restored from them without an
//! upload, each guarded by a canary tail and a keyed checksum.

use kevo_backend::{Backend, BackendError, BufferId};
use kevo_tasks::{BufferInit, Problem};

use crate::ahead::CacheKey;
use crate::device::{self, round_up};

/// Device buffers holding a problem's initial contents, per (task, size,
/// seed), bounded by a share of device memory and evicted least recently
/// used first. Each is a whole number of granules whose tail past the data
/// holds the canary, checked after every run, and whose contents have a
/// keyed checksum, checked after every size: a kernel that reaches the
/// pristine copies can neither hide anything in their slack nor have its
/// answer restored into its next run.
#[derive(Default)]
pub(crate) struct PristineCache {
    entries: Vec<(CacheKey, Vec<Option<BufferId>>, usize, u64)>,
    /// Every live pristine buffer.
    records: Vec<PristineRecord>,
    clock: u64,
}

/// One live pristine buffer, with what is checked of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PristineRecord {
    pub(crate) buffer: BufferId,
    /// Whole 32-bit words of data.
    pub(crate) words: usize,
    /// First word and length of the canary tail.
    pub(crate) tail_at: usize,
    pub(crate) tail_words: usize,
    /// `device::keyed_checksum` of the data under the utility's key.
    pub(crate) checksum: u32,
}

impl PristineCache {
    /// The pristine buffers of `problem`, uploading them on a miss. Entries
    /// whose key is in `protect` are never evicted to make room.
    pub(crate) fn get(
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
        self.make_room(backend, bytes, protect);
        let buffers = self.upload(backend, problem, checksum_key)?;
        self.entries.push((key, buffers.clone(), bytes, self.clock));
        Ok(buffers)
    }

    /// Evict the least recently used entries not in `protect` until `bytes`
    /// more fit in the budget.
    fn make_room(&mut self, backend: &mut impl Backend, bytes: usize, protect: &[&CacheKey]) {
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
    }

    /// Upload `problem`'s initial contents, each into a buffer whose tail
    /// past the data holds the canary, and record each; on a failure the
    /// buffers made so far are freed.
    fn upload(
        &mut self,
        backend: &mut impl Backend,
        problem: &Problem,
        checksum_key: u32,
    ) -> Result<Vec<Option<BufferId>>, BackendError> {
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
        Ok(buffers)
    }

    /// The records of `buffers` (a problem's pristine list).
    pub(crate) fn records_of(&self, buffers: &[Option<BufferId>]) -> Vec<PristineRecord> {
        self.records
            .iter()
            .filter(|r| buffers.contains(&Some(r.buffer)))
            .copied()
            .collect()
    }

    /// Free every pristine buffer.
    pub(crate) fn clear(&mut self, backend: &mut impl Backend) {
        self.records.clear();
        for (_, buffers, _, _) in self.entries.drain(..) {
            for b in buffers.into_iter().flatten() {
                backend.free(b);
            }
        }
    }
}
