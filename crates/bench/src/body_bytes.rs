//! Bytes per write: the request bodies the API server read while one side ran.
//!
//! kube-apiserver records the size of every create, update, patch and delete body it reads in the
//! histogram `apiserver_request_body_size_bytes{group, resource, verb}`, with no label for the client.
//! The sides of a benchmark run one at a time, so the difference of its sums and counts between a
//! side's start and its stop covers that side's writes, the benchmark's own few (the scenario's create
//! or patch, the probe objects) and the plane's writes meanwhile (kwok's pod status patches, the
//! scheduler's bindings, node leases), which are the same work on both sides. The ratio between sides
//! therefore understates the controllers' own difference; mini-kcm writes JSON, kube-controller-manager
//! writes the kinds that have one in protobuf.

use kube::Client;

/// Sum and count of the write bodies the API server has read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BodyBytes {
    pub bytes: u64,
    pub writes: u64,
}

impl BodyBytes {
    /// Reads the API server's `/metrics`; `None` if they cannot be read.
    pub(crate) async fn read(client: &Client) -> Option<Self> {
        let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
        let text = client.request_text(request).await.ok()?;
        Some(Self::parse(&text))
    }

    /// The histogram's `_sum` and `_count` lines, summed over every group, resource and verb.
    fn parse(text: &str) -> Self {
        let sum_of = |name: &str| -> u64 {
            text.lines()
                .filter_map(|line| line.strip_prefix(name))
                .filter(|rest| rest.starts_with('{') || rest.starts_with(' '))
                .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
                .map(|value| value.max(0.0) as u64)
                .fold(0u64, u64::saturating_add)
        };
        BodyBytes {
            bytes: sum_of("apiserver_request_body_size_bytes_sum"),
            writes: sum_of("apiserver_request_body_size_bytes_count"),
        }
    }

    /// What was written between `self` (earlier) and `later`.
    pub(crate) fn until(self, later: Self) -> Self {
        BodyBytes {
            bytes: later.bytes.saturating_sub(self.bytes),
            writes: later.writes.saturating_sub(self.writes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_histogram_over_resources_and_verbs() {
        let text = "\
# HELP apiserver_request_body_size_bytes [ALPHA] Apiserver request body size in bytes broken out by resource and verb.
# TYPE apiserver_request_body_size_bytes histogram
apiserver_request_body_size_bytes_bucket{group=\"\",resource=\"pods\",verb=\"create\",le=\"50000\"} 500
apiserver_request_body_size_bytes_sum{group=\"\",resource=\"pods\",verb=\"create\"} 350000
apiserver_request_body_size_bytes_count{group=\"\",resource=\"pods\",verb=\"create\"} 500
apiserver_request_body_size_bytes_sum{group=\"apps\",resource=\"replicasets\",verb=\"update\"} 4.5e+04
apiserver_request_body_size_bytes_count{group=\"apps\",resource=\"replicasets\",verb=\"update\"} 20
apiserver_request_body_size_bytes_sum_other 99
";
        let read = BodyBytes::parse(text);
        assert_eq!(
            read,
            BodyBytes {
                bytes: 395_000,
                writes: 520
            }
        );
        let before = BodyBytes {
            bytes: 95_000,
            writes: 20,
        };
        assert_eq!(
            before.until(read),
            BodyBytes {
                bytes: 300_000,
                writes: 500
            }
        );
    }
}
