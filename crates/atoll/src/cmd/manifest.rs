//! Printing Kubernetes objects as multi-document YAML (`atoll crds`, `atoll rbac`,
//! `atoll admission-policy`), ready for `kubectl apply -f -` and for the Helm chart's files.

use std::io::Write;

use anyhow::Context;

/// One object as a YAML document body.
pub fn to_yaml(value: &impl serde::Serialize) -> anyhow::Result<String> {
    serde_saphyr::to_string(value).context("encoding an object as YAML")
}

/// Writes each document after a `---` line.
pub fn write_documents(out: &mut impl Write, documents: &[String]) -> anyhow::Result<()> {
    for document in documents {
        write!(out, "---\n{document}")?;
    }
    Ok(())
}

/// The documents of multi-document YAML, parsed (for tests of the printing commands).
#[cfg(test)]
pub fn parse_documents(text: &str) -> Vec<serde_json::Value> {
    text.split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect()
}
