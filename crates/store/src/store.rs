//! The [`Store`]: one type over SQLite and PostgreSQL.
//!
//! The two backends are two typed sqlx pools behind an enum rather than the
//! `Any` driver, so JSON columns are real JSONB on Postgres, timestamps are
//! real `timestamptz`, and every value is encoded by the backend's own type
//! rather than squeezed through `Any`'s lowest common denominator. The SQL is
//! written once: `$n` placeholders, `RETURNING`, `NULLS LAST` and partial
//! indexes mean the same on both, and each query is an async closure that
//! [`on_pool!`] (or, inside a write transaction, [`on_tx!`]) compiles once
//! per backend.
//!
//! The methods are grouped by what they store, one file each: [`opening`]
//! (options, connecting, migrations), [`runs`], [`iterations`] (with the
//! steps of one iteration's transaction in [`iteration_steps`]),
//! [`proposals`], [`candidates`], [`held_out`], [`remeasurements`],
//! [`validations`] and [`cross`]; underneath are [`values`] (cleaning and
//! checking what comes in) and [`write`] (write transactions and the
//! inserts several of them share).

use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

use crate::StoreError;

/// Runs the async closure `$body` with the store's concrete pool
/// (`&SqlitePool` or `&PgPool`). The closure is written once and
/// compiled once per backend, so each query is encoded and decoded by
/// that backend's own types; it is an ordinary closure, so `?` and
/// `return` in it leave the closure, not the method.
///
/// The closure is called where it stands, its parameter typed by the
/// macro: handed to a generic function instead, it would make the
/// method's future fail to be `Send` ("implementation of `AsyncFnOnce`
/// is not general enough").
macro_rules! on_pool {
    ($store:expr, async |$pool:ident| $body:expr) => {
        match &$store.pool {
            $crate::store::Pool::Sqlite(pool) => {
                (async |$pool: &::sqlx::sqlite::SqlitePool| $body)(pool).await
            }
            $crate::store::Pool::Postgres(pool) => {
                (async |$pool: &::sqlx::postgres::PgPool| $body)(pool).await
            }
        }
    };
}

/// [`on_pool!`] inside a write transaction: runs the async closure
/// `$body` with the concrete connection (`&mut SqliteConnection` or
/// `&mut PgConnection`) of the transaction of `$write`, a
/// [`write::Write`].
macro_rules! on_tx {
    ($write:expr, async |$conn:ident| $body:expr) => {
        match &mut $write.tx {
            $crate::store::write::Tx::Sqlite(tx) => {
                (async |$conn: &mut ::sqlx::sqlite::SqliteConnection| $body)(&mut **tx).await
            }
            $crate::store::write::Tx::Postgres(tx) => {
                (async |$conn: &mut ::sqlx::postgres::PgConnection| $body)(&mut **tx).await
            }
        }
    };
}

mod candidates;
mod cross;
mod held_out;
mod iteration_steps;
mod iterations;
mod opening;
mod proposals;
mod remeasurements;
mod runs;
mod validations;
mod values;
mod write;

#[cfg(test)]
mod futures_are_send;

pub use opening::StoreOptions;
pub use values::source_sha256;

/// The connection pool, of one backend or the other.
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

impl Store {
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

    /// Closes the pool, waiting for connections to finish; SQLite then
    /// checkpoints its write-ahead log into the main file.
    pub async fn close(&self) {
        on_pool!(self, async |pool| pool.close().await)
    }

    /// Turns a database error met while doing `what` into a
    /// [`StoreError::Database`] that names this store.
    fn db(&self, what: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        move |cause| StoreError::Database {
            location: self.location.clone(),
            what,
            cause,
        }
    }

    /// A value read back that the store could not have written.
    fn corrupt(&self, message: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            location: self.location.clone(),
            message: message.into(),
        }
    }

    /// An iteration number read back.
    fn iteration_of(&self, v: i64) -> Result<u32, StoreError> {
        u32::try_from(v).map_err(|_| self.corrupt(format!("iteration {v} out of range")))
    }

    /// A count read back (tokens, candidates).
    fn count_of(&self, v: i64) -> Result<u64, StoreError> {
        u64::try_from(v).map_err(|_| self.corrupt(format!("negative count {v}")))
    }

    /// A status, kind or role read back.
    fn parse<T: std::str::FromStr<Err = String>>(&self, s: &str) -> Result<T, StoreError> {
        s.parse().map_err(|e: String| self.corrupt(e))
    }

    /// A size set read back.
    fn size_set(&self, s: &str) -> Result<kevo_tasks::SizeSet, StoreError> {
        s.parse().map_err(|e: String| self.corrupt(e))
    }
}
