//! Loading a task folder's `[[buffers]]` and `[[scalars]]`: names, types,
//! length expressions, the initialisation a buffer's role needs (an npy
//! file is read here, once) and the matrix structure of its values.

use std::collections::BTreeMap;

use super::raw::{RawBuffer, RawScalar};
use super::{Scope, file_key};
use crate::folder::{
    BufferDef, ElementType, FolderError, FolderFiles, Init, Role, Scalar, ScalarDef, Structure,
    StructureKind, TYPES, npy,
};
use crate::syntax::is_identifier;

impl Scope<'_> {
    /// The buffers, at least one, each under a new name.
    pub(super) fn buffers(&self, raw: &[RawBuffer]) -> Result<Vec<BufferDef>, FolderError> {
        let mut buffers: Vec<BufferDef> = Vec::new();
        for (i, b) in raw.iter().enumerate() {
            let key = format!("buffers[{i}]");
            if !is_identifier(&b.name) || buffers.iter().any(|o| o.name == b.name) {
                return Err(self.load.error(
                    &format!("{key}.name"),
                    format!("`{}`: expected a new identifier", b.name),
                ));
            }
            buffers.push(self.buffer(&key, b)?);
        }
        if buffers.is_empty() {
            return Err(self.load.error("buffers", "declares no buffer".into()));
        }
        Ok(buffers)
    }

    /// One buffer, at `key`: an input starts with data, an output or
    /// scratch buffer with a sentinel.
    fn buffer(&self, key: &str, b: &RawBuffer) -> Result<BufferDef, FolderError> {
        let element = ElementType::parse(&b.element).ok_or_else(|| {
            self.load.error(
                &format!("{key}.type"),
                format!("`{}`: expected {TYPES}", b.element),
            )
        })?;
        let length = self.expr(&format!("{key}.length"), &b.length, &[])?;
        let init = b
            .init
            .as_ref()
            .map(|v| {
                parse_init(v, self.load.files, element)
                    .map_err(|m| self.load.error(&format!("{key}.init"), m))
            })
            .transpose()?;
        match (b.role, &init) {
            (Role::Input | Role::Inout, None) => {
                return Err(self.load.error(
                    &format!("{key}.init"),
                    format!("an {:?} buffer needs an initialisation", b.role).to_lowercase(),
                ));
            }
            (Role::Output | Role::Scratch, Some(_)) => {
                return Err(self.load.error(
                    &format!("{key}.init"),
                    "an output or scratch buffer starts as a sentinel that the kernels must \
                     overwrite; it takes no initialisation"
                        .into(),
                ));
            }
            _ => {}
        }
        let structure = match &b.structure {
            None => None,
            Some(table) => Some(self.structure(key, table, element, init.as_ref())?),
        };
        Ok(BufferDef {
            name: b.name.clone(),
            element,
            length,
            role: b.role,
            init,
            structure,
        })
    }

    /// The `structure` of a buffer at `key`: one kind of square matrices
    /// with their order, shaping the values a scalar init draws.
    fn structure(
        &self,
        key: &str,
        table: &BTreeMap<String, String>,
        element: ElementType,
        init: Option<&Init>,
    ) -> Result<Structure, FolderError> {
        let err = |message: &str| self.load.error(&format!("{key}.structure"), message.into());
        if init.is_none() || matches!(init, Some(Init::Npy { .. })) {
            return Err(err(
                "shapes the values the init makes: the buffer needs an init other than an \
                 npy file, which is used as it is",
            ));
        }
        if element.lanes != 1 {
            return Err(err("needs a scalar element type, not a vector"));
        }
        let [(name, order)] = table.iter().collect::<Vec<_>>()[..] else {
            return Err(err(EXPECTED_STRUCTURE));
        };
        let kind = match name.as_str() {
            "upper" => StructureKind::Upper,
            "lower" => StructureKind::Lower,
            "symmetric" => StructureKind::Symmetric,
            other => {
                return Err(err(&format!(
                    "`{other}`: expected upper, lower or symmetric"
                )));
            }
        };
        let order = self.expr(&format!("{key}.structure.{name}"), order, &[])?;
        Ok(Structure { kind, order })
    }

    /// The by-value arguments, each under a name no buffer or earlier
    /// scalar has, of a type a launch can pass (see `crate::Arg`).
    pub(super) fn scalars(
        &self,
        raw: &[RawScalar],
        buffers: &[BufferDef],
    ) -> Result<Vec<ScalarDef>, FolderError> {
        let mut scalars: Vec<ScalarDef> = Vec::new();
        for (i, s) in raw.iter().enumerate() {
            let key = format!("scalars[{i}]");
            if !is_identifier(&s.name)
                || scalars.iter().any(|o| o.name == s.name)
                || buffers.iter().any(|b| b.name == s.name)
            {
                return Err(self.load.error(
                    &format!("{key}.name"),
                    format!("`{}`: expected a new identifier", s.name),
                ));
            }
            let scalar = match Scalar::parse(&s.scalar) {
                Some(t @ (Scalar::F32 | Scalar::I32 | Scalar::U32)) => t,
                _ => {
                    return Err(self.load.error(
                        &format!("{key}.type"),
                        format!("`{}`: expected f32, i32 or u32", s.scalar),
                    ));
                }
            };
            let value = self.expr(&format!("{key}.value"), &s.value, &["step"])?;
            scalars.push(ScalarDef {
                name: s.name.clone(),
                scalar,
                value,
            });
        }
        Ok(scalars)
    }
}

/// What a buffer's `init` may be.
const EXPECTED_INIT: &str = "expected \"iota\", \"zero\", { uniform = [LOW, HIGH] }, \
                             { normal = [MEAN, STD] }, { integers = [LOW, HIGH] }, \
                             { constant = V } or { npy = \"FILE\" }";

/// What a buffer's `structure` may be.
const EXPECTED_STRUCTURE: &str = "expected one of { upper = \"ORDER\" }, \
                                  { lower = \"ORDER\" }, { symmetric = \"ORDER\" }";

/// A buffer's `init`: a keyword, or a one-entry table of a distribution,
/// a constant or an npy file of the folder (read now, for `element`).
fn parse_init(
    value: &toml::Value,
    files: &FolderFiles,
    element: ElementType,
) -> Result<Init, String> {
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    let pair = |v: &toml::Value| -> Option<(f64, f64)> {
        match v.as_array()?.as_slice() {
            [a, b] => Some((number(a)?, number(b)?)),
            _ => None,
        }
    };
    match value {
        toml::Value::String(s) if s == "iota" => Ok(Init::Iota),
        toml::Value::String(s) if s == "zero" => Ok(Init::Zero),
        toml::Value::Table(t) if t.len() == 1 => {
            let (kind, v) = t.iter().next().expect("one entry");
            match kind.as_str() {
                "uniform" => match pair(v) {
                    Some((low, high)) if low < high => Ok(Init::Uniform { low, high }),
                    _ => Err("uniform: expected [LOW, HIGH] with LOW < HIGH".into()),
                },
                "normal" => match pair(v) {
                    Some((mean, std)) if std > 0.0 => Ok(Init::Normal { mean, std }),
                    _ => Err("normal: expected [MEAN, STD] with STD > 0".into()),
                },
                "integers" => integers_init(v),
                "constant" => number(v)
                    .map(Init::Constant)
                    .ok_or_else(|| "constant: expected a number".into()),
                "npy" => npy_init(v, files, element),
                _ => Err(EXPECTED_INIT.into()),
            }
        }
        _ => Err(EXPECTED_INIT.into()),
    }
}

/// `integers = [LOW, HIGH]`: whole numbers, LOW <= HIGH.
fn integers_init(v: &toml::Value) -> Result<Init, String> {
    match v.as_array().map(|a| a.as_slice()) {
        Some([a, b]) => match (a.as_integer(), b.as_integer()) {
            (Some(low), Some(high)) if low <= high => Ok(Init::Integers { low, high }),
            _ => Err("integers: expected [LOW, HIGH], whole numbers, LOW <= HIGH".into()),
        },
        _ => Err("integers: expected [LOW, HIGH]".into()),
    }
}

/// `npy = "FILE"`: the file's elements, read as `element`s.
fn npy_init(v: &toml::Value, files: &FolderFiles, element: ElementType) -> Result<Init, String> {
    let name = v.as_str().ok_or("npy: expected a file name")?;
    let bytes = file_key(name)
        .and_then(|k| files.get(&k))
        .ok_or_else(|| format!("npy: `{name}` is not a file in the task folder"))?;
    let (data, scalars) = npy::read(bytes, element).map_err(|m| format!("npy: `{name}` {m}"))?;
    Ok(Init::Npy {
        file: name.to_string(),
        data: std::sync::Arc::new(data),
        scalars,
    })
}
