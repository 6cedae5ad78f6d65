//! Medians and ratios: the summary of a metric over rounds, and how the two sides compare.
//!
//! Medians rather than means because a round on a shared machine is occasionally slow for reasons that
//! have nothing to do with the controller (another process compiling, etcd compaction).
//!
//! A ratio alone does not say whether the sides differ or the rounds merely scattered: a sub-second
//! scenario varies by ±20 % between rounds of the same build. So each metric also gets its range per
//! side and, from [`MIN_ROUNDS_FOR_P`] rounds per side on, a rank test's p-value ([`rank_sum_p`]): how
//! often two sides that do not differ at all would still look at least this far apart.

/// The median of `values` (the mean of the two middle values for an even count); `None` when empty or
/// when a value is not a number.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
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
pub(crate) fn ratio(mini_kcm: Option<f64>, upstream: Option<f64>) -> Option<f64> {
    match (mini_kcm, upstream) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

/// The smallest and largest of `values`; `None` when empty or when a value is not a number.
pub(crate) fn range(values: &[f64]) -> Option<(f64, f64)> {
    if values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let min = values.iter().copied().reduce(f64::min)?;
    let max = values.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

/// The least-squares line through `points` (x, y): `(slope, intercept)`; `None` for fewer than two
/// distinct x or a value that is not a number. The scale scenario fits memory against pods with it.
pub(crate) fn linear_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    // All x equal (or no points): no slope can be told.
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, mean_y - slope * mean_x))
}

/// Fewer rounds per side than this give no p-value: with 4 against 4 the most extreme split already
/// has p = 2/70 ≈ 0.03, with 3 against 3 it cannot get below 0.1.
pub(crate) const MIN_ROUNDS_FOR_P: usize = 4;

/// The two-sided p-value of the Wilcoxon rank-sum (Mann-Whitney) test of `a` against `b`: the
/// probability that, were both drawn from one distribution, the count of pairs in which `a`'s value is
/// the larger would lie at least as far from its middle as observed. Exact (every ordering of the
/// pooled rounds equally likely), which suits the handful of rounds a benchmark has; a tie counts half
/// a pair, and the null distribution is the one without ties, so with many ties (request counts) the
/// p-value is approximate. `None` below [`MIN_ROUNDS_FOR_P`] rounds on either side or for a value that
/// is not a number.
pub(crate) fn rank_sum_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (m, n) = (a.len(), b.len());
    if m < MIN_ROUNDS_FOR_P || n < MIN_ROUNDS_FOR_P || a.iter().chain(b).any(|v| v.is_nan()) {
        return None;
    }
    // Twice the pair count, so that ties stay whole numbers.
    let twice_u: usize = a
        .iter()
        .map(|x| {
            b.iter()
                .map(|y| match x.total_cmp(y) {
                    std::cmp::Ordering::Greater => 2,
                    std::cmp::Ordering::Equal => 1,
                    std::cmp::Ordering::Less => 0,
                })
                .sum::<usize>()
        })
        .sum();
    let pairs = m.checked_mul(n)?;
    let observed = twice_u.abs_diff(pairs);
    let counts = pair_count_distribution(m, n);
    let total: f64 = counts.iter().sum();
    let extreme: f64 = counts
        .iter()
        .enumerate()
        .filter(|(u, _)| (2 * u).abs_diff(pairs) >= observed)
        .map(|(_, count)| count)
        .sum();
    Some((extreme / total).min(1.0))
}

/// How many orderings of `m` values of one side and `n` of the other (no ties) have each count `u`
/// (index) of pairs in which the first side's value is the larger. Built up one value at a time: the
/// largest of `i` and `j` values is either the first side's, beating all `j` of the other side, or
/// the other side's, beating none.
fn pair_count_distribution(m: usize, n: usize) -> Vec<f64> {
    // row[j]: the distribution for i values of the first side and j of the other.
    let mut row: Vec<Vec<f64>> = vec![vec![1.0]; n + 1];
    for i in 1..=m {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        next.push(vec![1.0]);
        for j in 1..=n {
            let mut counts = vec![0.0; i * j + 1];
            // The largest is the first side's: j more pairs won.
            for (u, count) in row[j].iter().enumerate() {
                counts[u + j] += count;
            }
            // The largest is the other side's: no more pairs won.
            for (u, count) in next[j - 1].iter().enumerate() {
                counts[u] += count;
            }
            next.push(counts);
        }
        row = next;
    }
    row.pop().unwrap_or_default()
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

    #[test]
    fn range_is_min_and_max() {
        assert_eq!(range(&[0.5, 0.2, 0.9]), Some((0.2, 0.9)));
        assert_eq!(range(&[3.0]), Some((3.0, 3.0)));
        assert_eq!(range(&[]), None);
        assert_eq!(range(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn the_pair_count_distribution_of_four_against_four() {
        // The textbook table: 70 orderings, symmetric around 8.
        let counts = pair_count_distribution(4, 4);
        let expected = [
            1.0, 1.0, 2.0, 3.0, 5.0, 5.0, 7.0, 7.0, 8.0, 7.0, 7.0, 5.0, 5.0, 3.0, 2.0, 1.0, 1.0,
        ];
        assert_eq!(counts, expected);
        assert_eq!(pair_count_distribution(3, 5).iter().sum::<f64>(), 56.0);
    }

    #[test]
    fn rank_sum_p_values() {
        let close = |p: Option<f64>, expected: f64| {
            let p = p.unwrap();
            assert!((p - expected).abs() < 1e-12, "{p} != {expected}");
        };
        // Completely separated: only the two most extreme of 70 orderings.
        close(
            rank_sum_p(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]),
            2.0 / 70.0,
        );
        close(
            rank_sum_p(&[5.0, 6.0, 7.0, 8.0], &[1.0, 2.0, 3.0, 4.0]),
            2.0 / 70.0,
        );
        // Interleaved: 6 pairs of 16 won; 48 of 70 orderings lie at least 2 from the middle.
        close(
            rank_sum_p(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]),
            48.0 / 70.0,
        );
        // The same values on both sides: right in the middle.
        close(
            rank_sum_p(&[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.0]),
            1.0,
        );
        // Unequal sides: 4 against 6, separated: 2 of C(10, 4) = 210.
        close(
            rank_sum_p(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0, 9.0, 10.0]),
            2.0 / 210.0,
        );
    }

    #[test]
    fn no_p_value_for_too_few_rounds_or_not_a_number() {
        assert_eq!(rank_sum_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0, 7.0]), None);
        assert_eq!(rank_sum_p(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0]), None);
        assert_eq!(
            rank_sum_p(&[1.0, 2.0, 3.0, f64::NAN], &[4.0, 5.0, 6.0, 7.0]),
            None
        );
    }

    #[test]
    fn a_line_through_points_on_a_line_and_none_without_two_x() {
        let (slope, intercept) =
            linear_fit(&[(1000.0, 30.0), (2000.0, 35.0), (3000.0, 40.0)]).unwrap();
        assert!((slope - 0.005).abs() < 1e-12 && (intercept - 25.0).abs() < 1e-9);
        // Scatter around a line: the fit goes between.
        let (slope, _) = linear_fit(&[(0.0, 0.0), (0.0, 2.0), (2.0, 2.0), (2.0, 4.0)]).unwrap();
        assert!((slope - 1.0).abs() < 1e-12);
        assert_eq!(linear_fit(&[(5.0, 1.0), (5.0, 2.0)]), None);
        assert_eq!(linear_fit(&[]), None);
        assert_eq!(linear_fit(&[(1.0, f64::NAN), (2.0, 1.0)]), None);
    }
}
