//! One API client per controller, with client-side rate limiting like client-go's.
//!
//! kube-controller-manager gives each controller its own client limited to `--kube-api-qps` (20) with
//! bursts of `--kube-api-burst` (30), so one busy controller cannot starve the others or flood the API
//! server. kube's client has no such limiter, so this module adds one as a tower layer: each request
//! reserves a token from a bucket and waits until the token exists.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use mini_kcm_workqueue::{BucketRateLimiter, RateLimiter};
use tower::{Layer, Service};

/// Request rate limits of one controller's client.
#[derive(Debug, Clone, Copy)]
pub struct ClientRateLimit {
    pub qps: f32,
    pub burst: u32,
}

impl Default for ClientRateLimit {
    /// kube-controller-manager's defaults.
    fn default() -> Self {
        ClientRateLimit {
            qps: 20.0,
            burst: 30,
        }
    }
}

/// Builds a client from `config` whose requests are limited by `limit` (qps <= 0 disables the limit).
pub fn rate_limited_client(
    config: kube::Config,
    limit: ClientRateLimit,
) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    if limit.qps <= 0.0 {
        return Ok(builder.build());
    }
    Ok(builder.with_layer(&RateLimitLayer::new(limit)).build())
}

/// A tower layer that spaces requests by a token bucket.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<BucketRateLimiter>,
}

impl RateLimitLayer {
    pub fn new(limit: ClientRateLimit) -> Self {
        RateLimitLayer {
            bucket: Arc::new(BucketRateLimiter::new(f64::from(limit.qps), limit.burst)),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The service of [`RateLimitLayer`]: `poll_ready` waits for a token, then for the inner service.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<BucketRateLimiter>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was reserved and its time has come; consumed by the next `call`.
    permitted: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            let wait = self.wait.get_or_insert_with(|| {
                let delay: Duration = RateLimiter::<()>::when(self.bucket.as_ref(), &());
                Box::pin(tokio::time::sleep(delay))
            });
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    #[derive(Clone)]
    struct Echo;

    impl Service<u32> for Echo {
        type Response = u32;
        type Error = Infallible;
        type Future = std::future::Ready<Result<u32, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, r: u32) -> Self::Future {
            std::future::ready(Ok(r))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_are_spaced_by_qps() {
        use tower::ServiceExt;
        let mut service = RateLimitLayer::new(ClientRateLimit {
            qps: 10.0,
            burst: 3,
        })
        .layer(Echo);
        let start = tokio::time::Instant::now();
        for i in 0..5 {
            service.ready().await.unwrap();
            assert_eq!(service.call(i).await.unwrap(), i);
        }
        // 3 free (burst), then 2 more at 100 ms each.
        assert_eq!(start.elapsed(), Duration::from_millis(200));
    }
}
