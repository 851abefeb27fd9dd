//! The coordinator's UDP socket, with a receive buffer sized for thousands of agents.
//!
//! Linux gives a UDP socket `net.core.rmem_default` (often 208 KiB) of receive buffer. Thousands
//! of QUIC connections sending a batch each second, with TLS handshakes after a coordinator
//! restart, overflow that in bursts: the kernel drops datagrams (`RcvbufErrors` in
//! `/proc/net/snmp`), handshakes time out, and agents that should connect do not. So the
//! coordinator asks for a larger buffer; the kernel caps the request at `net.core.rmem_max`,
//! which the operator may need to raise (see docs/install.md).

use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

use crate::{Error, Result};

/// A bound UDP socket and the receive buffer the kernel actually granted.
#[derive(Debug)]
pub struct BoundUdp {
    pub socket: UdpSocket,
    /// Bytes, as `getsockopt(SO_RCVBUF)` reports them (Linux reports double the usable size).
    pub receive_buffer: usize,
}

/// Binds `addr`, asking for `receive_buffer` bytes of receive buffer (0: the system default).
pub fn bind_udp(addr: SocketAddr, receive_buffer: usize) -> Result<BoundUdp> {
    let io = |source: std::io::Error| Error::Io {
        path: addr.to_string().into(),
        source,
    };
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(io)?;
    if addr.is_ipv6() {
        // Dual-stack when bound to [::], as quinn's own bind does.
        let _ = socket.set_only_v6(false);
    }
    if receive_buffer > 0 {
        socket.set_recv_buffer_size(receive_buffer).map_err(io)?;
    }
    socket.bind(&addr.into()).map_err(io)?;
    let receive_buffer = socket.recv_buffer_size().map_err(io)?;
    Ok(BoundUdp {
        socket: socket.into(),
        receive_buffer,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn asks_for_a_larger_receive_buffer_than_the_default() {
        let default = bind_udp("127.0.0.1:0".parse().unwrap(), 0).unwrap();
        let larger = bind_udp("127.0.0.1:0".parse().unwrap(), 4 * default.receive_buffer).unwrap();
        // Capped by net.core.rmem_max, but never smaller than what an unconfigured socket gets.
        assert!(larger.receive_buffer >= default.receive_buffer);
        assert!(larger.socket.local_addr().unwrap().port() != 0);
    }
}
