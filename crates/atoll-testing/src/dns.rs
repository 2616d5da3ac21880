//! Asking the local ClusterSet's `atoll dns` servers (`hack/dns.sh`; their ports are
//! [`crate::dns_port`]) over UDP, decoding with hickory-proto.

use std::net::{IpAddr, UdpSocket};
use std::time::Duration;

use anyhow::Context;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

/// Sends one query to 127.0.0.1:`port` and returns the response.
pub fn ask(port: u16, name: &str, rtype: RecordType) -> anyhow::Result<Message> {
    let mut query = Message::query();
    query.metadata.id = rand::random();
    query.metadata.recursion_desired = true;
    query.add_query(Query::query(Name::from_ascii(name)?, rtype));
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.set_read_timeout(Some(Duration::from_secs(2)))?;
    socket.send_to(&query.to_vec()?, ("127.0.0.1", port))?;
    let mut buf = [0u8; 65535];
    let (len, _) = socket
        .recv_from(&mut buf)
        .with_context(|| format!("no DNS answer from 127.0.0.1:{port}"))?;
    Ok(Message::from_vec(&buf[..len])?)
}

/// The response code and the sorted A/AAAA addresses of an answer.
pub fn addresses(message: &Message) -> (ResponseCode, Vec<IpAddr>) {
    let mut ips: Vec<IpAddr> = message
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
    ips.sort();
    (message.metadata.response_code, ips)
}
