//! `metav1.Condition` as the MCS CRDs embed it, with the same validation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Status of a condition. Serialized as the strings `True`, `False` and `Unknown`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// One entry of `status.conditions`; field for field `metav1.Condition`.
///
/// `reason` and `message` are always serialized: the CRD requires both keys, and an empty
/// message is valid while a missing one is not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of condition in CamelCase or in foo.example.com/CamelCase.
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition, one of True, False, Unknown.
    pub status: ConditionStatus,
    /// The `.metadata.generation` the condition was set from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// Last time the condition transitioned from one status to another.
    pub last_transition_time: Time,
    /// Programmatic identifier of the reason for the last transition (CamelCase, commas allowed).
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// Human-readable message about the transition; may be empty.
    #[schemars(length(max = 32768))]
    pub message: String,
}

impl Condition {
    /// Whether `reason` satisfies the CRD's pattern; the apiserver rejects the whole status
    /// write otherwise, so writers check before they send.
    pub fn reason_is_valid(reason: &str) -> bool {
        let bytes = reason.as_bytes();
        let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
            return false;
        };
        reason.len() <= 1024
            && first.is_ascii_alphabetic()
            && (last.is_ascii_alphanumeric() || *last == b'_')
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_pattern_matches_the_crd() {
        for ok in ["Valid", "PortConflict,TypeConflict", "a", "A:b_c", "X_"] {
            assert!(Condition::reason_is_valid(ok), "{ok} should be valid");
        }
        for bad in [
            "",
            "1abc",
            "Port Conflict",
            "Ends,",
            "Ends:",
            "_x",
            "Ünicode",
        ] {
            assert!(!Condition::reason_is_valid(bad), "{bad} should be invalid");
        }
    }
}
