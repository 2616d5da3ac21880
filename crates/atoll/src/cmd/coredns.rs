//! `atoll coredns wire|unwire|check|print`: Atoll's `clusterset.local` block in the cluster's
//! CoreDNS Corefile (the ConfigMap `kube-system/coredns` by default, or a file), edited by
//! `atoll_core::corefile` with optimistic concurrency (read, edit, replace against the version
//! read, again on a conflict).

use std::path::PathBuf;

use anyhow::{Context, bail};
use atoll_core::corefile::{self, Edit, Wiring};
use atoll_core::corefile_input;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::PostParams;

use super::kubeconfig::{Cluster, ClusterHelp};

/// Arguments of `atoll coredns`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Add (or update) Atoll's clusterset.local block; no change when it is already there.
    Wire(WireArgs),
    /// Remove Atoll's block, leaving the rest of the Corefile as it was.
    Unwire(Where),
    /// Say whether the Corefile forwards clusterset.local to Atoll; exits 1 when it does not.
    Check(Where),
    /// Print the block to add by hand (managed clusters whose CoreDNS cannot be edited).
    Print(BlockArgs),
}

/// The cluster whose CoreDNS is wired, as the flags say.
#[derive(Debug, Clone)]
pub struct CorednsCluster;

impl ClusterHelp for CorednsCluster {
    const KUBECONFIG: &'static str =
        "Kubeconfig of the cluster (default: inferred, e.g. in-cluster)";
    const KUBECONFIG_ENV: Option<&'static str> = Some("ATOLL_KUBECONFIG");
    const CONTEXT: &'static str = "Context in --kubeconfig";
}

/// Which Corefile.
#[derive(Debug, Clone, clap::Args)]
pub struct Where {
    #[command(flatten)]
    pub cluster: Cluster<CorednsCluster>,
    /// Namespace of CoreDNS's ConfigMap.
    #[arg(long, default_value = "kube-system")]
    pub namespace: String,
    /// Name of CoreDNS's ConfigMap.
    #[arg(long, default_value = "coredns")]
    pub configmap: String,
    /// Key of the Corefile in the ConfigMap.
    #[arg(long, default_value = "Corefile")]
    pub key: String,
    /// Edit this Corefile on disk instead of the ConfigMap.
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub file: Option<PathBuf>,
    /// Print the new Corefile instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
}

/// What the block forwards to. Every value is checked as it is parsed
/// (`atoll_core::corefile_input`), so a value that could break the Corefile stops the command
/// before it reads or writes anything.
#[derive(Debug, Clone, clap::Args)]
pub struct BlockArgs {
    /// Where `atoll dns` answers, host:port: an IPv4 address, an IPv6 address in brackets or a
    /// DNS name, and a port from 1 to 65535 (repeat for several; default: the cluster IP of the
    /// Service atoll-system/atoll-dns, port 53).
    #[arg(long = "target", value_parser = corefile_input::target)]
    pub targets: Vec<String>,
    /// The zone: a DNS name, not the root.
    #[arg(long, default_value = "clusterset.local", value_parser = corefile_input::zone)]
    pub zone: String,
    /// Seconds CoreDNS caches answers (0: no cache; Atoll's TTL is 5 s); "no such name" at
    /// most 1 s whatever this is.
    #[arg(long, default_value_t = 5)]
    pub cache_seconds: u32,
    /// IP addresses the block binds to (default: CoreDNS's, every address).
    #[arg(long, value_parser = corefile_input::bind)]
    pub bind: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct WireArgs {
    #[command(flatten)]
    pub place: Where,
    #[command(flatten)]
    pub block: BlockArgs,
}

/// Runs the action; `Ok(false)` when `check` finds no wiring.
pub async fn run(args: Args) -> anyhow::Result<bool> {
    match args.action {
        Action::Print(block) => {
            let targets = if block.targets.is_empty() {
                vec!["<cluster IP of atoll-system/atoll-dns>:53".to_owned()]
            } else {
                block.targets.clone()
            };
            print!("{}", wiring(&block, targets).block());
            Ok(true)
        }
        Action::Check(place) => {
            let source = open(&place).await?;
            let text = read(&place, &source)
                .await?
                .ok_or_else(|| missing(&place))?
                .0;
            match corefile::wired(&text)? {
                Some(targets) => {
                    println!(
                        "{}: clusterset.local is forwarded to atoll dns at {}",
                        describe(&place),
                        targets.join(" ")
                    );
                    Ok(true)
                }
                None => {
                    println!(
                        "{}: clusterset.local is not wired to Atoll; run `atoll coredns wire` (or add the block `atoll coredns print` shows)",
                        describe(&place)
                    );
                    Ok(false)
                }
            }
        }
        Action::Unwire(place) => {
            let source = open(&place).await?;
            // No CoreDNS ConfigMap, nothing of Atoll's in it: an uninstall must not be blocked.
            edit(&place, &source, IfMissing::NothingToDo, |text| {
                Ok(corefile::unwire(text)?)
            })
            .await?;
            Ok(true)
        }
        Action::Wire(args) => {
            let source = open(&args.place).await?;
            let targets = if args.block.targets.is_empty() {
                vec![dns_service_target(&source).await?]
            } else {
                args.block.targets.clone()
            };
            let wiring = wiring(&args.block, targets);
            edit(&args.place, &source, IfMissing::Fail, |text| {
                Ok(corefile::wire(text, &wiring)?)
            })
            .await?;
            Ok(true)
        }
    }
}

/// The block's settings; the zone, targets and bind addresses were checked when parsed.
fn wiring(block: &BlockArgs, targets: Vec<String>) -> Wiring {
    Wiring {
        zone: block.zone.clone(),
        targets,
        cache_seconds: block.cache_seconds,
        bind: block.bind.clone(),
    }
}

fn describe(place: &Where) -> String {
    match &place.file {
        Some(path) => path.display().to_string(),
        None => format!(
            "ConfigMap {}/{} key {}",
            place.namespace, place.configmap, place.key
        ),
    }
}

/// Where the Corefile is, opened once: one client serves every call of the command.
enum Source {
    File(PathBuf),
    ConfigMap(Box<Api<ConfigMap>>),
}

async fn open(place: &Where) -> anyhow::Result<Source> {
    if let Some(path) = &place.file {
        return Ok(Source::File(path.clone()));
    }
    let client = place.cluster.client("cluster").await?;
    Ok(Source::ConfigMap(Box::new(Api::namespaced(
        client,
        &place.namespace,
    ))))
}

fn missing(place: &Where) -> anyhow::Error {
    anyhow::anyhow!(
        "{} does not exist: is CoreDNS the cluster's DNS? On managed clusters add the block `atoll coredns print` shows where the provider allows",
        describe(place)
    )
}

/// The Corefile's text and the ConfigMap it came from (none for a file); `None` when the
/// ConfigMap does not exist.
async fn read(
    place: &Where,
    source: &Source,
) -> anyhow::Result<Option<(String, Option<ConfigMap>)>> {
    let api = match source {
        Source::File(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            return Ok(Some((text, None)));
        }
        Source::ConfigMap(api) => api,
    };
    let Some(map) = api
        .get_opt(&place.configmap)
        .await
        .with_context(|| format!("reading {}", describe(place)))?
    else {
        return Ok(None);
    };
    let text = map
        .data
        .as_ref()
        .and_then(|d| d.get(&place.key))
        .cloned()
        .with_context(|| format!("{} has no key {}", describe(place), place.key))?;
    Ok(Some((text, Some(map))))
}

/// What an edit does when the ConfigMap does not exist.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IfMissing {
    Fail,
    NothingToDo,
}

/// Reads, edits and writes the Corefile, again from the start when the ConfigMap changed in
/// between (409 Conflict).
async fn edit(
    place: &Where,
    source: &Source,
    if_missing: IfMissing,
    change: impl Fn(&str) -> anyhow::Result<Edit>,
) -> anyhow::Result<()> {
    for _attempt in 0..5 {
        let Some((text, map)) = read(place, source).await? else {
            if if_missing == IfMissing::NothingToDo {
                println!("{}: does not exist, nothing to unwire", describe(place));
                return Ok(());
            }
            return Err(missing(place));
        };
        let new = match change(&text).with_context(|| describe(place))? {
            Edit::Unchanged => {
                println!("{}: already as asked, nothing written", describe(place));
                return Ok(());
            }
            Edit::Changed(new) => new,
        };
        if place.dry_run {
            print!("{new}");
            return Ok(());
        }
        match (source, map) {
            (Source::File(path), _) => {
                // Write beside it and rename, so a reader never sees half a file.
                let tmp = path.with_extension("atoll-tmp");
                std::fs::write(&tmp, &new).with_context(|| format!("writing {}", tmp.display()))?;
                std::fs::rename(&tmp, path)
                    .with_context(|| format!("replacing {}", path.display()))?;
            }
            (Source::ConfigMap(api), Some(mut map)) => {
                map.data
                    .get_or_insert_with(Default::default)
                    .insert(place.key.clone(), new);
                // The object carries the resourceVersion read: a concurrent change fails it.
                match api
                    .replace(&place.configmap, &PostParams::default(), &map)
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    Err(e) => {
                        return Err(e).with_context(|| format!("writing {}", describe(place)));
                    }
                }
            }
            (Source::ConfigMap(_), None) => bail!("read a ConfigMap without the object"),
        }
        println!("{}: updated", describe(place));
        return Ok(());
    }
    bail!(
        "{} kept changing while Atoll edited it; try again",
        describe(place)
    )
}

/// `<cluster IP of atoll-system/atoll-dns>:53`.
async fn dns_service_target(source: &Source) -> anyhow::Result<String> {
    let Source::ConfigMap(configmaps) = source else {
        bail!("with --file, say where atoll dns answers with --target host:port");
    };
    let service = Api::<Service>::namespaced((**configmaps).clone().into_client(), atoll_core::membership::SYSTEM_NAMESPACE)
        .get_opt("atoll-dns")
        .await
        .context("reading the Service atoll-system/atoll-dns")?
        .context("the Service atoll-system/atoll-dns does not exist: install the chart first, or pass --target")?;
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .filter(|ip| !ip.is_empty() && ip != "None")
        .context("the Service atoll-system/atoll-dns has no cluster IP yet")?;
    Ok(if ip.contains(':') {
        format!("[{ip}]:53")
    } else {
        format!("{ip}:53")
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        action: Action,
    }

    fn parse(args: &[&str]) -> Result<Action, String> {
        Cli::try_parse_from(["coredns"].iter().chain(args))
            .map(|cli| cli.action)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn values_that_could_break_the_corefile_stop_the_command_before_it_starts() {
        for (args, says) in [
            (&["print", "--zone", "."][..], "root"),
            (
                &["wire", "--file", "/nonexistent", "--zone", "."][..],
                "root",
            ),
            (&["print", "--zone", "a b"][..], "--zone"),
            (&["print", "--target", "10.0.0.1:53 }"][..], "--target"),
            (&["print", "--target", "10.0.0.1"][..], "port"),
            (&["print", "--target", "10.0.0.1:0"][..], "1 and 65535"),
            (&["print", "--target", "{10.0.0.1:53"][..], "--target"),
            (
                &["wire", "--file", "/nonexistent", "--target", "a\nb:53"][..],
                "--target",
            ),
            (&["print", "--bind", "eth0"][..], "not an IP address"),
            (
                &["print", "--bind", "127.0.0.1\"}"][..],
                "not an IP address",
            ),
        ] {
            let error = parse(args).expect_err(&format!("{args:?} accepted"));
            assert!(error.contains(says), "{args:?}: {error}");
        }
    }

    #[test]
    fn checked_values_reach_the_block_in_canonical_form() {
        let Ok(Action::Print(block)) = parse(&[
            "print",
            "--zone",
            "ClusterSet.Local.",
            "--target",
            "[FD00::53]:53",
            "--target",
            "Atoll-DNS.atoll-system.svc:5353",
            "--bind",
            "127.0.0.1",
        ]) else {
            panic!("valid arguments refused");
        };
        let text = wiring(&block, block.targets.clone()).block();
        assert!(text.contains("\nclusterset.local {\n"), "{text}");
        assert!(
            text.contains("forward . [fd00::53]:53 atoll-dns.atoll-system.svc:5353\n"),
            "{text}"
        );
        assert!(text.contains("bind 127.0.0.1\n"), "{text}");
    }
}
