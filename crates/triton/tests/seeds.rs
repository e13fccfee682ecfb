//! Every built-in task's Triton seed passes the module check and compiles
//! to an sm_90 cubin on a machine without a GPU, with the parameter types
//! kevo reads from the task's signature, and declares a grid for each of
//! its entry points that evaluates at every size. Correctness at full and
//! held-out sizes needs the GPU (scripts/gpu-check triton).

mod common;

use std::collections::BTreeMap;

use common::triton_python;
use kevo_backend::Dialect;
use kevo_tasks::SizeSet;
use kevo_triton::{Compiled, Helper, HelperConfig, KernelRequest, directives};

#[test]
fn every_task_has_a_triton_seed_that_compiles_for_sm_90() {
    let Some(python) = triton_python() else {
        eprintln!("skipping: no python with triton");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut helper = Helper::start(HelperConfig::new(&python, dir.path())).unwrap();
    for task in kevo_tasks::all() {
        let seed = task
            .seed(Dialect::Triton)
            .unwrap_or_else(|| panic!("{} has no Triton seed", task.name()));
        assert!(
            task.signature(Dialect::Triton).is_some(),
            "{} has no Triton signature",
            task.name()
        );
        let entry_points = task.entry_points().unwrap();
        let names: Vec<&str> = task.kernel_names().iter().map(String::as_str).collect();
        let declared =
            directives::parse(seed, &names).unwrap_or_else(|e| panic!("{}: {e}", task.name()));
        let requests: Vec<KernelRequest> = entry_points
            .iter()
            .map(|e| KernelRequest {
                name: e.name.clone(),
                params: e
                    .params
                    .iter()
                    .map(|p| (p.name.clone(), p.triton_type()))
                    .collect(),
                num_warps: declared[&e.name].warps,
                num_stages: declared[&e.name].stages,
                constexprs: BTreeMap::new(),
            })
            .collect();
        let kernels = match helper.compile(seed, &requests, 90).unwrap() {
            Compiled::Kernels { kernels, .. } => kernels,
            Compiled::Rejected { stage, reason } => {
                panic!("{}: rejected at {stage}: {reason}", task.name())
            }
        };
        assert_eq!(kernels.len(), names.len(), "{}", task.name());
        // Every launch of every size set gets a grid within CUDA's limits.
        for set in [SizeSet::Smoke, SizeSet::Full] {
            let plan = task.sizes(set);
            for size in plan.in_distribution.iter().chain([&plan.held_out]) {
                let problem = task.problem(size, task.default_seed());
                for launch in &problem.launches {
                    let k = &kernels[launch.kernel];
                    let scalars: Vec<Option<i64>> = launch
                        .args
                        .iter()
                        .map(|a| match *a {
                            kevo_tasks::Arg::U32(v) => Some(i64::from(v)),
                            kevo_tasks::Arg::I32(v) => Some(i64::from(v)),
                            _ => None,
                        })
                        .collect();
                    assert_eq!(
                        scalars.len(),
                        k.arg_names.len(),
                        "{} `{}`: the launch passes as many arguments as the kernel takes",
                        task.name(),
                        k.name
                    );
                    directives::grid(&declared[&k.name], &k.grid_values(&scalars)).unwrap_or_else(
                        |e| panic!("{} {} `{}`: {e}", task.name(), size.label, k.name),
                    );
                }
            }
        }
    }
}
