//! Medians and ratios: the summary of a metric over rounds, and how the two sides compare.
//!
//! Medians rather than means because a round on a shared machine is occasionally slow for reasons that
//! have nothing to do with the controller (another process compiling, etcd compaction).

/// The median of `values` (the mean of the two middle values for an even count); `None` when empty or
/// when a value is not a number.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted.get(middle).copied()
    } else {
        let low = sorted.get(middle.checked_sub(1)?)?;
        let high = sorted.get(middle)?;
        Some((low + high) / 2.0)
    }
}

/// `mini_kcm / upstream`: below 1 means mini-kcm needed less. `None` when upstream's value is zero or
/// either is missing, since a ratio to nothing says nothing.
pub fn ratio(mini_kcm: Option<f64>, upstream: Option<f64>) -> Option<f64> {
    match (mini_kcm, upstream) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.5]), Some(7.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn ratio_is_mini_kcm_over_upstream() {
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
    }
}
