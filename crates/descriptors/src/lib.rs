//! Behavioural descriptors of a kernel source for quality-diversity
//! search (KernelFoundry's three axes, four levels each), computed
//! deterministically by static analysis per dialect, so that the same
//! source always lands in the same MAP-Elites cell.
//!
//! The axes and how a level is reached (the first rule that matches,
//! from the top; each construct is found after comments and strings are
//! removed and `#define` macros expanded where they are used):
//!
//! Memory access
//! - 3 multi-level: shared/local-memory tiling together with register
//!   blocking (more arrays declared in function bodies without an address
//!   space than the seed declares) or asynchronous copies/prefetch
//!   (`cp.async`, `memcpy_async`, `__pipeline_*`; `async_work_group_copy`,
//!   `prefetch`), which fill shared/local memory themselves.
//! - 2 tiled: `__shared__` (CUDA), `__local`/`local` (OpenCL),
//!   `threadgroup` (Metal).
//! - 1 vectorised: wide accesses the kernel chose: `vload`/`vstore`,
//!   `as_T`, CUDA's cache-hinted loads (`__ldg`, `__ldcs`, ...), vector
//!   PTX, a cast to a vector pointer (`(float4*)x`), or a vector buffer
//!   type the seed's signature does not have; or register blocking
//!   without tiling. A vector local or literal is arithmetic, and a
//!   `float4` buffer of the task's signature is its layout: neither
//!   counts.
//! - 0 scalar: none of these.
//!
//! Algorithmic structure, against the task's seed in the same dialect
//! (the seed itself is 0):
//! - 3 asymptotically different: the deepest nest of loops over data
//!   is shallower than the seed's, or a doubling/halving loop that is
//!   neither a barrier tree nor a shuffle reduction appears where the
//!   seed has none.
//! - 2 reformulated: a different set of math builtins (`exp` for `pow`,
//!   `rsqrt` for `1/sqrt`; fast variants like `__expf` count as the
//!   builtin they approximate), a different set of precisions (half,
//!   bfloat16, float, double), or more program-scope constant tables.
//! - 1 fused: more loops than the seed or a deeper nest (passes merged
//!   into one kernel, temporal blocking, several outputs per thread).
//! - 0 as the seed.
//!
//! Loops whose condition names only their counters and compile-time
//! constants are unrollable, not loops over data: they do not count for
//! the depth. A remainder loop, holding no loop itself, that continues an
//! earlier loop's counter (`for (; j < n; ++j)`) or follows a closed block
//! holding a vector access finishes what a wider path left: it is the
//! memory axis's work and counts neither as a loop nor for the depth.
//! Loops whose body holds a barrier or a warp primitive (tile, tree and
//! shuffle loops) are the other axes' work: they do not count as loops or
//! doubling loops, and such a loop with everything inside it is
//! one level of depth, so a tiled O(N^2) kernel is as deep as its
//! untiled seed.
//!
//! Parallel coordination
//! - 3 global: atomics, `__threadfence`, a grid-wide sync.
//! - 2 warp/sub-group primitives: shuffles, votes, warp reductions
//!   (`__shfl_*_sync`, `__syncwarp`; `sub_group_*`, `work_group_reduce_*`;
//!   `simd_*`).
//! - 1 barriers: `__syncthreads`, `barrier`, `threadgroup_barrier`; but a
//!   barrier in a kernel that tiles counts for the tiling only (it keeps
//!   the tile consistent), unless it sits in a doubling/halving loop (a
//!   tree reduction).
//! - 0 none.
//!
//! These are heuristics over text: a kernel can use a construct without
//! benefiting from it. They place a kernel for diversity, never score it.

mod features;
mod lex;

use std::fmt;

pub use features::{Features, Loop, Seen};
use kevo_backend::{DeviceKind, Dialect};
pub use lex::normalised;
use serde::{Deserialize, Serialize};

/// Levels per axis.
pub const LEVELS: u8 = 4;

/// The three axes of the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    Memory,
    Algorithm,
    Coordination,
}

impl Axis {
    pub const ALL: [Axis; 3] = [Axis::Memory, Axis::Algorithm, Axis::Coordination];

    pub fn name(self) -> &'static str {
        match self {
            Axis::Memory => "memory",
            Axis::Algorithm => "algorithm",
            Axis::Coordination => "coordination",
        }
    }

    /// What `level` on this axis means, in a few words.
    pub fn level_name(self, level: u8) -> &'static str {
        match (self, level) {
            (Axis::Memory, 0) => "scalar access",
            (Axis::Memory, 1) => "vectorised access",
            (Axis::Memory, 2) => "shared/local-memory tiling",
            (Axis::Memory, _) => "multi-level (tiling with register blocking or async copies)",
            (Axis::Algorithm, 0) => "the seed's algorithm",
            (Axis::Algorithm, 1) => "fused (more loops or a deeper loop nest than the seed)",
            (Axis::Algorithm, 2) => "reformulated arithmetic",
            (Axis::Algorithm, _) => "an asymptotically different algorithm",
            (Axis::Coordination, 0) => "no coordination",
            (Axis::Coordination, 1) => "work-group barriers",
            (Axis::Coordination, 2) => "warp/sub-group primitives",
            (Axis::Coordination, _) => "global coordination (atomics, grid sync)",
        }
    }

    /// Whether moving toward `level` is sound advice on a device of
    /// `kind`. On a CPU, local memory is ordinary cached memory (a tile
    /// only adds copies), every barrier splits the work-item loop, and
    /// sub-group primitives have no lanes behind them: the levels built on
    /// them are not suggested there.
    pub fn suits(self, level: u8, kind: Option<DeviceKind>) -> bool {
        let gpu_only = matches!(
            (self, level),
            (Axis::Memory, 2..) | (Axis::Coordination, 1 | 2)
        );
        kind != Some(DeviceKind::Cpu) || !gpu_only
    }

    /// A suggestion for moving toward `level` on this axis as a proposer
    /// is told it ("consider tiling through __shared__ memory"), in the
    /// dialect's words and within the system prompts' rules: the launch
    /// stays one work-item per output (several outputs per work-item do
    /// not shrink it) and results stay deterministic. None where the
    /// device makes the move pointless (see [`Axis::suits`]).
    pub fn suggestion(
        self,
        level: u8,
        dialect: Dialect,
        kind: Option<DeviceKind>,
    ) -> Option<String> {
        if !self.suits(level, kind) {
            return None;
        }
        let w = Words::of(dialect);
        let shared = w.shared;
        Some(match (self, level) {
            (Axis::Memory, 0) => "consider plain scalar accesses with simpler indexing".into(),
            (Axis::Memory, 1) => format!("consider vectorised memory access ({})", w.vector),
            (Axis::Memory, 2) => format!("consider tiling through {shared} memory"),
            (Axis::Memory, _) => format!(
                "consider keeping reused values in private arrays (registers) on top of \
                 {shared} tiles, or asynchronous copies into the tiles"
            ),
            (Axis::Algorithm, 0) => {
                "consider returning to the seed's algorithm with tuned details".into()
            }
            (Axis::Algorithm, 1) => fusing(dialect, kind),
            (Axis::Algorithm, 2) => {
                "consider reformulating the arithmetic (cheaper math builtins, precomputed tables)"
                    .into()
            }
            (Axis::Algorithm, _) => "consider an algorithm with a lower operation count".into(),
            (Axis::Coordination, 0) => {
                "consider removing synchronisation the result does not need".into()
            }
            (Axis::Coordination, 1) => {
                format!("consider work-group cooperation with {}", w.barrier)
            }
            (Axis::Coordination, 2) => format!("consider warp/sub-group primitives ({})", w.warp),
            (Axis::Coordination, _) => "consider atomics or a global coordination pattern \
                 whose result does not depend on the order of updates"
                .into(),
        })
    }
}

/// Fusing as the rules allow it: fewer passes and more reuse, never
/// several outputs per work-item (they would not shrink the launch).
fn fusing(dialect: Dialect, kind: Option<DeviceKind>) -> String {
    let Words { group, item, .. } = Words::of(dialect);
    let reuse = match (dialect, kind) {
        (Dialect::Triton, _) => "reuse each loaded block for every result that needs it".into(),
        (_, Some(DeviceKind::Cpu)) => {
            "order the work so that data is reused while it is in cache".into()
        }
        _ => format!("reuse what a {group} has loaded across its {item}s"),
    };
    let launch = match dialect {
        Dialect::Triton => String::new(),
        _ => format!(" (the launch stays one {item} per output)"),
    };
    format!(
        "consider fusing work: merge passes over the same data into one loop and {reuse}{launch}"
    )
}

/// A dialect's names for the constructs the suggestions mention.
struct Words {
    shared: &'static str,
    barrier: &'static str,
    warp: &'static str,
    vector: &'static str,
    group: &'static str,
    item: &'static str,
}

impl Words {
    fn of(dialect: Dialect) -> Words {
        match dialect {
            Dialect::Cuda => Words {
                shared: "__shared__",
                barrier: "__syncthreads()",
                warp: "__shfl_down_sync",
                vector: "float4 loads and stores",
                group: "block",
                item: "thread",
            },
            Dialect::OpenCl => Words {
                shared: "__local",
                barrier: "barrier(CLK_LOCAL_MEM_FENCE)",
                // The extension may be missing: the rules ask for a fallback.
                warp: "sub_group_reduce_add, behind `#ifdef cl_khr_subgroups` with a fallback",
                vector: "vload4/vstore4",
                group: "work-group",
                item: "work-item",
            },
            Dialect::Metal => Words {
                shared: "threadgroup",
                barrier: "threadgroup_barrier",
                warp: "simd_sum",
                vector: "float4 loads and stores",
                group: "threadgroup",
                item: "thread",
            },
            Dialect::Triton => Words {
                shared: "shared (through `tl.dot`)",
                barrier: "tl.debug_barrier",
                warp: "tl.reduce",
                vector: "block pointers and contiguity hints (tl.multiple_of)",
                group: "program",
                item: "program",
            },
        }
    }
}

/// A cell of the archive: one level (0..=3) per axis.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct Descriptors {
    pub memory: u8,
    pub algorithm: u8,
    pub coordination: u8,
}

impl Descriptors {
    pub fn new(memory: u8, algorithm: u8, coordination: u8) -> Self {
        let clamp = |l: u8| l.min(LEVELS - 1);
        Descriptors {
            memory: clamp(memory),
            algorithm: clamp(algorithm),
            coordination: clamp(coordination),
        }
    }

    pub fn level(&self, axis: Axis) -> u8 {
        match axis {
            Axis::Memory => self.memory,
            Axis::Algorithm => self.algorithm,
            Axis::Coordination => self.coordination,
        }
    }

    pub fn with(&self, axis: Axis, level: u8) -> Descriptors {
        let mut d = *self;
        let l = level.min(LEVELS - 1);
        match axis {
            Axis::Memory => d.memory = l,
            Axis::Algorithm => d.algorithm = l,
            Axis::Coordination => d.coordination = l,
        }
        d
    }

    /// Every cell of the grid, in order.
    pub fn grid() -> impl Iterator<Item = Descriptors> {
        (0..LEVELS).flat_map(|m| {
            (0..LEVELS).flat_map(move |a| (0..LEVELS).map(move |c| Descriptors::new(m, a, c)))
        })
    }

    /// Steps between two cells (Manhattan distance over the levels).
    pub fn distance(&self, other: &Descriptors) -> u32 {
        Axis::ALL
            .iter()
            .map(|a| self.level(*a).abs_diff(other.level(*a)) as u32)
            .sum()
    }
}

/// "m2-a0-c1": memory, algorithm, coordination levels.
impl fmt::Display for Descriptors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "m{}-a{}-c{}",
            self.memory, self.algorithm, self.coordination
        )
    }
}

/// The label's parse ("m2-a0-c1"), as stored with candidates and decisions.
impl std::str::FromStr for Descriptors {
    type Err = String;

    fn from_str(label: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{label}` is not a cell label like m2-a0-c1");
        let levels: Vec<u8> = label
            .split('-')
            .zip(["m", "a", "c"])
            .map(|(part, prefix)| {
                part.strip_prefix(prefix)
                    .and_then(|l| l.parse::<u8>().ok())
                    .filter(|l| *l < LEVELS)
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(bad)?;
        match levels.as_slice() {
            [m, a, c] if label.split('-').count() == 3 => Ok(Descriptors::new(*m, *a, *c)),
            _ => Err(bad()),
        }
    }
}

/// A candidate's descriptors with the constructs that placed it, so a
/// placement can be checked by reading the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    pub descriptors: Descriptors,
    /// One line per axis: "memory 2: __shared__ (line 12)".
    pub evidence: Vec<String>,
}

/// Descriptors of `source` against the seed's features (computed once per
/// run with [`Features::of`]).
pub fn analyse(source: &str, dialect: Dialect, seed: &Features) -> Analysis {
    let f = Features::of(source, dialect);
    let at = |s: &Seen| format!("{} (line {})", s.pattern, s.line);
    let (memory, memory_why) = memory(&f, seed);
    let (algorithm, algorithm_why) = algorithm(&f, seed);
    let tree = f.tree_reduction();
    let (coordination, coordination_why) =
        match (&f.global_coordination, &f.warp_primitive, &f.barrier) {
            (Some(g), _, _) => (3, format!("global coordination {}", at(g))),
            (None, Some(w), _) => (2, format!("warp/sub-group primitive {}", at(w))),
            (None, None, Some(b)) if f.tiling.is_none() => (1, format!("barrier {}", at(b))),
            (None, None, Some(b)) => match tree {
                Some(line) => (
                    1,
                    format!("barrier {} in a tree reduction (line {line})", at(b)),
                ),
                None => (0, format!("barrier {} only keeps tiles consistent", at(b))),
            },
            (None, None, None) => (0, "no barrier, warp primitive or atomic".into()),
        };
    Analysis {
        descriptors: Descriptors::new(memory, algorithm, coordination),
        evidence: vec![
            format!("memory {memory}: {memory_why}"),
            format!("algorithm {algorithm}: {algorithm_why}"),
            format!("coordination {coordination}: {coordination_why}"),
        ],
    }
}

/// The memory level. A vector buffer or per-thread arrays the seed has too
/// are the task's data layout, not a choice of this kernel's.
fn memory(f: &Features, seed: &Features) -> (u8, String) {
    let at = |s: &Seen| format!("{} (line {})", s.pattern, s.line);
    let vector = f.vector_access.as_ref().or_else(|| {
        f.signature_vectors.iter().find(|v| {
            !seed
                .signature_vectors
                .iter()
                .any(|s| s.pattern == v.pattern)
        })
    });
    let register = (f.register_arrays.len() > seed.register_arrays.len()).then(|| {
        let theirs = |a: &&Seen| !seed.register_arrays.iter().any(|s| s.pattern == a.pattern);
        let arrays = &f.register_arrays;
        let new = arrays.iter().find(theirs).or(arrays.last());
        let seed_count = seed.register_arrays.len();
        new.map(|a| format!("{} (the seed's {seed_count})", at(a)))
            .unwrap_or_default()
    });
    match (&f.tiling, register, &f.async_copy, vector) {
        (_, _, Some(a), _) => (3, format!("asynchronous copy {}", at(a))),
        (Some(t), Some(r), _, _) => (3, format!("tiling {} with register array {r}", at(t))),
        (Some(t), None, _, _) => (2, format!("tiling {}", at(t))),
        (None, _, _, Some(v)) => (1, format!("vector access {}", at(v))),
        (None, Some(r), _, None) => (1, format!("register array {r} without tiling")),
        (None, None, None, None) => (0, "no vector, shared or asynchronous access".into()),
    }
}

fn algorithm(f: &Features, seed: &Features) -> (u8, String) {
    let (depth, seed_depth) = (f.data_loop_depth(), seed.data_loop_depth());
    if seed_depth > 0 && depth < seed_depth {
        return (
            3,
            format!("loop nest over data {depth} deep, the seed's {seed_depth}"),
        );
    }
    if f.logarithmic_loops() > 0 && seed.logarithmic_loops() == 0 {
        return (
            3,
            "a doubling/halving loop over data the seed does not have".into(),
        );
    }
    if f.math != seed.math {
        let list = |s: &std::collections::BTreeSet<String>| {
            s.iter().cloned().collect::<Vec<_>>().join(",")
        };
        return (
            2,
            format!(
                "math builtins {{{}}}, the seed's {{{}}}",
                list(&f.math),
                list(&seed.math)
            ),
        );
    }
    if f.precisions != seed.precisions {
        let list =
            |s: &std::collections::BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join(",");
        return (
            2,
            format!(
                "precisions {{{}}}, the seed's {{{}}}",
                list(&f.precisions),
                list(&seed.precisions)
            ),
        );
    }
    if f.tables > seed.tables {
        return (
            2,
            format!("{} constant tables, the seed's {}", f.tables, seed.tables),
        );
    }
    let (loops, seed_loops) = (
        f.algorithmic_loops().count(),
        seed.algorithmic_loops().count(),
    );
    if loops > seed_loops || depth > seed_depth {
        return (
            1,
            format!(
                "{loops} loops {depth} deep over data, the seed's {seed_loops} loops {seed_depth} deep"
            ),
        );
    }
    (0, "the seed's loop structure and arithmetic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_has_64_distinct_cells_and_labels() {
        let cells: std::collections::BTreeSet<String> =
            Descriptors::grid().map(|d| d.to_string()).collect();
        assert_eq!(cells.len(), 64);
        assert!(cells.contains("m3-a0-c2"));
        let d = Descriptors::new(9, 1, 2);
        assert_eq!(d.memory, 3, "levels clamp to 0..=3");
        assert_eq!(d.with(Axis::Coordination, 0).distance(&d), 2);
        for cell in Descriptors::grid() {
            assert_eq!(cell.to_string().parse::<Descriptors>(), Ok(cell));
        }
        for bad in ["m4-a0-c0", "m1-a0", "a0-m1-c0", "m1-a0-c0-x", ""] {
            assert!(bad.parse::<Descriptors>().is_err(), "{bad}");
        }
    }

    const DIALECTS: [Dialect; 4] = [
        Dialect::Cuda,
        Dialect::OpenCl,
        Dialect::Metal,
        Dialect::Triton,
    ];

    fn suggestions(kind: Option<DeviceKind>) -> Vec<(Dialect, Axis, u8, Option<String>)> {
        DIALECTS
            .iter()
            .flat_map(|d| Axis::ALL.map(|a| (*d, a)))
            .flat_map(|(d, a)| (0..LEVELS).map(move |l| (d, a, l, a.suggestion(l, d, kind))))
            .collect()
    }

    #[test]
    fn no_suggestion_asks_for_several_outputs_per_work_item() {
        // The launch is one work-item per output: more outputs per item
        // would not shrink it, so no suggestion may ask for them.
        for kind in [None, Some(DeviceKind::Cpu), Some(DeviceKind::DiscreteGpu)] {
            for (d, axis, level, text) in suggestions(kind) {
                let text = text.unwrap_or_default();
                assert!(!text.contains("several"), "{d:?} {axis:?} {level}: {text}");
            }
        }
        let fused = Axis::Algorithm
            .suggestion(1, Dialect::OpenCl, None)
            .unwrap();
        assert!(
            fused.starts_with("consider fusing work: merge passes"),
            "{fused}"
        );
        assert!(fused.contains("one work-item per output"), "{fused}");
    }

    #[test]
    fn a_cpu_is_never_told_to_tile_or_use_sub_groups() {
        for (d, axis, level, text) in suggestions(Some(DeviceKind::Cpu)) {
            let Some(text) = text else { continue };
            let w = Words::of(d);
            for banned in [w.shared, w.barrier, w.warp, "tiling", "sub-group"] {
                assert!(!text.contains(banned), "{d:?} {axis:?} {level}: {text}");
            }
        }
        let on = |kind| Axis::Memory.suggestion(2, Dialect::OpenCl, kind);
        assert_eq!(on(Some(DeviceKind::Cpu)), None);
        assert_eq!(
            on(Some(DeviceKind::DiscreteGpu)).as_deref(),
            Some("consider tiling through __local memory")
        );
        assert!(
            Axis::Memory.suits(1, Some(DeviceKind::Cpu)),
            "vectors help a CPU"
        );
    }

    #[test]
    fn a_seed_is_level_zero_on_the_algorithm_axis() {
        let seed = "for (int i = 0; i < n; ++i) acc += sqrtf(x[i]);";
        let f = Features::of(seed, Dialect::Cuda);
        assert_eq!(analyse(seed, Dialect::Cuda, &f).descriptors.algorithm, 0);
    }
}
