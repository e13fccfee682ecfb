//! Inputs and CPU references prepared ahead on spare cores while the
//! device works: the next evaluation's verification inputs are generated,
//! and their references computed, on threads of their own, so a search
//! waits for neither (ising's reference took 142 ms and adi3d's 236 ms per
//! full-size evaluation on an H200, against 20-190 ms of device time).
//!
//! Only where the device is not the CPU: on a CPU device the threads would
//! share the cores the timed runs are measured on.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use kevo_tasks::{Problem, Reference, Size, TaskCode};

/// (task content hash, size, seed): the key of every cached input.
pub(crate) type CacheKey = (String, Size, u64);

/// One size's inputs and reference, made ahead.
pub(crate) struct Prepared {
    pub problem: Arc<Problem>,
    /// None where the reference is the task's device kernel, run by the
    /// evaluator itself.
    pub reference: Option<Reference>,
}

/// The preparations in flight, by key.
#[derive(Default)]
pub(crate) struct Ahead {
    jobs: Vec<(CacheKey, JoinHandle<Prepared>)>,
}

impl Ahead {
    pub fn is_pending(&self, key: &CacheKey) -> bool {
        self.jobs.iter().any(|(k, _)| k == key)
    }

    /// Starts preparing `key` on a thread of its own: the problem, and the
    /// CPU reference under `check_key` unless `with_reference` is false.
    pub fn start(
        &mut self,
        key: CacheKey,
        code: Arc<dyn TaskCode>,
        check_key: u64,
        with_reference: bool,
    ) {
        if self.is_pending(&key) {
            return;
        }
        let (size, seed) = (key.1.clone(), key.2);
        let spawned = std::thread::Builder::new()
            .name("kevo-ahead".into())
            .spawn(move || {
                let problem = Arc::new(code.problem(&size, seed));
                let reference =
                    with_reference.then(|| code.reference_keyed(&size, &problem, check_key));
                Prepared { problem, reference }
            });
        // A thread that cannot start costs the preparation in line later.
        if let Ok(handle) = spawned {
            self.jobs.push((key, handle));
        }
    }

    /// Every preparation, waited for (a panicked one is left out), with the
    /// seconds waited: an evaluator settles them before it compiles, so no
    /// preparation allocates under a compile's tighter memory limit.
    pub fn settle(&mut self) -> (Vec<(CacheKey, Prepared)>, f64) {
        let waited = Instant::now();
        let done = self
            .jobs
            .drain(..)
            .filter_map(|(key, handle)| Some((key, handle.join().ok()?)))
            .collect();
        (done, waited.elapsed().as_secs_f64())
    }

    /// The preparation of `key`, waiting for it if it is still running;
    /// returns it with the seconds waited (the harness's real cost). None
    /// if it was never started or its thread panicked (the caller then
    /// prepares it in line, where a panic surfaces as it always did).
    pub fn take(&mut self, key: &CacheKey) -> Option<(Prepared, f64)> {
        let i = self.jobs.iter().position(|(k, _)| k == key)?;
        let (_, handle) = self.jobs.swap_remove(i);
        let waited = Instant::now();
        let prepared = handle.join().ok()?;
        Some((prepared, waited.elapsed().as_secs_f64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prepared_size_is_the_same_as_one_made_in_line() {
        // nbody: the reference determines every output byte, so the
        // outputs it gives for the in-line problem must pass the check
        // against the reference prepared on another thread.
        let task = kevo_tasks::by_name("nbody").unwrap();
        let size = task.sizes(kevo_tasks::SizeSet::Smoke).in_distribution[0].clone();
        let key = (task.content_hash().to_string(), size.clone(), 42);
        let mut ahead = Ahead::default();
        ahead.start(key.clone(), task.code(), 7, true);
        assert!(ahead.is_pending(&key));
        let (prepared, _) = ahead.take(&key).unwrap();
        assert!(!ahead.is_pending(&key));
        assert!(ahead.take(&key).is_none(), "taken once");
        let problem = task.problem(&size, 42);
        assert_eq!(prepared.problem.buffers.len(), problem.buffers.len());
        for (a, b) in prepared.problem.buffers.iter().zip(&problem.buffers) {
            assert_eq!(a.bytes, b.bytes);
            assert_eq!(format!("{:?}", a.init), format!("{:?}", b.init));
        }
        let outputs = task.code().exact_outputs(&size, &problem).unwrap();
        let reference = prepared.reference.unwrap();
        assert!(task.check(&size, &problem, &reference, &outputs).passed);
        // Another seed's inputs differ.
        let other = task.problem(&size, 43);
        assert_ne!(
            format!("{:?}", other.buffers[0].init),
            format!("{:?}", problem.buffers[0].init)
        );
    }
}
