//! Ports a member publishes: its Service's ports on a record (checked as the apiserver checks
//! a Service's) and its EndpointSlice's ports on a copy (as it checks an EndpointSlice's). An
//! importer writes both into its own cluster (derived Service, ServiceImport, MCS slices), so
//! anything the apiserver would refuse there must stop here, with the record or copy alone.

use std::collections::BTreeSet;

use atoll_api::multicluster::ServicePort;
use k8s_openapi::api::discovery::v1::EndpointPort;

use super::names::{is_dns_label, is_qualified_name};
use super::problem::{Problem, Reason, ensure};

/// Most ports one record may list. The apiserver sets no number for Services; this bound
/// (the hub CRD's `maxItems`) keeps a derived Service well inside an object's size limit.
pub const MAX_SERVICE_PORTS: usize = atoll_api::hub_bounds::MAX_RECORD_PORTS;
/// Most ports one EndpointSlice may list (the apiserver's `maxPorts`).
pub const MAX_SLICE_PORTS: usize = atoll_api::hub_bounds::MAX_COPY_PORTS;
/// The protocols a Service or EndpointSlice port may have.
pub const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

fn number(port: i32) -> Result<(), Problem> {
    ensure((1..=65535).contains(&port), Reason::Port, || {
        format!("port {port} is out of range (1-65535)")
    })
}

fn protocol(protocol: Option<&str>) -> Result<&str, Problem> {
    let protocol = protocol.unwrap_or("TCP");
    ensure(PROTOCOLS.contains(&protocol), Reason::Port, || {
        format!("protocol {protocol:?} is not TCP, UDP or SCTP")
    })?;
    Ok(protocol)
}

fn name(name: &str) -> Result<(), Problem> {
    ensure(is_dns_label(name), Reason::Port, || {
        format!("port name {name:?} is not a DNS label")
    })
}

fn app_protocol(value: Option<&str>) -> Result<(), Problem> {
    match value {
        None => Ok(()),
        Some(v) => ensure(is_qualified_name(v), Reason::Port, || {
            format!("appProtocol {v:?} is not a qualified name")
        }),
    }
}

/// A record's ports, as the apiserver checks a Service's: numbers 1-65535, TCP/UDP/SCTP, DNS
/// label names, named when there are several, no name and no (protocol, number) twice.
pub fn service_ports(ports: &[ServicePort]) -> Result<(), Problem> {
    ensure(ports.len() <= MAX_SERVICE_PORTS, Reason::Port, || {
        format!("{} ports, more than {MAX_SERVICE_PORTS}", ports.len())
    })?;
    let mut names = BTreeSet::new();
    let mut numbers = BTreeSet::new();
    for port in ports {
        number(port.port)?;
        let proto = protocol(port.protocol.as_deref())?;
        match port.name.as_deref() {
            Some(n) => name(n)?,
            None => ensure(ports.len() == 1, Reason::Port, || {
                format!(
                    "port {} has no name, which only a Service's single port may omit",
                    port.port
                )
            })?,
        }
        app_protocol(port.app_protocol.as_deref())?;
        ensure(names.insert(port.name.as_deref()), Reason::Port, || {
            format!(
                "port name {:?} is used twice",
                port.name.as_deref().unwrap_or_default()
            )
        })?;
        ensure(numbers.insert((proto, port.port)), Reason::Port, || {
            format!("port {}/{proto} is listed twice", port.port)
        })?;
    }
    Ok(())
}

/// A copy's ports, as the apiserver checks an EndpointSlice's: at most 100, DNS label names
/// (empty allowed) used once, TCP/UDP/SCTP, numbers 1-65535 when set.
pub fn slice_ports(ports: &[EndpointPort]) -> Result<(), Problem> {
    ensure(ports.len() <= MAX_SLICE_PORTS, Reason::Port, || {
        format!(
            "{} ports, more than an EndpointSlice's {MAX_SLICE_PORTS}",
            ports.len()
        )
    })?;
    let mut names = BTreeSet::new();
    for port in ports {
        let n = port.name.as_deref().unwrap_or_default();
        if !n.is_empty() {
            name(n)?;
        }
        ensure(names.insert(n), Reason::Port, || {
            format!("port name {n:?} is used twice")
        })?;
        protocol(port.protocol.as_deref())?;
        if let Some(p) = port.port {
            number(p)?;
        }
        app_protocol(port.app_protocol.as_deref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::port;

    #[test]
    fn service_ports_follow_the_apiserver() {
        assert_eq!(service_ports(&[port("", "TCP", 80)]), Ok(()));
        assert_eq!(
            service_ports(&[port("tcp", "TCP", 42), port("udp", "UDP", 42)]),
            Ok(())
        );
        let bad: Vec<Vec<ServicePort>> = vec![
            vec![port("tcp", "TCP", 0)],
            vec![port("tcp", "TCP", 70000)],
            vec![port("tcp", "ICMP", 42)],
            vec![port("Tcp", "TCP", 42)],
            vec![port("a_b", "TCP", 42)],
            vec![port(&"p".repeat(64), "TCP", 42)],
            vec![port("", "TCP", 42), port("b", "TCP", 43)],
            vec![port("a", "TCP", 42), port("a", "UDP", 43)],
            vec![port("a", "TCP", 42), port("b", "TCP", 42)],
            vec![ServicePort {
                app_protocol: Some("not qualified!".into()),
                ..port("a", "TCP", 1)
            }],
            (0..=MAX_SERVICE_PORTS as i32)
                .map(|i| port(&format!("p{i}"), "TCP", i + 1))
                .collect(),
        ];
        for ports in bad {
            assert_eq!(
                service_ports(&ports).map_err(|p| p.reason),
                Err(Reason::Port),
                "{ports:?}"
            );
        }
    }

    #[test]
    fn slice_ports_follow_the_apiserver() {
        let p = |name: &str, proto: Option<&str>, number: Option<i32>| EndpointPort {
            name: Some(name.to_owned()),
            protocol: proto.map(str::to_owned),
            port: number,
            app_protocol: None,
        };
        assert_eq!(
            slice_ports(&[p("", Some("TCP"), Some(8080)), p("h", None, None)]),
            Ok(())
        );
        for bad in [
            vec![p("a", Some("TCP"), Some(0))],
            vec![p("a", Some("TCP"), Some(65536))],
            vec![p("a", Some("XDP"), Some(1))],
            vec![p("", Some("TCP"), Some(1)), p("", Some("UDP"), Some(1))],
            vec![p("A", Some("TCP"), Some(1))],
            (0..=MAX_SLICE_PORTS)
                .map(|i| p(&format!("p{i}"), None, None))
                .collect(),
        ] {
            assert!(slice_ports(&bad).is_err(), "{bad:?}");
        }
    }
}
