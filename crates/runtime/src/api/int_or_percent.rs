//! `maxSurge` / `maxUnavailable` values: an integer, or a percentage of a total (upstream's
//! `intstr.GetScaledValueFromIntOrPercent`), shared by the Deployment and DaemonSet rolling updates.
//!
//! The percentage is computed in floating point and rounded up or down exactly as upstream does, so
//! results agree at the edges (`25%` of 10 is 3 rounded up, 2 down). Upstream then converts to `int32`,
//! which wraps for results beyond its range (`200%` of 2^31-1); validation bounds only maxUnavailable to
//! 100%, so such values can be stored. Here they saturate instead: no input can panic or wrap into a
//! negative limit.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Which way a percentage is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Towards +∞ (surge: never less room than asked).
    Up,
    /// Towards −∞ (unavailability: never more disruption than asked).
    Down,
}

/// Why a value could not be read (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntOrPercentError {
    /// The field is absent.
    #[error("nil value for IntOrString")]
    Missing,
    /// A string without the trailing `%`.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage")]
    NotAPercentage,
    /// A string ending in `%` whose rest is not an integer.
    #[error("invalid value for IntOrString: invalid value {value:?}")]
    BadNumber {
        /// The whole string, `%` included.
        value: String,
        /// Why the part before `%` did not parse.
        #[source]
        source: std::num::ParseIntError,
    },
}

/// An integer as is, or `N%` of `total` rounded as asked, saturated into `i32`.
pub fn scaled_value(
    value: Option<&IntOrString>,
    total: i32,
    rounding: Rounding,
) -> Result<i32, IntOrPercentError> {
    match value.ok_or(IntOrPercentError::Missing)? {
        IntOrString::Int(v) => Ok(*v),
        IntOrString::String(s) => {
            let number = s
                .strip_suffix('%')
                .ok_or(IntOrPercentError::NotAPercentage)?;
            let percent: i64 = number
                .parse()
                .map_err(|source| IntOrPercentError::BadNumber {
                    value: s.clone(),
                    source,
                })?;
            let scaled = percent as f64 * f64::from(total) / 100.0;
            let rounded = match rounding {
                Rounding::Up => scaled.ceil(),
                Rounding::Down => scaled.floor(),
            };
            // `as` from a float saturates at the i32 bounds (and the value is never NaN here).
            Ok(rounded as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    /// Upstream's TestGetScaledValueFromIntOrPercent cases, plus the edges where Go's int32 would wrap.
    #[test]
    fn scaled_value_table() {
        use Rounding::{Down, Up};
        let ok: [(IntOrString, i32, Rounding, i32); 12] = [
            (IntOrString::Int(123), 0, Down, 123),
            (pct("90%"), 100, Down, 90),
            (pct("90%"), 95, Down, 85),
            (pct("90%"), 95, Up, 86),
            (pct("25%"), 10, Up, 3),
            (pct("25%"), 10, Down, 2),
            (pct("0%"), 10, Up, 0),
            (pct("100%"), 0, Up, 0),
            (pct("+50%"), 10, Down, 5),
            (pct("-25%"), 10, Up, -2),
            (pct("200%"), i32::MAX, Up, i32::MAX),
            (pct("-300%"), i32::MAX, Up, i32::MIN),
        ];
        for (value, total, rounding, expected) in ok {
            assert_eq!(
                scaled_value(Some(&value), total, rounding),
                Ok(expected),
                "{value:?} of {total} rounded {rounding:?}"
            );
        }
        assert_eq!(scaled_value(None, 10, Up), Err(IntOrPercentError::Missing));
        assert_eq!(
            scaled_value(Some(&pct("90")), 100, Down),
            Err(IntOrPercentError::NotAPercentage)
        );
        let bad = scaled_value(Some(&pct("a%")), 100, Down).unwrap_err();
        assert!(matches!(bad, IntOrPercentError::BadNumber { .. }));
        assert!(bad.to_string().contains("\"a%\""), "{bad}");
    }
}
