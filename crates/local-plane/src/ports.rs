//! Free TCP ports on 127.0.0.1, so several planes (and parallel test binaries) can run side by side.

use std::net::TcpListener;

use crate::PlaneError;

/// Asks the kernel for `n` distinct free ports on 127.0.0.1.
///
/// All listeners are held until every port is chosen so the kernel cannot hand out one port twice;
/// they are released just before the components bind them.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, PlaneError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PlaneError::io("reserving a free port on 127.0.0.1", e))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PlaneError::io("reading a reserved port", e))
}

/// Whether something is listening on `port` on 127.0.0.1 (used to prove a stopped plane freed its ports).
pub fn port_in_use(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct() {
        let ports = free_ports(5).unwrap();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5);
        assert!(ports.iter().all(|p| *p != 0));
    }

    #[test]
    fn a_bound_port_is_in_use() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(port_in_use(listener.local_addr().unwrap().port()));
    }
}
