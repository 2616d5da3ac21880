//! The local ClusterSet (`make env-up`): one client per member cluster, found through
//! `ATOLL_KUBECONFIG` (default `~/.cache/atoll/env/kubeconfig`) and `ATOLL_CONTEXTS` (default
//! `kwok-c1,kwok-c2,kwok-c3`), and a fresh namespace per test in every cluster.

use std::fmt::Debug;
use std::path::PathBuf;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// One member cluster of the local ClusterSet.
#[derive(Clone)]
pub struct Member {
    /// The kubeconfig context, e.g. `kwok-c1`.
    pub context: String,
    /// A client for it.
    pub client: Client,
}

impl Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// The local ClusterSet: its kubeconfig and one [`Member`] per context.
#[derive(Debug, Clone)]
pub struct ClusterSet {
    /// Path of the kubeconfig holding every context.
    pub kubeconfig: PathBuf,
    /// Members in context order; the first is the hub.
    pub members: Vec<Member>,
}

/// Installs the ring crypto provider once; kube's rustls client needs one.
pub fn install_crypto_provider() {
    // A second install returns Err, which only means it is already there.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What every failure to reach the local ClusterSet says to do.
const HOW_TO_RUN: &str = "the end-to-end tests need the local ClusterSet: `make test` brings it \
     up, runs them and takes it down again; or start it with `make env-up` (plus \
     `hack/agents.sh start` and `hack/dns.sh start`) and run `cargo test -p atoll-e2e`. \
     A plain `cargo test` runs the unit tests only";

impl ClusterSet {
    /// Connects to every member named by the environment, failing with instructions when the
    /// ClusterSet is not running.
    pub async fn from_env() -> anyhow::Result<Self> {
        install_crypto_provider();
        let kubeconfig = match std::env::var_os("ATOLL_KUBECONFIG") {
            Some(path) => PathBuf::from(path),
            None => {
                let home = std::env::var_os("HOME")
                    .context("neither ATOLL_KUBECONFIG nor HOME is set")
                    .context(HOW_TO_RUN)?;
                PathBuf::from(home).join(".cache/atoll/env/kubeconfig")
            }
        };
        let contexts = std::env::var("ATOLL_CONTEXTS")
            .unwrap_or_else(|_| "kwok-c1,kwok-c2,kwok-c3".to_owned());
        Self::connect(kubeconfig, &contexts).await
    }

    /// Connects to `contexts` (comma-separated) of `kubeconfig`; every failure says what to run.
    async fn connect(kubeconfig: PathBuf, contexts: &str) -> anyhow::Result<Self> {
        Self::try_connect(kubeconfig, contexts)
            .await
            .context(HOW_TO_RUN)
    }

    async fn try_connect(kubeconfig: PathBuf, contexts: &str) -> anyhow::Result<Self> {
        let file = Kubeconfig::read_from(&kubeconfig).with_context(|| {
            format!(
                "no kubeconfig of the local ClusterSet at {} (ATOLL_KUBECONFIG)",
                kubeconfig.display()
            )
        })?;
        let mut members = Vec::new();
        for context in contexts.split(',').filter(|c| !c.is_empty()) {
            let options = KubeConfigOptions {
                context: Some(context.to_owned()),
                ..Default::default()
            };
            let config = Config::from_custom_kubeconfig(file.clone(), &options)
                .await
                .with_context(|| format!("context {context} in {}", kubeconfig.display()))?;
            let client =
                Client::try_from(config).with_context(|| format!("client for {context}"))?;
            client
                .apiserver_version()
                .await
                .with_context(|| format!("the apiserver of {context} does not answer"))?;
            members.push(Member {
                context: context.to_owned(),
                client,
            });
        }
        if members.is_empty() {
            bail!("ATOLL_CONTEXTS names no context");
        }
        Ok(Self {
            kubeconfig,
            members,
        })
    }

    /// Waits until no namespace is being deleted in any member: what earlier tests left
    /// terminating is still being withdrawn (records deleted, claims renewed, epochs kept)
    /// until it is gone, so a test that measures an idle ClusterSet starts after it.
    pub async fn wait_no_terminating_namespaces(
        &self,
        timeout: std::time::Duration,
    ) -> anyhow::Result<()> {
        crate::wait::wait_for("no namespace terminating", timeout, || async {
            let mut terminating = Vec::new();
            for member in &self.members {
                let list = Api::<Namespace>::all(member.client.clone())
                    .list(&Default::default())
                    .await
                    .with_context(|| format!("listing namespaces of {}", member.context))?;
                terminating.extend(
                    list.items
                        .iter()
                        .filter(|n| n.metadata.deletion_timestamp.is_some())
                        .map(|n| {
                            format!(
                                "{}/{}",
                                member.context,
                                n.metadata.name.as_deref().unwrap_or_default()
                            )
                        }),
                );
            }
            Ok(if terminating.is_empty() {
                Ok(())
            } else {
                Err(terminating)
            })
        })
        .await
    }

    /// Creates a namespace with a fresh name starting with `prefix` in every member.
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<TestNamespace> {
        self.namespace_in(prefix, &self.members).await
    }

    /// Creates a namespace with a fresh name starting with `prefix` in `members` only.
    pub async fn namespace_in(
        &self,
        prefix: &str,
        members: &[Member],
    ) -> anyhow::Result<TestNamespace> {
        let name = format!("{prefix}-{:08x}", rand::random::<u32>());
        for member in members {
            let ns = Namespace {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<Namespace>::all(member.client.clone())
                .create(&PostParams::default(), &ns)
                .await
                .with_context(|| format!("creating namespace {name} in {}", member.context))?;
        }
        Ok(TestNamespace {
            name,
            members: members.to_vec(),
        })
    }
}

/// A namespace that exists in every member for the length of one test.
#[derive(Debug)]
pub struct TestNamespace {
    /// Its name, the same in every member.
    pub name: String,
    members: Vec<Member>,
}

impl TestNamespace {
    /// Deletes the namespace everywhere (without waiting for finalization).
    pub async fn cleanup(self) -> anyhow::Result<()> {
        for member in &self.members {
            // A test that restarted a control plane may find its pooled connection to it closed
            // on the first request after: tried again, up to three times.
            let mut attempt = 0;
            loop {
                attempt += 1;
                match Api::<Namespace>::all(member.client.clone())
                    .delete(&self.name, &DeleteParams::background())
                    .await
                {
                    Ok(_) => break,
                    Err(kube::Error::Api(e)) if e.code == 404 => break,
                    Err(e) if attempt < 3 && !matches!(e, kube::Error::Api(_)) => {
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                    Err(e) => {
                        return Err(e).with_context(|| {
                            format!("deleting {} in {}", self.name, member.context)
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_cluster_set_the_error_says_what_to_run() {
        let missing = std::env::temp_dir().join(format!(
            "atoll-no-such-kubeconfig-{}",
            rand::random::<u64>()
        ));
        let error = ClusterSet::connect(missing.clone(), "kwok-c1")
            .await
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(error.contains("`make test`"), "{error}");
        assert!(error.contains("`make env-up`"), "{error}");
        assert!(error.contains(&missing.display().to_string()), "{error}");
    }
}
