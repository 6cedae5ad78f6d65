//! "Slow start" batching of API calls (upstream `slowStartBatch`, also inlined in the DaemonSet `syncNodes`).
//!
//! When a controller must create many pods, calls go out in batches of 1, 2, 4, … (capped by what is left), each
//! batch concurrently, and the first batch with a failure ends the run. A namespace over quota thus costs one
//! doomed request and one event instead of hundreds, while healthy runs still finish in O(log n) round trips.

use std::future::Future;

use futures::future::join_all;

use crate::switches::safeties::{Safeties, Safety};

/// Size of the first batch; each further batch is twice the previous one (upstream `SlowStartInitialBatchSize`).
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// The first batch a controller uses: [`SLOW_START_INITIAL_BATCH_SIZE`], or, with slow start switched off
/// by a learner (`mini-kcm up --without slow-start`), a batch as large as any count, so every call of a
/// run goes out at once and a failure stops nothing.
pub fn initial_batch_size(safeties: &Safeties) -> usize {
    if safeties.is_on(Safety::SlowStart) {
        SLOW_START_INITIAL_BATCH_SIZE
    } else {
        usize::MAX
    }
}

/// Calls `call(i)` for `i` in `0..count`, in batches of `initial_batch_size`, then double, …; the calls of one
/// batch run concurrently. Stops after the first batch in which any call failed.
///
/// Returns how many calls succeeded and the error of the lowest-indexed failed call of that batch. Calls never
/// attempted are `count − successes − failures of the last batch`; callers that must lower expectations for
/// them (the DaemonSet controller) can count failures inside `call`. An `initial_batch_size` of 0 makes no
/// calls, as upstream.
///
/// upstream: slowStartBatch
pub async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial_batch_size: usize,
    mut call: F,
) -> (usize, Option<E>)
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut successes = 0;
    let mut next_index = 0;
    let mut batch_size = initial_batch_size.min(count);
    while batch_size > 0 {
        let batch = (next_index..next_index + batch_size).map(&mut call);
        let results = join_all(batch).await;
        next_index += batch_size;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(()) => successes += 1,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if first_error.is_some() {
            return (successes, first_error);
        }
        batch_size = batch_size.saturating_mul(2).min(count - next_index);
    }
    (successes, None)
}

/// The batch sizes [`slow_start_batch`] uses for `count` calls when none fails (for decisions: "creating
/// 7 pods in slow-start batches 1, 2, 4").
pub(crate) fn batch_sizes(count: usize, initial_batch_size: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut left = count;
    let mut size = initial_batch_size.min(left);
    while size > 0 {
        sizes.push(size);
        left -= size;
        size = size.saturating_mul(2).min(left);
    }
    sizes
}

/// "in slow-start batches 1, 2, 4" (or "in one batch of 1").
pub fn describe_batches(count: usize, initial_batch_size: usize) -> String {
    let sizes = batch_sizes(count, initial_batch_size);
    if let [one] = sizes.as_slice() {
        return format!("in one batch of {one}");
    }
    let sizes: Vec<String> = sizes.iter().map(ToString::to_string).collect();
    format!("in slow-start batches {}", sizes.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_double_and_end_with_what_is_left() {
        assert_eq!(batch_sizes(7, 1), [1, 2, 4]);
        assert_eq!(batch_sizes(10, 1), [1, 2, 4, 3]);
        assert_eq!(batch_sizes(0, 1), Vec::<usize>::new());
        assert_eq!(batch_sizes(5, 0), Vec::<usize>::new());
        assert_eq!(describe_batches(3, 1), "in slow-start batches 1, 2");
        assert_eq!(describe_batches(1, 1), "in one batch of 1");
        let off = initial_batch_size(&Safeties::without([Safety::SlowStart]));
        assert_eq!(batch_sizes(7, off), [7]);
        assert_eq!(describe_batches(7, off), "in one batch of 7");
        assert_eq!(initial_batch_size(&Safeties::all_on()), 1);
    }
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, PartialEq)]
    struct FakeError;

    // Mirrors TestSlowStartBatch: (call limit, expected successes, expected error, expected calls).
    #[tokio::test]
    async fn slow_start_batch_stops_after_a_failing_batch() {
        let cases = [
            ("all fail", 0, 0, Some(FakeError), 1),     // 1 (first batch)
            ("all succeed", 10, 10, None, 10),          // 1 + 2 + 4 + 3
            ("some succeed", 5, 5, Some(FakeError), 7), // 1 + 2 + 4
        ];
        for (name, call_limit, want_successes, want_error, want_calls) in cases {
            let calls = AtomicUsize::new(0);
            let call = |_index| {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    if n > call_limit {
                        Err(FakeError)
                    } else {
                        Ok(())
                    }
                }
            };
            let (successes, error) =
                slow_start_batch(10, SLOW_START_INITIAL_BATCH_SIZE, call).await;
            assert_eq!(successes, want_successes, "{name}: successes");
            assert_eq!(error, want_error, "{name}: error");
            assert_eq!(
                calls.load(Ordering::SeqCst),
                want_calls,
                "{name}: calls attempted"
            );
        }
    }

    #[tokio::test]
    async fn batches_double_and_indices_cover_the_range() {
        let seen = Mutex::new(Vec::new());
        let (successes, error) = slow_start_batch(10, 1, |index| {
            seen.lock().unwrap().push(index);
            async { Ok::<(), FakeError>(()) }
        })
        .await;
        assert_eq!((successes, error), (10, None));
        assert_eq!(*seen.lock().unwrap(), (0..10).collect::<Vec<_>>());

        // Initial batch 3: batches 3, 6, then the remaining 1.
        let batches = Mutex::new(Vec::<Vec<usize>>::new());
        let in_flight = Mutex::new(Vec::new());
        let (successes, _) = slow_start_batch(10, 3, |index| {
            in_flight.lock().unwrap().push(index);
            let batches = &batches;
            let in_flight = &in_flight;
            async move {
                // Every call of a batch is created before any is polled; the first poll closes the batch.
                let mut current = in_flight.lock().unwrap();
                if !current.is_empty() {
                    batches.lock().unwrap().push(std::mem::take(&mut *current));
                }
                Ok::<(), FakeError>(())
            }
        })
        .await;
        assert_eq!(successes, 10);
        let sizes: Vec<usize> = batches.lock().unwrap().iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![3, 6, 1]);
    }

    #[tokio::test]
    async fn batch_calls_run_concurrently() {
        // Two calls of the second batch wait for each other; they can only finish if polled together.
        let barrier = tokio::sync::Barrier::new(2);
        let (successes, error) = slow_start_batch(3, 1, |index| {
            let barrier = &barrier;
            async move {
                if index > 0 {
                    barrier.wait().await;
                }
                Ok::<(), FakeError>(())
            }
        })
        .await;
        assert_eq!((successes, error), (3, None));
    }

    #[tokio::test]
    async fn first_error_of_the_batch_and_edge_sizes() {
        // Second batch (indices 1 and 2) fails on both; the lower index wins.
        let (successes, error) = slow_start_batch(10, 1, |index| async move {
            if index == 0 { Ok(()) } else { Err(index) }
        })
        .await;
        assert_eq!((successes, error), (1, Some(1)));

        let never = |_index: usize| async { Err::<(), FakeError>(FakeError) };
        assert_eq!(slow_start_batch(0, 1, never).await, (0, None));
        assert_eq!(slow_start_batch(5, 0, never).await, (0, None));
        // An initial batch larger than the count is capped.
        let (successes, error) =
            slow_start_batch(2, 8, |_| async { Ok::<(), FakeError>(()) }).await;
        assert_eq!((successes, error), (2, None));
    }
}
