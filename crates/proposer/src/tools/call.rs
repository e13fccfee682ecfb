//! A model's tool call read into what the host runs, or refused with the
//! reason the model is told.

use serde_json::{Map, Value};

use super::specs::{SUBMIT, ToolName};
use crate::types::ToolCall;

/// One call the host runs.
#[derive(Debug, Clone, PartialEq)]
pub enum HostCall {
    Compile {
        source: String,
    },
    Check {
        source: String,
    },
    /// `sizes` are labels the host offered, none repeated; never empty.
    Time {
        source: String,
        sizes: Vec<String>,
    },
    Profile {
        source: String,
        size: String,
    },
    Show {
        which: Shown,
    },
}

/// A kernel `show` can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Parent,
    Incumbent,
    Elite(usize),
}

/// What a tool call asks for.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Asked {
    Submit(String),
    Host(HostCall),
    /// Not a call this conversation can run: unknown or not offered, its
    /// arguments not a JSON object, a field missing or of the wrong type.
    Malformed(String),
    /// A size the host did not offer (the held-out size, a validation
    /// size, or a guess). The refusal names only what is offered.
    Forbidden(String),
}

/// Read `call` against the tools offered (`offered`), the host's sizes
/// and its number of elites.
pub(super) fn read(
    call: &ToolCall,
    offered: &[ToolName],
    sizes: &[String],
    elites: usize,
) -> Asked {
    let args: Map<String, Value> = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(o)) => o,
        Ok(Value::Null) if call.arguments.trim().is_empty() => Map::new(),
        Ok(other) => {
            return Asked::Malformed(format!(
                "the arguments of `{}` must be a JSON object, not {}",
                call.name,
                kind(&other)
            ));
        }
        Err(e) => {
            return Asked::Malformed(format!(
                "the arguments of `{}` are not JSON ({e})",
                call.name
            ));
        }
    };
    if call.name == SUBMIT {
        return match source(&args) {
            Ok(s) => Asked::Submit(s),
            Err(e) => Asked::Malformed(e),
        };
    }
    let Some(tool) = offered.iter().find(|t| t.as_str() == call.name) else {
        let mut names: Vec<&str> = offered.iter().map(|t| t.as_str()).collect();
        names.push(SUBMIT);
        return Asked::Malformed(format!(
            "there is no tool `{}`; the tools are {}",
            call.name,
            names.join(", ")
        ));
    };
    let host = match tool {
        ToolName::Compile => source(&args).map(|source| HostCall::Compile { source }),
        ToolName::Check => source(&args).map(|source| HostCall::Check { source }),
        ToolName::Time => {
            let source = match source(&args) {
                Ok(s) => s,
                Err(e) => return Asked::Malformed(e),
            };
            match time_sizes(&args, sizes) {
                Ok(sizes) => Ok(HostCall::Time { source, sizes }),
                Err(asked) => return asked,
            }
        }
        ToolName::Profile => {
            let source = match source(&args) {
                Ok(s) => s,
                Err(e) => return Asked::Malformed(e),
            };
            match args.get("size") {
                Some(Value::String(s)) if sizes.contains(s) => Ok(HostCall::Profile {
                    source,
                    size: s.clone(),
                }),
                Some(Value::String(s)) => return forbidden(s, sizes),
                _ => Err("`profile` needs `size`, one of the offered sizes".to_string()),
            }
        }
        ToolName::Show => shown(&args, elites).map(|which| HostCall::Show { which }),
    };
    match host {
        Ok(h) => Asked::Host(h),
        Err(e) => Asked::Malformed(e),
    }
}

fn source(args: &Map<String, Value>) -> Result<String, String> {
    match args.get("source") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err("`source` is empty".into()),
        Some(other) => Err(format!("`source` must be a string, not {}", kind(other))),
        None => Err("`source` is missing: pass the complete kernel source".into()),
    }
}

fn time_sizes(args: &Map<String, Value>, sizes: &[String]) -> Result<Vec<String>, Asked> {
    let named = match args.get("sizes") {
        None | Some(Value::Null) => return Ok(sizes.to_vec()),
        Some(Value::Array(a)) if a.is_empty() => return Ok(sizes.to_vec()),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(Asked::Malformed(format!(
                "`sizes` must be a list of size names, not {}",
                kind(other)
            )));
        }
    };
    let mut out: Vec<String> = Vec::new();
    for s in named {
        let Value::String(s) = s else {
            return Err(Asked::Malformed(format!(
                "`sizes` must hold size names, not {}",
                kind(s)
            )));
        };
        if !sizes.contains(s) {
            return Err(forbidden(s, sizes));
        }
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    Ok(out)
}

fn forbidden(asked: &str, sizes: &[String]) -> Asked {
    Asked::Forbidden(format!(
        "size `{}` is not offered; the sizes are {}",
        crate::sanitize::line(&asked.chars().take(80).collect::<String>()),
        sizes.join(", ")
    ))
}

fn shown(args: &Map<String, Value>, elites: usize) -> Result<Shown, String> {
    match args.get("which").and_then(Value::as_str) {
        Some("parent") => Ok(Shown::Parent),
        Some("incumbent") => Ok(Shown::Incumbent),
        Some("elite") => {
            let i = args.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            if i < elites {
                Ok(Shown::Elite(i))
            } else if elites == 0 {
                Err("there are no elites to show yet".into())
            } else {
                Err(format!("elite {i} does not exist; there are {elites}"))
            }
        }
        _ => Err("`which` must be parent, incumbent or elite".into()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn sizes() -> Vec<String> {
        vec!["n=1024".into(), "n=4096".into()]
    }

    fn read_one(name: &str, args: &str) -> Asked {
        read(&call(name, args), &ToolName::all(), &sizes(), 1)
    }

    #[test]
    fn calls_are_read_into_host_calls() {
        assert_eq!(
            read_one("time", r#"{"source":"k","sizes":["n=4096","n=4096"]}"#),
            Asked::Host(HostCall::Time {
                source: "k".into(),
                sizes: vec!["n=4096".into()]
            })
        );
        assert_eq!(
            read_one("time", r#"{"source":"k"}"#),
            Asked::Host(HostCall::Time {
                source: "k".into(),
                sizes: sizes()
            })
        );
        assert_eq!(
            read_one("show", r#"{"which":"elite","index":0}"#),
            Asked::Host(HostCall::Show {
                which: Shown::Elite(0)
            })
        );
        assert_eq!(
            read_one("submit", r#"{"source":"k"}"#),
            Asked::Submit("k".into())
        );
    }

    #[test]
    fn a_size_not_offered_is_refused_naming_only_the_offered_ones() {
        for (name, args) in [
            ("time", r#"{"source":"k","sizes":["n=1048576"]}"#),
            ("profile", r#"{"source":"k","size":"n=1048576"}"#),
        ] {
            let Asked::Forbidden(why) = read_one(name, args) else {
                panic!("{name} not refused");
            };
            assert!(why.contains("n=1024, n=4096"), "{why}");
        }
    }

    #[test]
    fn malformed_calls_say_what_is_wrong() {
        for (name, args, says) in [
            ("check", "{not json", "not JSON"),
            ("check", "[1]", "a list"),
            ("check", "{}", "`source` is missing"),
            ("check", r#"{"source":3}"#, "a number"),
            ("rm_rf", "{}", "there is no tool `rm_rf`"),
            ("show", r#"{"which":"elite","index":5}"#, "there are 1"),
            (
                "time",
                r#"{"source":"k","sizes":"n=1024"}"#,
                "a list of size names",
            ),
        ] {
            let Asked::Malformed(why) = read_one(name, args) else {
                panic!("{name} {args} not refused as malformed");
            };
            assert!(why.contains(says), "{name} {args}: {why}");
        }
        // A tool the settings do not offer is unknown to the model.
        let only_check = read(
            &call("time", r#"{"source":"k"}"#),
            &[ToolName::Check],
            &sizes(),
            0,
        );
        assert!(
            matches!(&only_check, Asked::Malformed(w) if w.contains("check, submit")),
            "{only_check:?}"
        );
    }
}
