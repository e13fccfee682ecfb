//! The block-shape declaration: the one way a candidate chooses its own
//! block (CUDA) / work-group (OpenCL) shape. The grid stays fixed by the task
//! (one thread per output element); only the shape of the blocks changes.
//!
//! Syntax, on a line of its own anywhere in the source:
//!
//! ```text
//! // kevo: block 128            every launch of every kernel: 128 x 1 x 1
//! // kevo: block 32x8           every launch: 32 x 8 x 1
//! // kevo: block lj_step 64     only launches of `lj_step`
//! ```
//!
//! A kernel-specific line wins over a general one. Launches whose block the
//! task fixes (e.g. fft3d's one block per line) ignore declarations. The
//! evaluator rejects a declaration that does not parse, names an unknown
//! kernel, uses more dimensions than the launch's grid, or exceeds the
//! kernel's thread limit.

use std::collections::BTreeMap;

/// Parsed block declarations of one candidate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockDeclarations {
    pub all: Option<[u32; 3]>,
    pub per_kernel: BTreeMap<String, [u32; 3]>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: invalid block declaration `{text}`: {reason}")]
pub struct BlockDeclarationError {
    pub line: u32,
    pub text: String,
    pub reason: String,
}

const MARKER: &str = "kevo:";

fn parse_shape(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(['x', 'X', '*']).map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err("expected 1 to 3 dimensions such as 256, 32x8 or 8x8x4".into());
    }
    let mut shape = [1u32; 3];
    for (d, p) in parts.iter().enumerate() {
        shape[d] = p
            .parse::<u32>()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("`{p}` is not a positive integer"))?;
    }
    Ok(shape)
}

impl BlockDeclarations {
    /// Parse every `// kevo: block ...` line of `source`. `kernels` are the
    /// task's entry points, used to validate kernel-specific lines.
    pub fn parse<K: AsRef<str>>(
        source: &str,
        kernels: &[K],
    ) -> Result<Self, BlockDeclarationError> {
        let kernels: Vec<&str> = kernels.iter().map(AsRef::as_ref).collect();
        let mut out = BlockDeclarations::default();
        for (n, raw) in source.lines().enumerate() {
            let line = raw.trim();
            let Some(rest) = line.strip_prefix("//").map(str::trim) else {
                continue;
            };
            let Some(rest) = rest.strip_prefix(MARKER).map(str::trim) else {
                continue;
            };
            let err = |reason: String| BlockDeclarationError {
                line: n as u32 + 1,
                text: line.to_string(),
                reason,
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            match words.as_slice() {
                ["block", shape] => {
                    if out.all.is_some() {
                        return Err(err("a general block is declared twice".into()));
                    }
                    out.all = Some(parse_shape(shape).map_err(err)?);
                }
                ["block", kernel, shape] => {
                    if !kernels.contains(kernel) {
                        return Err(err(format!(
                            "`{kernel}` is not an entry point of this task ({})",
                            kernels.join(", ")
                        )));
                    }
                    let shape = parse_shape(shape).map_err(err)?;
                    if out.per_kernel.insert(kernel.to_string(), shape).is_some() {
                        return Err(err(format!("the block of `{kernel}` is declared twice")));
                    }
                }
                ["tune" | "require", ..] => {
                    return Err(err(
                        "the kernel declares tunable parameters: it is a template of many \
                         kernels, and each configuration is evaluated on its own (`kevo tune`)"
                            .into(),
                    ));
                }
                _ => {
                    return Err(err(
                        "expected `// kevo: block SHAPE` or `// kevo: block KERNEL SHAPE`".into(),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The declared block for `kernel`, if any.
    pub fn for_kernel(&self, kernel: &str) -> Option<[u32; 3]> {
        self.per_kernel.get(kernel).copied().or(self.all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_general_and_kernel_specific_blocks() {
        let src = "// kevo: block 32x8\n__kernel void a() {}\n  //kevo: block b 64\n";
        let d = BlockDeclarations::parse(src, &["a", "b"]).unwrap();
        assert_eq!(d.for_kernel("a"), Some([32, 8, 1]));
        assert_eq!(d.for_kernel("b"), Some([64, 1, 1]));
        assert_eq!(
            BlockDeclarations::parse("// nothing\n", &["a"])
                .unwrap()
                .for_kernel("a"),
            None
        );
        assert_eq!(
            BlockDeclarations::parse("// kevo: block 8x8x4", &["a"])
                .unwrap()
                .all,
            Some([8, 8, 4])
        );
    }

    #[test]
    fn rejects_bad_declarations_with_the_line() {
        for (src, needle) in [
            ("\n// kevo: block 0", "positive"),
            ("\n// kevo: block 2x2x2x2", "1 to 3"),
            ("\n// kevo: block nope 32", "not an entry point"),
            ("\n// kevo: blocks 32", "expected"),
            ("\n// kevo: block 32\n// kevo: block 64", "twice"),
            ("\n// kevo: tune B 32 64", "template"),
        ] {
            let e = BlockDeclarations::parse(src, &["a"]).unwrap_err();
            assert!(e.line >= 2, "{e}");
            assert!(e.to_string().contains(needle), "{src:?}: {e}");
        }
    }
}
