//! What a controller tells about itself: Kubernetes Events on the objects it manages ([`events`],
//! correlated and spam-filtered as client-go's recorder does), the decisions behind each sync with their
//! reasons ([`decisions`], what `mini-kcm explain` and the live view show), Prometheus metrics
//! ([`metrics`]) and the point-in-time views of queues, expectations and informers ([`inspect`]).

pub(crate) mod counter;
pub mod decisions;
pub(crate) mod event_correlation;
pub mod events;
pub mod inspect;
pub mod metrics;
