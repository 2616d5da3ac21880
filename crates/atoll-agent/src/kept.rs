//! The liveness decisions this member's agent keeps (`atoll_core::liveness::Persisted`), in a
//! ConfigMap of the member: read before the first pass and by every new leader, so a restarted
//! or newly elected agent continues from its predecessor's decisions; written by the leader
//! through the writer.
//!
//! A ConfigMap rather than the imports' status (a withdrawn cluster's imports may be gone, and
//! decisions are per cluster, not per service) or an annotation on the election Lease (which
//! exists only with an election and is renewed every two seconds): one small object per
//! member, written only when a decision changes, that `kubectl get` and `atoll status` can read.
//!
//! Safety never depends on it (an importer uses a cluster only once it has seen it beat), so
//! reading it is strict in what it takes and patient in how: only NotFound means a new member;
//! any other error or a timeout is retried ([`Reader`]) and nothing is written meanwhile; text
//! that cannot be read is copied aside ([`ASIDE_CONFIG_MAP`]) before anything overwrites it.

use std::time::Duration;

use atoll_api::keys::ObjectKey;
use atoll_core::liveness::Persisted;
use atoll_core::reconciler::KeptRead;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;

/// Name of the ConfigMap, in the agent's namespace.
pub const CONFIG_MAP: &str = atoll_core::membership::KEPT_CONFIG_MAP;
/// Where unreadable kept text is copied before it is overwritten.
pub const ASIDE_CONFIG_MAP: &str = atoll_core::membership::KEPT_ASIDE_CONFIG_MAP;
/// Its data key.
pub const DATA_KEY: &str = atoll_core::liveness::KEPT_DATA_KEY;

/// How long one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How soon a failed read is tried again; the delay doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Why the kept decisions could not be taken (yet).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading ConfigMap {key} failed: {source}")]
    Api {
        key: ObjectKey,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("reading ConfigMap {key} took longer than {READ_TIMEOUT:?}")]
    Timeout { key: ObjectKey },
    #[error(
        "ConfigMap {key} holds no kept decisions this agent can read ({problem}); copying it to {ASIDE_CONFIG_MAP} failed: {source}"
    )]
    Aside {
        key: ObjectKey,
        problem: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// What the member holds.
#[derive(Debug)]
pub enum Stored {
    /// Readable kept decisions (absurd values refused and named).
    Found(Persisted, Vec<String>),
    /// No ConfigMap: a new member.
    Absent,
    /// Text this agent cannot read, and what is wrong with it.
    Unreadable(String, String),
}

/// Reads what the member holds, once, and writes nothing (`atoll status` reads it too).
pub async fn look(member: &Client, key: &ObjectKey) -> Result<Stored, ReadError> {
    let api: Api<ConfigMap> = Api::namespaced(member.clone(), &key.namespace);
    let got = tokio::time::timeout(READ_TIMEOUT, api.get_opt(&key.name))
        .await
        .map_err(|_| ReadError::Timeout { key: key.clone() })?
        .map_err(|e| ReadError::Api {
            key: key.clone(),
            source: Box::new(e),
        })?;
    let Some(config_map) = got else {
        return Ok(Stored::Absent);
    };
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .cloned()
        .unwrap_or_default();
    Ok(match Persisted::parse_checked(&text) {
        Ok((kept, refused)) => Stored::Found(kept, refused),
        Err(problem) => Stored::Unreadable(text, problem.to_string()),
    })
}

/// Reads what a predecessor kept, once: `Found`, `Absent` (NotFound: a new member), or an
/// error. Unreadable text is copied aside first and then counts as absent (logged, with what
/// was wrong); absurd values in readable text are refused one by one and logged.
pub async fn read(member: &Client, key: &ObjectKey) -> Result<KeptRead, ReadError> {
    match look(member, key).await? {
        Stored::Found(kept, refused) => {
            for value in &refused {
                tracing::warn!(config_map = %key, %value, "an absurd kept value is refused");
            }
            Ok(KeptRead::Found(kept))
        }
        Stored::Absent => Ok(KeptRead::Absent),
        Stored::Unreadable(text, problem) => {
            keep_aside(member, key, &text, &problem)
                .await
                .map_err(|e| ReadError::Aside {
                    key: key.clone(),
                    problem: problem.clone(),
                    source: Box::new(e),
                })?;
            tracing::warn!(config_map = %key, aside = ASIDE_CONFIG_MAP, %problem, "the kept liveness decisions are unreadable: copied aside, every source cluster is judged afresh");
            Ok(KeptRead::Absent)
        }
    }
}

/// Copies unreadable kept text to [`ASIDE_CONFIG_MAP`] (what was wrong in an annotation).
async fn keep_aside(
    member: &Client,
    key: &ObjectKey,
    text: &str,
    problem: &str,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(member.clone(), &key.namespace);
    let aside = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": ASIDE_CONFIG_MAP,
            "namespace": key.namespace,
            "labels": { "app.kubernetes.io/managed-by": "atoll" },
            "annotations": {
                "atoll.dev/copied-from": key.name,
                "atoll.dev/problem": problem.chars().take(1024).collect::<String>(),
            },
        },
        "data": { DATA_KEY: text },
    });
    let params = PatchParams::apply("atoll-agent").force();
    api.patch(ASIDE_CONFIG_MAP, &params, &Patch::Apply(&aside))
        .await
        .map(|_| ())
}

/// Reads the kept decisions in a task of its own whenever asked, retrying until a read
/// succeeds, so the reconcile loop (and the heartbeat with it) never waits on the member's
/// ConfigMap.
#[derive(Debug)]
pub struct Reader {
    ask: mpsc::UnboundedSender<()>,
    answers: mpsc::UnboundedReceiver<KeptRead>,
}

impl Reader {
    /// Starts the reading task.
    pub fn start(
        member: Client,
        key: ObjectKey,
        failures: prometheus_client::metrics::counter::Counter,
    ) -> Self {
        let (ask, mut asked) = mpsc::unbounded_channel::<()>();
        let (answer, answers) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while asked.recv().await.is_some() {
                // Asked again meanwhile: one read answers every ask.
                while asked.try_recv().is_ok() {}
                let mut delay = FIRST_RETRY;
                let read = loop {
                    match read(&member, &key).await {
                        Ok(read) => break read,
                        Err(error) => {
                            failures.inc();
                            tracing::warn!(%error, retry_in = ?delay, "the kept liveness decisions cannot be read: nothing is kept until they are (every source cluster is judged afresh meanwhile)");
                            tokio::time::sleep(delay).await;
                            delay = (delay * 2).min(MAX_RETRY);
                        }
                    }
                };
                if answer.send(read).is_err() {
                    return;
                }
            }
        });
        Self { ask, answers }
    }

    /// Asks for a (new) read.
    pub fn ask(&self) {
        let _ = self.ask.send(());
    }

    /// The answer to the last ask, if it has come.
    pub fn answer(&mut self) -> Option<KeptRead> {
        let mut last = None;
        while let Ok(read) = self.answers.try_recv() {
            last = Some(read);
        }
        last
    }

    /// Waits up to `most` for an answer.
    pub async fn wait(&mut self, most: Duration) -> Option<KeptRead> {
        tokio::time::timeout(most, self.answers.recv())
            .await
            .ok()
            .flatten()
    }
}
