//! Null candidates for a task folder's check: the outputs a kernel would
//! leave that does not do the work (writes nothing, writes zeros, writes
//! one constant, copies an input). `kevo task check` runs the task's own
//! check on each; one that passes means the check cannot tell a kernel
//! that skips the work from one that does it.

use super::{BufferDef, FolderTask, Role, program};
use crate::{BufferInit, Problem};

/// The outputs of one null candidate, in the order of `Problem::outputs`.
#[derive(Debug, Clone)]
pub struct NullCandidate {
    /// "writes nothing", "writes zeros", "writes a constant", "copies the
    /// input `x`": the same at every size.
    pub kind: String,
    /// The kind with its particulars ("writes the constant 0.5100").
    pub name: String,
    pub outputs: Vec<Vec<u8>>,
}

/// The checked outputs of a problem: each one's index among the problem's
/// buffers, and its definition.
type Outputs<'a> = Vec<(usize, &'a BufferDef)>;

impl FolderTask {
    /// The null candidates of `problem`, whose expected outputs are
    /// `expected`. The constant is the expected outputs' mean (floats) or
    /// most common value (integers): the constant most likely to pass.
    pub fn null_candidates(&self, problem: &Problem, expected: &[Vec<u8>]) -> Vec<NullCandidate> {
        let outputs: Outputs = problem
            .outputs
            .iter()
            .zip(self.checks.keys())
            .map(|(&i, name)| {
                let def = self
                    .buffers
                    .iter()
                    .find(|b| &b.name == name)
                    .expect("validated: a check names a buffer");
                (i, def)
            })
            .collect();
        let untouched: Vec<Vec<u8>> = outputs
            .iter()
            .map(|&(i, _)| {
                let spec = &problem.buffers[i];
                match &spec.init {
                    BufferInit::Data(d) => d.to_vec(),
                    BufferInit::Zero => vec![0; spec.bytes],
                    BufferInit::Sentinel => vec![0xFF; spec.bytes],
                }
            })
            .collect();
        let mut nulls = vec![
            NullCandidate {
                kind: "writes nothing".into(),
                name: "writes nothing".into(),
                outputs: untouched.clone(),
            },
            NullCandidate {
                kind: "writes zeros".into(),
                name: "writes zeros".into(),
                outputs: outputs
                    .iter()
                    .map(|&(i, _)| vec![0; problem.buffers[i].bytes])
                    .collect(),
            },
            constant_candidate(problem, &outputs, expected),
        ];
        nulls.extend(self.copy_candidates(problem, &outputs, &untouched));
        nulls
    }

    /// For each input (or inout) buffer that starts with data, the outputs
    /// of a kernel that copies it into every output of its element type
    /// (leaving the others `untouched`).
    fn copy_candidates(
        &self,
        problem: &Problem,
        outputs: &Outputs,
        untouched: &[Vec<u8>],
    ) -> Vec<NullCandidate> {
        let mut nulls = Vec::new();
        for (k, b) in self.buffers.iter().enumerate() {
            if !matches!(b.role, Role::Input | Role::Inout) {
                continue;
            }
            let BufferInit::Data(data) = &problem.buffers[k].init else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            let copied = outputs
                .iter()
                .zip(untouched)
                .map(|(&(i, def), untouched)| {
                    if def.element != b.element {
                        return untouched.clone();
                    }
                    // The input, cut or repeated to the output's length.
                    data.iter()
                        .cycle()
                        .take(problem.buffers[i].bytes)
                        .copied()
                        .collect()
                })
                .collect();
            nulls.push(NullCandidate {
                kind: format!("copies the input `{}`", b.name),
                name: format!("copies the input `{}`", b.name),
                outputs: copied,
            });
        }
        nulls
    }
}

/// The outputs of a kernel that writes one constant into each output: the
/// mean of the `expected` output's finite values (floats) or its most
/// common value (integers).
fn constant_candidate(problem: &Problem, outputs: &Outputs, expected: &[Vec<u8>]) -> NullCandidate {
    let mut constants = Vec::new();
    let mut shown = Vec::new();
    for (&(i, def), want) in outputs.iter().zip(expected) {
        let scalar = def.element.scalar;
        let values = program::decode(want, scalar);
        let c = if scalar.is_float() {
            let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
            finite.iter().sum::<f64>() / finite.len().max(1) as f64
        } else {
            let mut counts = std::collections::HashMap::new();
            for v in &values {
                *counts.entry(*v as i64).or_insert(0usize) += 1;
            }
            counts
                .into_iter()
                .max_by_key(|&(v, n)| (n, -v))
                .map_or(0.0, |(v, _)| v as f64)
        };
        shown.push(format!("{c:.4}"));
        let n = problem.buffers[i].bytes / scalar.bytes();
        let mut bytes = Vec::with_capacity(problem.buffers[i].bytes);
        for _ in 0..n {
            program::encode(c, scalar, &mut bytes);
        }
        constants.push(bytes);
    }
    NullCandidate {
        kind: "writes a constant".into(),
        name: format!("writes the constant {}", shown.join(", ")),
        outputs: constants,
    }
}
