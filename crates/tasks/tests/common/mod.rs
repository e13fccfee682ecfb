//! Helpers shared by the test targets of this crate (each target includes
//! this module with `mod common;` and uses what it needs).
#![allow(dead_code)]

pub mod models;

use kevo_tasks::{Size, SizeSet, Task};

/// Every size of `set`: the in-distribution ones, the held-out one, then
/// the validation ones.
pub fn all_sizes(task: &Task, set: SizeSet) -> Vec<Size> {
    task.sizes(set).all().cloned().collect()
}

/// Little-endian f32 values of an output or input buffer.
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The bytes of `v` as a kernel would leave them in a buffer.
pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `f()` and the seconds it took, for the timing reports.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = std::time::Instant::now();
    let out = f();
    (out, t.elapsed().as_secs_f64())
}
