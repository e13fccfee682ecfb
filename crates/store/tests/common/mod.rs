//! Test harness: the same test body runs against a fresh SQLite file and a
//! fresh schema on the real PostgreSQL server (`KEVO_TEST_POSTGRES_URL`,
//! default `postgres://postgres@127.0.0.1:5432/test`). Each Postgres test
//! gets its own schema, dropped afterwards even if the test panics, because
//! tests run in parallel against one database.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use kevo_eval::{Evaluation, Outcome, SizeResult, TimeStats, WallTimes};
use kevo_store::{Store, StoreError, StoreOptions, Target};
use sqlx::{AssertSqlSafe, Connection, Executor};

pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn postgres_url() -> String {
    std::env::var("KEVO_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// Drops its Postgres schema when dropped, from a thread of its own so it
/// works inside an async test and while unwinding from a panic.
pub struct SchemaGuard {
    pub url: String,
    pub schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.schema.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                    let _ = conn
                        .execute(AssertSqlSafe(format!(
                            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                        )))
                        .await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

pub struct TestDb {
    pub kind: Kind,
    pub options: StoreOptions,
    pub store: Store,
    // Keeps the SQLite file alive / drops the Postgres schema.
    _dir: Option<tempfile::TempDir>,
    _schema: Option<SchemaGuard>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub fn unique_schema() -> String {
    format!(
        "kevo_test_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    )
}

impl TestDb {
    pub async fn new(kind: Kind) -> TestDb {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let options =
                    StoreOptions::new(Target::Sqlite(dir.path().join(".kevo").join("kevo.db")));
                let store = Store::open_with(options.clone()).await.unwrap();
                TestDb {
                    kind,
                    options,
                    store,
                    _dir: Some(dir),
                    _schema: None,
                }
            }
            Kind::Postgres => {
                let url = postgres_url();
                let schema = unique_schema();
                let guard = SchemaGuard {
                    url: url.clone(),
                    schema: schema.clone(),
                };
                let mut options = StoreOptions::new(Target::Postgres(url));
                options.pg_schema = Some(schema);
                let store = Store::open_with(options.clone()).await.unwrap_or_else(|e| {
                    panic!("the Postgres tests need a server (set KEVO_TEST_POSTGRES_URL): {e}")
                });
                TestDb {
                    kind,
                    options,
                    store,
                    _dir: None,
                    _schema: Some(guard),
                }
            }
        }
    }

    /// A second, independent store on the same database.
    pub async fn reopen(&self) -> Result<Store, StoreError> {
        Store::open_with(self.options.clone()).await
    }

    pub fn sqlite_path(&self) -> Option<PathBuf> {
        match &self.options.target {
            Target::Sqlite(p) => Some(p.clone()),
            Target::Postgres(_) => None,
        }
    }

    /// Runs one statement outside the store (to inspect or tamper with the
    /// database the way another program could).
    pub async fn exec(&self, sql: &str) {
        match &self.options.target {
            Target::Sqlite(path) => {
                let mut c = sqlx::SqliteConnection::connect_with(
                    &sqlx::sqlite::SqliteConnectOptions::new().filename(path),
                )
                .await
                .unwrap();
                c.execute(AssertSqlSafe(sql.to_string())).await.unwrap();
                c.close().await.unwrap();
            }
            Target::Postgres(url) => {
                let mut c = self.pg_conn(url).await;
                c.execute(AssertSqlSafe(sql.to_string())).await.unwrap();
                c.close().await.unwrap();
            }
        }
    }

    async fn pg_conn(&self, url: &str) -> sqlx::PgConnection {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        let schema = self.options.pg_schema.as_ref().unwrap();
        c.execute(AssertSqlSafe(format!("SET search_path TO \"{schema}\"")))
            .await
            .unwrap();
        c
    }

    /// One integer from a query run outside the store.
    pub async fn scalar(&self, sql: &str) -> i64 {
        self.scalars(&[sql]).await[0]
    }

    /// Integers from queries run outside the store, on one connection
    /// (a Postgres connection costs tens of milliseconds here).
    pub async fn scalars(&self, sqls: &[&str]) -> Vec<i64> {
        let mut out = Vec::with_capacity(sqls.len());
        match &self.options.target {
            Target::Sqlite(path) => {
                let mut c = sqlx::SqliteConnection::connect_with(
                    &sqlx::sqlite::SqliteConnectOptions::new().filename(path),
                )
                .await
                .unwrap();
                for sql in sqls {
                    out.push(
                        sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
                            .fetch_one(&mut c)
                            .await
                            .unwrap(),
                    );
                }
                c.close().await.unwrap();
            }
            Target::Postgres(url) => {
                let mut c = self.pg_conn(url).await;
                for sql in sqls {
                    out.push(
                        sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
                            .fetch_one(&mut c)
                            .await
                            .unwrap(),
                    );
                }
                c.close().await.unwrap();
            }
        }
        out
    }

    /// Row counts of every table, to show that a failed write left nothing.
    pub async fn row_counts(&self) -> Vec<(&'static str, i64)> {
        let tables = [
            "runs",
            "candidates",
            "candidate_parents",
            "llm_calls",
            "evaluations",
            "decisions",
            "steps",
            "held_out_results",
            "proposals",
        ];
        let sqls: Vec<String> = tables
            .iter()
            .map(|t| format!("SELECT COUNT(*) FROM {t}"))
            .collect();
        let refs: Vec<&str> = sqls.iter().map(String::as_str).collect();
        tables.into_iter().zip(self.scalars(&refs).await).collect()
    }
}

/// Runs the named async test body `fn(&TestDb)` once per backend.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let db = $crate::common::TestDb::new($crate::common::Kind::Sqlite).await;
                    super::$name(&db).await;
                    db.store.close().await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    let db = $crate::common::TestDb::new($crate::common::Kind::Postgres).await;
                    super::$name(&db).await;
                    db.store.close().await;
                }
            }
        )*
    };
}

fn size(label: &str, fraction: f64) -> SizeResult {
    SizeResult {
        label: label.into(),
        correct: true,
        metric: "max_abs".into(),
        error: 1e-7,
        tolerance: Some(1e-5),
        time: TimeStats::from_samples(vec![1.0e-3, 1.1e-3, 0.9e-3]),
        warmups: 3,
        work: 1.0e9,
        achieved: fraction * 1000.0,
        ceiling: 1000.0,
        fraction,
        unit: "GB/s".into(),
        work_note: "bytes read + written".into(),
        suspicious: None,
        working_set_bytes: 0,
        level: None,
    }
}

pub fn correct(task: &str, score: f64) -> Evaluation {
    Evaluation {
        task: task.into(),
        device: "Test GPU".into(),
        backend: "opencl".parse().unwrap(),
        outcome: Outcome::Correct { score },
        sizes: vec![size("1M", score), size("16M", score)],
        wall: WallTimes {
            compile_s: 0.25,
            total_s: 1.5,
            ..WallTimes::default()
        },
        kernels: vec![kevo_eval::KernelResources {
            name: "saxpy".into(),
            info: kevo_eval::KernelInfo {
                max_threads_per_block: 1024,
                registers_per_thread: Some(16),
                static_shared_bytes: Some(0),
                local_bytes_per_thread: Some(0),
                ..Default::default()
            },
            occupancy: None,
        }],
        source_sha: None,
    }
}

/// A wrong result whose error is NaN, what a kernel that writes NaN gets.
pub fn wrong_nan(task: &str) -> Evaluation {
    let mut s = size("1M", 0.5);
    s.correct = false;
    s.error = f64::NAN;
    Evaluation {
        task: task.into(),
        device: "Test GPU".into(),
        backend: "opencl".parse().unwrap(),
        outcome: Outcome::WrongResult {
            size: "1M".into(),
            metric: "max_abs".into(),
            value: f64::NAN,
            tolerance: Some(1e-5),
        },
        sizes: vec![s],
        wall: WallTimes::default(),
        kernels: Vec::new(),
        source_sha: None,
    }
}

pub fn runtime_error(task: &str) -> Evaluation {
    Evaluation {
        task: task.into(),
        device: "Test GPU".into(),
        backend: "opencl".parse().unwrap(),
        outcome: Outcome::RuntimeError {
            size: Some("16M".into()),
            fault: None,
            message: "CL_OUT_OF_RESOURCES".into(),
        },
        sizes: vec![],
        wall: WallTimes::default(),
        kernels: Vec::new(),
        source_sha: None,
    }
}
