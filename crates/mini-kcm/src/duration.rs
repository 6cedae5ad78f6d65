//! Durations on the command line as Go's `time.ParseDuration` reads them, so `mini-kcm` takes the same
//! values as kubectl (`rollout status --timeout`) and kube-controller-manager (`--min-resync-period`,
//! `--leader-elect-*`).

use std::time::Duration;

/// Parses a Go duration (`time.ParseDuration`, as kubectl's `--timeout`): `0`, `90s`, `1m30s`, `1.5h`,
/// `250ms`; `0` is zero (for `--timeout`: wait forever).
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {input:?}: use e.g. 30s, 5m, 1h30m");
    let s = input.trim();
    if s.starts_with('-') {
        return Err(format!("invalid duration {input:?}: must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok = |s: &str| parse_go_duration(s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("2h45m"), Duration::from_secs(2 * 3600 + 45 * 60));
        assert_eq!(ok("12h0m0s"), Duration::from_secs(12 * 3600));
        for bad in ["", "10", "5x", "-1s", "s", "1..5s", "1d", "5 s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} parsed");
        }
    }
}
