//! Finding a level's problems in a KernelBench checkout or package.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::KernelBenchError;

/// One problem file, `level<L>/<id>_<Name>.py`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub level: u8,
    pub id: u32,
    /// The file's name without `.py`, e.g. `19_ReLU`.
    pub stem: String,
    pub path: PathBuf,
}

impl Problem {
    /// The task's name: `kb-l1-19-relu`.
    pub fn task_name(&self) -> String {
        let rest = self.stem.split_once('_').map(|(_, r)| r).unwrap_or("");
        let mut slug = String::new();
        for c in rest.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.ends_with('-') {
                slug.push('-');
            }
        }
        let slug = slug.trim_matches('-');
        let slug: String = slug.chars().take(40).collect();
        format!(
            "kb-l{}-{}-{}",
            self.level,
            self.id,
            slug.trim_end_matches('-')
        )
    }
}

/// The problems of `level` under `source`: a KernelBench checkout (its
/// `KernelBench/level<L>`), a folder holding `level<L>`, the level folder
/// itself, or the name of an installed Python package (asked of
/// `python`), sorted by id.
pub fn discover(source: &str, level: u8, python: &str) -> Result<Vec<Problem>, KernelBenchError> {
    let root = if Path::new(source).exists() {
        PathBuf::from(source)
    } else {
        package_dir(source, python)?
    };
    let level_dir = format!("level{level}");
    let candidates = [
        root.join("KernelBench").join(&level_dir),
        root.join(&level_dir),
        root.clone(),
    ];
    let dir = candidates
        .iter()
        .find(|d| d.is_dir() && (d.ends_with(&level_dir)))
        .ok_or_else(|| {
            KernelBenchError::Source(format!(
                "{} holds no {level_dir} folder (looked for KernelBench/{level_dir}, {level_dir}, or the folder itself named {level_dir})",
                root.display()
            ))
        })?;
    let entries = std::fs::read_dir(dir).map_err(|e| KernelBenchError::Io {
        path: dir.clone(),
        message: e.to_string(),
    })?;
    let mut problems = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".py") else {
            continue;
        };
        let Some(id) = stem.split('_').next().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        problems.push(Problem {
            level,
            id,
            stem: stem.to_string(),
            path,
        });
    }
    problems.sort_by_key(|p| p.id);
    if problems.is_empty() {
        return Err(KernelBenchError::Source(format!(
            "{} holds no problem files (named like 19_ReLU.py)",
            dir.display()
        )));
    }
    Ok(problems)
}

/// Where an installed package lives, asked of the interpreter.
fn package_dir(name: &str, python: &str) -> Result<PathBuf, KernelBenchError> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !valid {
        return Err(KernelBenchError::Source(format!(
            "`{name}` is neither a folder nor a Python package name"
        )));
    }
    let script = format!(
        "import importlib.util, os, sys\ns = importlib.util.find_spec({name:?})\nif s is None: sys.exit(3)\nprint(list(s.submodule_search_locations or [os.path.dirname(s.origin)])[0])"
    );
    let out = Command::new(python)
        .args(["-c", &script])
        .output()
        .map_err(|e| KernelBenchError::Python {
            python: python.to_string(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(KernelBenchError::Source(format!(
            "`{name}` is not a folder, and `{python}` has no package of that name"
        )));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// `1,3,5-9` as ids; empty for all.
pub fn parse_selection(text: &str) -> Result<Vec<u32>, KernelBenchError> {
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            KernelBenchError::Source(format!(
                "--problems: `{part}` is not an id or a range like 3-9"
            ))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                ids.extend(a..=b);
            }
            None => ids.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_and_names() {
        assert_eq!(parse_selection("1,3-5, 9").unwrap(), vec![1, 3, 4, 5, 9]);
        assert!(parse_selection("5-3").is_err());
        assert!(
            parse_selection("x")
                .unwrap_err()
                .to_string()
                .contains("`x`")
        );
        let p = Problem {
            level: 2,
            id: 17,
            stem: "17_Conv2d_InstanceNorm_Divide".into(),
            path: PathBuf::new(),
        };
        assert_eq!(p.task_name(), "kb-l2-17-conv2d-instancenorm-divide");
    }

    #[test]
    fn a_checkout_a_level_folder_and_a_missing_level() {
        let dir = tempfile::tempdir().unwrap();
        let level = dir.path().join("KernelBench").join("level1");
        std::fs::create_dir_all(&level).unwrap();
        for f in ["2_B.py", "10_C.py", "1_A.py", "notes.txt", "x_y.py"] {
            std::fs::write(level.join(f), "").unwrap();
        }
        let root = dir.path().to_str().unwrap();
        let found = discover(root, 1, "python3").unwrap();
        assert_eq!(found.iter().map(|p| p.id).collect::<Vec<_>>(), [1, 2, 10]);
        let direct = discover(level.to_str().unwrap(), 1, "python3").unwrap();
        assert_eq!(direct.len(), 3);
        let missing = discover(root, 2, "python3").unwrap_err().to_string();
        assert!(missing.contains("no level2 folder"), "{missing}");
        let bad = discover("not a package!", 1, "python3")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("neither a folder"), "{bad}");
    }
}
