//! The KEP-5939 hop of `atoll explain`: which selector decided which clusters this member
//! uses for the service, and whether its MCS EndpointSlices say the same.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::labels;
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::selection::{Candidate, SELECTORS_ANNOTATION, parse, select, serving};

/// What the hop found: whether it holds, what was found, and the fix when it does not.
pub struct Verdict {
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

fn ok(detail: String) -> Verdict {
    Verdict {
        ok: true,
        detail,
        fix: None,
    }
}

fn broken(detail: String, fix: String) -> Verdict {
    Verdict {
        ok: false,
        detail,
        fix: Some(fix),
    }
}

/// The verdict for `member`'s `import` and its MCS `slices`, with `properties` by cluster id;
/// `None` when the import carries no selectors.
pub fn verdict(
    member: &str,
    import: Option<&ServiceImport>,
    slices: &[EndpointSlice],
    properties: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<Verdict> {
    let text = import?
        .metadata
        .annotations
        .as_ref()?
        .get(SELECTORS_ANNOTATION)?;
    let selectors = match parse(text) {
        Ok(s) => s,
        Err(e) => {
            return Some(broken(
                format!("the import's selectors cannot be read ({e}): every cluster is used"),
                "fix the selectors on the oldest export of the service".to_owned(),
            ));
        }
    };
    // Each source cluster's slices: whether it serves, and how the slices are marked.
    let mut serves: BTreeMap<String, bool> = BTreeMap::new();
    let mut marked_active: BTreeSet<String> = BTreeSet::new();
    for slice in slices {
        let Some(l) = slice.metadata.labels.as_ref() else {
            continue;
        };
        let Some(cluster) = l.get(labels::SOURCE_CLUSTER) else {
            continue;
        };
        *serves.entry(cluster.clone()).or_default() |= slice.endpoints.iter().any(serving);
        if l.get(labels::ACTIVE).map(String::as_str) != Some("false") {
            marked_active.insert(cluster.clone());
        }
    }
    let none = BTreeMap::new();
    let importer = properties.get(member).unwrap_or(&none);
    let candidates: Vec<Candidate<'_>> = serves
        .iter()
        .map(|(cluster, serving)| Candidate {
            id: cluster,
            properties: properties.get(cluster).unwrap_or(&none),
            serving: *serving,
        })
        .collect();
    let selection = select(&selectors, importer, &candidates);
    let list = |set: &BTreeSet<String>| {
        if set.is_empty() {
            "none".to_owned()
        } else {
            set.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    let inactive: BTreeSet<String> = serves
        .keys()
        .filter(|c| !selection.active.contains(*c))
        .cloned()
        .collect();
    let why = match selection.decided_by {
        Some(i) => format!(
            "selector {} of {} ({}) picks clusters with serving endpoints",
            i + 1,
            selectors.len(),
            serde_json::to_string(&selectors[i].property_selector).unwrap_or_default()
        ),
        None => format!(
            "none of the {} selector(s) picks a cluster with a serving endpoint, so every cluster is used",
            selectors.len()
        ),
    };
    let detail = format!(
        "{why}: active {}; inactive {}",
        list(&selection.active),
        list(&inactive)
    );
    Some(if marked_active == selection.active {
        ok(detail)
    } else {
        broken(
            format!(
                "{detail}; but the MCS EndpointSlices mark {} active",
                list(&marked_active)
            ),
            format!(
                "check the agent in {} (`atoll status`) and that every member's ClusterProfile on the hub mirrors its ClusterProperties",
                member
            ),
        )
    })
}
