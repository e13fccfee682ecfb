//! The task's launch specs turned into launches with concrete blocks: a
//! block the candidate declares replaces the task's default and must fit
//! the kernel's limit, an undeclared default block is halved until it fits,
//! a fixed block must fit as it is.

use kevo_backend::{Backend, BackendError, KernelId};
use kevo_tasks::{Block, BlockDeclarations, LaunchSpec, Problem, Task};

use crate::Evaluator;
use crate::device::PendingLaunch;

impl<B: Backend> Evaluator<B> {
    /// Turn the task's launch specs into launches with concrete block shapes.
    /// A block the candidate declares replaces the task's default and must
    /// fit the kernel's limit; an undeclared default block is halved (z
    /// first, then y, then x) while it exceeds the limit, as the Metal-Sci
    /// host does; a fixed block that exceeds it is an error.
    pub(crate) fn resolve_launches(
        &self,
        task: &Task,
        problem: &Problem,
        kernels: &[KernelId],
        declared: &BlockDeclarations,
        triton: bool,
    ) -> Result<Vec<PendingLaunch>, BackendError> {
        if triton {
            // A Triton kernel's grid is the candidate's own declaration,
            // in programs, and its block Triton's; the backend computes
            // both from the launch's arguments (kevo_triton::TritonBackend).
            return Ok(problem
                .launches
                .iter()
                .map(|spec| PendingLaunch {
                    kernel: kernels[spec.kernel],
                    global: spec.threads.map(|t| t.max(1)),
                    local: [1, 1, 1],
                    args: spec.args.clone(),
                })
                .collect());
        }
        let mut limits = Vec::with_capacity(kernels.len());
        for &k in kernels {
            limits.push(self.backend.kernel_info(k)?.max_threads_per_block.max(1));
        }
        let names = task.kernel_names();
        problem
            .launches
            .iter()
            .map(|spec| {
                let limit = limits[spec.kernel];
                let name = names[spec.kernel].as_str();
                let block = block_for(spec, name, limit, declared)?;
                let global = [0, 1, 2]
                    .map(|d| spec.threads[d].div_ceil(u64::from(block[d])) * u64::from(block[d]));
                Ok(PendingLaunch {
                    kernel: kernels[spec.kernel],
                    global,
                    local: block,
                    args: spec.args.clone(),
                })
            })
            .collect()
    }
}

/// The block of one launch of kernel `name`, which allows `limit` threads
/// per block: the candidate's declared block, which must have no more
/// dimensions than the grid and fit the limit; else the task's default,
/// halved (z first, then y, then x) until it fits; or the task's fixed
/// block, which must fit.
fn block_for(
    spec: &LaunchSpec,
    name: &str,
    limit: u64,
    declared: &BlockDeclarations,
) -> Result<[u32; 3], BackendError> {
    let threads_of = |b: [u32; 3]| b.iter().map(|&x| u64::from(x)).product::<u64>();
    Ok(match spec.block {
        Block::Default(default) => match declared.for_kernel(name) {
            Some(b) => {
                let dims = (0..3)
                    .rev()
                    .find(|&d| default[d] > 1 || spec.threads[d] > 1)
                    .unwrap_or(0)
                    + 1;
                if b[dims..].iter().any(|&x| x != 1) {
                    return Err(BackendError::InvalidLaunch(format!(
                        "declared block {b:?} for `{name}` has more dimensions than its {dims}-D grid"
                    )));
                }
                if threads_of(b) > limit {
                    return Err(BackendError::InvalidLaunch(format!(
                        "declared block {b:?} for `{name}` has {} threads; this kernel allows at most {limit} on this device",
                        threads_of(b)
                    )));
                }
                b
            }
            None => {
                let mut b = default;
                while threads_of(b) > limit {
                    let d = (0..3).rev().find(|&d| b[d] > 1).unwrap_or(0);
                    b[d] /= 2;
                }
                b
            }
        },
        Block::Fixed(b) => {
            if threads_of(b) > limit {
                return Err(BackendError::InvalidLaunch(format!(
                    "`{name}` allows {limit} threads per block, the task requires {b:?}"
                )));
            }
            b
        }
    })
}
