//! Reading a task folder from disk, whole and once: every regular file
//! under it by relative path, links followed only where they stay inside.

use std::fs::DirEntry;
use std::path::{Path, PathBuf};

use super::{FolderError, FolderFiles, MAX_FOLDER_BYTES};

/// An error about `key` of the folder at `root`.
fn error(root: &Path, key: &str, message: String) -> FolderError {
    FolderError {
        file: root.display().to_string(),
        key: key.to_string(),
        message,
    }
}

/// Every regular file under `root`, except names starting with a dot (VCS
/// metadata, editor files, caches). Symbolic links are followed only where
/// they resolve inside the folder: a link to a file or directory outside
/// it (a `brief.md` pointing at a key file, say) is refused, naming the
/// link and where it points, since what is read here goes into prompts
/// sent to a model, into the store and to every worker. A link back to a
/// directory that holds it (a loop) is refused too.
pub fn read_folder(root: &Path) -> Result<FolderFiles, FolderError> {
    let err = |key: &str, message: String| error(root, key, message);
    if !root.is_dir() {
        return Err(err(
            "folder",
            "is not a directory; a task folder holds a task.toml".into(),
        ));
    }
    // The folder itself may be reached through links: what counts as
    // inside is where it really is.
    let inside = std::fs::canonicalize(root)
        .map_err(|e| err("folder", format!("cannot resolve the folder's path ({e})")))?;
    let mut files = FolderFiles::new();
    let mut total = 0u64;
    // (the directory, its key prefix, where it and each directory above
    // it up to the folder really are)
    let mut pending = vec![(root.to_path_buf(), String::new(), vec![inside.clone()])];
    while let Some((dir, prefix, real_dirs)) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| err(&prefix, format!("cannot list the directory ({e})")))?;
        for entry in entries {
            let entry = entry.map_err(|e| err(&prefix, format!("cannot list ({e})")))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let relative = format!("{prefix}{name}");
            let (path, real) = entry_paths(root, &entry, &name, &relative, &inside, &real_dirs)?;
            let meta = std::fs::metadata(&path)
                .map_err(|e| err(&relative, format!("cannot read ({e})")))?;
            if meta.is_dir() {
                let mut below = real_dirs.clone();
                below.push(real);
                pending.push((path, format!("{relative}/"), below));
            } else if meta.is_file() {
                total += meta.len();
                if total > MAX_FOLDER_BYTES {
                    return Err(err(
                        &relative,
                        format!(
                            "the folder holds more than {} MiB; keep large data out of it",
                            MAX_FOLDER_BYTES >> 20
                        ),
                    ));
                }
                let bytes = std::fs::read(&path)
                    .map_err(|e| err(&relative, format!("cannot read ({e})")))?;
                files.insert(relative, bytes);
            }
        }
    }
    Ok(files)
}

/// What is read for `entry` (`name`, or `relative` in errors), and where
/// it really is: the entry itself, or the resolved target of a link (read by
/// that path, not through the link again), which must lie `inside` the
/// folder and must not be one of `real_dirs`, the directories holding it.
fn entry_paths(
    root: &Path,
    entry: &DirEntry,
    name: &str,
    relative: &str,
    inside: &Path,
    real_dirs: &[PathBuf],
) -> Result<(PathBuf, PathBuf), FolderError> {
    let err = |message: String| error(root, relative, message);
    let link = entry
        .file_type()
        .map_err(|e| err(format!("cannot read ({e})")))?
        .is_symlink();
    if !link {
        let real_dir = real_dirs.last().expect("the folder at least");
        return Ok((entry.path(), real_dir.join(name)));
    }
    let target = std::fs::canonicalize(entry.path()).map_err(|e| {
        err(format!(
            "is a symbolic link to {} that cannot be followed ({e})",
            std::fs::read_link(entry.path())
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into())
        ))
    })?;
    if !target.starts_with(inside) {
        return Err(err(format!(
            "is a symbolic link to {}, outside the task folder {}; a task \
             folder's files must be inside it (copy the file in instead)",
            target.display(),
            inside.display()
        )));
    }
    if real_dirs.iter().any(|d| d.starts_with(&target)) {
        return Err(err(format!(
            "is a symbolic link to {}, a directory the link is in (a loop)",
            target.display()
        )));
    }
    Ok((target.clone(), target))
}

/// `name` as a key of [`FolderFiles`]: relative, inside the folder.
pub(super) fn file_key(name: &str) -> Option<String> {
    let trimmed = name.trim_start_matches("./");
    let parts: Vec<&str> = trimmed
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") || name.starts_with('/') {
        return None;
    }
    Some(parts.join("/"))
}
