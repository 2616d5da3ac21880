//! Wiring `clusterset.local` into a cluster's CoreDNS: Atoll's server block in a Corefile,
//! added and removed idempotently, as text edits that leave every other byte of the file as it
//! was (users' comments, other blocks, their order).
//!
//! The block is delimited by marker comments, so Atoll only ever touches what it wrote:
//!
//! ```text
//! # BEGIN atoll: clusterset.local -> atoll dns (managed by Atoll; `atoll coredns unwire` removes it)
//! clusterset.local {
//!     errors
//!     cache 5 {
//!         denial 9984 1
//!     }
//!     forward . 10.96.0.53:53
//! }
//! # END atoll
//! ```
//!
//! A server block for the zone that Atoll did not write (the user wired it by hand) is left
//! alone: wiring refuses with an error saying so, rather than answering the zone twice.

use crate::corefile_input::{self, InputError};

/// First line of Atoll's block (followed by a description).
pub const BEGIN_MARKER: &str = "# BEGIN atoll";
/// Last line of Atoll's block.
pub const END_MARKER: &str = "# END atoll";

/// Longest time CoreDNS caches "no such name" from `atoll dns`. A client that asks before the
/// service is imported (one waiting for it) gets the answer at most this long after `atoll dns`
/// has it; with CoreDNS's own floor for denials (5 s) it would wait up to 5 s. `denial CAPACITY
/// TTL` is understood by every CoreDNS that Kubernetes has shipped.
pub const DENIAL_CACHE_SECONDS: u32 = 1;
/// CoreDNS's default capacity of the denial cache (256 shards of 39), written out because the
/// `denial` line needs one before its TTL.
const DENIAL_CACHE_CAPACITY: u32 = 9984;

/// What to wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wiring {
    /// The zone, e.g. `clusterset.local`.
    pub zone: String,
    /// Where `atoll dns` answers: `host:port` entries for CoreDNS's `forward`.
    pub targets: Vec<String>,
    /// Seconds CoreDNS caches answers (0: no `cache` line); "no such name" at most
    /// [`DENIAL_CACHE_SECONDS`].
    pub cache_seconds: u32,
    /// Addresses the server block binds to (none: CoreDNS's default, every address).
    pub bind: Vec<String>,
}

impl Wiring {
    /// This wiring with its zone, targets and bind addresses checked ([`corefile_input`]) and
    /// in canonical form; an error names the first value that cannot go into a Corefile.
    pub fn checked(self) -> Result<Self, InputError> {
        Ok(Self {
            zone: corefile_input::zone(&self.zone)?,
            targets: self
                .targets
                .iter()
                .map(|t| corefile_input::target(t))
                .collect::<Result<_, _>>()?,
            cache_seconds: self.cache_seconds,
            bind: self
                .bind
                .iter()
                .map(|b| corefile_input::bind(b))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Atoll's block for this wiring, markers included, ending with a newline.
    pub fn block(&self) -> String {
        let mut out = format!(
            "{BEGIN_MARKER}: {zone} -> atoll dns (managed by Atoll; `atoll coredns unwire` removes it)\n{zone} {{\n",
            zone = self.zone
        );
        if !self.bind.is_empty() {
            out.push_str(&format!("    bind {}\n", self.bind.join(" ")));
        }
        out.push_str("    errors\n");
        match self.cache_seconds {
            0 => {}
            seconds if seconds <= DENIAL_CACHE_SECONDS => {
                out.push_str(&format!("    cache {seconds}\n"));
            }
            seconds => out.push_str(&format!(
                "    cache {seconds} {{\n        denial {DENIAL_CACHE_CAPACITY} {DENIAL_CACHE_SECONDS}\n    }}\n"
            )),
        }
        out.push_str(&format!(
            "    forward . {}\n}}\n{END_MARKER}\n",
            self.targets.join(" ")
        ));
        out
    }
}

/// Why a Corefile cannot be edited.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorefileError {
    #[error(
        "the Corefile has `{BEGIN_MARKER}` on line {line} but no `{END_MARKER}` after it: fix or remove Atoll's block by hand"
    )]
    Unterminated { line: usize },
    #[error(
        "the Corefile has more than one Atoll block (lines {first} and {second}): remove all but one by hand"
    )]
    Repeated { first: usize, second: usize },
    #[error(
        "the Corefile already has a server block for {zone} on line {line} that Atoll did not write: leaving it alone (remove it to let Atoll wire the zone, or keep it and skip `atoll coredns wire`)"
    )]
    ForeignBlock { zone: String, line: usize },
    #[error("nothing to forward to: give at least one target")]
    NoTarget,
    #[error(transparent)]
    Input(#[from] InputError),
}

/// The result of an edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// The file already is as asked.
    Unchanged,
    /// The new text of the file.
    Changed(String),
}

/// Byte range of Atoll's block (whole lines, markers included), if any.
fn find_block(corefile: &str) -> Result<Option<std::ops::Range<usize>>, CorefileError> {
    let mut start: Option<(usize, usize)> = None;
    let mut found: Option<(std::ops::Range<usize>, usize)> = None;
    let mut offset = 0;
    for (index, line) in corefile.split_inclusive('\n').enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with(BEGIN_MARKER) {
            if let Some((_, first)) = start {
                return Err(CorefileError::Unterminated { line: first });
            }
            if let Some((_, first)) = &found {
                return Err(CorefileError::Repeated {
                    first: *first,
                    second: index + 1,
                });
            }
            start = Some((offset, index + 1));
        } else if trimmed == END_MARKER
            && let Some((begin, first)) = start.take()
        {
            found = Some((begin..offset + line.len(), first));
        }
        offset += line.len();
    }
    if let Some((_, line)) = start {
        return Err(CorefileError::Unterminated { line });
    }
    Ok(found.map(|(range, _)| range))
}

/// Line number of a server block for `zone` outside `atoll` (Atoll's block range), if any.
fn foreign_block(
    corefile: &str,
    zone: &str,
    atoll: Option<&std::ops::Range<usize>>,
) -> Option<usize> {
    let zone = zone.trim_end_matches('.');
    let mut offset = 0;
    for (index, line) in corefile.split_inclusive('\n').enumerate() {
        let inside = atoll.is_some_and(|r| r.contains(&offset));
        offset += line.len();
        if inside {
            continue;
        }
        let code = line.split('#').next().unwrap_or("").trim();
        let Some(keys) = code.strip_suffix('{') else {
            continue;
        };
        // Server block keys: `zone[:port]`, optionally with a scheme (dns://, tls://).
        let names_zone = keys.split_whitespace().any(|key| {
            let key = key.split_once("://").map_or(key, |(_, rest)| rest);
            let host = key.rsplit_once(':').map_or(key, |(host, _)| host);
            host.trim_end_matches('.').eq_ignore_ascii_case(zone)
        });
        if names_zone {
            return Some(index + 1);
        }
    }
    None
}

/// Adds (or updates) Atoll's block. The block goes at the end of the file; an existing block
/// is replaced where it is. Refuses a wiring that [`Wiring::checked`] refuses, so nothing that
/// could break the Corefile is ever written.
pub fn wire(corefile: &str, wiring: &Wiring) -> Result<Edit, CorefileError> {
    if wiring.targets.is_empty() {
        return Err(CorefileError::NoTarget);
    }
    let wiring = &wiring.clone().checked()?;
    let existing = find_block(corefile)?;
    if let Some(line) = foreign_block(corefile, &wiring.zone, existing.as_ref()) {
        return Err(CorefileError::ForeignBlock {
            zone: wiring.zone.clone(),
            line,
        });
    }
    let block = wiring.block();
    let text = match existing {
        Some(range) if corefile[range.clone()] == block => return Ok(Edit::Unchanged),
        Some(range) => format!(
            "{}{block}{}",
            &corefile[..range.start],
            &corefile[range.end..]
        ),
        None if corefile.is_empty() || corefile.ends_with('\n') => format!("{corefile}{block}"),
        None => format!("{corefile}\n{block}"),
    };
    Ok(Edit::Changed(text))
}

/// Removes Atoll's block, and nothing else. (Wiring a file without a final newline added one
/// before the block; that newline stays.)
pub fn unwire(corefile: &str) -> Result<Edit, CorefileError> {
    Ok(match find_block(corefile)? {
        None => Edit::Unchanged,
        Some(range) => Edit::Changed(format!(
            "{}{}",
            &corefile[..range.start],
            &corefile[range.end..]
        )),
    })
}

/// The `forward` targets of Atoll's block, when the Corefile has one.
pub fn wired(corefile: &str) -> Result<Option<Vec<String>>, CorefileError> {
    let Some(range) = find_block(corefile)? else {
        return Ok(None);
    };
    Ok(Some(
        corefile[range]
            .lines()
            .find_map(|l| l.trim().strip_prefix("forward . "))
            .map(|t| t.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
    ))
}

#[cfg(test)]
#[path = "corefile_tests.rs"]
mod tests;
