//! A command reference at work: the problem's inputs written as `.npy`
//! files, the command run in the folder on them (stopped after
//! [`COMMAND_TIMEOUT`]), its outputs read back, and cached on disk per
//! (size, inputs).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{COMMAND_TIMEOUT, FolderCode, ReferenceError};
use crate::{BufferInit, Problem, Size};

impl FolderCode {
    /// Run the reference command on the inputs of `problem`, or read its
    /// earlier answer from the cache.
    pub(super) fn run_command(
        &self,
        command: &[String],
        size: &Size,
        problem: &Problem,
        fingerprint: &str,
    ) -> Result<Vec<Vec<u8>>, ReferenceError> {
        let cached = crate::cache_dir()
            .join("task-references")
            .join(&self.hash)
            .join(format!("{}-{fingerprint}", size.label));
        let names: Vec<&String> = self.checked().map(|(n, _)| n).collect();
        if cached.is_dir()
            && let Ok(out) = self.read_outputs(command, &cached, &names, size)
        {
            return Ok(out);
        }
        let work = tempfile::Builder::new()
            .prefix("kevo-reference-")
            .tempdir()
            .map_err(|e| self.error(format!("cannot make a temporary directory: {e}")))?;
        let (inputs, outputs) = (work.path().join("inputs"), work.path().join("outputs"));
        for dir in [&inputs, &outputs] {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.error(format!("cannot make {}: {e}", dir.display())))?;
        }
        self.write_inputs(problem, &inputs)?;
        self.run_to_end(command, size, &inputs, &outputs)?;
        let out = self.read_outputs(command, &outputs, &names, size)?;
        self.cache_outputs(&cached, &names, &out);
        Ok(out)
    }

    /// The checked outputs `names` that `command` wrote into `dir`.
    fn read_outputs(
        &self,
        command: &[String],
        dir: &Path,
        names: &[&String],
        size: &Size,
    ) -> Result<Vec<Vec<u8>>, ReferenceError> {
        names
            .iter()
            .map(|name| {
                let path = dir.join(format!("{name}.npy"));
                let shown = format!("outputs/{name}.npy");
                let bytes = std::fs::read(&path).map_err(|e| {
                    self.error(format!(
                        "the command {command:?} wrote no `{shown}` ({e}); it must write \
                         every checked output into $KEVO_OUTPUTS"
                    ))
                })?;
                self.decode_output(name, &bytes, size, &shown)
            })
            .collect()
    }

    /// Every buffer of `problem` that starts with data, as `NAME.npy` in
    /// `dir`.
    fn write_inputs(&self, problem: &Problem, dir: &Path) -> Result<(), ReferenceError> {
        for (b, spec) in self.folder.buffers.iter().zip(&problem.buffers) {
            if let BufferInit::Data(data) = &spec.init {
                let path = dir.join(format!("{}.npy", b.name));
                std::fs::write(&path, crate::folder::npy::write(data, b.element))
                    .map_err(|e| self.error(format!("cannot write {}: {e}", path.display())))?;
            }
        }
        Ok(())
    }

    /// Run `command` in the folder at `size`, reading `inputs` and writing
    /// `outputs`, until it ends (or runs past [`COMMAND_TIMEOUT`]); a
    /// failure quotes the end of what it wrote to stderr.
    fn run_to_end(
        &self,
        command: &[String],
        size: &Size,
        inputs: &Path,
        outputs: &Path,
    ) -> Result<(), ReferenceError> {
        let mut child = self
            .command(command, size, inputs, outputs)
            .spawn()
            .map_err(|e| {
                self.error(format!(
                    "cannot start {:?} in {} ({e})",
                    command[0],
                    self.folder.root.display()
                ))
            })?;
        let mut stderr = child.stderr.take().expect("piped");
        let tail = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(8)..].join("\n")
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() > COMMAND_TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(self.error(format!(
                        "the command {command:?} ran longer than {} s at size `{}`; stopped",
                        COMMAND_TIMEOUT.as_secs(),
                        size.label
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(self.error(format!("waiting for {command:?}: {e}"))),
            }
        };
        let tail = tail.join().unwrap_or_default();
        if !status.success() {
            return Err(self.error(format!(
                "the command {command:?} failed at size `{}` ({status}){}",
                size.label,
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(":\n{tail}")
                }
            )));
        }
        Ok(())
    }

    /// `command` to run in the folder with `KEVO_INPUTS`, `KEVO_OUTPUTS`,
    /// `KEVO_SIZE` and `KEVO_<NAME>` for every dim and derived value set,
    /// no stdin or stdout, and stderr piped.
    fn command(
        &self,
        command: &[String],
        size: &Size,
        inputs: &Path,
        outputs: &Path,
    ) -> std::process::Command {
        let mut cmd = std::process::Command::new(&command[0]);
        cmd.args(&command[1..])
            .current_dir(&self.folder.root)
            .env("KEVO_INPUTS", inputs)
            .env("KEVO_OUTPUTS", outputs)
            .env("KEVO_SIZE", &size.label)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let names_values = self
            .folder
            .spec
            .dims
            .iter()
            .map(|d| d.name.clone())
            .chain(self.folder.derived.iter().map(|(n, _)| n.clone()))
            .zip(self.folder.values(size));
        for (name, value) in names_values {
            cmd.env(format!("KEVO_{name}"), format!("{value}"));
        }
        cmd
    }

    /// Keep `outputs` in `cached` for the next run; a cache that cannot be
    /// written costs a rerun, nothing more.
    fn cache_outputs(&self, cached: &Path, names: &[&String], outputs: &[Vec<u8>]) {
        if std::fs::create_dir_all(cached).is_ok() {
            for (name, data) in names.iter().zip(outputs) {
                let b = self
                    .folder
                    .buffers
                    .iter()
                    .find(|b| &&b.name == name)
                    .expect("validated");
                let _ = std::fs::write(
                    cached.join(format!("{name}.npy")),
                    crate::folder::npy::write(data, b.element),
                );
            }
        }
    }
}
