//! The prompt templates: real files under `templates/`, compiled into kevo
//! with `include_str!`, each replaceable by a file of the same name in an
//! override directory.
//!
//! Rendering is strict: an undefined variable is an error, not an empty
//! string, so a typo in an override fails loudly instead of silently
//! dropping a section. Block tags do not leave blank lines behind
//! (`trim_blocks` and `lstrip_blocks`), and nothing is HTML-escaped.

use std::path::Path;

use minijinja::{AutoEscape, Environment, UndefinedBehavior, syntax::SyntaxConfig};
use serde::Serialize;

use super::PromptError;

/// Every template kevo ships, by file name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "system_cuda.j2",
        include_str!("../../templates/system_cuda.j2"),
    ),
    (
        "system_opencl.j2",
        include_str!("../../templates/system_opencl.j2"),
    ),
    (
        "system_metal.j2",
        include_str!("../../templates/system_metal.j2"),
    ),
    (
        "system_triton.j2",
        include_str!("../../templates/system_triton.j2"),
    ),
    ("user.j2", include_str!("../../templates/user.j2")),
    ("_brief.j2", include_str!("../../templates/_brief.j2")),
    (
        "_output_format.j2",
        include_str!("../../templates/_output_format.j2"),
    ),
    (
        "_stagnation.j2",
        include_str!("../../templates/_stagnation.j2"),
    ),
    (
        "_device_kind.j2",
        include_str!("../../templates/_device_kind.j2"),
    ),
    ("_tunables.j2", include_str!("../../templates/_tunables.j2")),
    (
        "analyst_system.j2",
        include_str!("../../templates/analyst_system.j2"),
    ),
    (
        "analyst_user.j2",
        include_str!("../../templates/analyst_user.j2"),
    ),
    (
        "guidance_cuda.j2",
        include_str!("../../templates/guidance_cuda.j2"),
    ),
    (
        "guidance_opencl.j2",
        include_str!("../../templates/guidance_opencl.j2"),
    ),
    (
        "guidance_metal.j2",
        include_str!("../../templates/guidance_metal.j2"),
    ),
    (
        "guidance_triton.j2",
        include_str!("../../templates/guidance_triton.j2"),
    ),
    (
        "meta_system.j2",
        include_str!("../../templates/meta_system.j2"),
    ),
    ("meta_user.j2", include_str!("../../templates/meta_user.j2")),
];

pub struct Templates {
    env: Environment<'static>,
    overridden: Vec<String>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("overridden", &self.overridden)
            .finish()
    }
}

impl Default for Templates {
    fn default() -> Self {
        Self::builtin()
    }
}

fn template_error(name: &str, e: minijinja::Error) -> PromptError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    PromptError::Template {
        name: name.to_string(),
        message,
    }
}

impl Templates {
    fn env() -> Environment<'static> {
        let mut env = Environment::new();
        env.set_syntax(
            SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .keep_trailing_newline(false)
                .build()
                .expect("default delimiters"),
        );
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env
    }

    /// The templates that ship with kevo.
    pub fn builtin() -> Self {
        let mut env = Self::env();
        for (name, src) in BUILTIN {
            env.add_template(name, src)
                .unwrap_or_else(|e| panic!("built-in template {name} does not parse: {e}"));
        }
        Templates {
            env,
            overridden: Vec::new(),
        }
    }

    /// The built-in templates, with every `*.j2` file of `dir` replacing the
    /// one of the same name. A file whose name kevo does not know is an
    /// error (a misspelt override would otherwise be ignored).
    pub fn with_overrides(dir: &Path) -> Result<Self, PromptError> {
        let dir_err = |message: String| PromptError::TemplateDir {
            dir: dir.display().to_string(),
            message,
        };
        let entries = std::fs::read_dir(dir).map_err(|e| dir_err(e.to_string()))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| dir_err(e.to_string()))?;
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".j2") {
                continue;
            }
            if !BUILTIN.iter().any(|(n, _)| *n == name) {
                return Err(dir_err(format!(
                    "`{name}` is not a kevo template (known: {})",
                    Self::names().collect::<Vec<_>>().join(", ")
                )));
            }
            let text =
                std::fs::read_to_string(&path).map_err(|e| dir_err(format!("{name}: {e}")))?;
            files.push((name, text));
        }
        files.sort();
        let mut env = Self::env();
        let mut overridden = Vec::new();
        for (name, src) in BUILTIN {
            match files.iter().find(|(n, _)| n == name) {
                Some((n, text)) => {
                    env.add_template_owned(n.clone(), text.clone())
                        .map_err(|e| template_error(n, e))?;
                    overridden.push(n.clone());
                }
                None => env.add_template(name, src).expect("built-in parses"),
            }
        }
        Ok(Templates { env, overridden })
    }

    /// The file names kevo knows.
    pub fn names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(n, _)| *n)
    }

    /// The shipped text of a template, e.g. to start an override from.
    pub fn builtin_source(name: &str) -> Option<&'static str> {
        BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }

    /// Names replaced from the override directory.
    pub fn overridden(&self) -> &[String] {
        &self.overridden
    }

    /// Render `name` with `ctx`; the result ends with exactly one newline.
    pub fn render(&self, name: &str, ctx: &impl Serialize) -> Result<String, PromptError> {
        let t = self
            .env
            .get_template(name)
            .map_err(|e| template_error(name, e))?;
        let mut out = t
            .render(minijinja::value::Serde(ctx))
            .map_err(|e| template_error(name, e))?;
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_replace_by_name_and_unknown_names_fail() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("_stagnation.j2"),
            "STUCK {{ stagnation.window }}",
        )
        .unwrap();
        std::fs::write(dir.path().join("README.txt"), "ignored").unwrap();
        let t = Templates::with_overrides(dir.path()).unwrap();
        assert_eq!(t.overridden(), ["_stagnation.j2"]);
        assert_eq!(
            t.render("_stagnation.j2", &json!({"stagnation": {"window": 3}}))
                .unwrap(),
            "STUCK 3\n"
        );

        std::fs::write(dir.path().join("sytem_cuda.j2"), "x").unwrap();
        let e = Templates::with_overrides(dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("sytem_cuda.j2") && e.to_string().contains("system_cuda.j2"),
            "{e}"
        );

        let bad = tempfile::tempdir().unwrap();
        std::fs::write(bad.path().join("user.j2"), "{% if %}").unwrap();
        let e = Templates::with_overrides(bad.path()).unwrap_err();
        assert!(e.to_string().contains("user.j2"), "{e}");
    }

    #[test]
    fn undefined_variables_are_errors() {
        let t = Templates::builtin();
        let e = t.render("_stagnation.j2", &json!({})).unwrap_err();
        assert!(e.to_string().contains("_stagnation.j2"), "{e}");
    }
}
