//! Free loopback ports for processes the tests start (etcd members, hub replicas), which must be
//! told their ports before they bind them.

use std::net::TcpListener;

/// `n` distinct free loopback ports. Every listener is held until all are picked, so the kernel
/// never hands out one port twice within a call. Another process may still take a port before
/// the caller's process binds it; callers retry on "address already in use".
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<std::io::Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}
