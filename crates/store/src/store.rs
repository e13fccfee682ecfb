//! The [`Store`]: one type over SQLite and PostgreSQL.
//!
//! The two backends are two typed sqlx pools behind an enum rather than the
//! `Any` driver, so JSON columns are real JSONB on Postgres, timestamps are
//! real `timestamptz`, and every value is encoded by the backend's own type
//! rather than squeezed through `Any`'s lowest common denominator. The SQL is
//! written once: `$n` placeholders, `RETURNING`, `NULLS LAST` and partial
//! indexes mean the same on both, and each method's body is compiled once
//! per backend by [`on_pool!`].

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, Connection, Executor, Transaction};

use crate::StoreError;
use crate::location::{Target, scrub};
use crate::model::*;
use kevo_tasks::SizeSet;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");

/// How to open a store. [`Store::open`] covers the usual case.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub target: Target,
    /// Postgres only: keep every table in this schema (created if missing),
    /// so several deployments, or parallel tests, can share one database.
    pub pg_schema: Option<String>,
    pub max_connections: u32,
    /// How long to wait for the database before giving up with an error.
    pub connect_timeout: Duration,
}

impl StoreOptions {
    pub fn new(target: Target) -> Self {
        StoreOptions {
            target,
            pg_schema: None,
            max_connections: 8,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The persistent run store. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// The database, safe to print.
    location: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish()
    }
}

/// Runs `$body` with `$pool` bound to the concrete pool; the body is
/// type-checked once per backend, so each query is encoded and decoded by
/// that backend's own types.
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            Pool::Sqlite($pool) => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

/// Return from the enclosing function with an error unless every
/// candidate of `ids` (CandidateIds) exists and belongs to `run`: a record
/// about another run's candidate is a bug.
macro_rules! ensure_run_owns {
    ($store:expr, $executor:expr, $run:expr, $ids:expr, $what:expr) => {
        for id in $ids {
            let owner: Option<String> =
                sqlx::query_scalar("SELECT run_id FROM candidates WHERE id = $1")
                    .bind(id.0)
                    .fetch_optional($executor)
                    .await
                    .map_err($store.db($what))?;
            match owner {
                None => return Err(StoreError::CandidateNotFound(id)),
                Some(owner) if owner != $run.0 => {
                    return Err(StoreError::InvalidRecord(format!(
                        "candidate {id} belongs to run `{owner}`, not `{}`",
                        $run
                    )));
                }
                Some(_) => {}
            }
        }
    };
}

/// Insert one re-measurement (`NewRemeasurement`) of `run` at
/// `iteration` through `executor`; evaluates to its id. A macro because
/// the two database backends' executors share no usable trait.
macro_rules! insert_remeasurement {
    ($executor:expr, $run:expr, $iteration:expr, $r:expr, $at:expr) => {{
        let r: &NewRemeasurement = $r;
        let candidates: Vec<i64> = r.candidates.iter().map(|c| c.0).collect();
        sqlx::query_scalar::<_, i64>(
            "INSERT INTO remeasurements (run_id, iteration, purpose, candidates, verdict, \
             rounds, evaluations, device_s, wall_s, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
        )
        .bind(&$run.0)
        .bind($iteration)
        .bind(r.purpose.as_str())
        .bind(Json(serde_json::json!(candidates)))
        .bind(clean_text(&r.verdict).into_owned())
        .bind(Json(clean_value(&r.rounds).into_owned()))
        .bind(i64::from(r.evaluations))
        .bind(r.device_s)
        .bind(r.wall_s)
        .bind($at)
        .fetch_one($executor)
        .await
    }};
}

/// Insert one validation (`NewValidation`, its candidate resolved to
/// `$candidate`) of `run` at `iteration`; evaluates to its id.
macro_rules! insert_validation {
    ($executor:expr, $run:expr, $iteration:expr, $candidate:expr, $v:expr, $at:expr) => {{
        let v: &NewValidation = $v;
        let evaluation = serde_json::to_value(&v.evaluation).map_err(|cause| StoreError::Json {
            what: "evaluation",
            cause,
        })?;
        sqlx::query_scalar::<_, i64>(
            "INSERT INTO validations (run_id, iteration, candidate_id, passed, reason, \
             evaluation, device_s, wall_s, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        )
        .bind(&$run.0)
        .bind($iteration)
        .bind($candidate)
        .bind(v.passed)
        .bind(clean_text(&v.reason).into_owned())
        .bind(Json(clean_value(&evaluation).into_owned()))
        .bind(v.device_s)
        .bind(v.wall_s)
        .bind($at)
        .fetch_one($executor)
        .await
    }};
}

/// Starting a transaction that will write. SQLite takes the write lock up
/// front (`BEGIN IMMEDIATE`): a deferred transaction that reads first and
/// writes later can fail outright when another connection wrote meanwhile,
/// instead of waiting.
trait WritePool {
    type Db: sqlx::Database;
    async fn begin_write(&self) -> Result<Transaction<'static, Self::Db>, sqlx::Error>;
}

impl WritePool for SqlitePool {
    type Db = sqlx::Sqlite;
    async fn begin_write(&self) -> Result<Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.begin_with("BEGIN IMMEDIATE").await
    }
}

impl WritePool for PgPool {
    type Db = sqlx::Postgres;
    async fn begin_write(&self) -> Result<Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        self.begin().await
    }
}

/// SHA-256 of a kernel source, lowercase hex: the key under which a run
/// remembers what it already evaluated.
pub fn source_sha256(source: &str) -> String {
    let digest = Sha256::digest(source.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Timestamps are kept to the microsecond, what Postgres stores, so that a
/// value reads back equal on both backends.
fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// PostgreSQL rejects NUL characters in text and JSON. They are replaced
/// by U+FFFD on both backends alike, so a stray NUL in a model's response
/// cannot abort an iteration and both backends store the same text.
fn clean_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn clean_opt(s: &Option<String>) -> Option<std::borrow::Cow<'_, str>> {
    s.as_deref().map(clean_text)
}

fn clean_value(v: &Value) -> std::borrow::Cow<'_, Value> {
    fn has_nul(v: &Value) -> bool {
        match v {
            Value::String(s) => s.contains('\0'),
            Value::Array(a) => a.iter().any(has_nul),
            Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
            _ => false,
        }
    }
    fn fix(v: &mut Value) {
        match v {
            Value::String(s) => *s = s.replace('\0', "\u{FFFD}"),
            Value::Array(a) => a.iter_mut().for_each(fix),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut v) in old {
                    fix(&mut v);
                    o.insert(k.replace('\0', "\u{FFFD}"), v);
                }
            }
            _ => {}
        }
    }
    if has_nul(v) {
        let mut v = v.clone();
        fix(&mut v);
        std::borrow::Cow::Owned(v)
    } else {
        std::borrow::Cow::Borrowed(v)
    }
}

/// SQLite stores a NaN as NULL and Postgres keeps it; an optional figure
/// that is not finite is stored as NULL on both, so they agree.
fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

/// A reference to proposal `j` of an iteration needs that proposal to
/// have a candidate.
fn check_proposal_ref(
    proposed: &[Proposed],
    r: &CandidateRef,
    what: &str,
) -> Result<(), StoreError> {
    match r {
        CandidateRef::Proposal(j) if proposed.get(*j).is_none_or(|p| p.candidate.is_none()) => {
            Err(StoreError::InvalidRecord(format!(
                "{what} refers to proposal {j}, which has no candidate"
            )))
        }
        _ => Ok(()),
    }
}

fn required_finite(x: f64, what: &str) -> Result<f64, StoreError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(StoreError::InvalidRecord(format!("{what} is {x}")))
    }
}

fn to_i64(x: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(x).map_err(|_| StoreError::InvalidRecord(format!("{what} {x} is too large")))
}

fn to_json(v: &impl serde::Serialize, what: &'static str) -> Result<Value, StoreError> {
    serde_json::to_value(v).map_err(|cause| StoreError::Json { what, cause })
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}

/// SQLITE_BUSY or SQLITE_LOCKED: another connection holds a lock.
fn is_sqlite_busy(e: &sqlx::Error) -> bool {
    // The code is SQLite's extended result code; the primary code is its
    // low byte (SQLITE_BUSY_SNAPSHOT is 517, for instance).
    e.as_database_error()
        .and_then(|d| d.code())
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| matches!(c & 0xff, 5 | 6))
}

/// Quotes a Postgres identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn new_run_id(task: &str, at: DateTime<Utc>) -> RunId {
    let task: String = task
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let tag: u32 = rand::random::<u32>() & 0xff_ffff;
    RunId(format!("{task}-{}-{tag:06x}", at.format("%Y%m%d-%H%M%S")))
}

// Rows as the database returns them; converted to the public types with
// range and enum checks.

#[derive(sqlx::FromRow)]
struct RunRow {
    id: String,
    created_at: DateTime<Utc>,
    task: String,
    backend: String,
    device: String,
    size_set: String,
    strategy: String,
    config: Json<Value>,
    status: String,
    status_reason: Option<String>,
    rng_state: Option<Json<Value>>,
    finished_at: Option<DateTime<Utc>>,
    summary: Option<Json<Value>>,
}

#[derive(sqlx::FromRow)]
struct ListingRow {
    id: String,
    created_at: DateTime<Utc>,
    task: String,
    backend: String,
    device: String,
    size_set: String,
    strategy: String,
    status: String,
    finished_at: Option<DateTime<Utc>>,
    last_iteration: Option<i64>,
    candidates: i64,
    best_score: Option<f64>,
    cost_usd: Option<f64>,
    heartbeat_at: Option<DateTime<Utc>>,
    heartbeat_holder: Option<String>,
    summary: Option<Json<Value>>,
}

#[derive(sqlx::FromRow)]
struct CandidateRow {
    id: i64,
    run_id: String,
    iteration: i64,
    island: Option<i64>,
    cell: Option<String>,
    descriptors: Option<Json<Value>>,
    source: String,
    source_sha256: String,
    provider: Option<String>,
    model: Option<String>,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct EvaluationRow {
    id: i64,
    candidate_id: i64,
    kind: String,
    outcome_kind: String,
    score: Option<f64>,
    device: String,
    backend: String,
    evaluation: Json<Value>,
    reused_from: Option<i64>,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct StepRow {
    run_id: String,
    iteration: i64,
    incumbent_id: Option<i64>,
    previous_id: Option<i64>,
    rng_state: Option<Json<Value>>,
    strategy_state: Option<Json<Value>>,
    input_tokens: i64,
    output_tokens: i64,
    reasoning_tokens: i64,
    cost_usd: f64,
    wall_s: f64,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct HistoryDbRow {
    iteration: i64,
    candidate_id: Option<i64>,
    outcome_kind: Option<String>,
    score: Option<f64>,
    promoted: bool,
    incumbent_id: Option<i64>,
    island: Option<i64>,
    cell: Option<String>,
    reason: String,
}

#[derive(sqlx::FromRow)]
struct LlmCallRow {
    id: i64,
    run_id: String,
    candidate_id: Option<i64>,
    iteration: i64,
    purpose: String,
    provider: String,
    model: String,
    prompt_system: String,
    prompt_user: String,
    response: Option<String>,
    reasoning: Option<String>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    reasoning_tokens: Option<i64>,
    cost_usd: Option<f64>,
    latency_s: f64,
    error: Option<String>,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct RemeasurementRow {
    id: i64,
    run_id: String,
    iteration: i64,
    purpose: String,
    candidates: Json<Value>,
    verdict: String,
    rounds: Json<Value>,
    evaluations: i64,
    device_s: f64,
    wall_s: f64,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct ValidationRow {
    id: i64,
    run_id: String,
    iteration: i64,
    candidate_id: i64,
    passed: bool,
    reason: String,
    evaluation: Json<Value>,
    device_s: f64,
    wall_s: f64,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct CrossRow {
    id: i64,
    run_id: String,
    candidate_id: i64,
    role: String,
    session: String,
    evaluation: Json<Value>,
    translated_source: Option<String>,
    created_at: DateTime<Utc>,
}

const PROPOSAL_COLUMNS: &str = "SELECT id, run_id, asked_after, system, user_prompt, selection, \
     status, batch, iteration, reason, asked_at, closed_at FROM proposals";

#[derive(sqlx::FromRow)]
struct ProposalRow {
    id: i64,
    run_id: String,
    asked_after: i64,
    system: String,
    user_prompt: String,
    selection: Json<Value>,
    status: String,
    batch: Option<String>,
    iteration: Option<i64>,
    reason: Option<String>,
    asked_at: DateTime<Utc>,
    closed_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct HeldOutRow {
    id: i64,
    run_id: String,
    candidate_id: i64,
    role: String,
    evaluation_id: i64,
    outcome_kind: String,
    session: Option<String>,
    phi: Option<f64>,
    fraction: Option<f64>,
    speedup: Option<f64>,
    created_at: DateTime<Utc>,
}

const SELECT_RUN: &str = "SELECT id, created_at, task, backend, device, size_set, strategy, \
     config, status, status_reason, rng_state, finished_at, summary FROM runs WHERE id = $1";

const LIST_RUNS: &str = "
SELECT r.id, r.created_at, r.task, r.backend, r.device, r.size_set, r.strategy, r.status,
       r.finished_at,
       (SELECT MAX(s.iteration) FROM steps s WHERE s.run_id = r.id) AS last_iteration,
       (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) AS candidates,
       (SELECT MAX(e.score) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
         WHERE c.run_id = r.id AND e.kind = 'in_distribution') AS best_score,
       (SELECT s.cost_usd FROM steps s WHERE s.run_id = r.id
         ORDER BY s.iteration DESC LIMIT 1) AS cost_usd,
       r.heartbeat_at, r.heartbeat_holder, r.summary
FROM runs r
ORDER BY r.created_at DESC, r.id DESC";

const CANDIDATE_COLUMNS: &str = "SELECT id, run_id, iteration, island, cell, descriptors, source, \
     source_sha256, provider, model, created_at FROM candidates";

const EVALUATION_COLUMNS: &str = "SELECT e.id, e.candidate_id, e.kind, e.outcome_kind, e.score, \
     e.device, e.backend, e.evaluation, e.reused_from, e.created_at FROM evaluations e";

const STEP_COLUMNS: &str = "SELECT run_id, iteration, incumbent_id, previous_id, rng_state, \
     strategy_state, input_tokens, output_tokens, reasoning_tokens, cost_usd, wall_s, created_at \
     FROM steps";

const HISTORY: &str = "
SELECT d.iteration, d.candidate_id, e.outcome_kind, e.score, d.promoted, d.incumbent_id,
       d.island, d.cell, d.reason
FROM decisions d
LEFT JOIN evaluations e ON e.candidate_id = d.candidate_id AND e.kind = 'in_distribution'
WHERE d.run_id = $1
ORDER BY d.iteration, d.id";

const LLM_CALLS: &str = "SELECT id, run_id, candidate_id, iteration, purpose, provider, model, \
     prompt_system, prompt_user, response, reasoning, input_tokens, output_tokens, \
     reasoning_tokens, cost_usd, latency_s, error, created_at FROM llm_calls \
     WHERE run_id = $1 ORDER BY iteration, id";

const HELD_OUT: &str = "
SELECT h.id, h.run_id, h.candidate_id, h.role, h.evaluation_id, e.outcome_kind, h.session,
       h.phi, h.fraction, h.speedup, h.created_at
FROM held_out_results h JOIN evaluations e ON e.id = h.evaluation_id
WHERE h.run_id = $1
ORDER BY h.id";

const INSERT_CANDIDATE: &str = "INSERT INTO candidates (run_id, iteration, island, cell, \
     descriptors, source, source_sha256, provider, model, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id";

const INSERT_PARENT: &str =
    "INSERT INTO candidate_parents (candidate_id, position, parent_id) VALUES ($1, $2, $3)";

const INSERT_LLM_CALL: &str = "INSERT INTO llm_calls (run_id, candidate_id, iteration, purpose, \
     provider, model, prompt_system, prompt_user, response, reasoning, input_tokens, \
     output_tokens, reasoning_tokens, cost_usd, latency_s, error, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
     RETURNING id";

/// Run [`INSERT_LLM_CALL`] for `call` on `$exec` (inside a transaction);
/// yields the new row's id. A macro because the two pools' executors are
/// different types; `?` returns counts too large to store.
macro_rules! insert_llm_call {
    ($exec:expr, $run:expr, $candidate:expr, $iteration:expr, $call:expr, $at:expr) => {{
        let call: &NewLlmCall = $call;
        sqlx::query_scalar::<_, i64>(INSERT_LLM_CALL)
            .bind(&$run.0)
            .bind($candidate)
            .bind($iteration)
            .bind(clean_text(&call.purpose))
            .bind(clean_text(&call.provider))
            .bind(clean_text(&call.model))
            .bind(clean_text(&call.prompt_system))
            .bind(clean_text(&call.prompt_user))
            .bind(clean_opt(&call.response))
            .bind(clean_opt(&call.reasoning))
            .bind(
                call.input_tokens
                    .map(|t| to_i64(t, "input tokens"))
                    .transpose()?,
            )
            .bind(
                call.output_tokens
                    .map(|t| to_i64(t, "output tokens"))
                    .transpose()?,
            )
            .bind(
                call.reasoning_tokens
                    .map(|t| to_i64(t, "reasoning tokens"))
                    .transpose()?,
            )
            .bind(finite(call.cost_usd))
            .bind(call.latency_s)
            .bind(clean_opt(&call.error))
            .bind($at)
            .fetch_one($exec)
            .await
    }};
}

const INSERT_EVALUATION: &str = "INSERT INTO evaluations (candidate_id, kind, outcome_kind, \
     score, device, backend, evaluation, reused_from, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id";

const INSERT_DECISION: &str = "INSERT INTO decisions (run_id, iteration, candidate_id, island, \
     cell, promoted, incumbent_id, reason, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id";

const INSERT_STEP: &str = "INSERT INTO steps (run_id, iteration, incumbent_id, previous_id, \
     rng_state, strategy_state, input_tokens, output_tokens, reasoning_tokens, cost_usd, wall_s, \
     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// An evaluation ready to insert: JSON and the queryable columns, computed
/// before the transaction starts.
struct PreparedEvaluation {
    json: Value,
    outcome_kind: &'static str,
    score: Option<f64>,
    device: String,
    backend: String,
    task: String,
    reused_from: Option<i64>,
}

impl PreparedEvaluation {
    fn new(
        ev: &kevo_eval::Evaluation,
        reused_from: Option<EvaluationId>,
    ) -> Result<Self, StoreError> {
        Ok(PreparedEvaluation {
            json: clean_value(&to_json(ev, "evaluation")?).into_owned(),
            outcome_kind: ev.outcome.kind(),
            score: finite(ev.outcome.score()),
            device: clean_text(&ev.device).into_owned(),
            backend: clean_text(&ev.backend).into_owned(),
            task: ev.task.clone(),
            reused_from: reused_from.map(|e| e.0),
        })
    }
}

impl Store {
    /// Opens (creating if needed) the store at `target`: a `postgres://` URL
    /// or a SQLite file path, and brings its schema up to date.
    pub async fn open(target: &str) -> Result<Store, StoreError> {
        Store::open_with(StoreOptions::new(Target::parse(target)?)).await
    }

    /// Opens the workspace's default store, `<workspace>/.kevo/kevo.db`.
    pub async fn open_workspace(workspace: &std::path::Path) -> Result<Store, StoreError> {
        Store::open_with(StoreOptions::new(Target::default_for(workspace))).await
    }

    /// Opens a store with explicit options.
    ///
    /// The database is first reached with a single connection, so that a
    /// corrupt file or a server that is down fails at once with the driver's
    /// own reason instead of a pool timeout. A failed open writes nothing.
    pub async fn open_with(options: StoreOptions) -> Result<Store, StoreError> {
        let location = options.target.display();
        let store = match &options.target {
            Target::Sqlite(path) => open_sqlite(path, &options, &location).await?,
            Target::Postgres(url) => open_postgres(url, &options, &location).await?,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The database, with any password redacted.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// "sqlite" or "postgres".
    pub fn backend_name(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// The newest schema version this build knows.
    pub fn schema_version(&self) -> i64 {
        self.migrator().iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// Closes the pool, waiting for connections to finish; SQLite then
    /// checkpoints its write-ahead log into the main file.
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await)
    }

    fn migrator(&self) -> &'static Migrator {
        match self.pool {
            Pool::Sqlite(_) => &SQLITE_MIGRATIONS,
            Pool::Postgres(_) => &POSTGRES_MIGRATIONS,
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let known = self.schema_version();
        let mut result = on_pool!(self, pool => self.migrator().run(pool).await);
        // Postgres migrations hold an advisory lock; SQLite ones do not, so
        // two processes opening a fresh file at once can both try to apply
        // the same migration. The loser's transaction rolls back whole, and
        // on a second look it finds the migration applied.
        if let Pool::Sqlite(pool) = &self.pool {
            for attempt in 1..=3u64 {
                match &result {
                    Err(MigrateError::Execute(_) | MigrateError::ExecuteMigration(..)) => {
                        tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                        result = self.migrator().run(pool).await;
                    }
                    _ => break,
                }
            }
        }
        result.map_err(|e| match e {
            MigrateError::VersionMissing(found) if found > known => StoreError::SchemaTooNew {
                location: self.location.clone(),
                found,
                known,
            },
            other => StoreError::Migrate {
                location: self.location.clone(),
                message: other.to_string(),
            },
        })
    }

    fn db(&self, what: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        move |cause| StoreError::Database {
            location: self.location.clone(),
            what,
            cause,
        }
    }

    fn corrupt(&self, message: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            location: self.location.clone(),
            message: message.into(),
        }
    }

    fn iteration_of(&self, v: i64) -> Result<u32, StoreError> {
        u32::try_from(v).map_err(|_| self.corrupt(format!("iteration {v} out of range")))
    }

    fn count_of(&self, v: i64) -> Result<u64, StoreError> {
        u64::try_from(v).map_err(|_| self.corrupt(format!("negative count {v}")))
    }

    fn parse<T: FromStr<Err = String>>(&self, s: &str) -> Result<T, StoreError> {
        s.parse().map_err(|e: String| self.corrupt(e))
    }

    fn size_set(&self, s: &str) -> Result<kevo_tasks::SizeSet, StoreError> {
        s.parse().map_err(|e: String| self.corrupt(e))
    }

    // ----------------------------------------------------------------- runs

    /// Starts a run with status `running` and returns its new id.
    pub async fn create_run(&self, run: &NewRun) -> Result<RunId, StoreError> {
        let created = now();
        let config = clean_value(&run.config);
        let rng = run.rng_state.as_ref().map(clean_value);
        // The random part makes a clash within one second unlikely; a clash
        // is retried with a fresh id rather than reported.
        for _ in 0..8 {
            let id = new_run_id(&run.task, created);
            let result = on_pool!(self, pool => {
                sqlx::query(
                    "INSERT INTO runs (id, created_at, task, backend, device, size_set, strategy, \
                     config, status, rng_state) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'running', $9)",
                )
                .bind(&id.0)
                .bind(created)
                .bind(clean_text(&run.task))
                .bind(clean_text(&run.backend))
                .bind(clean_text(&run.device))
                .bind(run.size_set.to_string())
                .bind(clean_text(&run.strategy))
                .bind(Json(config.as_ref()))
                .bind(rng.as_ref().map(|v| Json(v.as_ref())))
                .execute(pool)
                .await
                .map(|_| ())
            });
            match result {
                Ok(_) => return Ok(id),
                Err(e) if is_unique_violation(&e) => continue,
                Err(e) => return Err(self.db("create run")(e)),
            }
        }
        Err(StoreError::InvalidRecord(
            "could not find a free run id".into(),
        ))
    }

    /// A run's stored record.
    pub async fn run(&self, run: &RunId) -> Result<RunInfo, StoreError> {
        let row: Option<RunRow> = on_pool!(self, pool => {
            sqlx::query_as(SELECT_RUN).bind(&run.0).fetch_optional(pool).await
        })
        .map_err(self.db("read run"))?;
        let row = row.ok_or_else(|| StoreError::RunNotFound(run.clone()))?;
        self.run_info(row)
    }

    fn run_info(&self, r: RunRow) -> Result<RunInfo, StoreError> {
        Ok(RunInfo {
            id: RunId(r.id),
            created_at: r.created_at,
            task: r.task,
            backend: r.backend,
            device: r.device,
            size_set: self.size_set(&r.size_set)?,
            strategy: r.strategy,
            config: r.config.0,
            status: self.parse(&r.status)?,
            status_reason: r.status_reason,
            rng_state: r.rng_state.map(|j| j.0),
            finished_at: r.finished_at,
            summary: r.summary.map(|j| j.0),
        })
    }

    /// Every run, newest first, with its progress and best score.
    pub async fn list_runs(&self) -> Result<Vec<RunListing>, StoreError> {
        let rows: Vec<ListingRow> = on_pool!(self, pool => {
            sqlx::query_as(LIST_RUNS).fetch_all(pool).await
        })
        .map_err(self.db("list runs"))?;
        rows.into_iter()
            .map(|r| {
                Ok(RunListing {
                    id: RunId(r.id),
                    created_at: r.created_at,
                    task: r.task,
                    backend: r.backend,
                    device: r.device,
                    size_set: self.size_set(&r.size_set)?,
                    strategy: r.strategy,
                    status: self.parse(&r.status)?,
                    finished_at: r.finished_at,
                    last_iteration: r.last_iteration.map(|i| self.iteration_of(i)).transpose()?,
                    candidates: self.count_of(r.candidates)?,
                    // A finished run's winner is the confirmed one of its
                    // summary, not the in-run maximum of noisy scores.
                    best_score: r
                        .summary
                        .as_ref()
                        .and_then(|s| s.0["best_score"].as_f64())
                        .or(r.best_score),
                    speedup: r.summary.as_ref().and_then(|s| s.0["speedup"].as_f64()),
                    cost_usd: r.cost_usd,
                    heartbeat_at: r.heartbeat_at,
                    heartbeat_holder: r.heartbeat_holder,
                    held_out_verdict: r
                        .summary
                        .as_ref()
                        .and_then(|s| s.0["held_out"]["verdict"].as_str())
                        .map(String::from),
                    winner_safety: r
                        .summary
                        .as_ref()
                        .and_then(|s| s.0["safety"]["verdict"].as_str())
                        .map(String::from),
                })
            })
            .collect()
    }

    /// Changes a run's status if it is currently one of `from`.
    async fn set_status(
        &self,
        run: &RunId,
        to: RunStatus,
        from: &[RunStatus],
        reason: Option<&str>,
        summary: Option<&Value>,
        why: &'static str,
    ) -> Result<(), StoreError> {
        let finished_at = (to == RunStatus::Finished).then(now);
        let allowed: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        let summary = summary.map(clean_value);
        let affected = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db("update run status"))?;
            let current: Option<String> = sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
                .bind(&run.0)
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.db("update run status"))?;
            let Some(current) = current else {
                return Err(StoreError::RunNotFound(run.clone()));
            };
            if !allowed.contains(&current.as_str()) {
                return Err(StoreError::RunStatus {
                    run: run.clone(),
                    status: self.parse(&current)?,
                    why,
                });
            }
            let done = sqlx::query(
                "UPDATE runs SET status = $2, status_reason = $3, \
                 finished_at = COALESCE($4, finished_at), summary = COALESCE($5, summary) \
                 WHERE id = $1",
            )
            .bind(&run.0)
            .bind(to.as_str())
            .bind(reason.map(clean_text))
            .bind(finished_at)
            .bind(summary.as_ref().map(|v| Json(v.as_ref())))
            .execute(&mut *tx)
            .await
            .map_err(self.db("update run status"))?;
            tx.commit().await.map_err(self.db("update run status"))?;
            done.rows_affected()
        });
        debug_assert_eq!(affected, 1);
        Ok(())
    }

    /// Marks a running run finished and stores its summary.
    pub async fn mark_finished(&self, run: &RunId, summary: &Value) -> Result<(), StoreError> {
        self.set_status(
            run,
            RunStatus::Finished,
            &[RunStatus::Running],
            None,
            Some(summary),
            "only a running run can finish",
        )
        .await
    }

    /// Marks a run failed, with the reason.
    pub async fn mark_failed(&self, run: &RunId, reason: &str) -> Result<(), StoreError> {
        self.set_status(
            run,
            RunStatus::Failed,
            &[RunStatus::Running, RunStatus::Interrupted],
            Some(reason),
            None,
            "a finished run cannot fail",
        )
        .await
    }

    /// Record that the process running `run` is alive (see
    /// [`RunListing::is_alive`]). A run that is not running is left alone.
    pub async fn heartbeat(&self, run: &RunId) -> Result<(), StoreError> {
        let at = now();
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE runs SET heartbeat_at = $1, heartbeat_holder = $2 \
                 WHERE id = $3 AND status = 'running'",
            )
                .bind(at)
                .bind(crate::lease::this_process())
                .bind(&run.0)
                .execute(pool)
                .await
                .map(|_| ())
        })
        .map_err(self.db("write a heartbeat"))?;
        Ok(())
    }

    /// Marks a running run interrupted (Ctrl-C, budget pause); it can be
    /// resumed.
    pub async fn mark_interrupted(&self, run: &RunId, reason: &str) -> Result<(), StoreError> {
        self.set_status(
            run,
            RunStatus::Interrupted,
            &[RunStatus::Running],
            Some(reason),
            None,
            "only a running run can be interrupted",
        )
        .await
    }

    /// Puts an interrupted, failed or (after a crash) still-running run back
    /// to running and returns it with its last checkpoint: the point to
    /// continue from. A finished run is refused, and so is a running run
    /// whose process still writes its heartbeat: two processes would
    /// record the same iterations.
    pub async fn resume_run(
        &self,
        run: &RunId,
    ) -> Result<(RunInfo, Option<StoredCheckpoint>), StoreError> {
        let row: Option<(String, Option<DateTime<Utc>>, Option<String>)> = on_pool!(self, pool => {
            sqlx::query_as("SELECT status, heartbeat_at, heartbeat_holder FROM runs WHERE id = $1")
                .bind(&run.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read a run's heartbeat"))?;
        let Some((status, heartbeat_at, holder)) = row else {
            return Err(StoreError::RunNotFound(run.clone()));
        };
        if self.parse::<RunStatus>(&status)? == RunStatus::Running
            && let Some(at) = heartbeat_at
            && !holder.as_deref().is_some_and(crate::lease::holder_is_gone)
        {
            let age_s = (Utc::now() - at).num_seconds();
            if age_s <= HEARTBEAT_STALE_S {
                return Err(StoreError::RunAlive {
                    run: run.clone(),
                    age_s: age_s.max(0),
                    stale_s: HEARTBEAT_STALE_S,
                });
            }
        }
        self.set_status(
            run,
            RunStatus::Running,
            &[
                RunStatus::Running,
                RunStatus::Interrupted,
                RunStatus::Failed,
            ],
            None,
            None,
            "a finished run has nothing to resume",
        )
        .await?;
        let info = self.run(run).await?;
        let checkpoint = self.last_checkpoint(run).await?;
        Ok((info, checkpoint))
    }

    /// Stores model calls that were in flight when the run stopped
    /// (Ctrl-C): they belong to no candidate and no recorded iteration
    /// (`iteration` is the one they were for, which a resume runs again),
    /// but what was asked, and that it may have been billed, is kept.
    pub async fn record_abandoned_calls(
        &self,
        run: &RunId,
        iteration: u32,
        calls: &[NewLlmCall],
    ) -> Result<(), StoreError> {
        let what = "record abandoned LLM calls";
        for call in calls {
            required_finite(call.latency_s, "an LLM call's latency")?;
        }
        let at = now();
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            for call in calls {
                insert_llm_call!(&mut *tx, run, None::<i64>, i64::from(iteration), call, at)
                    .map_err(self.db(what))?;
            }
            tx.commit().await.map_err(self.db(what))?;
        });
        Ok(())
    }

    /// Stores one model call made outside an iteration's proposals (the
    /// performance analyst's, about `candidate`) as soon as it returns, so
    /// that what it cost is kept whatever happens to the iteration it
    /// informs. `iteration` is the last one recorded when it was made.
    pub async fn record_llm_call(
        &self,
        run: &RunId,
        candidate: Option<CandidateId>,
        iteration: u32,
        call: &NewLlmCall,
    ) -> Result<LlmCallId, StoreError> {
        let what = "record an LLM call";
        required_finite(call.latency_s, "an LLM call's latency")?;
        let at = now();
        let id;
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            id = insert_llm_call!(&mut *tx, run, candidate.map(|c| c.0), i64::from(iteration), call, at)
                .map_err(self.db(what))?;
            tx.commit().await.map_err(self.db(what))?;
        });
        Ok(LlmCallId(id))
    }

    // ----------------------------------------------------------- iterations

    /// What can be checked of an iteration's proposals before any
    /// decision: evaluations belong to candidates, parents that name a
    /// proposal name one with a candidate, latencies are numbers.
    fn validate_proposed(proposed: &[Proposed]) -> Result<(), StoreError> {
        for (i, p) in proposed.iter().enumerate() {
            if p.candidate.is_none() && p.evaluation.is_some() {
                return Err(StoreError::InvalidRecord(format!(
                    "proposal {i} has an evaluation but no candidate"
                )));
            }
            if let Some(c) = &p.candidate {
                for parent in &c.parents {
                    if *parent == CandidateRef::Proposal(i) {
                        return Err(StoreError::InvalidRecord(format!(
                            "proposal {i}'s candidate is its own parent"
                        )));
                    }
                    check_proposal_ref(proposed, parent, &format!("a parent of proposal {i}"))?;
                }
            }
            for call in &p.llm_calls {
                required_finite(call.latency_s, "an LLM call's latency")?;
            }
        }
        Ok(())
    }

    /// The decisions about `proposed`: one per proposal, promoting only
    /// candidates that exist, naming only proposals that have one.
    fn validate_decided(proposed: &[Proposed], decided: &Decided) -> Result<(), StoreError> {
        if decided.decisions.len() != proposed.len() {
            return Err(StoreError::InvalidRecord(format!(
                "{} decisions for {} proposals",
                decided.decisions.len(),
                proposed.len()
            )));
        }
        for (i, (p, d)) in proposed.iter().zip(&decided.decisions).enumerate() {
            if p.candidate.is_none() && d.promoted {
                return Err(StoreError::InvalidRecord(format!(
                    "proposal {i} promotes a candidate it does not have"
                )));
            }
            if let Some(r) = &d.incumbent {
                check_proposal_ref(proposed, r, &format!("the incumbent of proposal {i}"))?;
            }
        }
        let cp = &decided.checkpoint;
        if let Some(r) = &cp.incumbent {
            check_proposal_ref(proposed, r, "the checkpoint's incumbent")?;
        }
        if let Some(r) = &cp.previous {
            check_proposal_ref(proposed, r, "the checkpoint's previous candidate")?;
        }
        for (i, v) in decided.validations.iter().enumerate() {
            check_proposal_ref(proposed, &v.candidate, &format!("validation {i}"))?;
            required_finite(v.device_s, "the validation's device time")?;
            required_finite(v.wall_s, "the validation's wall time")?;
        }
        required_finite(cp.spent.cost_usd, "the spent cost")?;
        required_finite(cp.spent.wall_s, "the spent wall time")?;
        Ok(())
    }

    /// Writes everything one iteration produced (candidates, LLM calls,
    /// evaluations, decisions, checkpoint) in one transaction. If anything
    /// fails, or the process dies before the commit, nothing of the
    /// iteration is stored, and the run resumes from the previous
    /// checkpoint. Recording an iteration number twice, or out of order, is
    /// refused, so a candidate is never counted twice.
    pub async fn record_iteration(
        &self,
        run: &RunId,
        record: &IterationRecord,
    ) -> Result<Vec<ProposalIds>, StoreError> {
        let (proposed, decided) = record.split();
        // Refused before the transaction, as it always was (the proposals
        // are checked first thing in `record_iteration_with`).
        Self::validate_decided(&proposed, &decided)?;
        self.record_iteration_with(run, record.iteration, &proposed, |_| decided)
            .await
    }

    /// [`Store::record_iteration`] for a strategy that decides on stored
    /// ids: the candidates of `proposed` are inserted first, `decide` is
    /// called with their ids (None where a proposal has no candidate, in
    /// the order of `proposed`), and what it returns (one decision per
    /// proposal, the checkpoint) is written in the same transaction. If
    /// anything fails after `decide` ran, nothing is stored: a caller
    /// whose strategy decided must then give up its in-memory state and
    /// resume from the store.
    pub async fn record_iteration_with<F>(
        &self,
        run: &RunId,
        iteration_number: u32,
        proposed: &[Proposed],
        decide: F,
    ) -> Result<Vec<ProposalIds>, StoreError>
    where
        F: FnOnce(&[Option<CandidateId>]) -> Decided,
    {
        Self::validate_proposed(proposed)?;
        let at = now();
        let iteration = i64::from(iteration_number);
        let evaluations: Vec<Option<PreparedEvaluation>> = proposed
            .iter()
            .map(|p| {
                p.evaluation
                    .as_ref()
                    .map(|e| PreparedEvaluation::new(&e.evaluation, e.reused_from))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let what = "record iteration";

        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;

            let row: Option<(String, String)> =
                sqlx::query_as("SELECT status, task FROM runs WHERE id = $1")
                    .bind(&run.0)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(self.db(what))?;
            let Some((status, task)) = row else {
                return Err(StoreError::RunNotFound(run.clone()));
            };
            let status: RunStatus = self.parse(&status)?;
            if status != RunStatus::Running {
                return Err(StoreError::RunStatus {
                    run: run.clone(),
                    status,
                    why: "iterations can only be added to a running run",
                });
            }
            for ev in evaluations.iter().flatten() {
                if ev.task != task {
                    return Err(StoreError::InvalidRecord(format!(
                        "an evaluation of task `{}` cannot belong to a run of task `{task}`",
                        ev.task
                    )));
                }
            }
            let last: Option<i64> =
                sqlx::query_scalar("SELECT MAX(iteration) FROM steps WHERE run_id = $1")
                    .bind(&run.0)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(self.db(what))?;
            if let Some(last) = last {
                if last == iteration {
                    return Err(StoreError::IterationExists {
                        run: run.clone(),
                        iteration: iteration_number,
                    });
                }
                if last > iteration {
                    return Err(StoreError::IterationOutOfOrder {
                        run: run.clone(),
                        iteration: iteration_number,
                        last: self.iteration_of(last)?,
                    });
                }
            }

            // Candidates first: decisions and the checkpoint may refer to
            // any proposal's candidate.
            let mut candidate_ids: Vec<Option<i64>> = Vec::with_capacity(proposed.len());
            for p in proposed {
                let id = match &p.candidate {
                    Some(c) => {
                        let id: i64 = sqlx::query_scalar(INSERT_CANDIDATE)
                            .bind(&run.0)
                            .bind(iteration)
                            .bind(c.island)
                            .bind(clean_opt(&c.cell))
                            .bind(c.descriptors.as_ref().map(clean_value).map(|v| Json(v.into_owned())))
                            .bind(clean_text(&c.source))
                            .bind(source_sha256(&c.source))
                            .bind(clean_opt(&c.provider))
                            .bind(clean_opt(&c.model))
                            .bind(at)
                            .fetch_one(&mut *tx)
                            .await
                            .map_err(self.db(what))?;
                        Some(id)
                    }
                    None => None,
                };
                candidate_ids.push(id);
            }
            let stored: Vec<Option<CandidateId>> =
                candidate_ids.iter().map(|id| id.map(CandidateId)).collect();
            let decided = decide(&stored);
            Self::validate_decided(proposed, &decided)?;
            let spent = &decided.checkpoint.spent;
            let tokens = [
                to_i64(spent.input_tokens, "input tokens")?,
                to_i64(spent.output_tokens, "output tokens")?,
                to_i64(spent.reasoning_tokens, "reasoning tokens")?,
            ];

            // Incumbents and previous candidates named by id must be this
            // run's: a decision about another run's candidate is a bug.
            let stored_refs = decided
                .decisions
                .iter()
                .filter_map(|d| d.incumbent)
                .chain(decided.checkpoint.incumbent)
                .chain(decided.checkpoint.previous)
                .filter_map(|r| match r {
                    CandidateRef::Stored(id) => Some(id),
                    CandidateRef::Proposal(_) => None,
                })
                .chain(decided.remeasurements.iter().flat_map(|r| r.candidates.iter().copied()))
                .chain(decided.validations.iter().filter_map(|v| match v.candidate {
                    CandidateRef::Stored(id) => Some(id),
                    CandidateRef::Proposal(_) => None,
                }));
            ensure_run_owns!(self, &mut *tx, run, stored_refs, what);

            let resolve = |r: &CandidateRef| -> i64 {
                match r {
                    CandidateRef::Stored(id) => id.0,
                    // validate() guarantees the proposal has a candidate.
                    CandidateRef::Proposal(j) => candidate_ids[*j].expect("validated reference"),
                }
            };

            let mut ids = Vec::with_capacity(proposed.len());
            for (i, (p, d)) in proposed.iter().zip(&decided.decisions).enumerate() {
                let candidate_id = candidate_ids[i];
                if let (Some(c), Some(cid)) = (&p.candidate, candidate_id) {
                    for (pos, parent) in c.parents.iter().enumerate() {
                        sqlx::query(INSERT_PARENT)
                            .bind(cid)
                            .bind(pos as i64)
                            .bind(resolve(parent))
                            .execute(&mut *tx)
                            .await
                            .map_err(self.db(what))?;
                    }
                }

                let mut call_ids = Vec::with_capacity(p.llm_calls.len());
                for call in &p.llm_calls {
                    let id: i64 = insert_llm_call!(&mut *tx, run, candidate_id, iteration, call, at)
                        .map_err(self.db(what))?;
                    call_ids.push(LlmCallId(id));
                }

                let evaluation_id = match (&evaluations[i], candidate_id) {
                    (Some(ev), Some(cid)) => {
                        let id: i64 = sqlx::query_scalar(INSERT_EVALUATION)
                            .bind(cid)
                            .bind(EvaluationKind::InDistribution.as_str())
                            .bind(ev.outcome_kind)
                            .bind(ev.score)
                            .bind(&ev.device)
                            .bind(&ev.backend)
                            .bind(Json(&ev.json))
                            .bind(ev.reused_from)
                            .bind(at)
                            .fetch_one(&mut *tx)
                            .await
                            .map_err(self.db(what))?;
                        Some(EvaluationId(id))
                    }
                    _ => None,
                };

                let decision_id: i64 = sqlx::query_scalar(INSERT_DECISION)
                    .bind(&run.0)
                    .bind(iteration)
                    .bind(candidate_id)
                    .bind(d.island)
                    .bind(clean_opt(&d.cell))
                    .bind(d.promoted)
                    .bind(d.incumbent.as_ref().map(resolve))
                    .bind(clean_text(&d.reason))
                    .bind(at)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(self.db(what))?;

                ids.push(ProposalIds {
                    candidate: candidate_id.map(CandidateId),
                    evaluation: evaluation_id,
                    llm_calls: call_ids,
                    decision: DecisionId(decision_id),
                });
            }

            for r in &decided.remeasurements {
                insert_remeasurement!(&mut *tx, run, iteration, r, at)
                    .map_err(self.db(what))?;
            }
            for v in &decided.validations {
                insert_validation!(&mut *tx, run, iteration, resolve(&v.candidate), v, at)
                    .map_err(self.db(what))?;
            }

            let cp = &decided.checkpoint;
            let step = sqlx::query(INSERT_STEP)
                .bind(&run.0)
                .bind(iteration)
                .bind(cp.incumbent.as_ref().map(resolve))
                .bind(cp.previous.as_ref().map(resolve))
                .bind(cp.rng_state.as_ref().map(clean_value).map(|v| Json(v.into_owned())))
                .bind(cp.strategy_state.as_ref().map(clean_value).map(|v| Json(v.into_owned())))
                .bind(tokens[0])
                .bind(tokens[1])
                .bind(tokens[2])
                .bind(spent.cost_usd)
                .bind(spent.wall_s)
                .bind(at)
                .execute(&mut *tx)
                .await;
            match step {
                Ok(_) => {}
                // Another writer recorded this iteration since our check.
                Err(e) if is_unique_violation(&e) => {
                    return Err(StoreError::IterationExists {
                        run: run.clone(),
                        iteration: iteration_number,
                    });
                }
                Err(e) => return Err(self.db(what)(e)),
            }

            if let Some(answered) = decided.answers {
                let done = sqlx::query(
                    "UPDATE proposals SET status = 'answered', iteration = $1, closed_at = $2 \
                     WHERE id = $3 AND run_id = $4 AND status = 'pending'",
                )
                .bind(iteration)
                .bind(at)
                .bind(answered.0)
                .bind(&run.0)
                .execute(&mut *tx)
                .await
                .map_err(self.db(what))?;
                if done.rows_affected() != 1 {
                    let found: Option<ProposalRow> = sqlx::query_as(AssertSqlSafe(format!(
                        "{PROPOSAL_COLUMNS} WHERE id = $1 AND run_id = $2"
                    )))
                    .bind(answered.0)
                    .bind(&run.0)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(self.db(what))?;
                    return Err(match found {
                        None => StoreError::ProposalNotFound { run: run.clone(), id: answered },
                        Some(row) => {
                            let p = self.proposal_of(row)?;
                            StoreError::ProposalClosed {
                                run: run.clone(),
                                id: answered,
                                status: p.status,
                                iteration: p.iteration,
                            }
                        }
                    });
                }
            }

            tx.commit().await.map_err(self.db(what))?;
            Ok(ids)
        })
    }

    // ------------------------------------------------------------ proposals

    /// Store prompts handed out to be answered later (ask/tell, batch),
    /// asked after iteration `asked_after`, and return their ids. With
    /// `strategy_state`, that iteration's checkpoint takes the strategy's
    /// state as the selections left it (a selection may draw random numbers
    /// or advance a round-robin), in the same transaction: the next session
    /// continues from there instead of selecting the same again.
    pub async fn add_proposals(
        &self,
        run: &RunId,
        asked_after: u32,
        proposals: &[NewProposal],
        strategy_state: Option<&Value>,
    ) -> Result<Vec<ProposalId>, StoreError> {
        let what = "record proposals";
        let at = now();
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            let status: Option<String> = sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
                .bind(&run.0)
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.db(what))?;
            let Some(status) = status else {
                return Err(StoreError::RunNotFound(run.clone()));
            };
            let status: RunStatus = self.parse(&status)?;
            if status != RunStatus::Running {
                return Err(StoreError::RunStatus {
                    run: run.clone(),
                    status,
                    why: "proposals can only be added to a running run",
                });
            }
            let mut ids = Vec::with_capacity(proposals.len());
            for p in proposals {
                let id: i64 = sqlx::query_scalar(
                    "INSERT INTO proposals (run_id, asked_after, system, user_prompt, selection, \
                     status, asked_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6) RETURNING id",
                )
                .bind(&run.0)
                .bind(i64::from(asked_after))
                .bind(clean_text(&p.system))
                .bind(clean_text(&p.user))
                .bind(Json(clean_value(&p.selection).into_owned()))
                .bind(at)
                .fetch_one(&mut *tx)
                .await
                .map_err(self.db(what))?;
                ids.push(ProposalId(id));
            }
            if let Some(state) = strategy_state {
                let done = sqlx::query(
                    "UPDATE steps SET strategy_state = $1 WHERE run_id = $2 AND iteration = $3",
                )
                .bind(Json(clean_value(state).into_owned()))
                .bind(&run.0)
                .bind(i64::from(asked_after))
                .execute(&mut *tx)
                .await
                .map_err(self.db(what))?;
                if done.rows_affected() != 1 {
                    return Err(StoreError::InvalidRecord(format!(
                        "run `{run}` has no checkpoint at iteration {asked_after} to advance"
                    )));
                }
            }
            tx.commit().await.map_err(self.db(what))?;
            Ok(ids)
        })
    }

    /// One of `run`'s proposals.
    pub async fn proposal(
        &self,
        run: &RunId,
        id: ProposalId,
    ) -> Result<StoredProposal, StoreError> {
        let row: Option<ProposalRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(format!("{PROPOSAL_COLUMNS} WHERE id = $1 AND run_id = $2")))
                .bind(id.0)
                .bind(&run.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read a proposal"))?;
        match row {
            Some(row) => self.proposal_of(row),
            None => Err(StoreError::ProposalNotFound {
                run: run.clone(),
                id,
            }),
        }
    }

    /// `run`'s proposals in the order they were asked.
    pub async fn proposals(&self, run: &RunId) -> Result<Vec<StoredProposal>, StoreError> {
        let rows: Vec<ProposalRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(format!("{PROPOSAL_COLUMNS} WHERE run_id = $1 ORDER BY id")))
                .bind(&run.0)
                .fetch_all(pool)
                .await
        })
        .map_err(self.db("read proposals"))?;
        rows.into_iter().map(|r| self.proposal_of(r)).collect()
    }

    /// Record that pending proposals `ids` went out in the provider's batch
    /// job `batch`.
    pub async fn set_proposal_batch(
        &self,
        run: &RunId,
        ids: &[ProposalId],
        batch: &str,
    ) -> Result<(), StoreError> {
        self.update_pending(run, ids, "batch = $1", batch, false)
            .await
    }

    /// Give up pending proposals `ids`, saying why; answers to them are
    /// refused from then on.
    pub async fn withdraw_proposals(
        &self,
        run: &RunId,
        ids: &[ProposalId],
        reason: &str,
    ) -> Result<(), StoreError> {
        self.update_pending(
            run,
            ids,
            "status = 'withdrawn', reason = $1, closed_at = $4",
            reason,
            true,
        )
        .await
    }

    async fn update_pending(
        &self,
        run: &RunId,
        ids: &[ProposalId],
        set: &'static str,
        value: &str,
        closes: bool,
    ) -> Result<(), StoreError> {
        let what = "update proposals";
        let at = now();
        let sql = format!(
            "UPDATE proposals SET {set} WHERE id = $2 AND run_id = $3 AND status = 'pending'"
        );
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            for id in ids {
                let mut query = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(clean_text(value))
                    .bind(id.0)
                    .bind(&run.0);
                if closes {
                    query = query.bind(at);
                }
                let done = query
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db(what))?;
                if done.rows_affected() != 1 {
                    return Err(StoreError::InvalidRecord(format!(
                        "proposal {id} of run `{run}` is not pending"
                    )));
                }
            }
            tx.commit().await.map_err(self.db(what))?;
            Ok(())
        })
    }

    fn proposal_of(&self, r: ProposalRow) -> Result<StoredProposal, StoreError> {
        Ok(StoredProposal {
            id: ProposalId(r.id),
            run_id: RunId(r.run_id),
            asked_after: self.iteration_of(r.asked_after)?,
            proposal: NewProposal {
                system: r.system,
                user: r.user_prompt,
                selection: r.selection.0,
            },
            status: self.parse(&r.status)?,
            batch: r.batch,
            iteration: r.iteration.map(|i| self.iteration_of(i)).transpose()?,
            reason: r.reason,
            asked_at: r.asked_at,
            closed_at: r.closed_at,
        })
    }

    /// The last completed step of a run: where `resume` continues. None if
    /// not even the seed was recorded.
    pub async fn last_checkpoint(
        &self,
        run: &RunId,
    ) -> Result<Option<StoredCheckpoint>, StoreError> {
        let sql = format!("{STEP_COLUMNS} WHERE run_id = $1 ORDER BY iteration DESC LIMIT 1");
        let row: Option<StepRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(sql)).bind(&run.0).fetch_optional(pool).await
        })
        .map_err(self.db("read checkpoint"))?;
        match row {
            Some(r) => Ok(Some(StoredCheckpoint {
                run_id: RunId(r.run_id),
                iteration: self.iteration_of(r.iteration)?,
                incumbent: r.incumbent_id.map(CandidateId),
                previous: r.previous_id.map(CandidateId),
                rng_state: r.rng_state.map(|j| j.0),
                strategy_state: r.strategy_state.map(|j| j.0),
                spent: Spent {
                    input_tokens: self.count_of(r.input_tokens)?,
                    output_tokens: self.count_of(r.output_tokens)?,
                    reasoning_tokens: self.count_of(r.reasoning_tokens)?,
                    cost_usd: r.cost_usd,
                    wall_s: r.wall_s,
                },
                created_at: r.created_at,
            })),
            None => {
                // Distinguish "nothing recorded yet" from "no such run".
                self.run(run).await?;
                Ok(None)
            }
        }
    }

    /// One row per proposal, in order: what was tried, how it fared, and
    /// whether it was kept.
    pub async fn history(&self, run: &RunId) -> Result<Vec<HistoryRow>, StoreError> {
        let rows: Vec<HistoryDbRow> = on_pool!(self, pool => {
            sqlx::query_as(HISTORY).bind(&run.0).fetch_all(pool).await
        })
        .map_err(self.db("read history"))?;
        if rows.is_empty() {
            self.run(run).await?;
        }
        rows.into_iter()
            .map(|r| {
                Ok(HistoryRow {
                    iteration: self.iteration_of(r.iteration)?,
                    candidate_id: r.candidate_id.map(CandidateId),
                    outcome_kind: r.outcome_kind,
                    score: r.score,
                    promoted: r.promoted,
                    incumbent_id: r.incumbent_id.map(CandidateId),
                    island: r.island,
                    cell: r.cell,
                    reason: r.reason,
                })
            })
            .collect()
    }

    // ----------------------------------------------------------- candidates

    /// A stored candidate with its parents.
    pub async fn candidate(&self, id: CandidateId) -> Result<StoredCandidate, StoreError> {
        let sql = format!("{CANDIDATE_COLUMNS} WHERE id = $1");
        let (row, parents): (Option<CandidateRow>, Vec<i64>) = on_pool!(self, pool => {
            let row = sqlx::query_as(AssertSqlSafe(sql))
                .bind(id.0)
                .fetch_optional(pool)
                .await
                .map_err(self.db("read candidate"))?;
            let parents = sqlx::query_scalar(
                "SELECT parent_id FROM candidate_parents WHERE candidate_id = $1 ORDER BY position",
            )
            .bind(id.0)
            .fetch_all(pool)
            .await
            .map_err(self.db("read candidate parents"))?;
            (row, parents)
        });
        let r = row.ok_or(StoreError::CandidateNotFound(id))?;
        Ok(StoredCandidate {
            id: CandidateId(r.id),
            run_id: RunId(r.run_id),
            iteration: self.iteration_of(r.iteration)?,
            parents: parents.into_iter().map(CandidateId).collect(),
            island: r.island,
            cell: r.cell,
            descriptors: r.descriptors.map(|j| j.0),
            source: r.source,
            source_sha256: r.source_sha256,
            provider: r.provider,
            model: r.model,
            created_at: r.created_at,
        })
    }

    /// Just the source of a candidate.
    pub async fn candidate_source(&self, id: CandidateId) -> Result<String, StoreError> {
        let source: Option<String> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT source FROM candidates WHERE id = $1")
                .bind(id.0)
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("read candidate source"))?;
        source.ok_or(StoreError::CandidateNotFound(id))
    }

    fn stored_evaluation(&self, r: EvaluationRow) -> Result<StoredEvaluation, StoreError> {
        Ok(StoredEvaluation {
            id: EvaluationId(r.id),
            candidate_id: CandidateId(r.candidate_id),
            kind: self.parse(&r.kind)?,
            outcome_kind: r.outcome_kind,
            score: r.score,
            device: r.device,
            backend: r.backend,
            json: r.evaluation.0,
            reused_from: r.reused_from.map(EvaluationId),
            created_at: r.created_at,
        })
    }

    /// Every evaluation of a candidate (in-distribution, then held-out ones).
    pub async fn evaluations_of(
        &self,
        candidate: CandidateId,
    ) -> Result<Vec<StoredEvaluation>, StoreError> {
        let sql = format!("{EVALUATION_COLUMNS} WHERE e.candidate_id = $1 ORDER BY e.id");
        let rows: Vec<EvaluationRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(sql)).bind(candidate.0).fetch_all(pool).await
        })
        .map_err(self.db("read evaluations"))?;
        rows.into_iter()
            .map(|r| self.stored_evaluation(r))
            .collect()
    }

    /// The run's in-distribution evaluation of a source with this SHA-256,
    /// if it has one (the first, original measurement). A resumed run asks
    /// before evaluating, so the same source is never measured twice.
    pub async fn find_evaluation(
        &self,
        run: &RunId,
        source_sha256: &str,
    ) -> Result<Option<StoredEvaluation>, StoreError> {
        let sql = format!(
            "{EVALUATION_COLUMNS} JOIN candidates c ON c.id = e.candidate_id \
             WHERE c.run_id = $1 AND c.source_sha256 = $2 AND e.kind = 'in_distribution' \
             ORDER BY e.id LIMIT 1"
        );
        let row: Option<EvaluationRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(&run.0)
                .bind(source_sha256.to_ascii_lowercase())
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("find evaluation"))?;
        row.map(|r| self.stored_evaluation(r)).transpose()
    }

    /// The latest original in-distribution measurement of a source with
    /// this SHA-256 for `task` at `size_set` on `device` through
    /// `backend`, in any run: the cache that makes a repeated tuning
    /// configuration cost nothing. Timeouts and runtime errors are not
    /// served from it (a worker that died or a busy device is not a
    /// property of the kernel); copies are not either, so a chain of reuse
    /// always ends at a measurement.
    pub async fn find_measurement(
        &self,
        task: &str,
        backend: &str,
        device: &str,
        size_set: SizeSet,
        source_sha256: &str,
    ) -> Result<Option<StoredEvaluation>, StoreError> {
        let sql = format!(
            "{EVALUATION_COLUMNS} JOIN candidates c ON c.id = e.candidate_id \
             JOIN runs r ON r.id = c.run_id \
             WHERE r.task = $1 AND e.backend = $2 AND e.device = $3 AND r.size_set = $4 \
             AND c.source_sha256 = $5 AND e.kind = 'in_distribution' \
             AND e.reused_from IS NULL AND e.outcome_kind NOT IN ('timeout', 'runtime_error') \
             ORDER BY e.id DESC LIMIT 1"
        );
        let row: Option<EvaluationRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(task)
                .bind(backend)
                .bind(device)
                .bind(size_set.to_string())
                .bind(source_sha256.to_ascii_lowercase())
                .fetch_optional(pool)
                .await
        })
        .map_err(self.db("find measurement"))?;
        row.map(|r| self.stored_evaluation(r)).transpose()
    }

    /// The run's winner: the candidate its held-out gate scored as the
    /// winner (a finished run's final pick), else its last checkpoint's
    /// incumbent (the strategy's best, which a noise-aware promotion rule
    /// may have kept over a candidate whose one measurement was higher),
    /// else the highest in-distribution score. None while nothing is
    /// correct.
    pub async fn best_candidate(&self, run: &RunId) -> Result<Option<BestCandidate>, StoreError> {
        let winner = self
            .held_out_results(run)
            .await?
            .into_iter()
            .rev()
            .find(|h| h.role == HeldOutRole::Winner)
            .map(|h| h.candidate_id);
        let chosen = match winner {
            Some(id) => Some(id),
            None => self.last_checkpoint(run).await?.and_then(|cp| cp.incumbent),
        };
        if let Some(id) = chosen
            && let Some(evaluation) = self
                .evaluations_of(id)
                .await?
                .into_iter()
                .find(|e| e.kind == EvaluationKind::InDistribution && e.score.is_some())
        {
            let candidate = self.candidate(id).await?;
            return Ok(Some(BestCandidate {
                candidate,
                evaluation,
            }));
        }
        let sql = format!(
            "{EVALUATION_COLUMNS} JOIN candidates c ON c.id = e.candidate_id \
             WHERE c.run_id = $1 AND e.kind = 'in_distribution' AND e.score IS NOT NULL \
             ORDER BY e.score DESC, c.iteration ASC, c.id ASC LIMIT 1"
        );
        let row: Option<EvaluationRow> = on_pool!(self, pool => {
            sqlx::query_as(AssertSqlSafe(sql)).bind(&run.0).fetch_optional(pool).await
        })
        .map_err(self.db("find best candidate"))?;
        let Some(row) = row else {
            self.run(run).await?;
            return Ok(None);
        };
        let evaluation = self.stored_evaluation(row)?;
        let candidate = self.candidate(evaluation.candidate_id).await?;
        Ok(Some(BestCandidate {
            candidate,
            evaluation,
        }))
    }

    /// Every LLM call of a run, in order, failed ones included.
    pub async fn llm_calls(&self, run: &RunId) -> Result<Vec<StoredLlmCall>, StoreError> {
        let rows: Vec<LlmCallRow> = on_pool!(self, pool => {
            sqlx::query_as(LLM_CALLS).bind(&run.0).fetch_all(pool).await
        })
        .map_err(self.db("read LLM calls"))?;
        let tokens = |t: Option<i64>| t.map(|v| self.count_of(v)).transpose();
        rows.into_iter()
            .map(|r| {
                Ok(StoredLlmCall {
                    id: LlmCallId(r.id),
                    run_id: RunId(r.run_id),
                    candidate_id: r.candidate_id.map(CandidateId),
                    iteration: self.iteration_of(r.iteration)?,
                    call: NewLlmCall {
                        purpose: r.purpose,
                        provider: r.provider,
                        model: r.model,
                        prompt_system: r.prompt_system,
                        prompt_user: r.prompt_user,
                        response: r.response,
                        reasoning: r.reasoning,
                        input_tokens: tokens(r.input_tokens)?,
                        output_tokens: tokens(r.output_tokens)?,
                        reasoning_tokens: tokens(r.reasoning_tokens)?,
                        cost_usd: r.cost_usd,
                        latency_s: r.latency_s,
                        error: r.error,
                    },
                    created_at: r.created_at,
                })
            })
            .collect()
    }

    // ------------------------------------------------------------- held out

    /// Stores a held-out evaluation of one of the run's candidates and the
    /// figures derived from it, together. Allowed in any run status: the
    /// held-out gate runs after a run finished.
    pub async fn record_held_out(
        &self,
        run: &RunId,
        held_out: &NewHeldOut,
    ) -> Result<HeldOutId, StoreError> {
        let ev = PreparedEvaluation::new(&held_out.evaluation, None)?;
        let at = now();
        let what = "record held-out result";
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            let owner: Option<(String, String)> = sqlx::query_as(
                "SELECT c.run_id, r.task FROM candidates c JOIN runs r ON r.id = c.run_id \
                 WHERE c.id = $1",
            )
            .bind(held_out.candidate_id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db(what))?;
            match owner {
                None => return Err(StoreError::CandidateNotFound(held_out.candidate_id)),
                Some((owner, _)) if owner != run.0 => {
                    return Err(StoreError::InvalidRecord(format!(
                        "candidate {} belongs to run `{owner}`, not `{run}`",
                        held_out.candidate_id
                    )));
                }
                Some((_, task)) if task != ev.task => {
                    return Err(StoreError::InvalidRecord(format!(
                        "a held-out evaluation of task `{}` cannot belong to a run of task `{task}`",
                        ev.task
                    )));
                }
                Some(_) => {}
            }
            let evaluation_id: i64 = sqlx::query_scalar(INSERT_EVALUATION)
                .bind(held_out.candidate_id.0)
                .bind(EvaluationKind::HeldOut.as_str())
                .bind(ev.outcome_kind)
                .bind(ev.score)
                .bind(&ev.device)
                .bind(&ev.backend)
                .bind(Json(&ev.json))
                .bind(None::<i64>)
                .bind(at)
                .fetch_one(&mut *tx)
                .await
                .map_err(self.db(what))?;
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO held_out_results (run_id, candidate_id, role, evaluation_id, \
                 session, phi, fraction, speedup, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            )
            .bind(&run.0)
            .bind(held_out.candidate_id.0)
            .bind(held_out.role.as_str())
            .bind(evaluation_id)
            .bind(clean_opt(&held_out.session))
            .bind(finite(held_out.phi))
            .bind(finite(held_out.fraction))
            .bind(finite(held_out.speedup))
            .bind(at)
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db(what))?;
            tx.commit().await.map_err(self.db(what))?;
            Ok(HeldOutId(id))
        })
    }

    /// Store a re-measurement made outside an iteration (the end of a
    /// run's final pick), under the run's last iteration. Its candidates
    /// must be the run's.
    pub async fn record_remeasurement(
        &self,
        run: &RunId,
        iteration: u32,
        remeasurement: &NewRemeasurement,
    ) -> Result<i64, StoreError> {
        Self::validate_remeasurement(remeasurement)?;
        let at = now();
        let what = "record re-measurement";
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            ensure_run_owns!(self, &mut *tx, run, remeasurement.candidates.iter().copied(), what);
            let id = insert_remeasurement!(&mut *tx, run, i64::from(iteration), remeasurement, at)
                .map_err(self.db(what))?;
            tx.commit().await.map_err(self.db(what))?;
            Ok(id)
        })
    }

    /// Store a validation made outside an iteration (the seed's baseline,
    /// at iteration 0). Its candidate must be the run's.
    pub async fn record_validation(
        &self,
        run: &RunId,
        iteration: u32,
        validation: &NewValidation,
    ) -> Result<i64, StoreError> {
        let CandidateRef::Stored(candidate) = validation.candidate else {
            return Err(StoreError::InvalidRecord(
                "a validation outside an iteration names a stored candidate".into(),
            ));
        };
        required_finite(validation.device_s, "the validation's device time")?;
        required_finite(validation.wall_s, "the validation's wall time")?;
        let at = now();
        let what = "record validation";
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            ensure_run_owns!(self, &mut *tx, run, [candidate], what);
            let id = insert_validation!(&mut *tx, run, i64::from(iteration), candidate.0, validation, at)
                .map_err(self.db(what))?;
            tx.commit().await.map_err(self.db(what))?;
            Ok(id)
        })
    }

    /// A run's validations, in the order they were made.
    pub async fn validations(&self, run: &RunId) -> Result<Vec<StoredValidation>, StoreError> {
        let rows: Vec<ValidationRow> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, run_id, iteration, candidate_id, passed, reason, evaluation, \
                 device_s, wall_s, created_at FROM validations WHERE run_id = $1 ORDER BY id",
            )
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read validations"))?;
        rows.into_iter()
            .map(|r| {
                let evaluation = serde_json::from_value(r.evaluation.0).map_err(|e| {
                    StoreError::InvalidRecord(format!("validation {} is unreadable: {e}", r.id))
                })?;
                Ok(StoredValidation {
                    id: r.id,
                    run_id: RunId(r.run_id),
                    iteration: self.iteration_of(r.iteration)?,
                    candidate_id: CandidateId(r.candidate_id),
                    passed: r.passed,
                    reason: r.reason,
                    evaluation,
                    device_s: r.device_s,
                    wall_s: r.wall_s,
                    created_at: r.created_at,
                })
            })
            .collect()
    }

    fn validate_remeasurement(r: &NewRemeasurement) -> Result<(), StoreError> {
        if r.candidates.is_empty() {
            return Err(StoreError::InvalidRecord(
                "a re-measurement needs at least one candidate".into(),
            ));
        }
        required_finite(r.device_s, "the re-measurement's device time")?;
        required_finite(r.wall_s, "the re-measurement's wall time")?;
        Ok(())
    }

    /// A run's re-measurements, in the order they were made.
    /// Stores a session of cross-device evaluations (`kevo cross`) of
    /// `run`'s candidates, all or none.
    pub async fn record_cross(
        &self,
        run: &RunId,
        rows: &[NewCrossEvaluation],
    ) -> Result<(), StoreError> {
        let what = "record cross-device evaluations";
        let at = now();
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await.map_err(self.db(what))?;
            ensure_run_owns!(self, &mut *tx, run, rows.iter().map(|r| r.candidate_id), what);
            for r in rows {
                let evaluation = serde_json::to_value(&r.evaluation)
                    .map_err(|cause| StoreError::Json { what: "evaluation", cause })?;
                sqlx::query(
                    "INSERT INTO cross_evaluations (run_id, candidate_id, role, session, backend, \
                     device, outcome_kind, score, evaluation, translated_source, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                )
                .bind(&run.0)
                .bind(r.candidate_id.0)
                .bind(r.role.as_str())
                .bind(clean_text(&r.session))
                .bind(clean_text(&r.evaluation.backend))
                .bind(clean_text(&r.evaluation.device))
                .bind(r.evaluation.outcome.kind())
                .bind(r.evaluation.outcome.score())
                .bind(Json(clean_value(&evaluation).as_ref()))
                .bind(r.translated_source.as_deref().map(clean_text))
                .bind(at)
                .execute(&mut *tx)
                .await
                .map_err(self.db(what))?;
            }
            tx.commit().await.map_err(self.db(what))?;
        });
        Ok(())
    }

    /// `run`'s cross-device evaluations, oldest first.
    pub async fn cross_evaluations(
        &self,
        run: &RunId,
    ) -> Result<Vec<StoredCrossEvaluation>, StoreError> {
        let rows: Vec<CrossRow> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, run_id, candidate_id, role, session, evaluation, translated_source, \
                 created_at FROM cross_evaluations WHERE run_id = $1 ORDER BY id",
            )
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read cross-device evaluations"))?;
        rows.into_iter()
            .map(|r| {
                let evaluation = serde_json::from_value(r.evaluation.0).map_err(|e| {
                    StoreError::InvalidRecord(format!(
                        "cross-device evaluation {} is unreadable: {e}",
                        r.id
                    ))
                })?;
                Ok(StoredCrossEvaluation {
                    id: r.id,
                    run_id: RunId(r.run_id),
                    cross: NewCrossEvaluation {
                        candidate_id: CandidateId(r.candidate_id),
                        role: self.parse(&r.role)?,
                        session: r.session,
                        evaluation,
                        translated_source: r.translated_source,
                    },
                    created_at: r.created_at,
                })
            })
            .collect()
    }

    pub async fn remeasurements(
        &self,
        run: &RunId,
    ) -> Result<Vec<StoredRemeasurement>, StoreError> {
        let rows: Vec<RemeasurementRow> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, run_id, iteration, purpose, candidates, verdict, rounds, \
                 evaluations, device_s, wall_s, created_at FROM remeasurements \
                 WHERE run_id = $1 ORDER BY id",
            )
            .bind(&run.0)
            .fetch_all(pool)
            .await
        })
        .map_err(self.db("read re-measurements"))?;
        rows.into_iter()
            .map(|r| {
                let candidates: Vec<i64> = serde_json::from_value(r.candidates.0).map_err(|e| {
                    StoreError::InvalidRecord(format!(
                        "re-measurement {} has unreadable candidates: {e}",
                        r.id
                    ))
                })?;
                Ok(StoredRemeasurement {
                    id: r.id,
                    run_id: RunId(r.run_id),
                    iteration: self.iteration_of(r.iteration)?,
                    remeasurement: NewRemeasurement {
                        purpose: self.parse(&r.purpose)?,
                        candidates: candidates.into_iter().map(CandidateId).collect(),
                        verdict: r.verdict,
                        rounds: r.rounds.0,
                        evaluations: u32::try_from(r.evaluations).unwrap_or(u32::MAX),
                        device_s: r.device_s,
                        wall_s: r.wall_s,
                    },
                    created_at: r.created_at,
                })
            })
            .collect()
    }

    /// A run's held-out results, in the order they were recorded.
    pub async fn held_out_results(&self, run: &RunId) -> Result<Vec<HeldOutResult>, StoreError> {
        let rows: Vec<HeldOutRow> = on_pool!(self, pool => {
            sqlx::query_as(HELD_OUT).bind(&run.0).fetch_all(pool).await
        })
        .map_err(self.db("read held-out results"))?;
        rows.into_iter()
            .map(|r| {
                Ok(HeldOutResult {
                    id: HeldOutId(r.id),
                    run_id: RunId(r.run_id),
                    candidate_id: CandidateId(r.candidate_id),
                    role: self.parse(&r.role)?,
                    evaluation_id: EvaluationId(r.evaluation_id),
                    outcome_kind: r.outcome_kind,
                    session: r.session,
                    phi: r.phi,
                    fraction: r.fraction,
                    speedup: r.speedup,
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}

// ------------------------------------------------------------------ opening

async fn open_sqlite(
    path: &std::path::Path,
    options: &StoreOptions,
    location: &str,
) -> Result<Store, StoreError> {
    let open_err = |message: String| StoreError::Open {
        location: location.to_string(),
        message,
    };
    if path.is_dir() {
        return Err(open_err("is a directory, not a database file".into()));
    }
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|cause| StoreError::Io {
            path: parent.to_path_buf(),
            cause,
        })?;
    }
    let connect = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        // WAL lets `kevo list` read while a run writes; FULL makes every
        // committed iteration survive a power cut, not just a killed process.
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(30));

    // Reach the file once: a corrupt or unreadable file fails here, before
    // anything is written to it.
    //
    // Switching a fresh file to WAL needs an exclusive lock, and SQLite
    // answers "database is locked" at once, without waiting, when another
    // process is opening the same new file; that is retried.
    let probe = async {
        let mut backoff = Duration::from_millis(10);
        loop {
            let attempt = async {
                let mut conn = SqliteConnection::connect_with(&connect).await?;
                conn.execute("SELECT count(*) FROM sqlite_master").await?;
                conn.close().await
            };
            match attempt.await {
                Err(e) if is_sqlite_busy(&e) => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                other => return other,
            }
        }
    };
    match tokio::time::timeout(options.connect_timeout, probe).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(open_err(e.to_string())),
        Err(_) => {
            return Err(open_err(format!(
                "timed out after {:?} (is another process holding a lock?)",
                options.connect_timeout
            )));
        }
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.connect_timeout.max(Duration::from_secs(30)))
        .connect_with(connect)
        .await
        .map_err(|e| open_err(e.to_string()))?;
    Ok(Store {
        pool: Pool::Sqlite(pool),
        location: location.to_string(),
    })
}

async fn open_postgres(
    url: &str,
    options: &StoreOptions,
    location: &str,
) -> Result<Store, StoreError> {
    let open_err = |e: &dyn std::fmt::Display| StoreError::Open {
        location: location.to_string(),
        message: scrub(&e.to_string(), url),
    };
    let connect = PgConnectOptions::from_str(url).map_err(|e| StoreError::InvalidTarget {
        target: location.to_string(),
        reason: scrub(&e.to_string(), url),
    })?;

    // One direct connection first: the pool would retry a refused
    // connection until its timeout and then report only "timed out".
    let probe = async {
        let mut conn = PgConnection::connect_with(&connect).await?;
        if let Some(schema) = &options.pg_schema {
            let create = format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema));
            if let Err(e) = conn.execute(AssertSqlSafe(create)).await {
                // Two processes creating the schema at once: one loses the
                // race with a unique violation, and the schema exists.
                let exists: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                )
                .bind(schema)
                .fetch_one(&mut conn)
                .await?;
                if !exists {
                    return Err(e);
                }
            }
        }
        conn.close().await
    };
    match tokio::time::timeout(options.connect_timeout, probe).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(open_err(&e)),
        Err(_) => {
            return Err(open_err(&format!(
                "no answer within {:?}",
                options.connect_timeout
            )));
        }
    }

    let mut pool_options = PgPoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.connect_timeout.max(Duration::from_secs(30)));
    if let Some(schema) = &options.pg_schema {
        let set = format!("SET search_path TO {}", quote_ident(schema));
        pool_options = pool_options.after_connect(move |conn, _meta| {
            let set = set.clone();
            Box::pin(async move {
                conn.execute(AssertSqlSafe(set)).await?;
                Ok(())
            })
        });
    }
    let pool = pool_options
        .connect_with(connect)
        .await
        .map_err(|e| open_err(&e))?;
    Ok(Store {
        pool: Pool::Postgres(pool),
        location: location.to_string(),
    })
}
