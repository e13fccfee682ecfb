//! Ceilings as an envelope of measurements, never a snapshot.
//!
//! A micro-benchmark run while the machine is busy measures the machine's
//! load, not its ceiling: a DRAM copy measured at 12.2 GB/s on a busy
//! 2-core VM (19.3 GB/s quiet) made every later honest evaluation on that
//! device "faster than the hardware". So a device's cached measurement is
//! the best of every measurement made of it: each figure only rises, and
//! the envelope records how many runs it holds and when they ran.

use crate::Measurement;
use crate::hierarchy::{Hierarchy, Spread, SweepPoint};
use crate::levels::Extras;

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The spread with the higher median (NaN never wins).
pub fn higher(a: Spread, b: Spread) -> Spread {
    if b.median > a.median || a.median.is_nan() {
        b
    } else {
        a
    }
}

fn higher_result(a: &Result<Spread, String>, b: &Result<Spread, String>) -> Result<Spread, String> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(higher(*a, *b)),
        (Ok(x), Err(_)) | (Err(_), Ok(x)) => Ok(*x),
        (Err(_), Err(e)) => Err(e.clone()),
    }
}

/// Sweep points of two measurements, by working set, the faster where both
/// measured one.
fn merge_sweep(a: &[SweepPoint], b: &[SweepPoint]) -> Vec<SweepPoint> {
    let mut all: Vec<SweepPoint> = a.to_vec();
    for p in b {
        match all.iter_mut().find(|q| q.bytes == p.bytes) {
            Some(q) => {
                q.gbs = higher(q.gbs, p.gbs);
                q.saturated |= p.saturated;
            }
            None => all.push(*p),
        }
    }
    all.sort_by_key(|p| p.bytes);
    all
}

fn merge_extras(a: &Extras, b: &Extras, dram: Spread, is_cpu: bool) -> Extras {
    let sweep = merge_sweep(&a.hierarchy.sweep, &b.hierarchy.sweep);
    Extras {
        hierarchy: Hierarchy::from_sweep(sweep, dram, is_cpu, b.hierarchy.driver_cache_bytes),
        shared_gbs: higher_result(&a.shared_gbs, &b.shared_gbs),
        fp64_gflops: higher_result(&a.fp64_gflops, &b.fp64_gflops),
        fp16_gflops: higher_result(&a.fp16_gflops, &b.fp16_gflops),
        // A cost, not a ceiling: the latest describes the driver now.
        launch_overhead: b
            .launch_overhead
            .clone()
            .or_else(|| a.launch_overhead.clone()),
    }
}

/// `old`'s envelope with `new` added: each ceiling the higher of the two
/// (with that measurement's spread), the hierarchy re-derived from the
/// faster of each sweep point.
pub fn merge(old: &Measurement, new: &Measurement, is_cpu: bool) -> Measurement {
    let copy = higher(old.copy_spread(), new.copy_spread());
    let fma = higher(old.fma_spread(), new.fma_spread());
    let extras = match (&old.extras, &new.extras) {
        (Some(a), Some(b)) => Some(merge_extras(a, b, copy, is_cpu)),
        (a, b) => b.clone().or_else(|| a.clone()),
    };
    let first = [
        old.first_unix,
        old.measured_unix,
        new.first_unix,
        new.measured_unix,
    ]
    .into_iter()
    .filter(|&t| t > 0)
    .min()
    .unwrap_or(0);
    Measurement::from_spreads(
        copy,
        fma,
        new.copy_bytes.max(old.copy_bytes),
        (
            first,
            old.measured_unix.max(new.measured_unix),
            old.runs.max(1) + new.runs.max(1),
        ),
        extras,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(x: f64) -> Spread {
        Spread {
            median: x,
            min: x * 0.9,
            max: x * 1.1,
        }
    }

    fn point(bytes: u64, gbs: f64) -> SweepPoint {
        SweepPoint {
            bytes,
            gbs: spread(gbs),
            saturated: true,
        }
    }

    fn measurement(copy: f64, fma: f64, at: u64, sweep: Vec<SweepPoint>) -> Measurement {
        let dram = spread(copy);
        Measurement {
            copy_gbs: copy,
            copy_gbs_min: copy * 0.9,
            copy_gbs_max: copy * 1.1,
            fma_gflops: fma,
            fma_gflops_min: fma * 0.9,
            fma_gflops_max: fma * 1.1,
            copy_bytes: 1 << 27,
            measured_unix: at,
            runs: 1,
            first_unix: at,
            extras: Some(Extras {
                hierarchy: Hierarchy::from_sweep(sweep, dram, true, 260 << 20),
                shared_gbs: Err("none".into()),
                fp64_gflops: Ok(spread(5.0)),
                fp16_gflops: Err("no halves".into()),
                launch_overhead: None,
            }),
        }
    }

    const MIB: u64 = 1 << 20;

    /// A staircase: 200 GB/s up to `last_cache`, then DRAM at `dram`.
    fn sweep(last_cache: u64, dram: f64, busy: f64) -> Vec<SweepPoint> {
        (0..12)
            .map(|i| {
                let bytes = MIB << i;
                point(bytes, busy * if bytes <= last_cache { 200.0 } else { dram })
            })
            .collect()
    }

    #[test]
    fn a_busy_measurement_never_lowers_the_envelope() {
        let quiet = measurement(19.3, 140.0, 100, sweep(32 * MIB, 19.3, 1.0));
        let busy = measurement(12.2, 70.0, 200, sweep(8 * MIB, 12.2, 0.6));
        for m in [merge(&quiet, &busy, true), merge(&busy, &quiet, true)] {
            assert_eq!(m.copy_gbs, 19.3);
            assert_eq!(m.fma_gflops, 140.0);
            assert_eq!((m.runs, m.first_unix, m.measured_unix), (2, 100, 200));
            let h = &m.extras.as_ref().unwrap().hierarchy;
            // The busy sweep's early cliff does not shrink the last cache.
            let caches = h.caches();
            assert_eq!(caches.last().unwrap().capacity_bytes, Some(32 * MIB));
            assert_eq!(h.levels.last().unwrap().gbs.median, 19.3);
            assert_eq!(
                m.extras
                    .as_ref()
                    .unwrap()
                    .fp64_gflops
                    .as_ref()
                    .unwrap()
                    .median,
                5.0
            );
        }
    }

    #[test]
    fn a_faster_measurement_raises_it() {
        let old = measurement(12.2, 19.5, 100, sweep(32 * MIB, 12.2, 1.0));
        let new = measurement(19.3, 140.0, 300, sweep(64 * MIB, 19.3, 1.0));
        let m = merge(&old, &new, true);
        assert_eq!((m.copy_gbs, m.fma_gflops, m.runs), (19.3, 140.0, 2));
        let three = merge(&m, &old, true);
        assert_eq!((three.copy_gbs, three.runs), (19.3, 3));
        let h = &three.extras.as_ref().unwrap().hierarchy;
        assert_eq!(h.caches().last().unwrap().capacity_bytes, Some(64 * MIB));
    }
}
