//! `atoll crds`: print every CRD as multi-document YAML (or a JSON List).

use std::io::Write;

use anyhow::Context;

/// Output format of `atoll crds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Multi-document YAML, one CRD per document.
    Yaml,
    /// A JSON `List` of CRDs.
    Json,
}

/// Arguments of `atoll crds`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// Writes the CRDs to `out`.
pub fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let crds = atoll_api::crd::all().context("building the CRDs")?;
    match args.output {
        Format::Yaml => {
            for crd in &crds {
                let yaml = serde_saphyr::to_string(crd).context("encoding a CRD as YAML")?;
                write!(out, "---\n{yaml}")?;
            }
        }
        Format::Json => {
            let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": crds });
            serde_json::to_writer_pretty(&mut *out, &list)?;
            writeln!(out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_output_is_one_document_per_crd_and_parses_back() {
        let mut out = Vec::new();
        run(
            &Args {
                output: Format::Yaml,
            },
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let docs: Vec<&str> = text
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .collect();
        assert_eq!(docs.len(), atoll_api::crd::all().unwrap().len());
        for doc in docs {
            let crd: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
            assert_eq!(crd["kind"], "CustomResourceDefinition");
            let versions = crd["spec"]["versions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let storage = versions.iter().filter(|v| v["storage"] == true).count();
            assert_eq!(
                storage, 1,
                "exactly one storage version in {}",
                crd["metadata"]["name"]
            );
        }
    }
}
