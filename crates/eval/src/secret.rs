//! The secret every input of an evaluation is drawn from.
//!
//! A task's seed (`default_seed` in its definition) and the sizes are
//! public, so inputs derived from them alone can be computed offline and
//! their answers embedded in a kernel (an nbody kernel that recognised its
//! input set by the first mass and N wrote tabulated final states, exact to
//! the bit, at 3.3x the seed's speed). Every seed an evaluator uses, for the
//! timed, verification, validation and held-out inputs alike, is derived
//! from an [`InputSecret`] of 128 bits drawn from the operating system's
//! randomness, through SHA-256, so knowing the inputs of one seed (or
//! inverting the input generator) tells nothing about another or about the
//! secret. A search draws one per run and records it with the run's
//! provenance, so every kernel of the run sees the same inputs (decisions
//! compare like with like) and a result can be reproduced afterwards; a
//! lone `kevo eval` draws one per invocation.

use std::fmt;
use std::str::FromStr;

use rand::TryRngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// 128 secret bits, written as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputSecret([u8; 16]);

/// The roles a seed is derived for: a verification seed never equals the
/// timed seed, and a check key is never an input seed.
#[derive(Clone, Copy)]
enum Role {
    Timed,
    Verify(u64),
    Check(u64),
}

impl InputSecret {
    /// A fresh secret from the operating system's random source.
    pub fn draw() -> Self {
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng
            .try_fill_bytes(&mut bytes)
            .expect("the operating system's random source failed");
        InputSecret(bytes)
    }

    /// The secret named by `KEVO_INPUTS_SECRET` (32 hex digits), to
    /// reproduce a recorded evaluation; else a fresh one. The variable's
    /// name contains SECRET, so the worker's environment never carries it.
    pub fn from_env_or_draw() -> Result<Self, ParseSecretError> {
        match std::env::var("KEVO_INPUTS_SECRET") {
            Ok(text) if !text.trim().is_empty() => text.trim().parse(),
            _ => Ok(InputSecret::draw()),
        }
    }

    /// The seed of the timed inputs of a task whose public seed is
    /// `task_seed`.
    pub fn timed_seed(&self, task_seed: u64) -> u64 {
        self.derive(task_seed, Role::Timed)
    }

    /// The seed of verification input set `k` (an index into the pool).
    pub fn verify_seed(&self, task_seed: u64, k: u64) -> u64 {
        self.derive(task_seed, Role::Verify(k))
    }

    /// The key a check that looks at a sample of the outputs (hmc's exact
    /// chains) draws its sample with, for the inputs of `input_seed`: the
    /// kernel sees the inputs but not this key, so it cannot tell which
    /// outputs will be looked at.
    pub fn check_key(&self, input_seed: u64) -> u64 {
        self.derive(input_seed, Role::Check(0))
    }

    fn derive(&self, base: u64, role: Role) -> u64 {
        let mut h = Sha256::new();
        h.update(b"kevo inputs v1\0");
        h.update(self.0);
        h.update(base.to_le_bytes());
        match role {
            Role::Timed => h.update([0u8]),
            Role::Verify(k) => {
                h.update([1u8]);
                h.update(k.to_le_bytes());
            }
            Role::Check(k) => {
                h.update([2u8]);
                h.update(k.to_le_bytes());
            }
        }
        let digest = h.finalize();
        u64::from_le_bytes(
            digest[..8]
                .try_into()
                .expect("a SHA-256 digest has 32 bytes"),
        )
    }
}

impl fmt::Display for InputSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Never printed in full by `{:?}`: debug output of a configuration goes
/// to logs.
impl fmt::Debug for InputSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InputSecret(..)")
    }
}

/// `KEVO_INPUTS_SECRET` or a stored secret that is not 32 hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseSecretError(pub String);

impl fmt::Display for ParseSecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an input secret is 32 hex digits (as recorded in a run's provenance), not `{}`",
            self.0
        )
    }
}

impl std::error::Error for ParseSecretError {}

impl FromStr for InputSecret {
    type Err = ParseSecretError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseSecretError(s.chars().take(40).collect());
        if s.len() != 32 || !s.is_ascii() {
            return Err(err());
        }
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| err())?;
        }
        Ok(InputSecret(bytes))
    }
}

impl Serialize for InputSecret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InputSecret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_fresh_and_round_trip_as_hex() {
        let a = InputSecret::draw();
        let b = InputSecret::draw();
        assert_ne!(a, b, "two draws of 128 bits collided");
        let text = a.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<InputSecret>().unwrap(), a);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<InputSecret>(&json).unwrap(), a);
        assert!("xyz".parse::<InputSecret>().is_err());
        assert!(
            format!("{a:?}").find(&text).is_none(),
            "Debug prints the secret"
        );
    }

    #[test]
    fn seeds_depend_on_the_secret_and_differ_by_role() {
        let s: InputSecret = "000102030405060708090a0b0c0d0e0f".parse().unwrap();
        let t: InputSecret = "000102030405060708090a0b0c0d0e0e".parse().unwrap();
        let timed = s.timed_seed(7);
        assert_eq!(timed, s.timed_seed(7), "derivation is deterministic");
        assert_ne!(timed, t.timed_seed(7), "one bit of secret changes the seed");
        assert_ne!(timed, s.timed_seed(8));
        let verify: Vec<u64> = (0..4).map(|k| s.verify_seed(7, k)).collect();
        for (i, v) in verify.iter().enumerate() {
            assert_ne!(*v, timed);
            assert_ne!(*v, s.check_key(timed));
            assert!(!verify[..i].contains(v));
        }
        // None of them is the public seed or the old public derivation.
        let old = 7u64.wrapping_add(0x9E37_79B9_7F4A_7C15);
        assert!(![7, old].contains(&timed) && !verify.contains(&old));
    }
}
