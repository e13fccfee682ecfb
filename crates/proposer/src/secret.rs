//! API keys. A [`Secret`] can be read from a config file but never printed,
//! serialised or logged: its `Debug` and `Serialize` both write
//! `[redacted]`, so a config dump, a recording or a report cannot carry it.

use serde::{Deserialize, Serialize, Serializer};

#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that needs it: a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_shows_its_value() {
        let s = Secret::new("sk-very-secret");
        assert!(!format!("{s:?}").contains("very"));
        assert!(!serde_json::to_string(&s).unwrap().contains("very"));
        assert_eq!(s.expose(), "sk-very-secret");
        let back: Secret = serde_json::from_str("\"k\"").unwrap();
        assert_eq!(back.expose(), "k");
    }
}
