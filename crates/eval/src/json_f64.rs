//! JSON has no NaN or infinity, and serde_json writes them as `null`, which
//! then fails to read back as an f64. Error values are NaN whenever a kernel
//! leaves NaN in its output, so these fields are written as the strings
//! "NaN", "inf" and "-inf" and read back from those, numbers, or null.

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else if v.is_nan() {
        s.serialize_str("NaN")
    } else if *v > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Repr {
    Num(f64),
    Text(String),
    Null(()),
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Option::<Repr>::deserialize(d)? {
        Some(Repr::Num(v)) => Ok(v),
        Some(Repr::Text(t)) => match t.as_str() {
            "NaN" | "nan" => Ok(f64::NAN),
            "inf" | "Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(serde::de::Error::custom(format!("not a number: {other}"))),
        },
        Some(Repr::Null(())) | None => Ok(f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize, Debug)]
    struct T {
        #[serde(with = "super")]
        v: f64,
    }

    #[test]
    fn non_finite_values_round_trip() {
        for v in [1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0] {
            let text = serde_json::to_string(&T { v }).unwrap();
            let back: T = serde_json::from_str(&text).unwrap();
            assert!(back.v == v || (v.is_nan() && back.v.is_nan()), "{text}");
        }
        let back: T = serde_json::from_str(r#"{"v":null}"#).unwrap();
        assert!(back.v.is_nan());
    }
}
