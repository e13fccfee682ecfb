//! Opening a store: the options, the first connection that fails fast
//! with the driver's own reason, the pools, and the schema migrations.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Connection, Executor};

use super::{Pool, Store};
use crate::StoreError;
use crate::location::{Target, scrub};

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

impl Store {
    /// Opens (creating if needed) the store at `target`: a `postgres://` URL
    /// or a SQLite file path, and brings its schema up to date.
    pub async fn open(target: &str) -> Result<Store, StoreError> {
        Store::open_with(StoreOptions::new(Target::parse(target)?)).await
    }

    /// Opens the workspace's default store, `<workspace>/kevo.db` (see
    /// [`Target::default_for`]).
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

    /// The newest schema version this build knows.
    pub fn schema_version(&self) -> i64 {
        self.migrator().iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// The migrations of this store's backend.
    fn migrator(&self) -> &'static Migrator {
        match self.pool {
            Pool::Sqlite(_) => &SQLITE_MIGRATIONS,
            Pool::Postgres(_) => &POSTGRES_MIGRATIONS,
        }
    }

    /// Brings the schema up to date; a schema newer than this build is
    /// refused.
    async fn migrate(&self) -> Result<(), StoreError> {
        let known = self.schema_version();
        let mut result = on_pool!(self, async |pool| self.migrator().run(pool).await);
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
}

/// Opens the SQLite file at `path` (creating it and its folder if
/// needed) in write-ahead-log mode.
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

/// Connects to the PostgreSQL server at `url`, creating the schema of
/// [`StoreOptions::pg_schema`] if one is given and missing.
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
