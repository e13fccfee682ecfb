//! Tool requests as a command-line agent writes them (`kevo-tool check
//! kernel.cu`): one line of words naming files in the agent's directory,
//! read into the tool call an API model would have made and run through
//! the proposal's [`Gate`]. The `agent:` proposer serves them over its
//! socket pair, `kevo tool` from a mailbox between an agent's turns.

use std::path::Path;

use super::{Gate, Step, TranscriptCall};
use crate::types::ToolCall;

/// A kernel file larger than this is not read.
pub(crate) const MAX_KERNEL_BYTES: u64 = 1 << 20;

/// Serve one request line: (succeeded, reply, why the proposal ends).
pub(crate) async fn serve(
    gate: &mut Gate<'_>,
    dir: &Path,
    line: &str,
    n: u32,
    submitted: &mut Option<String>,
) -> (bool, String, Option<String>) {
    let call = match request(dir, line, n) {
        Ok(call) => call,
        Err(why) => {
            gate.record(TranscriptCall {
                name: line
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(40)
                    .collect(),
                arguments: line.chars().take(200).collect(),
                result: why.clone(),
                is_error: true,
                refused: Some(why.clone()),
                ..Default::default()
            });
            return (false, why, None);
        }
    };
    if call.name == "sizes" {
        return (true, gate.sizes().join("\n"), None);
    }
    match gate.step(&call).await {
        Step::Result(result, record) => {
            gate.record(record);
            (!result.is_error, result.content, None)
        }
        Step::Submitted(source) => {
            gate.record(TranscriptCall {
                name: call.name,
                arguments: line.to_string(),
                result: "submitted".into(),
                ..Default::default()
            });
            gate.transcript.ended = "submitted".into();
            *submitted = Some(source);
            (true, "submitted; exit when you are done".into(), None)
        }
        Step::End(why) => {
            gate.record(TranscriptCall {
                name: call.name,
                arguments: line.to_string(),
                result: why.clone(),
                is_error: true,
                refused: Some(why.clone()),
                ..Default::default()
            });
            (false, why.clone(), Some(why))
        }
    }
}

/// A request line as the tool call an API model would have made: files
/// it names read from inside `dir`.
pub(crate) fn request(dir: &Path, line: &str, n: u32) -> Result<ToolCall, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&tool, rest)) = words.split_first() else {
        return Err("an empty request; run kevo-tool without arguments for its commands".into());
    };
    let source = |i: usize| -> Result<String, String> {
        let file = rest
            .get(i)
            .ok_or_else(|| format!("`{tool}` needs a FILE"))?;
        read_inside(dir, file)
    };
    let arguments = match tool {
        "compile" | "check" | "submit" => serde_json::json!({ "source": source(0)? }),
        "time" => {
            serde_json::json!({ "source": source(0)?, "sizes": rest.get(1..).unwrap_or(&[]) })
        }
        "profile" => {
            serde_json::json!({ "source": source(0)?, "size": rest.get(1).copied().unwrap_or("") })
        }
        "show" => {
            let index: u64 = rest.get(1).and_then(|i| i.parse().ok()).unwrap_or(0);
            serde_json::json!({ "which": rest.first().copied().unwrap_or(""), "index": index })
        }
        _ => serde_json::json!({}),
    };
    Ok(ToolCall {
        id: format!("agent-{n}"),
        name: tool.to_string(),
        arguments: arguments.to_string(),
    })
}

/// The text of `file` inside `dir`: refused when it resolves outside it
/// (a `..` or a symbolic link; kevo reads unconfined), is missing, is
/// larger than [`MAX_KERNEL_BYTES`] or is not UTF-8.
pub(crate) fn read_inside(dir: &Path, file: &str) -> Result<String, String> {
    let root = dir
        .canonicalize()
        .map_err(|e| format!("the agent's directory: {e}"))?;
    let path = root
        .join(file)
        .canonicalize()
        .map_err(|e| format!("`{file}`: {e}"))?;
    if !path.starts_with(&root) {
        return Err(format!("`{file}` is outside the agent's directory"));
    }
    let meta = std::fs::metadata(&path).map_err(|e| format!("`{file}`: {e}"))?;
    if !meta.is_file() || meta.len() > MAX_KERNEL_BYTES {
        return Err(format!(
            "`{file}` is not a file of at most {MAX_KERNEL_BYTES} bytes"
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("`{file}`: {e}"))?;
    if text.trim().is_empty() {
        return Err(format!("`{file}` is empty"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_only_inside_the_agents_directory() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("agent");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(outer.path().join("secret"), "key").unwrap();
        std::fs::write(dir.join("kernel.cl"), "k").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret"), dir.join("link")).unwrap();
        assert_eq!(read_inside(&dir, "kernel.cl").unwrap(), "k");
        for escape in ["../secret", "link", "/etc/passwd"] {
            let why = read_inside(&dir, escape).unwrap_err();
            assert!(why.contains("outside"), "{escape}: {why}");
        }
        assert!(read_inside(&dir, "missing.cl").is_err());
    }

    #[test]
    fn request_lines_become_tool_calls() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.cl"), "src").unwrap();
        let call = request(dir.path(), "time k.cl 64K 1M", 7).unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("agent-7", "time"));
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(
            args,
            serde_json::json!({"source": "src", "sizes": ["64K", "1M"]})
        );
        let show = request(dir.path(), "show elite 2", 1).unwrap();
        assert_eq!(show.arguments, r#"{"index":2,"which":"elite"}"#);
        assert!(
            request(dir.path(), "check", 1)
                .unwrap_err()
                .contains("needs a FILE")
        );
        assert_eq!(request(dir.path(), "rm -rf /", 1).unwrap().name, "rm");
    }
}
