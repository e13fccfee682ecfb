//! Stream, subject and bucket names, and opening them.

use std::time::Duration;

use async_nats::jetstream::{self, stream};
use kevo_backend::BackendName;

use crate::{DispatchError, RESULT_TTL_S, jetstream_error};

/// A device name as a subject token: ASCII letters, digits, `-` and `_`
/// kept, anything else (spaces, dots, wildcards) `_`.
pub fn device_key(name: &str) -> String {
    let key: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if key.is_empty() { "_".into() } else { key }
}

/// The names of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    prefix: String,
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace {
            prefix: "kevo".into(),
        }
    }
}

impl Namespace {
    /// A namespace of letters, digits, `-` and `_` (it names streams and
    /// buckets, which allow no more).
    pub fn new(prefix: &str) -> Result<Namespace, String> {
        if prefix.is_empty()
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "namespace `{prefix}`: use letters, digits, `-` and `_` only"
            ));
        }
        Ok(Namespace {
            prefix: prefix.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.prefix
    }

    fn upper(&self) -> String {
        self.prefix.to_ascii_uppercase().replace('-', "_")
    }

    pub fn jobs_stream(&self) -> String {
        format!("{}_JOBS", self.upper())
    }

    pub fn results_bucket(&self) -> String {
        format!("{}_RESULTS", self.upper())
    }

    pub fn workers_bucket(&self) -> String {
        format!("{}_WORKERS", self.upper())
    }

    /// The subject of jobs for one backend and device model.
    pub fn job_subject(&self, backend: BackendName, device: &str) -> String {
        format!(
            "{}.jobs.{}.{}",
            self.prefix,
            device_key(backend.name()),
            device_key(device)
        )
    }

    /// The durable consumer every worker of one backend and device model
    /// shares: each job goes to one of them.
    pub fn consumer(&self, backend: BackendName, device: &str) -> String {
        format!("{}-{}", device_key(backend.name()), device_key(device))
    }

    /// Delete the namespace's streams (its queued jobs, results and
    /// worker entries) from the server: for a namespace made for one test
    /// or experiment. Streams already gone are not an error.
    pub async fn remove(&self, url: &str) -> Result<(), DispatchError> {
        let js = connect(url).await?;
        for name in [
            self.jobs_stream(),
            self.results_bucket(),
            self.workers_bucket(),
        ] {
            if let Err(e) = js.delete_stream(&name).await
                && !e.to_string().contains("not found")
            {
                return Err(jetstream_error(&format!("delete stream {name}"), e));
            }
        }
        Ok(())
    }

    /// Connect and make sure the streams exist (creating them is
    /// idempotent, so workers and coordinators may start in any order).
    pub async fn open(&self, url: &str) -> Result<Opened, DispatchError> {
        let js = connect(url).await?;
        let jobs = js
            .get_or_create_stream(stream::Config {
                name: self.jobs_stream(),
                subjects: vec![format!("{}.jobs.>", self.prefix)],
                retention: stream::RetentionPolicy::WorkQueue,
                // A coordinator that publishes the same job twice (a retry
                // after a lost acknowledgement) stores it once.
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await
            .map_err(|e| jetstream_error(&format!("stream {}", self.jobs_stream()), e))?;
        let results = Keyed::open(
            &js,
            &self.results_bucket(),
            &format!("{}.results", self.prefix),
            Duration::from_secs(RESULT_TTL_S),
        )
        .await?;
        let workers = Keyed::open(
            &js,
            &self.workers_bucket(),
            &format!("{}.workers", self.prefix),
            Duration::ZERO,
        )
        .await?;
        Ok(Opened {
            js,
            jobs,
            results,
            workers,
        })
    }
}

/// A JetStream context on the server at `url`.
async fn connect(url: &str) -> Result<jetstream::Context, DispatchError> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| DispatchError::Connect {
            url: url.to_string(),
            message: e.to_string(),
        })?;
    Ok(jetstream::new(client))
}

/// A connection with the namespace's streams.
pub struct Opened {
    pub js: jetstream::Context,
    pub jobs: stream::Stream,
    pub results: Keyed,
    pub workers: Keyed,
}

/// Values by key on a stream that keeps the last message of each subject
/// `PREFIX.KEY`: a key-value store built on the stream API alone, which
/// every JetStream server (2.2 and later) offers.
#[derive(Clone)]
pub struct Keyed {
    js: jetstream::Context,
    stream: stream::Stream,
    prefix: String,
}

impl Keyed {
    async fn open(
        js: &jetstream::Context,
        name: &str,
        prefix: &str,
        max_age: Duration,
    ) -> Result<Keyed, DispatchError> {
        let stream = js
            .get_or_create_stream(stream::Config {
                name: name.to_string(),
                subjects: vec![format!("{prefix}.>")],
                max_messages_per_subject: 1,
                max_age,
                ..Default::default()
            })
            .await
            .map_err(|e| jetstream_error(&format!("stream {name}"), e))?;
        Ok(Keyed {
            js: js.clone(),
            stream,
            prefix: prefix.to_string(),
        })
    }

    /// The subject a value of `key` is published on: a core subscription
    /// to it hears the value as it is stored.
    pub fn subject(&self, key: &str) -> String {
        format!("{}.{key}", self.prefix)
    }

    /// Store `value` under `key` (replacing what was there).
    pub async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), DispatchError> {
        self.js
            .publish(self.subject(key), value.into())
            .await
            .map_err(|e| jetstream_error("publish", e))?
            .await
            .map_err(|e| jetstream_error("publish", e))?;
        Ok(())
    }

    /// Store `value` under `key` unless a value is there already: the
    /// server checks (its last sequence for the key must be 0), so of two
    /// writers racing, exactly one stores. Whether this one did.
    pub async fn put_once(&self, key: &str, value: Vec<u8>) -> Result<bool, DispatchError> {
        let sent = self
            .js
            .send_publish(
                self.subject(key),
                async_nats::jetstream::message::PublishMessage::build()
                    .payload(value.into())
                    .expected_last_subject_sequence(0),
            )
            .await
            .map_err(|e| jetstream_error("publish", e))?;
        match sent.await {
            Ok(_) => Ok(true),
            Err(e)
                if e.kind()
                    == async_nats::jetstream::context::PublishErrorKind::WrongLastSequence =>
            {
                Ok(false)
            }
            Err(e) => Err(jetstream_error("publish", e)),
        }
    }

    /// The value under `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, DispatchError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&self.subject(key))
            .await
        {
            Ok(m) => Ok(Some(m.payload.to_vec())),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(jetstream_error("read", e)),
        }
    }

    pub async fn delete(&self, key: &str) -> Result<(), DispatchError> {
        self.stream
            .purge()
            .filter(self.subject(key))
            .await
            .map_err(|e| jetstream_error("purge", e))?;
        Ok(())
    }

    /// Every key with a value.
    pub async fn keys(&self) -> Result<Vec<String>, DispatchError> {
        use futures::StreamExt;
        let mut subjects = self
            .stream
            .info_with_subjects(format!("{}.>", self.prefix))
            .await
            .map_err(|e| jetstream_error("list", e))?;
        let mut keys = Vec::new();
        while let Some(s) = subjects.next().await {
            let (subject, _) = s.map_err(|e| jetstream_error("list", e))?;
            if let Some(key) = subject.strip_prefix(&format!("{}.", self.prefix)) {
                keys.push(key.to_string());
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_become_subject_tokens() {
        assert_eq!(device_key("NVIDIA H100 80GB HBM3"), "NVIDIA_H100_80GB_HBM3");
        assert_eq!(device_key("a.b*c>d"), "a_b_c_d");
        assert_eq!(device_key(""), "_");
        let ns = Namespace::new("team-a").unwrap();
        assert_eq!(ns.jobs_stream(), "TEAM_A_JOBS");
        assert_eq!(
            ns.job_subject(BackendName::Opencl, "pthread-x 1.0"),
            "team-a.jobs.opencl.pthread-x_1_0"
        );
        assert!(Namespace::new("a.b").is_err());
    }
}
