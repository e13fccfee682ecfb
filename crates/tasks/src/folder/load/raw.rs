//! The shape of a folder's task.toml beyond the built-in tasks' schema, as
//! serde reads it: strings and tables, validated by the other steps of
//! loading.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::folder::{Role, Stage};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFolder {
    pub(super) brief: String,
    pub(super) dialects: BTreeMap<String, RawDialect>,
    #[serde(default)]
    pub(super) derived: toml::Table,
    pub(super) buffers: Vec<RawBuffer>,
    #[serde(default)]
    pub(super) scalars: Vec<RawScalar>,
    pub(super) launches: Vec<RawLaunch>,
    pub(super) steps: Option<String>,
    #[serde(default)]
    pub(super) ping_pong: Vec<[String; 2]>,
    pub(super) check: BTreeMap<String, RawCheck>,
    pub(super) reference: RawReference,
    /// A JSON file of the folder that every run on the task records.
    pub(super) provenance: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDialect {
    pub(super) seed: String,
    pub(super) signature: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuffer {
    pub(super) name: String,
    #[serde(rename = "type")]
    pub(super) element: String,
    pub(super) length: String,
    pub(super) role: Role,
    pub(super) init: Option<toml::Value>,
    pub(super) structure: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScalar {
    pub(super) name: String,
    #[serde(rename = "type")]
    pub(super) scalar: String,
    pub(super) value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLaunch {
    pub(super) kernel: String,
    pub(super) grid: Vec<String>,
    pub(super) block: Option<RawBlock>,
    pub(super) args: Vec<String>,
    pub(super) stage: Option<Stage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub(super) enum RawBlock {
    Default(Vec<u32>),
    Fixed(Vec<u32>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    pub(super) atol: Option<f64>,
    pub(super) rtol: Option<f64>,
    pub(super) within: Option<f64>,
    pub(super) cosine: Option<f64>,
    pub(super) peak_error: Option<f64>,
    pub(super) atol_rms: Option<f64>,
    pub(super) exact: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReference {
    pub(super) kernel: Option<BTreeMap<String, String>>,
    pub(super) command: Option<Vec<String>>,
    pub(super) golden: Option<String>,
}
