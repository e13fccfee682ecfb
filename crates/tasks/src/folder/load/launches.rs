//! Loading a task folder's `[[launches]]`, `steps` and `ping_pong`: which
//! kernel each launch runs over which grid and block with which arguments,
//! the buffer pairs that swap after every step, and that every buffer is
//! passed and every kernel launched.

use std::collections::BTreeSet;

use super::raw::{RawBlock, RawLaunch};
use super::{Loader, Scope};
use crate::folder::{BlockDef, BufferDef, FolderError, LaunchDef, Role, ScalarDef, Stage};

impl Scope<'_> {
    /// The launches, at least one, of the task's `kernels`.
    pub(super) fn launches(
        &self,
        raw: &[RawLaunch],
        kernels: &[String],
        buffers: &[BufferDef],
        scalars: &[ScalarDef],
    ) -> Result<Vec<LaunchDef>, FolderError> {
        let launches = raw
            .iter()
            .enumerate()
            .map(|(i, l)| self.launch(&format!("launches[{i}]"), l, kernels, buffers, scalars))
            .collect::<Result<Vec<_>, _>>()?;
        if launches.is_empty() {
            return Err(self.load.error("launches", "declares no launch".into()));
        }
        Ok(launches)
    }

    /// One launch, at `key`: a kernel of the task, 1 to 3 grid
    /// expressions, a block shape and arguments that name buffers or
    /// scalars.
    fn launch(
        &self,
        key: &str,
        l: &RawLaunch,
        kernels: &[String],
        buffers: &[BufferDef],
        scalars: &[ScalarDef],
    ) -> Result<LaunchDef, FolderError> {
        let err =
            |field: &str, message: String| self.load.error(&format!("{key}.{field}"), message);
        let kernel = kernels.iter().position(|k| *k == l.kernel).ok_or_else(|| {
            err(
                "kernel",
                format!(
                    "`{}` is not one of the task's kernels ({})",
                    l.kernel,
                    kernels.join(", ")
                ),
            )
        })?;
        if l.grid.is_empty() || l.grid.len() > 3 {
            return Err(err(
                "grid",
                "expected 1 to 3 expressions (threads per dimension)".into(),
            ));
        }
        let grid = l
            .grid
            .iter()
            .enumerate()
            .map(|(d, g)| self.expr(&format!("{key}.grid[{d}]"), g, &[]))
            .collect::<Result<Vec<_>, _>>()?;
        let block = match &l.block {
            None => BlockDef::Default([256, 1, 1]),
            Some(RawBlock::Default(s)) => BlockDef::Default(shape(s).map_err(|m| err("block", m))?),
            Some(RawBlock::Fixed(s)) => BlockDef::Fixed(shape(s).map_err(|m| err("block", m))?),
        };
        for (a, name) in l.args.iter().enumerate() {
            if !buffers.iter().any(|b| &b.name == name) && !scalars.iter().any(|s| &s.name == name)
            {
                return Err(err(
                    &format!("args[{a}]"),
                    format!("`{name}` is neither a buffer nor a scalar of the task"),
                ));
            }
        }
        Ok(LaunchDef {
            kernel,
            grid,
            block,
            args: l.args.clone(),
            stage: l.stage.unwrap_or(Stage::Step),
        })
    }
}

impl Loader<'_> {
    /// Ping-pong pairs swap roles after every step: each name is a written
    /// buffer in one pair only, and a pair's buffers have the same type and
    /// length.
    pub(super) fn check_ping_pong(
        &self,
        pairs: &[[String; 2]],
        buffers: &[BufferDef],
    ) -> Result<(), FolderError> {
        let mut paired: BTreeSet<&str> = BTreeSet::new();
        for (i, pair) in pairs.iter().enumerate() {
            let key = format!("ping_pong[{i}]");
            for name in pair {
                let Some(b) = buffers.iter().find(|b| &b.name == name) else {
                    return Err(self.error(&key, format!("`{name}` is not a buffer of the task")));
                };
                if b.role == Role::Input {
                    return Err(self.error(
                        &key,
                        format!("`{name}` is an input; ping-pong buffers are written"),
                    ));
                }
                if !paired.insert(name) {
                    return Err(self.error(&key, format!("`{name}` is in more than one pair")));
                }
            }
            let (a, b) = (&pair[0], &pair[1]);
            let (ba, bb) = (
                buffers.iter().find(|x| &x.name == a).expect("checked"),
                buffers.iter().find(|x| &x.name == b).expect("checked"),
            );
            if ba.element != bb.element || ba.length != bb.length {
                return Err(self.error(
                    &key,
                    format!("`{a}` and `{b}` must have the same type and length to swap"),
                ));
            }
        }
        Ok(())
    }

    /// Every buffer is passed to a launch and every kernel launched.
    pub(super) fn check_everything_launched(
        &self,
        kernels: &[String],
        buffers: &[BufferDef],
        launches: &[LaunchDef],
    ) -> Result<(), FolderError> {
        let used: BTreeSet<&str> = launches
            .iter()
            .flat_map(|l| l.args.iter().map(String::as_str))
            .collect();
        for b in buffers {
            if !used.contains(b.name.as_str()) {
                return Err(self.error("buffers", format!("`{}` is passed to no launch", b.name)));
            }
        }
        for (k, name) in kernels.iter().enumerate() {
            if !launches.iter().any(|l| l.kernel == k) {
                return Err(
                    self.error("launches", format!("the kernel `{name}` is never launched"))
                );
            }
        }
        Ok(())
    }
}

/// A block shape: 1 to 3 positive dimensions, padded with 1s.
fn shape(dims: &[u32]) -> Result<[u32; 3], String> {
    if dims.is_empty() || dims.len() > 3 || dims.contains(&0) {
        return Err("expected 1 to 3 positive dimensions".into());
    }
    let mut out = [1u32; 3];
    out[..dims.len()].copy_from_slice(dims);
    Ok(out)
}
