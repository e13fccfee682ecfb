//! The integer literals of tuning declarations, read the same way in
//! `// kevo: tune` value lists and in `// kevo: require` constraints.

/// Parse a decimal or 0x-hexadecimal integer, with `_` separators.
pub(crate) fn parse_integer(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let magnitude = match clean
        .strip_prefix("0x")
        .or_else(|| clean.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None if !clean.is_empty() && clean.chars().all(|c| c.is_ascii_digit()) => {
            clean.parse::<i64>().ok()?
        }
        None => return None,
    };
    Some(if negative { -magnitude } else { magnitude })
}
