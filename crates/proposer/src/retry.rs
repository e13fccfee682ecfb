//! Retries with exponential backoff (the `backon` crate) that wait as long
//! as the server asks when it says so.
//!
//! Backoff starts at `min_delay` (1 s by default) and doubles up to
//! `max_delay` (60 s), with jitter of up to one delay so that parallel
//! workers hitting the same rate limit do not retry in lockstep. When the
//! failed response carried `Retry-After` (seconds or an HTTP date) or
//! OpenAI's `retry-after-ms`, that wait replaces the backoff delay; a wait
//! longer than `max_retry_after` (300 s) ends the call with the server's
//! answer rather than stalling the run, and says so. Every retry prints
//! one notice (cause, attempt, wait), and a call's attempts and waits
//! together stay within `max_call` (600 s by default): a silent server
//! costs minutes, not an hour.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};

use crate::error::ProviderError;
use crate::notice::notice;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub min_delay: Duration,
    pub max_delay: Duration,
    pub max_retry_after: Duration,
    /// Attempts and waits of one call together; no retry starts after it.
    pub max_call: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(120),
            max_call: Duration::from_secs(600),
        }
    }
}

impl RetryPolicy {
    /// No retries at all (replay, tests).
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The wait before the next attempt, given the backoff's proposal
    /// (`None` once the retries are used up) and the error.
    pub fn next_delay(&self, err: &ProviderError, backoff: Option<Duration>) -> Option<Duration> {
        let backoff = backoff?;
        match err.retry_after() {
            Some(asked) if asked > self.max_retry_after => None,
            Some(asked) => Some(asked),
            None => Some(backoff),
        }
    }
}

/// Run `attempt` until it succeeds, fails with an error that is not worth
/// repeating, or the retries or the call's time are used up. Returns the
/// value and the number of attempts; an error after more than one attempt
/// comes wrapped in [`ProviderError::GaveUp`], a refused `Retry-After` in
/// [`ProviderError::RetryAfterRefused`]. `redact` is applied to every
/// notice.
pub async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    label: &str,
    redact: &(dyn Fn(&str) -> String + Sync),
    attempt: F,
) -> Result<(T, u32), (ProviderError, u32)>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let started = std::time::Instant::now();
    let attempts = AtomicU32::new(0);
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay.max(policy.min_delay))
        .with_max_times(policy.max_retries as usize)
        .with_jitter();
    let result = (|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        attempt()
    })
    .retry(backoff)
    .sleep(tokio::time::sleep)
    .when(ProviderError::is_retryable)
    .adjust(|e, d| {
        let d = policy.next_delay(e, d)?;
        if started.elapsed() + d >= policy.max_call {
            notice(&redact(&format!(
                "{label}: attempt {} failed ({e}); no retry: the call has used {:.0} s of its {:.0} s (max_call_s)",
                attempts.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64(),
                policy.max_call.as_secs_f64()
            )));
            return None;
        }
        Some(d)
    })
    .notify(|e, d| {
        notice(&redact(&format!(
            "{label}: attempt {} of {} failed ({e}); retrying in {:.1} s",
            attempts.load(Ordering::Relaxed),
            policy.max_retries + 1,
            d.as_secs_f64()
        )))
    })
    .await;
    let n = attempts.load(Ordering::Relaxed);
    match result {
        Ok(v) => Ok((v, n)),
        Err(e) => {
            if let Some(asked) = e.retry_after().filter(|a| *a > policy.max_retry_after)
                && e.is_retryable()
                && n <= policy.max_retries
            {
                let refused = ProviderError::RetryAfterRefused {
                    provider: label.to_string(),
                    asked,
                    limit: policy.max_retry_after,
                    last: Box::new(e),
                };
                notice(&redact(&refused.to_string()));
                return Err((refused, n));
            }
            if n > 1 {
                Err((
                    ProviderError::GaveUp {
                        attempts: n,
                        last: Box::new(e),
                    },
                    n,
                ))
            } else {
                Err((e, n))
            }
        }
    }
}

/// Parse a `Retry-After` value: delay-seconds (`"2"`, fractions accepted)
/// or an HTTP date, relative to `now`. A date in the past means "now".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait a response asks for: `retry-after-ms` (OpenAI) wins over
/// `Retry-After` because it is more precise.
pub(crate) fn retry_after_from_headers(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = h
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1e3));
    }
    h.get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    #[test]
    fn parses_both_retry_after_forms() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 0.5 ", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn headers_prefer_milliseconds() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after_from_headers(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(
            retry_after_from_headers(&h),
            Some(Duration::from_millis(250))
        );
    }

    fn http(status: u16, retry_after: Option<Duration>) -> ProviderError {
        ProviderError::Http {
            provider: "p".into(),
            status,
            body: String::new(),
            retry_after,
        }
    }

    #[test]
    fn next_delay_honours_and_caps_retry_after() {
        let p = RetryPolicy::default();
        let b = Some(Duration::from_secs(4));
        assert_eq!(p.next_delay(&http(500, None), b), b);
        assert_eq!(
            p.next_delay(&http(429, Some(Duration::from_secs(7))), b),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            p.next_delay(&http(429, Some(Duration::from_secs(3600))), b),
            None
        );
        assert_eq!(
            p.next_delay(&http(503, Some(Duration::from_secs(250))), b),
            None,
            "250 s is more than the default 120 s"
        );
        assert_eq!(p.next_delay(&http(500, None), None), None);
    }

    #[tokio::test]
    async fn retries_retryable_errors_and_stops_on_others() {
        let policy = RetryPolicy {
            max_retries: 3,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            ..RetryPolicy::default()
        };
        let calls = AtomicUsize::new(0);
        let (v, n) = with_retries(&policy, "t", &|t| t.to_string(), || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(http(503, None)),
                _ => Ok(42),
            }
        })
        .await
        .unwrap();
        assert_eq!((v, n), (42, 3));

        let calls = AtomicUsize::new(0);
        let (e, n) = with_retries(&policy, "t", &|t| t.to_string(), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(http(500, None))
        })
        .await
        .unwrap_err();
        assert_eq!(n, 4, "1 attempt + 3 retries");
        assert!(
            matches!(e, ProviderError::GaveUp { attempts: 4, .. }),
            "{e}"
        );

        let (e, n) = with_retries(&policy, "t", &|t| t.to_string(), || async {
            Err::<(), _>(http(401, None))
        })
        .await
        .unwrap_err();
        assert_eq!(n, 1);
        assert!(matches!(e, ProviderError::Http { status: 401, .. }));
    }

    #[tokio::test]
    async fn waits_what_retry_after_asks() {
        let policy = RetryPolicy {
            max_retries: 2,
            min_delay: Duration::from_millis(1),
            ..RetryPolicy::default()
        };
        let calls = AtomicUsize::new(0);
        let t0 = Instant::now();
        with_retries(&policy, "t", &|t| t.to_string(), || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(http(429, Some(Duration::from_millis(300)))),
                _ => Ok(()),
            }
        })
        .await
        .unwrap();
        assert!(
            t0.elapsed() >= Duration::from_millis(290),
            "{:?}",
            t0.elapsed()
        );
    }
}
