//! How soon a failed watch tries again: a short, jittered, capped backoff, and one retry budget for the
//! whole process.
//!
//! Why not kube's `default_backoff` (client-go's reflector numbers: 0.8 s doubling to 30 s, reset only
//! after two minutes without an error): while an API server restarts, every failed reconnect grows the
//! delay, so informers resumed up to a minute after the API server answered again, and the relist after
//! a 410 Gone waited behind the same grown delay. A reflector's numbers are sized for thousands of
//! clients of one API server; one manager has a handful of watches, so it can retry far sooner without
//! loading a recovering API server:
//!
//! - the delay after the n-th error in a row is drawn uniformly in `[d/2, d]` with
//!   `d = min(250 ms × 2^(n-1), 2 s)`: at most 2 s between attempts, so a watch resumes at most 2 s after
//!   the API server answers; the jitter keeps watches that failed together from retrying together;
//! - any event from the watch (the server answered) resets it, and so does a 410 Gone, after which the
//!   relist goes at once: the server is up, and the cache is stale until it has relisted;
//! - every retry of every watch in the process first takes a token from one [`RetryBudget`] (10 per
//!   second, bursts of 10), so however many informers a process runs, a recovering API server sees at
//!   most that many retries from it.
//!
//! Inside one request, kube's retry of 429/503 waits at most 2 s too, the server's `Retry-After`
//! included (`crate::api::transport`): a restarting API server asks for 5 s on custom resources.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio::time::Instant;

/// The delay sequence of one watch (see the module header).
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    /// Errors in a row since the last reset.
    failures: u32,
    /// Where the jitter comes from: a draw in `[0, 1)`.
    unit: fn() -> f64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff::new()
    }
}

impl WatchBackoff {
    /// The nominal delay after the first error.
    pub const INITIAL: Duration = Duration::from_millis(250);
    /// The longest delay, however many errors in a row.
    pub const CAP: Duration = Duration::from_secs(2);

    /// A backoff at its first delay, with random jitter.
    pub fn new() -> Self {
        WatchBackoff::with_jitter(rand::random::<f64>)
    }

    /// A backoff whose jitter draws come from `unit` (tests pin them).
    pub(crate) fn with_jitter(unit: fn() -> f64) -> Self {
        WatchBackoff { failures: 0, unit }
    }

    /// The delay before the next attempt, after one more error.
    pub(crate) fn next_delay(&mut self) -> Duration {
        // From 2^3 × 250 ms on the delay is the cap; clamping the exponent keeps the shift in range.
        let nominal = Self::INITIAL
            .saturating_mul(1 << self.failures.min(4))
            .min(Self::CAP);
        self.failures = self.failures.saturating_add(1);
        nominal.mul_f64(0.5 + 0.5 * (self.unit)().clamp(0.0, 1.0))
    }

    /// Back to the first delay: the server answered.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

/// A token bucket shared by the watches of a process: at most `burst` retries at once, then one every
/// `1 / per_second`. Waiters reserve their slot when they ask, so they go in order.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    interval: Duration,
    /// How far ahead of now the reservations may run before a retry has to wait.
    tolerance: Duration,
    /// The time at which the next retry would go if the bucket were empty (a GCRA's "theoretical
    /// arrival time").
    next: Arc<Mutex<Option<Instant>>>,
}

impl RetryBudget {
    /// The process's budget: 10 retries per second, bursts of 10.
    pub const PER_SECOND: u32 = 10;
    /// How many retries the process's budget lets go at once, before one per `1 / PER_SECOND`.
    pub const BURST: u32 = 10;

    pub(crate) fn new(per_second: u32, burst: u32) -> Self {
        let interval = Duration::from_secs(1) / per_second.max(1);
        RetryBudget {
            interval,
            tolerance: interval.saturating_mul(burst.max(1) - 1),
            next: Arc::default(),
        }
    }

    /// The one budget every informer of this process shares.
    pub fn process() -> RetryBudget {
        static PROCESS: OnceLock<RetryBudget> = OnceLock::new();
        PROCESS
            .get_or_init(|| RetryBudget::new(Self::PER_SECOND, Self::BURST))
            .clone()
    }

    /// Waits until a retry may go.
    pub(crate) async fn acquire(&self) {
        let now = Instant::now();
        let go_at = {
            let mut next = self
                .next
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let slot = next.map_or(now, |n| n.max(now));
            *next = Some(slot + self.interval);
            slot.checked_sub(self.tolerance).unwrap_or(now)
        };
        if go_at > now {
            tokio::time::sleep_until(go_at).await;
        }
    }
}

/// Whether a watch error is a 410 Gone: the resourceVersion it resumed from is compacted away, and the
/// watcher relists next.
fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// `events` (a watcher's stream) with the backoff: after an error the stream is polled again only once
/// the backoff's delay has passed and the budget has a token (after a 410, without delay but with a
/// token). The watcher itself makes the next request when it is polled.
pub fn with_watch_backoff<K, S>(
    events: S,
    backoff: WatchBackoff,
    budget: RetryBudget,
) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    struct State<K> {
        events: BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
        backoff: WatchBackoff,
        budget: RetryBudget,
        /// Set after an error: how long to wait before polling the watch again.
        retry_after: Option<Duration>,
    }
    let state = State {
        events: events.boxed(),
        backoff,
        budget,
        retry_after: None,
    };
    // `unfold` keeps the pending step inside the stream, so a caller that drops a `next()` future mid
    // sleep (the informer's `select!` with its resync timer) does not restart the delay.
    futures::stream::unfold(state, |mut state| async move {
        if let Some(delay) = state.retry_after.take() {
            tokio::time::sleep(delay).await;
            state.budget.acquire().await;
        }
        let item = state.events.next().await?;
        match &item {
            Ok(_) => state.backoff.reset(),
            Err(e) if is_gone(e) => {
                state.backoff.reset();
                state.retry_after = Some(Duration::ZERO);
            }
            Err(_) => state.retry_after = Some(state.backoff.next_delay()),
        }
        Some((item, state))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::task::Poll;

    type Item = Result<watcher::Event<()>, watcher::Error>;

    fn unreachable() -> Item {
        Err(watcher::Error::NoResourceVersion)
    }

    fn gone() -> Item {
        let mut status = kube::core::Status::failure("too old resource version", "Expired");
        status.code = 410;
        Err(watcher::Error::WatchError(Box::new(status)))
    }

    fn event() -> Item {
        Ok(watcher::Event::Init)
    }

    /// Runs `script` through the backoff and returns, per item, how long after the previous one the
    /// watch was polled for it (paused time: the delays are exact).
    async fn gaps(script: Vec<Item>, backoff: WatchBackoff, budget: RetryBudget) -> Vec<Duration> {
        let mut script = VecDeque::from(script);
        let polls = Arc::new(Mutex::new(Vec::new()));
        let seen = polls.clone();
        let watch = futures::stream::poll_fn(move |_| {
            seen.lock().unwrap().push(Instant::now());
            Poll::Ready(script.pop_front())
        });
        with_watch_backoff(watch, backoff, budget)
            .for_each(|_| async {})
            .await;
        let polls = polls.lock().unwrap();
        polls.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// A budget that never makes anyone wait here.
    fn ample() -> RetryBudget {
        RetryBudget::new(1000, 1000)
    }

    #[tokio::test(start_paused = true)]
    async fn delays_double_from_250ms_to_a_2s_cap_and_reset_on_an_event_or_a_410() {
        let script = vec![
            unreachable(),
            unreachable(),
            unreachable(),
            unreachable(),
            unreachable(),
            unreachable(),
            event(),
            unreachable(),
            unreachable(),
            gone(),
            event(),
            unreachable(),
        ];
        // The longest draw of the jitter: each delay is its nominal value.
        let longest = WatchBackoff::with_jitter(|| 1.0);
        let gaps: Vec<u64> = gaps(script, longest, ample())
            .await
            .iter()
            .map(|g| g.as_millis() as u64)
            .collect();
        assert_eq!(
            gaps,
            vec![
                250, 500, 1000, 2000, 2000, 2000, // doubling, then capped
                0,    // the event: no delay, and the backoff starts over
                250, 500, // so the next errors wait from the first delay again
                0,   // a 410: the relist goes at once
                0,   // after its Init event
                250, // the backoff was reset by the 410
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_shortest_jitter_halves_every_delay() {
        let script = (0..6).map(|_| unreachable()).collect();
        let gaps = gaps(script, WatchBackoff::with_jitter(|| 0.0), ample()).await;
        assert_eq!(
            gaps,
            vec![ms(125), ms(250), ms(500), ms(1000), ms(1000), ms(1000)],
            "each delay is half its nominal value"
        );
    }

    #[test]
    fn random_delays_stay_within_half_and_all_of_the_nominal_delay() {
        let mut backoff = WatchBackoff::new();
        let mut lowest = Duration::MAX;
        let mut highest = Duration::ZERO;
        for round in 0..2000 {
            if round % 20 == 0 {
                backoff.reset();
            }
            let failures = backoff.failures;
            let nominal =
                (WatchBackoff::INITIAL * 2_u32.pow(failures.min(4))).min(WatchBackoff::CAP);
            let delay = backoff.next_delay();
            assert!(
                delay >= nominal / 2 && delay <= nominal,
                "{delay:?} outside [{:?}, {nominal:?}]",
                nominal / 2
            );
            if failures >= 4 {
                lowest = lowest.min(delay);
                highest = highest.max(delay);
            }
        }
        // The draws spread over the range (not one fixed value).
        assert!(
            lowest < ms(1100) && highest > ms(1900),
            "{lowest:?}..{highest:?}"
        );
    }

    #[test]
    fn a_long_outage_never_exceeds_the_cap() {
        let mut backoff = WatchBackoff::with_jitter(|| 1.0);
        let delays: Vec<Duration> = (0..100).map(|_| backoff.next_delay()).collect();
        assert!(delays.iter().all(|d| *d <= WatchBackoff::CAP));
        assert_eq!(delays[99], WatchBackoff::CAP);
    }

    #[tokio::test(start_paused = true)]
    async fn the_process_budget_bounds_retries_per_second_however_many_watches_fail() {
        let budget = RetryBudget::new(10, 10);
        let start = Instant::now();
        // 40 watches failing for 10 s; each would retry about every 0.5–1 s (the shortest draws).
        let watches: Vec<_> = (0..40)
            .map(|_| {
                let budget = budget.clone();
                tokio::spawn(async move {
                    let script: Vec<Item> = (0..30).map(|_| unreachable()).collect();
                    let mut script = VecDeque::from(script);
                    let polls = Arc::new(Mutex::new(Vec::new()));
                    let seen = polls.clone();
                    let watch = futures::stream::poll_fn(move |_| {
                        seen.lock().unwrap().push(Instant::now());
                        Poll::Ready(script.pop_front())
                    });
                    let mut events =
                        with_watch_backoff(watch, WatchBackoff::with_jitter(|| 0.0), budget);
                    while events.next().await.is_some() {
                        if start.elapsed() > Duration::from_secs(10) {
                            break;
                        }
                    }
                    // The first poll of each watch is its first attempt, not a retry.
                    let polls = polls.lock().unwrap();
                    polls[1..].to_vec()
                })
            })
            .collect();
        let mut retries = Vec::new();
        for watch in watches {
            retries.extend(watch.await.unwrap());
        }
        retries.sort();
        assert!(
            retries.len() > 50,
            "the watches kept retrying: {}",
            retries.len()
        );
        // Any one-second window holds at most the burst plus one second's worth.
        for (i, first) in retries.iter().enumerate() {
            let within = retries[i..]
                .iter()
                .take_while(|t| **t - *first < Duration::from_secs(1))
                .count();
            assert!(within <= 20, "{within} retries within 1 s from {first:?}");
        }
        // Without the budget, 40 watches at most 1 s apart would have made 40 per second; with it, the
        // burst and then one per interval.
        let span = (*retries.last().unwrap() - start).as_secs_f64();
        assert!(
            retries.len() as f64 <= 10.0 + 10.0 * span + 1.0,
            "{} retries in {span:.1} s",
            retries.len()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_budget_lets_a_burst_through_at_once() {
        let budget = RetryBudget::new(10, 10);
        let start = Instant::now();
        for _ in 0..10 {
            budget.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        budget.acquire().await;
        assert_eq!(start.elapsed(), ms(100), "the 11th waits one interval");
    }

    #[test]
    fn only_410_counts_as_gone() {
        assert!(is_gone(gone().as_ref().unwrap_err()));
        assert!(!is_gone(unreachable().as_ref().unwrap_err()));
        let mut status = kube::core::Status::failure("forbidden", "Forbidden");
        status.code = 403;
        assert!(!is_gone(&watcher::Error::WatchError(Box::new(status))));
    }
}
