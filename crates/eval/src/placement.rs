//! A size against the memory hierarchy: where its working set lives, its
//! fraction of that level's ceiling (beside the DRAM/FP32 fraction the
//! score uses, unchanged), and whether its figure is physically
//! implausible there.

use kevo_roofline::{Bound, CeilingSource, Ceilings, Hierarchy, Placement, human_bytes};
use kevo_tasks::CeilingKind;
use serde::{Deserialize, Serialize};

/// Above this multiple of the DRAM or FP32 ceiling a size is physically
/// implausible: datasheet ceilings are peaks, measured ones are within a
/// few percent, so 25% over leaves room for noise and for FLOP counts an
/// FMA merges.
pub const SUSPICIOUS_FRACTION: f64 = 1.25;
/// A cache-resident size is implausible above this multiple of its level's
/// fastest measured copy run. Copies understate what a read-heavy kernel
/// gets from a cache (cores issue loads at twice the rate of stores, and a
/// copy pays write-allocate traffic), so the margin is wider than DRAM's.
pub const CACHE_LEVEL_SUSPICIOUS_FACTOR: f64 = 2.0;
/// Without a measured hierarchy (declared ceilings, or a sweep that could
/// not run), sizes inside the driver's cache are bounded by what any cache
/// can give: per-core L1 bandwidth is ~10x DRAM on an H100 (33 TB/s
/// aggregate vs 3.35) and ~20x on a 2-core VM.
pub const CACHE_RESIDENT_SUSPICIOUS_FRACTION: f64 = 25.0;

/// One size's place in the measured hierarchy and its fraction there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelFraction {
    pub placement: Placement,
    /// The attainable ceiling at that level, in the size's unit: the
    /// level's copy bandwidth for bandwidth-bound tasks (the DRAM ceiling
    /// itself when the data is past every cache), the FP32 peak for
    /// compute-bound ones (the hierarchical roofline min(peak, intensity x
    /// level bandwidth) is the peak at these tasks' intensities).
    #[serde(with = "crate::json_f64")]
    pub ceiling: f64,
    /// achieved / ceiling.
    #[serde(with = "crate::json_f64")]
    pub fraction: f64,
}

/// Places a size's working set and divides by its level's ceiling; None
/// without a measured hierarchy.
pub fn level_fraction(
    achieved: f64,
    kind: CeilingKind,
    ceilings: &Ceilings,
    working_set: u64,
) -> Option<LevelFraction> {
    let hierarchy = ceilings.hierarchy.as_ref()?;
    let placement = hierarchy.place(working_set);
    let ceiling = match kind {
        CeilingKind::Fp32 => ceilings.fp32_gflops,
        CeilingKind::Bandwidth if placement.is_dram() => ceilings.bandwidth_gbs,
        CeilingKind::Bandwidth => hierarchy.level(&placement.level)?.gbs.median,
    };
    Some(LevelFraction {
        placement,
        ceiling,
        fraction: achieved / ceiling,
    })
}

/// Where a figure is checked and what the evaluator measures again before
/// it calls the figure implausible.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspicion {
    /// The ceiling the figure beat, for [`kevo_roofline::remeasure`].
    pub bound: Bound,
    pub why: String,
}

/// Margin over a measured (not datasheet) ceiling on a CPU device: a copy
/// or FMA loop is a measured rate there, not a physical limit (a kernel
/// with streaming stores skips the copy's write-allocate, 1.5x its bytes),
/// so only a figure twice the best measurement is implausible.
pub const CPU_MEASURED_SUSPICIOUS_FRACTION: f64 = 2.0;

/// The device facts the rule needs beside the ceilings.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceFacts {
    /// The driver's last-level cache size (0 unknown).
    pub driver_cache_bytes: u64,
    pub is_cpu: bool,
}

/// Why a size's figure is physically implausible, if it is: above the FP32
/// peak for compute-bound tasks; for bandwidth-bound ones, above the
/// ceiling of the level its working set lives in (DRAM past every cache),
/// or, with no measured hierarchy, the fallback rule of the driver's cache.
/// `achieved` is the figure at the kernel's median time (the one its
/// score uses: judging a quartile would let a kernel that slows a quarter
/// of its runs on purpose hide a fast median), and every measured ceiling
/// is taken at its best (the envelope's maximum, raised by the
/// re-measurement the evaluator makes before any verdict).
pub fn suspicion(
    achieved: f64,
    kind: CeilingKind,
    ceilings: &Ceilings,
    working_set: u64,
    device: DeviceFacts,
) -> Option<Suspicion> {
    let measured = matches!(ceilings.source, CeilingSource::Measured { .. });
    let (margin, basis) = if measured && device.is_cpu {
        (
            CPU_MEASURED_SUSPICIOUS_FRACTION,
            " (a measured rate on a CPU device, not a physical limit: only twice it is implausible)",
        )
    } else {
        (SUSPICIOUS_FRACTION, "")
    };
    let (over, why, bound) = match (kind, &ceilings.hierarchy) {
        (CeilingKind::Fp32, _) => {
            let fraction = achieved / ceilings.fp32_gflops;
            (
                fraction > margin,
                format!(
                    "{:.0}% of the FP32 peak ({:.0} GFLOPS{basis})",
                    fraction * 100.0,
                    ceilings.fp32_gflops
                ),
                Bound::Fp32,
            )
        }
        (CeilingKind::Bandwidth, Some(h)) => {
            measured_level_rule(achieved, ceilings, h, working_set, device, (margin, basis))
        }
        (CeilingKind::Bandwidth, None) => {
            let fraction = achieved / ceilings.bandwidth_gbs;
            let (over, why) =
                driver_cache_rule(fraction, working_set, device.driver_cache_bytes, margin);
            (over, why, Bound::Dram)
        }
    };
    (over || !achieved.is_finite()).then(|| Suspicion {
        bound,
        why: format!(
            "{why}: faster than the hardware allows, so the kernel is not doing the work it claims"
        ),
    })
}

/// The best DRAM figure: the datasheet's, or the envelope's fastest copy.
fn dram_best(ceilings: &Ceilings, h: &Hierarchy) -> f64 {
    match ceilings.source {
        CeilingSource::Measured { .. } => h
            .levels
            .last()
            .filter(|l| l.is_dram())
            .map_or(ceilings.bandwidth_gbs, |l| {
                l.gbs.max.max(ceilings.bandwidth_gbs)
            }),
        _ => ceilings.bandwidth_gbs,
    }
}

fn measured_level_rule(
    achieved: f64,
    ceilings: &Ceilings,
    h: &Hierarchy,
    working_set: u64,
    device: DeviceFacts,
    (margin, basis): (f64, &str),
) -> (bool, String, Bound) {
    let placement = h.place(working_set);
    let cache = Bound::Cache { working_set };
    if let Some(level) = h.level(&placement.level).filter(|l| !l.is_dram()) {
        let limit = CACHE_LEVEL_SUSPICIOUS_FACTOR * level.gbs.max;
        return (
            achieved > limit,
            format!(
                "{achieved:.0} GB/s, {:.1}x the {} copy bandwidth ({:.0} GB/s at best; {})",
                achieved / level.gbs.median,
                level.name,
                level.gbs.max,
                placement.describe()
            ),
            cache,
        );
    }
    let driver_cache = device.driver_cache_bytes.max(h.driver_cache_bytes);
    if working_set <= driver_cache {
        // The sweep found no cache this large, the driver reports one: a
        // VM's share of a host L3 ends at no sharp cliff, so the working
        // set may be partly cache-resident, and no faster than the last
        // cache the sweep measured (25x DRAM where it measured none).
        let dram = margin * dram_best(ceilings, h);
        let (limit, what) = match h.caches().last() {
            Some(last) => (
                last.gbs.max.max(dram),
                format!("{:.0} GB/s at best in the {}", last.gbs.max, last.name),
            ),
            None => (
                CACHE_RESIDENT_SUSPICIOUS_FRACTION * ceilings.bandwidth_gbs,
                format!("{:.0} GB/s DRAM", ceilings.bandwidth_gbs),
            ),
        };
        return (
            achieved > limit,
            format!(
                "{achieved:.0} GB/s with a {} working set inside the driver's {} cache ({what})",
                human_bytes(working_set),
                human_bytes(driver_cache)
            ),
            cache,
        );
    }
    let best = dram_best(ceilings, h);
    let fraction = achieved / best;
    (
        fraction > margin,
        format!(
            "{:.0}% of the DRAM bandwidth ({best:.0} GB/s at best{basis}) with a {} working set, past every measured cache",
            fraction * 100.0,
            human_bytes(working_set)
        ),
        Bound::Dram,
    )
}

/// `ceilings` with the bound a re-measurement covered raised to what it
/// measured now (never lowered): the evaluator's working copy, kept apart
/// from the ceilings scores are divided by, which stay fixed for a run.
pub fn raise(ceilings: &mut Ceilings, bound: Bound, now: kevo_roofline::Spread) {
    let measured = matches!(ceilings.source, CeilingSource::Measured { .. });
    match bound {
        Bound::Fp32 if measured => ceilings.fp32_gflops = ceilings.fp32_gflops.max(now.max),
        Bound::Fp32 => {}
        Bound::Dram => {
            if measured {
                ceilings.bandwidth_gbs = ceilings.bandwidth_gbs.max(now.median);
            }
            if let Some(dram) = ceilings
                .hierarchy
                .as_mut()
                .and_then(|h| h.levels.last_mut())
                .filter(|l| l.is_dram())
            {
                dram.gbs = kevo_roofline::envelope::higher(dram.gbs, now);
                dram.gbs.max = dram.gbs.max.max(now.max);
            }
        }
        Bound::Cache { working_set } => {
            if let Some(h) = ceilings.hierarchy.as_mut() {
                let name = h.place(working_set).level;
                let target = match h.levels.iter().position(|l| l.name == name && !l.is_dram()) {
                    Some(i) => Some(i),
                    // Inside the driver's cache the sweep did not resolve:
                    // the last cache stands for it.
                    None => h.levels.len().checked_sub(2),
                };
                if let Some(level) = target.map(|i| &mut h.levels[i]) {
                    level.gbs = kevo_roofline::envelope::higher(level.gbs, now);
                    level.gbs.max = level.gbs.max.max(now.max);
                }
            }
        }
    }
}

fn driver_cache_rule(
    fraction: f64,
    working_set: u64,
    cache_bytes: u64,
    margin: f64,
) -> (bool, String) {
    let ws = human_bytes(working_set);
    if cache_bytes > 0 && working_set <= cache_bytes {
        (
            fraction > CACHE_RESIDENT_SUSPICIOUS_FRACTION,
            format!(
                "{:.0}% of the DRAM bandwidth with a {ws} working set that fits the {} cache (no cache is that fast)",
                fraction * 100.0,
                human_bytes(cache_bytes)
            ),
        )
    } else {
        let past = if cache_bytes > 0 {
            format!(
                ", larger than the {} last-level cache",
                human_bytes(cache_bytes)
            )
        } else {
            String::new()
        };
        (
            fraction > margin,
            format!(
                "{:.0}% of the DRAM bandwidth with a {ws} working set{past}",
                fraction * 100.0
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevo_roofline::{CeilingSource, Spread, SweepPoint};

    const MIB: u64 = 1 << 20;

    fn ceilings(hierarchy: Option<Hierarchy>) -> Ceilings {
        Ceilings {
            bandwidth_gbs: 20.0,
            fp32_gflops: 100.0,
            source: CeilingSource::Datasheet {
                entry: "test".into(),
            },
            hierarchy,
            launch_overhead: None,
        }
    }

    fn spread(gbs: f64) -> Spread {
        Spread {
            median: gbs,
            min: gbs * 0.95,
            max: gbs * 1.05,
        }
    }

    /// An L2 of 4 MiB at 200 GB/s, then DRAM at 20.
    fn hierarchy() -> Hierarchy {
        let sweep = (0..10)
            .map(|i| {
                let bytes = (256 << 10) << i;
                SweepPoint {
                    bytes,
                    gbs: spread(if bytes <= 4 * MIB { 200.0 } else { 20.0 }),
                    saturated: true,
                }
            })
            .collect();
        Hierarchy::from_sweep(sweep, spread(20.0), false, 8 * MIB)
    }

    /// The rule on a GPU-like device with a `cache` byte driver cache.
    fn sus(
        achieved: f64,
        kind: CeilingKind,
        c: &Ceilings,
        working_set: u64,
        cache: u64,
    ) -> Option<String> {
        let device = DeviceFacts {
            driver_cache_bytes: cache,
            is_cpu: false,
        };
        suspicion(achieved, kind, c, working_set, device).map(|s| s.why)
    }

    fn measured(hierarchy: Option<Hierarchy>) -> Ceilings {
        Ceilings {
            source: CeilingSource::Measured {
                measured_unix: 1,
                cached: true,
            },
            ..ceilings(hierarchy)
        }
    }

    #[test]
    fn a_set_inside_the_drivers_cache_is_bounded_by_the_last_cache() {
        // The sweep's last cliff at 4 MiB, the driver reporting 260 MiB
        // (a VM's share of a host L3): 128 MiB may be partly resident.
        let mut h = hierarchy();
        h.driver_cache_bytes = 260 * MIB;
        let c = ceilings(Some(h));
        let why = sus(41.0, CeilingKind::Bandwidth, &c, 128 * MIB, 0);
        assert_eq!(why, None, "206% of DRAM inside the driver's cache");
        let why = sus(300.0, CeilingKind::Bandwidth, &c, 128 * MIB, 0).unwrap();
        assert!(why.contains("inside the driver's 260.0 MiB cache"), "{why}");
        // Past the driver's cache the DRAM rule holds.
        assert!(sus(30.0, CeilingKind::Bandwidth, &c, 512 * MIB, 0).is_some());
    }

    #[test]
    fn a_measured_cpu_ceiling_is_a_rate_with_a_wider_margin() {
        let c = measured(Some(hierarchy()));
        let cpu = DeviceFacts {
            driver_cache_bytes: 0,
            is_cpu: true,
        };
        let at = |x: f64, kind| suspicion(x, kind, &c, 64 * MIB, cpu);
        // The envelope's best DRAM copy is 21 GB/s (20 +5%): 2x is 42.
        assert!(at(41.0, CeilingKind::Bandwidth).is_none());
        let s = at(43.0, CeilingKind::Bandwidth).unwrap();
        assert_eq!(s.bound, Bound::Dram);
        assert!(s.why.contains("not a physical limit"), "{}", s.why);
        assert!(at(190.0, CeilingKind::Fp32).is_none());
        let s = at(210.0, CeilingKind::Fp32).unwrap();
        assert_eq!(s.bound, Bound::Fp32);
        // A datasheet ceiling on a GPU keeps the 1.25x margin.
        assert!(
            sus(
                30.0,
                CeilingKind::Bandwidth,
                &ceilings(Some(hierarchy())),
                64 * MIB,
                0
            )
            .is_some()
        );
    }

    #[test]
    fn a_remeasured_bound_only_rises() {
        let mut c = measured(Some(hierarchy()));
        let busy = kevo_roofline::Spread {
            median: 10.0,
            min: 9.0,
            max: 11.0,
        };
        raise(&mut c, Bound::Dram, busy);
        raise(&mut c, Bound::Fp32, busy);
        assert_eq!((c.bandwidth_gbs, c.fp32_gflops), (20.0, 100.0));
        let quiet = kevo_roofline::Spread {
            median: 30.0,
            min: 29.0,
            max: 33.0,
        };
        raise(&mut c, Bound::Dram, quiet);
        assert_eq!(c.bandwidth_gbs, 30.0);
        let h = c.hierarchy.as_ref().unwrap();
        assert_eq!(h.levels.last().unwrap().gbs.max, 33.0);
        let fast = kevo_roofline::Spread {
            median: 400.0,
            min: 390.0,
            max: 420.0,
        };
        raise(&mut c, Bound::Cache { working_set: MIB }, fast);
        assert_eq!(
            c.hierarchy.as_ref().unwrap().level("L2").unwrap().gbs.max,
            420.0
        );
    }

    #[test]
    fn a_cache_resident_size_is_divided_by_its_level() {
        let c = ceilings(Some(hierarchy()));
        let l = level_fraction(100.0, CeilingKind::Bandwidth, &c, MIB).unwrap();
        assert_eq!(l.placement.level, "L2");
        assert_eq!(l.ceiling, 200.0);
        assert!((l.fraction - 0.5).abs() < 1e-12);
        let d = level_fraction(10.0, CeilingKind::Bandwidth, &c, 64 * MIB).unwrap();
        assert_eq!(d.placement.level, "DRAM");
        assert_eq!(d.ceiling, 20.0, "the score's DRAM ceiling");
        // Compute-bound: the FP32 peak wherever the data lives.
        let f = level_fraction(50.0, CeilingKind::Fp32, &c, MIB).unwrap();
        assert_eq!((f.ceiling, f.placement.level.as_str()), (100.0, "L2"));
        assert!(level_fraction(1.0, CeilingKind::Bandwidth, &ceilings(None), MIB).is_none());
    }

    #[test]
    fn implausible_figures_are_flagged_against_their_level() {
        let c = ceilings(Some(hierarchy()));
        // L2-resident: 5x DRAM is fine, beyond 2x the L2's best copy is not.
        assert!(sus(100.0, CeilingKind::Bandwidth, &c, MIB, 0).is_none());
        assert!(sus(400.0, CeilingKind::Bandwidth, &c, MIB, 0).is_none());
        let why = sus(500.0, CeilingKind::Bandwidth, &c, MIB, 0).unwrap();
        assert!(why.contains("the L2 copy bandwidth"), "{why}");
        assert!(why.contains("cache-resident: 1.0 MiB"), "{why}");
        // Past every cache: 1.25x DRAM.
        assert!(sus(24.0, CeilingKind::Bandwidth, &c, 64 * MIB, 0).is_none());
        let why = sus(30.0, CeilingKind::Bandwidth, &c, 64 * MIB, 0).unwrap();
        assert!(why.contains("150% of the DRAM bandwidth"), "{why}");
        // Compute-bound: the FP32 peak, whatever the working set.
        assert!(sus(130.0, CeilingKind::Fp32, &c, MIB, 0).is_some());
        assert!(sus(110.0, CeilingKind::Fp32, &c, MIB, 0).is_none());
        let why = sus(300.0, CeilingKind::Fp32, &c, MIB, 0).unwrap();
        assert!(why.contains("300% of the FP32 peak"), "{why}");
        assert!(sus(f64::INFINITY, CeilingKind::Fp32, &c, MIB, 0).is_some());
    }

    #[test]
    fn without_a_hierarchy_the_driver_cache_rule_applies() {
        let c = ceilings(None);
        // Past the cache: DRAM bandwidth.
        assert!(sus(40.0, CeilingKind::Bandwidth, &c, 64 * MIB, 50 * MIB).is_some());
        assert!(sus(24.0, CeilingKind::Bandwidth, &c, 64 * MIB, 50 * MIB).is_none());
        // Inside it: any cache's bound.
        assert!(sus(80.0, CeilingKind::Bandwidth, &c, 10 * MIB, 50 * MIB).is_none());
        assert!(sus(800.0, CeilingKind::Bandwidth, &c, 10 * MIB, 50 * MIB).is_some());
        // Unknown cache size: the DRAM rule.
        assert!(sus(40.0, CeilingKind::Bandwidth, &c, 10 * MIB, 0).is_some());
    }
}
