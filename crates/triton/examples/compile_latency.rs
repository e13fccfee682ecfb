//! Compile latency of Triton candidates through the helper: the helper's
//! start (Python and Triton's import), then candidates compiled one after
//! another, each cold (a cache of its own). No GPU is needed.
//!
//! usage: cargo run --release -p kevo-triton --example compile_latency [PYTHON] [RUNS]

use std::collections::BTreeMap;
use std::time::Instant;

use kevo_triton::{Compiled, Helper, HelperConfig, KernelRequest};

const SAXPY: &str = "import triton\nimport triton.language as tl\n\n# kevo: grid saxpy = (cdiv(n, BLOCK),)\n@triton.jit\ndef saxpy(x, y, a, n, BLOCK: tl.constexpr = 1024):\n    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    m = i < n\n    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)\n";

fn main() {
    let mut args = std::env::args().skip(1);
    let python = args.next().unwrap_or_else(kevo_triton::default_python);
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(20);
    let dir = tempfile::tempdir().expect("a scratch directory");
    let started = Instant::now();
    let mut helper = Helper::start(HelperConfig::new(&python, dir.path())).expect("a helper");
    let start_s = started.elapsed().as_secs_f64();
    println!(
        "helper start (Python {}, Triton {}): {start_s:.3} s",
        helper.versions().python,
        helper.versions().triton
    );
    let mut wall = Vec::new();
    let mut inside = Vec::new();
    for k in 0..runs {
        // A different block per candidate: nothing is reused.
        let block = [128, 256, 512, 1024, 2048][k % 5];
        let request = KernelRequest {
            name: "saxpy".into(),
            params: [("x", "*fp32"), ("y", "*fp32"), ("a", "fp32"), ("n", "u32")]
                .iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect(),
            num_warps: 4,
            num_stages: 3,
            constexprs: BTreeMap::from([("BLOCK".to_string(), block)]),
        };
        let t = Instant::now();
        let answer = helper
            .compile(SAXPY, &[request], 90)
            .expect("the helper answers");
        let s = t.elapsed().as_secs_f64();
        match answer {
            Compiled::Kernels { seconds, .. } => {
                wall.push(s);
                inside.push(seconds);
            }
            Compiled::Rejected { stage, reason } => panic!("rejected at {stage}: {reason}"),
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (m, lo, hi) = median(&mut wall);
    println!("first compile: {:.3} s", wall_first(&inside));
    println!("per candidate, {runs} runs: median {m:.3} s (min {lo:.3}, max {hi:.3}) round trip");
    let (m, lo, hi) = median(&mut inside);
    println!("  of which in the helper: median {m:.3} s (min {lo:.3}, max {hi:.3})");
}

fn wall_first(inside: &[f64]) -> f64 {
    inside.first().copied().unwrap_or(f64::NAN)
}
