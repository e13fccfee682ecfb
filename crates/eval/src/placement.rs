//! A size against the memory hierarchy: where its working set lives, its
//! fraction of that level's ceiling (beside the DRAM/FP32 fraction the
//! score uses, unchanged), and whether its figure is physically
//! implausible there.

use kevo_roofline::{Ceilings, Hierarchy, Placement, human_bytes};
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

/// Why a size's figure is physically implausible, if it is: above the FP32
/// peak for compute-bound tasks; for bandwidth-bound ones, above the
/// ceiling of the level its working set lives in (DRAM past every cache),
/// or, with no measured hierarchy, the fallback rule of the driver's cache.
pub fn suspicion(
    achieved: f64,
    kind: CeilingKind,
    ceilings: &Ceilings,
    working_set: u64,
    driver_cache_bytes: u64,
) -> Option<String> {
    let fraction = achieved / ceilings.for_kind(kind);
    let (over, why) = match (kind, &ceilings.hierarchy) {
        (CeilingKind::Fp32, _) => (
            fraction > SUSPICIOUS_FRACTION,
            format!("{:.0}% of the FP32 peak", fraction * 100.0),
        ),
        (CeilingKind::Bandwidth, Some(h)) => {
            measured_level_rule(achieved, ceilings, h, working_set)
        }
        (CeilingKind::Bandwidth, None) => {
            driver_cache_rule(fraction, working_set, driver_cache_bytes)
        }
    };
    (over || !fraction.is_finite()).then(|| {
        format!(
            "{why}: faster than the hardware allows, so the kernel is not doing the work it claims"
        )
    })
}

fn measured_level_rule(
    achieved: f64,
    ceilings: &Ceilings,
    h: &Hierarchy,
    working_set: u64,
) -> (bool, String) {
    let placement = h.place(working_set);
    match h.level(&placement.level).filter(|l| !l.is_dram()) {
        Some(level) => {
            let limit = CACHE_LEVEL_SUSPICIOUS_FACTOR * level.gbs.max;
            (
                achieved > limit,
                format!(
                    "{achieved:.0} GB/s, {:.1}x the {} copy bandwidth ({:.0} GB/s at best; {})",
                    achieved / level.gbs.median,
                    level.name,
                    level.gbs.max,
                    placement.describe()
                ),
            )
        }
        None => {
            let fraction = achieved / ceilings.bandwidth_gbs;
            (
                fraction > SUSPICIOUS_FRACTION,
                format!(
                    "{:.0}% of the DRAM bandwidth with a {} working set, past every measured cache",
                    fraction * 100.0,
                    human_bytes(working_set)
                ),
            )
        }
    }
}

fn driver_cache_rule(fraction: f64, working_set: u64, cache_bytes: u64) -> (bool, String) {
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
            fraction > SUSPICIOUS_FRACTION,
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
        Hierarchy::from_sweep(sweep, spread(20.0), false, 480 * MIB)
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
        assert!(suspicion(100.0, CeilingKind::Bandwidth, &c, MIB, 0).is_none());
        assert!(suspicion(400.0, CeilingKind::Bandwidth, &c, MIB, 0).is_none());
        let why = suspicion(500.0, CeilingKind::Bandwidth, &c, MIB, 0).unwrap();
        assert!(why.contains("the L2 copy bandwidth"), "{why}");
        assert!(why.contains("cache-resident: 1.0 MiB"), "{why}");
        // Past every cache: 1.25x DRAM.
        assert!(suspicion(24.0, CeilingKind::Bandwidth, &c, 64 * MIB, 0).is_none());
        let why = suspicion(30.0, CeilingKind::Bandwidth, &c, 64 * MIB, 0).unwrap();
        assert!(why.contains("150% of the DRAM bandwidth"), "{why}");
        // Compute-bound: the FP32 peak, whatever the working set.
        assert!(suspicion(130.0, CeilingKind::Fp32, &c, MIB, 0).is_some());
        assert!(suspicion(110.0, CeilingKind::Fp32, &c, MIB, 0).is_none());
        let why = suspicion(300.0, CeilingKind::Fp32, &c, MIB, 0).unwrap();
        assert!(why.contains("300% of the FP32 peak"), "{why}");
        assert!(suspicion(f64::INFINITY, CeilingKind::Fp32, &c, MIB, 0).is_some());
    }

    #[test]
    fn without_a_hierarchy_the_driver_cache_rule_applies() {
        let c = ceilings(None);
        // Past the cache: DRAM bandwidth.
        assert!(suspicion(40.0, CeilingKind::Bandwidth, &c, 64 * MIB, 50 * MIB).is_some());
        assert!(suspicion(24.0, CeilingKind::Bandwidth, &c, 64 * MIB, 50 * MIB).is_none());
        // Inside it: any cache's bound.
        assert!(suspicion(80.0, CeilingKind::Bandwidth, &c, 10 * MIB, 50 * MIB).is_none());
        assert!(suspicion(800.0, CeilingKind::Bandwidth, &c, 10 * MIB, 50 * MIB).is_some());
        // Unknown cache size: the DRAM rule.
        assert!(suspicion(40.0, CeilingKind::Bandwidth, &c, 10 * MIB, 0).is_some());
    }
}
