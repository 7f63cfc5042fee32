//! Kubernetes memory quantities (`256Mi`, `1G`, `1.5Gi`) as bytes. The schema
//! pattern in `spec.rs` admits exactly what this parser accepts, so an
//! object that passes the API server never fails here for syntax alone.

use thiserror::Error;

/// Why a quantity string was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantityError {
    #[error("{0:?} is not a quantity: use a number with an optional suffix such as 512Mi, 2Gi or 1G")]
    Syntax(String),
    #[error("{0:?} is too large")]
    Overflow(String),
}

const SUFFIXES: [(&str, u128); 12] = [
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// Parses a memory quantity into bytes, rounding fractions of a byte up
/// (as Kubernetes does for memory).
pub fn parse_bytes(quantity: &str) -> Result<u64, QuantityError> {
    let syntax = || QuantityError::Syntax(quantity.to_string());
    let (number, multiplier) =
        SUFFIXES.iter().find_map(|(suffix, m)| quantity.strip_suffix(suffix).map(|n| (n, *m))).unwrap_or((quantity, 1));
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) if !f.is_empty() => (w, f),
        Some(_) => return Err(syntax()),
        None => (number, ""),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    if frac.len() > 18 {
        return Err(syntax());
    }
    let overflow = || QuantityError::Overflow(quantity.to_string());
    let whole: u128 = whole.parse().map_err(|_| overflow())?;
    let scale = 10u128.pow(frac.len() as u32);
    let frac_value: u128 = if frac.is_empty() { 0 } else { frac.parse().map_err(|_| syntax())? };
    let total = whole
        .checked_mul(scale)
        .and_then(|w| w.checked_add(frac_value))
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(overflow)?;
    let bytes = total.div_ceil(scale);
    u64::try_from(bytes).map_err(|_| overflow())
}

/// Bytes as whole MiB, rounded up (Mesos counts `mem` in MB).
pub fn bytes_to_mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(parse_bytes("256Mi"), Ok(256 << 20));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("1G"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("0.5"), Ok(1));
    }

    #[test]
    fn junk_is_refused_with_the_value_in_the_message() {
        let err = parse_bytes("lots").unwrap_err();
        assert_eq!(err, QuantityError::Syntax("lots".into()));
        assert!(err.to_string().contains("\"lots\""));
        for bad in ["", "Mi", "1.", ".5Gi", "-1Gi", "1 Gi", "1gi", "1e3"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn overflow_is_not_wrapped() {
        assert!(matches!(parse_bytes("99999999999999999999Ei"), Err(QuantityError::Overflow(_))));
    }

    #[test]
    fn mib_rounds_up() {
        assert_eq!(bytes_to_mib(1), 1);
        assert_eq!(bytes_to_mib(256 << 20), 256);
    }

    #[test]
    fn the_schema_pattern_admits_what_the_parser_admits() {
        let re = regex_lite::Regex::new(crate::spec::MEMORY_PATTERN).expect("pattern compiles");
        for q in ["256Mi", "1Gi", "1G", "1.5Gi", "1000", "0.5", "lots", "", "1.", "-1Gi", "1gi", "1e3", "Mi"] {
            assert_eq!(re.is_match(q), parse_bytes(q).is_ok(), "pattern and parser disagree on {q:?}");
        }
    }
}
