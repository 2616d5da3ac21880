//! An endpoint's addresses as every member holds them, once per endpoint of every hub copy: an
//! IP address in its canonical text form is held as the address itself (17 bytes, no
//! allocation) and an endpoint's one address inline, where a list of strings cost two
//! allocations per endpoint. Any other text (an FQDN endpoint, or an IP address written in a
//! non-canonical form) is held as it is, so every address reads back exactly as written.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    /// An IP address whose canonical text is the address as written.
    Ip(IpAddr),
    /// Anything else, as written.
    Text(Box<str>),
}

impl Address {
    /// `text`, held as an IP address when that reads back as `text`.
    pub fn new(text: &str) -> Self {
        match text.parse::<IpAddr>() {
            Ok(ip) if ip.to_string() == text => Self::Ip(ip),
            _ => Self::Text(text.into()),
        }
    }

    /// The address as written.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Ip(ip) => Cow::Owned(ip.to_string()),
            Self::Text(text) => Cow::Borrowed(text),
        }
    }

    /// Whether it is `text` as written.
    pub fn is(&self, text: &str) -> bool {
        match self {
            Self::Text(t) => &**t == text,
            Self::Ip(ip) => {
                text.parse::<IpAddr>().is_ok_and(|t| t == *ip) && ip.to_string() == text
            }
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip(ip) => ip.fmt(f),
            Self::Text(text) => f.write_str(text),
        }
    }
}

/// An endpoint's addresses (one, in practice), in order.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Addresses {
    One(Address),
    Many(Box<[Address]>),
}

impl Default for Addresses {
    fn default() -> Self {
        Self::Many(Box::default())
    }
}

impl Addresses {
    /// The addresses, in order.
    pub fn as_slice(&self) -> &[Address] {
        match self {
            Self::One(a) => std::slice::from_ref(a),
            Self::Many(all) => all,
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Each address as written.
    pub fn texts(&self) -> impl Iterator<Item = Cow<'_, str>> {
        self.as_slice().iter().map(Address::text)
    }

    /// The addresses as a list of strings (as an EndpointSlice holds them).
    pub fn to_strings(&self) -> Vec<String> {
        self.texts().map(Cow::into_owned).collect()
    }

    /// Whether they are `texts`, in order, each as written.
    pub fn are<S: AsRef<str>>(&self, texts: &[S]) -> bool {
        let mine = self.as_slice();
        mine.len() == texts.len() && mine.iter().zip(texts).all(|(a, t)| a.is(t.as_ref()))
    }
}

impl<S: AsRef<str>> From<&[S]> for Addresses {
    fn from(texts: &[S]) -> Self {
        match texts {
            [one] => Self::One(Address::new(one.as_ref())),
            all => Self::Many(all.iter().map(|t| Address::new(t.as_ref())).collect()),
        }
    }
}

impl<S: AsRef<str>> From<Vec<S>> for Addresses {
    fn from(texts: Vec<S>) -> Self {
        Self::from(texts.as_slice())
    }
}

impl fmt::Debug for Addresses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.as_slice().iter().map(|a| a.to_string()))
            .finish()
    }
}

/// As a list of strings.
impl Serialize for Addresses {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.as_slice().iter().map(|a| a.to_string()))
    }
}

/// From a list of strings (`null` reads as none).
impl<'de> Deserialize<'de> for Addresses {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Addresses;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of addresses")
            }
            fn visit_unit<E>(self) -> Result<Addresses, E> {
                Ok(Addresses::default())
            }
            fn visit_none<E>(self) -> Result<Addresses, E> {
                Ok(Addresses::default())
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Addresses, D::Error> {
                d.deserialize_seq(self)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Addresses, A::Error> {
                let Some(first) = seq.next_element::<Cow<'de, str>>()? else {
                    return Ok(Addresses::default());
                };
                let first = Address::new(&first);
                let Some(second) = seq.next_element::<Cow<'de, str>>()? else {
                    return Ok(Addresses::One(first));
                };
                let mut all = vec![first, Address::new(&second)];
                while let Some(next) = seq.next_element::<Cow<'de, str>>()? {
                    all.push(Address::new(&next));
                }
                Ok(Addresses::Many(all.into_boxed_slice()))
            }
        }
        deserializer.deserialize_option(Visitor)
    }
}

/// The schema of a list of strings.
impl JsonSchema for Addresses {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        <Vec<String>>::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<String>>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_reads_back_as_written() {
        for text in [
            "10.0.0.1",
            "fd00::1",
            "2001:db8::8:800:200c:417a",
            "::ffff:10.0.0.1",
            // Not canonical: held as text.
            "010.0.0.1",
            "FD00::1",
            "fd00:0::1",
            // Not an address at all (an FQDN endpoint).
            "web.example.com",
            "",
        ] {
            let a = Address::new(text);
            assert_eq!(a.text(), text);
            assert!(a.is(text), "{text}");
            assert_eq!(
                matches!(a, Address::Ip(_)),
                text.parse::<IpAddr>()
                    .is_ok_and(|ip| ip.to_string() == text),
                "{text}"
            );
        }
        assert!(!Address::new("10.0.0.1").is("10.0.0.2"));
        assert!(!Address::new("10.0.0.1").is("010.0.0.1"));
        assert!(!Address::new("fd00::1").is("FD00::1"));
    }

    #[test]
    fn lists_round_trip_through_json_and_compare_with_strings() {
        for texts in [
            vec![],
            vec!["10.0.0.1"],
            vec!["10.0.0.1", "web.example.com", "fd00::1"],
        ] {
            let addresses = Addresses::from(texts.clone());
            assert_eq!(addresses.to_strings(), texts);
            assert!(addresses.are(&texts));
            let json = serde_json::to_value(&addresses).unwrap_or_default();
            assert_eq!(json, serde_json::json!(texts));
            let back: Addresses = serde_json::from_str(&json.to_string())
                .unwrap_or_else(|e| panic!("{texts:?}: {e}"));
            assert_eq!(back, addresses);
        }
        let none: Addresses = serde_json::from_str("null").unwrap_or_else(|e| panic!("{e}"));
        assert!(none.is_empty());
        assert!(!Addresses::from(vec!["10.0.0.1"]).are(&["10.0.0.1", "10.0.0.2"]));
        assert!(matches!(
            Addresses::from(vec!["10.0.0.1"]),
            Addresses::One(Address::Ip(_))
        ));
    }

    #[test]
    fn its_schema_is_a_list_of_strings() {
        let mut generator = schemars::SchemaGenerator::default();
        assert_eq!(
            Addresses::json_schema(&mut generator),
            <Vec<String>>::json_schema(&mut generator)
        );
    }

    #[test]
    fn one_address_costs_no_allocation() {
        assert!(std::mem::size_of::<Addresses>() <= 32);
    }
}
