//! The measured memory hierarchy: a copy-bandwidth sweep over working sets,
//! the levels (plateaus) and capacities (cliffs) kevo derives from it, and
//! the placement of a working set in the level that holds it.
//!
//! Drivers' cache sizes are not trusted (PoCL reports a 480 MiB "global
//! memory cache" on a 2-core VM): the cliffs come from the sweep itself,
//! and the driver's figure is only shown beside them.

use serde::{Deserialize, Serialize};

/// A figure over repeated timed runs: median with the smallest and largest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Median, min and max of `values` (NaN-free; empty gives NaN).
    pub fn of(mut values: Vec<f64>) -> Spread {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        if n == 0 {
            return Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            0.5 * (values[n / 2 - 1] + values[n / 2])
        };
        Spread {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }
}

/// One working set of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Bytes of the two ping-pong buffers together.
    pub bytes: u64,
    /// Copy bandwidth (bytes read + written per second), GB/s.
    pub gbs: Spread,
    /// Whether enough threads ran to fill the device; points with too few
    /// threads measure parallelism, not the memory, and take no part in
    /// finding levels.
    pub saturated: bool,
}

/// One level of the hierarchy, fastest first; the last is DRAM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// "L1", "L2", "L3" counted down from the last cache before DRAM (the
    /// usual names for the device type; the capacities are measured), or
    /// "DRAM".
    pub name: String,
    /// The largest working set that still ran at this level's speed; None
    /// for DRAM.
    pub capacity_bytes: Option<u64>,
    /// The smallest working set measured at a slower level's speed: between
    /// capacity and reach the data lives partly here. None for DRAM.
    pub reach_bytes: Option<u64>,
    /// Copy bandwidth at this level, GB/s: the median over the plateau's
    /// points with the smallest and largest run.
    pub gbs: Spread,
}

impl Level {
    pub fn is_dram(&self) -> bool {
        self.capacity_bytes.is_none()
    }
}

/// The levels found by a sweep, with the sweep itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hierarchy {
    /// Fastest first; the last is DRAM.
    pub levels: Vec<Level>,
    pub sweep: Vec<SweepPoint>,
    /// The last-level cache size the driver reports (0 when none), shown
    /// beside the measured capacities, never used for placement.
    pub driver_cache_bytes: u64,
    /// Why fewer levels were found than a device usually has, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where a working set lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// The level's name ("L2", "DRAM", ...).
    pub level: String,
    pub working_set_bytes: u64,
    /// The level's measured capacity (None for DRAM).
    pub capacity_bytes: Option<u64>,
    /// The working set is past the level's capacity but short of its reach:
    /// partly cache-resident.
    #[serde(default)]
    pub partial: bool,
    /// The working set is smaller than the smallest saturated sweep point:
    /// it may live in a faster level that the sweep could not see.
    #[serde(default)]
    pub below_sweep: bool,
}

impl Placement {
    pub fn is_dram(&self) -> bool {
        self.capacity_bytes.is_none()
    }

    /// "cache-resident: 0.8 MiB in a 1.0 MiB L2", "partly cache-resident:
    /// ...", or "DRAM: 512 MiB" for a working set past every cache.
    pub fn describe(&self) -> String {
        let ws = human_bytes(self.working_set_bytes);
        match self.capacity_bytes {
            None => format!("{ws} working set, past every cache"),
            Some(cap) if self.partial => format!(
                "partly cache-resident: {ws} just past the {} {}",
                human_bytes(cap),
                self.level
            ),
            Some(cap) => format!(
                "cache-resident: {ws} in the {} {}{}",
                human_bytes(cap),
                self.level,
                if self.below_sweep {
                    " or a faster level"
                } else {
                    ""
                }
            ),
        }
    }
}

/// 1536 -> "1.5 KiB", 3 << 20 -> "3.0 MiB".
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// A point belongs to the current plateau while its bandwidth stays within
/// this factor of the plateau's fastest point; past it (and past that
/// point's slowest run), a cliff.
/// 1.5x: a cache level is typically 2-10x faster than the next (H100 L2
/// about 2x HBM3 for copies), while a shared VM's curve between them
/// sags gradually and its runs at one size spread by up to 20%.
pub const CLIFF_FACTOR: f64 = 1.5;

impl Hierarchy {
    /// Levels from a sweep (increasing working sets) and the DRAM copy
    /// bandwidth measured past every cache. `is_cpu` picks the level names.
    pub fn from_sweep(
        sweep: Vec<SweepPoint>,
        dram: Spread,
        is_cpu: bool,
        driver_cache_bytes: u64,
    ) -> Hierarchy {
        let points: Vec<&SweepPoint> = sweep.iter().filter(|p| p.saturated).collect();
        let plateaus = merge_plateaus(split_at_cliffs(&points));
        // The slowest plateau is DRAM when it runs near the DRAM copy
        // bandwidth; otherwise the sweep never got past the last cache.
        let reaches_dram = plateaus.last().is_some_and(|r| {
            let m = plateau_spread(r).median;
            m <= dram.median * CLIFF_FACTOR
        });
        let cache_runs: &[Vec<&SweepPoint>] = match (plateaus.len(), reaches_dram) {
            (0, _) => &[],
            (n, true) => &plateaus[..n - 1],
            (_, false) => &plateaus[..],
        };
        let note = sweep_note(&points, sweep.len(), cache_runs.is_empty(), reaches_dram);
        let mut levels = cache_levels(cache_runs, &points, is_cpu);
        levels.push(Level {
            name: "DRAM".into(),
            capacity_bytes: None,
            reach_bytes: None,
            gbs: dram,
        });
        Hierarchy {
            levels,
            sweep,
            driver_cache_bytes,
            note,
        }
    }

    /// The cache levels (every level but DRAM), fastest first.
    pub fn caches(&self) -> &[Level] {
        &self.levels[..self.levels.len().saturating_sub(1)]
    }

    /// The level that holds `working_set` bytes: the fastest whose reach is
    /// larger (partly resident past its capacity), else DRAM.
    pub fn place(&self, working_set: u64) -> Placement {
        let smallest = self
            .sweep
            .iter()
            .filter(|p| p.saturated)
            .map(|p| p.bytes)
            .min();
        let below_sweep = smallest.is_some_and(|s| working_set < s);
        for level in self.caches() {
            let (Some(capacity), Some(reach)) = (level.capacity_bytes, level.reach_bytes) else {
                continue;
            };
            if working_set <= capacity || working_set < reach {
                return Placement {
                    level: level.name.clone(),
                    working_set_bytes: working_set,
                    capacity_bytes: Some(capacity),
                    partial: working_set > capacity,
                    below_sweep,
                };
            }
        }
        Placement {
            level: "DRAM".into(),
            working_set_bytes: working_set,
            capacity_bytes: None,
            partial: false,
            below_sweep: false,
        }
    }

    /// The level called `name`.
    pub fn level(&self, name: &str) -> Option<&Level> {
        self.levels.iter().find(|l| l.name == name)
    }
}

/// The saturated points in runs, a new run at every cliff: a point more
/// than [`CLIFF_FACTOR`] slower than its run's best, past that point's
/// slowest run.
fn split_at_cliffs<'a>(points: &[&'a SweepPoint]) -> Vec<Vec<&'a SweepPoint>> {
    let mut runs: Vec<Vec<&SweepPoint>> = Vec::new();
    for p in points {
        let cliff = runs.last().is_some_and(|run| {
            // The plateau's best point: the small end of a sweep can be
            // slower than the level itself (launch and barrier costs).
            let top = run
                .iter()
                .max_by(|a, b| a.gbs.median.total_cmp(&b.gbs.median))
                .expect("runs are never empty");
            p.gbs.median * CLIFF_FACTOR < top.gbs.median && p.gbs.max < top.gbs.min
        });
        match runs.last_mut() {
            Some(run) if !cliff => run.push(p),
            _ => runs.push(vec![p]),
        }
    }
    runs
}

/// The plateaus among the runs: a run of one point between two others is
/// a transition and goes; neighbours within [`CLIFF_FACTOR`] merge.
fn merge_plateaus(runs: Vec<Vec<&SweepPoint>>) -> Vec<Vec<&SweepPoint>> {
    let last = runs.len().saturating_sub(1);
    let mut plateaus: Vec<Vec<&SweepPoint>> = Vec::new();
    for (i, run) in runs.into_iter().enumerate() {
        if run.len() < 2 && i != last {
            continue;
        }
        // A gentle slope cut into bands is one level: plateaus whose
        // medians are within the cliff factor merge.
        match plateaus.last_mut() {
            Some(prev)
                if plateau_spread(prev).median < plateau_spread(&run).median * CLIFF_FACTOR =>
            {
                prev.extend(run)
            }
            _ => plateaus.push(run),
        }
    }
    plateaus
}

/// Why fewer levels were found than a device usually has: fewer than 3
/// saturated points, no cliff at all, or a sweep that ended in a cache.
fn sweep_note(
    points: &[&SweepPoint],
    sweep_len: usize,
    no_caches: bool,
    reaches_dram: bool,
) -> Option<String> {
    if points.len() < 3 {
        Some(format!(
            "only {} of {} sweep points had enough threads to fill the device",
            points.len(),
            sweep_len
        ))
    } else if no_caches {
        let lo = points[0].bytes;
        let hi = points[points.len() - 1].bytes;
        Some(format!(
            "no cliff between {} and {}: every working set copied at about {:.0} GB/s",
            human_bytes(lo),
            human_bytes(hi),
            plateau_spread(points).median
        ))
    } else if !reaches_dram {
        Some(format!(
            "the sweep ended at {} still faster than DRAM: the last cache is at least that large",
            human_bytes(points[points.len() - 1].bytes)
        ))
    } else {
        None
    }
}

/// A cache level per plateau, named counting down from the last cache
/// before DRAM (L1-L3 on a CPU, L1-L2 on a GPU, "cache N" beyond), its
/// capacity the plateau's largest point and its reach the next point past
/// it.
fn cache_levels(
    cache_runs: &[Vec<&SweepPoint>],
    points: &[&SweepPoint],
    is_cpu: bool,
) -> Vec<Level> {
    let names: &[&str] = if is_cpu {
        &["L1", "L2", "L3"]
    } else {
        &["L1", "L2"]
    };
    let count = cache_runs.len();
    cache_runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            // Named counting down from the last cache before DRAM.
            let from_last = count - 1 - i;
            let name = names
                .len()
                .checked_sub(1 + from_last)
                .map_or_else(|| format!("cache {}", i + 1), |k| names[k].to_string());
            let capacity = run[run.len() - 1].bytes;
            let reach = points
                .iter()
                .map(|p| p.bytes)
                .find(|&b| b > capacity && !run.iter().any(|q| q.bytes == b));
            Level {
                name,
                capacity_bytes: Some(capacity),
                reach_bytes: Some(reach.unwrap_or(capacity)),
                gbs: plateau_spread(run),
            }
        })
        .collect()
}

/// Median of a plateau's medians, with its smallest and largest run.
fn plateau_spread(run: &[&SweepPoint]) -> Spread {
    let median = Spread::of(run.iter().map(|p| p.gbs.median).collect()).median;
    Spread {
        median,
        min: run.iter().map(|p| p.gbs.min).fold(f64::INFINITY, f64::min),
        max: run
            .iter()
            .map(|p| p.gbs.max)
            .fold(f64::NEG_INFINITY, f64::max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(bytes: u64, gbs: f64) -> SweepPoint {
        SweepPoint {
            bytes,
            gbs: Spread {
                median: gbs,
                min: gbs * 0.97,
                max: gbs * 1.03,
            },
            saturated: true,
        }
    }

    fn spread(gbs: f64) -> Spread {
        Spread {
            median: gbs,
            min: gbs * 0.98,
            max: gbs * 1.02,
        }
    }

    const KIB: u64 = 1024;
    const MIB: u64 = 1 << 20;

    /// A CPU-like curve: L1 to 64 KiB, L2 to 2 MiB, L3 to 32 MiB, DRAM.
    fn cpu() -> Hierarchy {
        let mut sweep = Vec::new();
        let mut b = 16 * KIB;
        while b <= 256 * MIB {
            let gbs = if b <= 64 * KIB {
                400.0
            } else if b <= 2 * MIB {
                150.0
            } else if b <= 32 * MIB {
                60.0
            } else {
                20.0
            };
            sweep.push(point(b, gbs));
            b *= 2;
        }
        Hierarchy::from_sweep(sweep, spread(19.0), true, 480 * MIB)
    }

    #[test]
    fn a_staircase_gives_its_levels_fastest_first_with_capacities() {
        let h = cpu();
        let names: Vec<&str> = h.levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "L3", "DRAM"]);
        let caps: Vec<Option<u64>> = h.levels.iter().map(|l| l.capacity_bytes).collect();
        assert_eq!(caps, [Some(64 * KIB), Some(2 * MIB), Some(32 * MIB), None]);
        assert_eq!(h.levels[0].reach_bytes, Some(128 * KIB));
        // Faster levels above slower ones, beyond their spreads.
        for pair in h.levels.windows(2) {
            assert!(pair[0].gbs.min > pair[1].gbs.max, "{pair:?}");
        }
        assert_eq!(h.levels[3].gbs.median, 19.0, "DRAM is the copy ceiling");
        assert!(h.note.is_none(), "{:?}", h.note);
    }

    #[test]
    fn working_sets_are_placed_in_the_level_that_holds_them() {
        let h = cpu();
        assert_eq!(h.place(32 * KIB).level, "L1");
        assert_eq!(h.place(64 * KIB).level, "L1");
        let between = h.place(100 * KIB);
        assert_eq!(between.level, "L1");
        assert!(between.partial, "past the capacity, short of the reach");
        assert_eq!(h.place(1536 * KIB).level, "L2");
        assert!(!h.place(1536 * KIB).partial);
        assert_eq!(h.place(24 * MIB).level, "L3");
        let dram = h.place(512 * MIB);
        assert_eq!(dram.level, "DRAM");
        assert!(dram.is_dram());
        assert!(h.place(8 * KIB).below_sweep);
        assert!(h.place(8 * KIB).describe().contains("in the 64.0 KiB L1"));
    }

    #[test]
    fn gpu_levels_are_named_from_the_last_cache() {
        // H100-like: unsaturated small sets, an L2 plateau, a gradual fall.
        let mut sweep = vec![SweepPoint {
            saturated: false,
            ..point(MIB, 900.0)
        }];
        for (mib, gbs) in [
            (8, 7000.0),
            (16, 7100.0),
            (32, 6500.0),
            (64, 4200.0),
            (128, 3000.0),
            (256, 2950.0),
            (512, 2900.0),
        ] {
            sweep.push(point(mib * MIB, gbs));
        }
        let h = Hierarchy::from_sweep(sweep, spread(2950.0), false, 50 * MIB);
        let names: Vec<&str> = h.levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L2", "DRAM"], "{h:?}");
        assert_eq!(h.levels[0].capacity_bytes, Some(32 * MIB));
        // The single point at 64 MiB is a transition: partly L2.
        assert_eq!(h.levels[0].reach_bytes, Some(64 * MIB));
        assert!(h.place(48 * MIB).partial);
        assert_eq!(h.place(64 * MIB).level, "DRAM");
        // Below the first saturated point: at most L2, and said so.
        let small = h.place(512 * KIB);
        assert_eq!(small.level, "L2");
        assert!(small.below_sweep);
    }

    #[test]
    fn a_flat_sweep_says_why_it_found_no_cliff() {
        let sweep = (0..8).map(|i| point((64 * KIB) << i, 20.0)).collect();
        let h = Hierarchy::from_sweep(sweep, spread(19.5), true, 0);
        assert_eq!(h.levels.len(), 1);
        assert_eq!(h.levels[0].name, "DRAM");
        assert!(
            h.note.as_deref().unwrap().contains("no cliff"),
            "{:?}",
            h.note
        );
        assert_eq!(h.place(KIB).level, "DRAM");
    }

    #[test]
    fn a_sweep_that_never_leaves_the_cache_says_so() {
        let sweep = (0..6).map(|i| point((64 * KIB) << i, 200.0)).collect();
        let h = Hierarchy::from_sweep(sweep, spread(20.0), true, 0);
        let names: Vec<&str> = h.levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L3", "DRAM"]);
        assert!(
            h.note.as_deref().unwrap().contains("at least"),
            "{:?}",
            h.note
        );
    }

    #[test]
    fn noise_within_the_spread_is_not_a_cliff() {
        // A 40% dip whose runs overlap the plateau's spread stays one level.
        let mut sweep: Vec<SweepPoint> = (0..6).map(|i| point((64 * KIB) << i, 100.0)).collect();
        sweep[3].gbs = Spread {
            median: 70.0,
            min: 50.0,
            max: 99.0,
        };
        let h = Hierarchy::from_sweep(sweep, spread(100.0), true, 0);
        assert_eq!(h.levels.len(), 1, "{h:?}");
    }
}
