//! Rate limiters decide how long a failed key waits before it is retried.
//!
//! They mirror client-go's `util/workqueue/default_rate_limiters.go`: a per-key exponential
//! backoff (so one broken object backs off on its own), an overall token bucket (so a burst of
//! failures across many keys cannot hammer the API server), and a combinator that takes the
//! worst of several limiters. [`default_controller_rate_limiter`] is the combination every
//! kube-controller-manager controller uses.
//!
//! A limiter only *computes* a delay; it never sleeps. The queue turns the delay into an
//! `add_after`.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Decides how long a key must wait before it is handed out again.
pub trait RateLimiter<K>: Send + Sync {
    /// Records one more failure of `key` and returns how long it should wait.
    fn when(&self, key: &K) -> Duration;
    /// Stops tracking `key` (it succeeded, or the caller gave up on it).
    fn forget(&self, key: &K);
    /// How many failures of `key` are currently being tracked.
    fn num_requeues(&self, key: &K) -> usize;
}

impl<K, R: RateLimiter<K> + ?Sized> RateLimiter<K> for Box<R> {
    fn when(&self, key: &K) -> Duration {
        (**self).when(key)
    }
    fn forget(&self, key: &K) {
        (**self).forget(key)
    }
    fn num_requeues(&self, key: &K) -> usize {
        (**self).num_requeues(key)
    }
}

/// Our critical sections cannot leave the data half-updated, so a poisoned lock is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Per-key exponential backoff: `base * 2^failures`, capped at `max`.
///
/// Keys are tracked until [`RateLimiter::forget`] is called, so callers must forget keys that
/// succeed or the map grows forever.
#[derive(Debug)]
pub(crate) struct ItemExponentialFailureRateLimiter<K> {
    failures: Mutex<HashMap<K, usize>>,
    base: Duration,
    max: Duration,
}

impl<K> ItemExponentialFailureRateLimiter<K> {
    /// A limiter whose first delay is `base`, doubling per failure up to `max`.
    pub(crate) fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base,
            max,
        }
    }
}

impl<K: Eq + Hash + Clone + Send> RateLimiter<K> for ItemExponentialFailureRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        let exp = {
            let mut failures = lock(&self.failures);
            let count = failures.entry(key.clone()).or_insert(0);
            let exp = *count;
            *count = count.saturating_add(1);
            exp
        };
        // Computed in floating point so a large exponent saturates instead of overflowing;
        // anything that does not fit in i64 nanoseconds (Go's Duration) is clamped to the cap.
        let exp = i32::try_from(exp).unwrap_or(i32::MAX);
        let backoff = self.base.as_nanos() as f64 * 2f64.powi(exp);
        if !backoff.is_finite() || backoff > i64::MAX as f64 {
            return self.max;
        }
        // Truncation toward zero matches Go's float64 -> Duration conversion.
        Duration::from_nanos(backoff as u64).min(self.max)
    }

    fn forget(&self, key: &K) {
        lock(&self.failures).remove(key);
    }

    fn num_requeues(&self, key: &K) -> usize {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }
}

/// An overall token bucket shared by all keys (golang.org/x/time/rate semantics).
///
/// The bucket starts full (`burst` tokens) and refills at `qps` tokens per second. Each call to
/// [`RateLimiter::when`] *reserves* one token, even if that drives the balance negative, and
/// returns how long until that token will exist. It never blocks: the waiting is done by the
/// queue's delay. Because the debt is remembered, callers that arrive together are spaced
/// `1/qps` apart.
#[derive(Debug)]
pub struct BucketRateLimiter {
    qps: f64,
    burst: u32,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` before the first reservation.
    last: Option<Instant>,
}

impl BucketRateLimiter {
    /// A bucket holding at most `burst` tokens, refilled at `qps` tokens per second.
    ///
    /// `qps = f64::INFINITY` disables limiting. `qps <= 0` or `burst == 0` means a token never
    /// becomes available; [`RateLimiter::when`] then returns [`Duration::MAX`].
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            qps,
            burst,
            state: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: None,
            }),
        }
    }

    /// Time needed to accumulate `tokens` at `qps` (x/time/rate's `durationFromTokens`).
    fn duration_from_tokens(&self, tokens: f64) -> Duration {
        if self.qps <= 0.0 {
            return Duration::MAX;
        }
        let nanos = tokens / self.qps * 1e9;
        if nanos > i64::MAX as f64 {
            return Duration::MAX;
        }
        Duration::from_nanos(nanos as u64)
    }

    /// The bucket's capacity.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// How long until the bucket holds at least `tokens` (counting the debt of reservations already
    /// made), if nobody reserves meanwhile; zero if it does now. Reserves nothing: a caller with lower
    /// priority looks first, and reserves with [`RateLimiter::when`] once the tokens are there.
    pub fn time_until_holding(&self, tokens: f64) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        let bucket = lock(&self.state);
        let now = Instant::now();
        let elapsed = bucket
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        let held =
            (bucket.tokens + elapsed.as_secs_f64() * self.qps.max(0.0)).min(f64::from(self.burst));
        if held >= tokens {
            Duration::ZERO
        } else if tokens > f64::from(self.burst) {
            Duration::MAX
        } else {
            self.duration_from_tokens(tokens - held)
        }
    }
}

impl<K> RateLimiter<K> for BucketRateLimiter {
    fn when(&self, _key: &K) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        // A reservation bigger than the bucket can never succeed; like x/time/rate we leave
        // the state untouched and report "forever".
        if self.burst < 1 {
            return Duration::MAX;
        }
        let now = Instant::now();
        let mut bucket = lock(&self.state);
        let elapsed = bucket
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        let refilled =
            (bucket.tokens + elapsed.as_secs_f64() * self.qps.max(0.0)).min(f64::from(self.burst));
        let tokens = refilled - 1.0;
        let wait = if tokens < 0.0 {
            self.duration_from_tokens(-tokens)
        } else {
            Duration::ZERO
        };
        bucket.tokens = tokens;
        bucket.last = Some(now);
        wait
    }

    fn forget(&self, _key: &K) {}

    fn num_requeues(&self, _key: &K) -> usize {
        0
    }
}

/// Asks every inner limiter and returns the longest delay (and the highest requeue count).
///
/// Every limiter is consulted on every call, so each keeps its own bookkeeping up to date.
pub struct MaxOfRateLimiter<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOfRateLimiter<K> {
    /// Combines `limiters`; with none, every delay is zero.
    pub(crate) fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K> std::fmt::Debug for MaxOfRateLimiter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K> RateLimiter<K> for MaxOfRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        // Not `max()` over an iterator adaptor that could short-circuit: all must be called.
        let mut worst = Duration::ZERO;
        for limiter in &self.limiters {
            worst = worst.max(limiter.when(key));
        }
        worst
    }

    fn forget(&self, key: &K) {
        for limiter in &self.limiters {
            limiter.forget(key);
        }
    }

    fn num_requeues(&self, key: &K) -> usize {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(key))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: the worse of a per-key exponential backoff
/// (5 ms doubling up to 1000 s) and an overall bucket of 10 qps with a burst of 100.
pub fn default_controller_rate_limiter<K>() -> MaxOfRateLimiter<K>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
{
    controller_rate_limiter(Duration::from_secs(1000))
}

/// [`default_controller_rate_limiter`] with another per-key cap than 1000 s (tests that need a key to
/// fail many times quickly).
pub fn controller_rate_limiter<K>(max_item_delay: Duration) -> MaxOfRateLimiter<K>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            max_item_delay,
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn exponential_doubles_per_key_and_forget_resets() {
        let l = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1));
        for expected in [1, 2, 4, 8, 16] {
            assert_eq!(l.when(&"one"), ms(expected));
        }
        assert_eq!(l.num_requeues(&"one"), 5);

        assert_eq!(l.when(&"two"), ms(1));
        assert_eq!(l.when(&"two"), ms(2));
        assert_eq!(l.num_requeues(&"two"), 2);

        l.forget(&"one");
        assert_eq!(l.num_requeues(&"one"), 0);
        assert_eq!(l.when(&"one"), ms(1));
        // Forgetting one key leaves the others alone.
        assert_eq!(l.num_requeues(&"two"), 2);
    }

    #[test]
    fn exponential_caps_and_never_overflows() {
        let l = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1000));
        for _ in 0..5 {
            l.when(&"one");
        }
        assert_eq!(l.when(&"one"), ms(32));
        for _ in 0..1000 {
            l.when(&"overflow");
        }
        assert_eq!(l.when(&"overflow"), Duration::from_secs(1000));

        let l = ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(60),
            Duration::from_secs(1000 * 3600),
        );
        l.when(&"two");
        l.when(&"two");
        assert_eq!(l.when(&"two"), Duration::from_secs(4 * 60));
        for _ in 0..1000 {
            l.when(&"overflow");
        }
        assert_eq!(l.when(&"overflow"), Duration::from_secs(1000 * 3600));
    }

    #[test]
    fn default_controller_backoff_sequence() {
        let l = default_controller_rate_limiter::<String>();
        let key = "ns/name".to_string();
        // 5ms, 10ms, 20ms, ... each doubling; the bucket is far from empty so never wins.
        let mut expected = ms(5);
        for _ in 0..10 {
            assert_eq!(l.when(&key), expected);
            expected *= 2;
        }
        assert_eq!(l.num_requeues(&key), 10);
        // 5ms * 2^17 = 655.36s, 2^18 would be 1310.72s: capped at 1000s from then on.
        let l = default_controller_rate_limiter::<String>();
        let mut last = Duration::ZERO;
        for _ in 0..18 {
            last = l.when(&key);
        }
        assert_eq!(last, Duration::from_millis(655_360));
        assert_eq!(l.when(&key), Duration::from_secs(1000));
        assert_eq!(l.when(&key), Duration::from_secs(1000));

        l.forget(&key);
        assert_eq!(l.num_requeues(&key), 0);
        assert_eq!(l.when(&key), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_spaces_by_one_over_qps() {
        let b = BucketRateLimiter::new(10.0, 100);
        for i in 0..100 {
            assert_eq!(RateLimiter::<u32>::when(&b, &i), Duration::ZERO, "call {i}");
        }
        // The bucket is empty; each reservation goes 100ms further into debt.
        for n in 1..=5 {
            assert_eq!(RateLimiter::<u32>::when(&b, &0), ms(100 * n));
        }
        // One second refills 10 tokens: 5 pay off the debt, 5 are free.
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..5 {
            assert_eq!(RateLimiter::<u32>::when(&b, &0), Duration::ZERO);
        }
        assert_eq!(RateLimiter::<u32>::when(&b, &0), ms(100));
        assert_eq!(RateLimiter::<u32>::num_requeues(&b, &0), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn time_until_holding_counts_the_debt_and_reserves_nothing() {
        let bucket = BucketRateLimiter::new(10.0, 4);
        assert_eq!(bucket.time_until_holding(4.0), Duration::ZERO);
        for _ in 0..5 {
            RateLimiter::<()>::when(&bucket, &());
        }
        // One token in debt: two tokens are 300 ms away, however often we ask.
        assert_eq!(bucket.time_until_holding(2.0), Duration::from_millis(300));
        assert_eq!(bucket.time_until_holding(2.0), Duration::from_millis(300));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(bucket.time_until_holding(2.0), Duration::from_millis(200));
        // More than the bucket can hold: never.
        assert_eq!(bucket.time_until_holding(5.0), Duration::MAX);
        assert_eq!(
            BucketRateLimiter::new(f64::INFINITY, 0).time_until_holding(1.0),
            Duration::ZERO
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_refill_is_capped_at_burst() {
        let b = BucketRateLimiter::new(10.0, 3);
        tokio::time::advance(Duration::from_secs(3600)).await;
        for _ in 0..3 {
            assert_eq!(RateLimiter::<u32>::when(&b, &0), Duration::ZERO);
        }
        assert_eq!(RateLimiter::<u32>::when(&b, &0), ms(100));
    }

    #[test]
    fn bucket_edge_cases() {
        let unlimited = BucketRateLimiter::new(f64::INFINITY, 0);
        assert_eq!(RateLimiter::<u32>::when(&unlimited, &0), Duration::ZERO);
        let never = BucketRateLimiter::new(10.0, 0);
        assert_eq!(RateLimiter::<u32>::when(&never, &0), Duration::MAX);
    }

    /// A limiter with a fixed answer and a failure counter, to test the combinator alone.
    struct Fixed {
        delay: Duration,
        count: Mutex<usize>,
    }

    impl RateLimiter<&'static str> for Fixed {
        fn when(&self, _key: &&'static str) -> Duration {
            *lock(&self.count) += 1;
            self.delay
        }
        fn forget(&self, _key: &&'static str) {
            *lock(&self.count) = 0;
        }
        fn num_requeues(&self, _key: &&'static str) -> usize {
            *lock(&self.count)
        }
    }

    #[test]
    fn max_of_takes_worst_and_forgets_all() {
        let l = MaxOfRateLimiter::new(vec![
            Box::new(Fixed {
                delay: ms(5),
                count: Mutex::new(0),
            }),
            Box::new(ItemExponentialFailureRateLimiter::new(
                ms(1),
                Duration::from_secs(1),
            )),
        ]);
        // exp gives 1,2,4,8,16: the fixed 5ms wins until exp overtakes it.
        let got: Vec<_> = (0..5).map(|_| l.when(&"one")).collect();
        assert_eq!(got, vec![ms(5), ms(5), ms(5), ms(8), ms(16)]);
        assert_eq!(l.num_requeues(&"one"), 5);
        l.forget(&"one");
        assert_eq!(l.num_requeues(&"one"), 0);
        assert_eq!(l.when(&"one"), ms(5));

        let empty = MaxOfRateLimiter::<&str>::new(Vec::new());
        assert_eq!(empty.when(&"x"), Duration::ZERO);
        assert_eq!(empty.num_requeues(&"x"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_bucket_wins_after_burst() {
        let l = default_controller_rate_limiter::<u32>();
        // 100 distinct keys each fail once: 5ms each, bucket drained.
        for k in 0..100 {
            assert_eq!(l.when(&k), ms(5));
        }
        // A fresh key would get 5ms from its own backoff, but the shared bucket says 100ms.
        assert_eq!(l.when(&100), ms(100));
        assert_eq!(l.when(&101), ms(200));
    }
}
