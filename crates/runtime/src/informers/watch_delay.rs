//! A watch whose events reach the cache late, on purpose: each event is handed on a fixed delay after it
//! arrived, in order, so the caches lag the API server as a busy cluster's can (`mini-kcm up
//! --watch-delay 2s`, for learning; docs/tour-breaking.md). With the lag widened from milliseconds to
//! seconds, what a safety mechanism prevents (`crate::switches::safeties`) happens every time it is switched off.
//!
//! The watch is read as fast as it delivers while earlier events wait their turn, so the lag stays the
//! delay and does not grow with the number of events.

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::time::Instant;

/// `events`, each handed on `delay` after it arrived (unchanged for a zero delay).
pub(crate) fn delayed<T: Send + 'static>(
    events: impl Stream<Item = T> + Send + 'static,
    delay: Duration,
) -> BoxStream<'static, T> {
    if delay.is_zero() {
        return events.boxed();
    }
    let state = Delayed {
        events: events.boxed(),
        waiting: VecDeque::new(),
        ended: false,
        delay,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
    .boxed()
}

struct Delayed<T> {
    events: BoxStream<'static, T>,
    /// Events received and not yet handed on, with when each is due.
    waiting: VecDeque<(Instant, T)>,
    ended: bool,
    delay: Duration,
}

impl<T> Delayed<T> {
    /// The next event once it is due; `None` when the watch ended and nothing waits.
    async fn next(&mut self) -> Option<T> {
        loop {
            let due = self.waiting.front().map(|(at, _)| *at);
            if self.ended && due.is_none() {
                return None;
            }
            let until_due = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // `next` on a stream is cancel-safe: an event is never lost when the delay ends first.
                event = self.events.next(), if !self.ended => match event {
                    Some(event) => self.waiting.push_back((Instant::now() + self.delay, event)),
                    None => self.ended = true,
                },
                () = until_due => {
                    if let Some((_, event)) = self.waiting.pop_front() {
                        return Some(event);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_event_comes_its_delay_after_it_arrived_in_order() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let start = Instant::now();
        // The informer reads its watch all the time; so does this reader.
        let reader = tokio::spawn(async move {
            let events = delayed(tokio_stream_of(rx), Duration::from_secs(2));
            events
                .map(|event| (event, start.elapsed()))
                .collect::<Vec<_>>()
                .await
        });
        tx.send(1).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        tx.send(2).unwrap();
        drop(tx);
        assert_eq!(
            reader.await.unwrap(),
            [
                (1, Duration::from_secs(2)),
                (2, Duration::from_millis(2500))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_delay_is_the_watch_itself() {
        let mut events = delayed(futures::stream::iter([1, 2]), Duration::ZERO);
        let start = Instant::now();
        assert_eq!(events.next().await, Some(1));
        assert_eq!(events.next().await, Some(2));
        assert_eq!(events.next().await, None);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    fn tokio_stream_of<T: Send + 'static>(
        mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
    ) -> impl Stream<Item = T> + Send + 'static {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
