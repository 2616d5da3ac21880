//! The third-party programs `hack/build-tools.sh` put in Atoll's cache, for tests that run them.

use std::path::PathBuf;

/// `~/.cache/atoll/<tool>-<version>/bin/<binary>` (or under `ATOLL_CACHE`), the version read
/// from `hack/versions.env`'s `<version_key>=` line; an error naming the build command when it
/// is missing.
pub fn cached_tool(version_key: &str, tool: &str, binary: &str) -> anyhow::Result<PathBuf> {
    let hack = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../hack");
    let versions = std::fs::read_to_string(hack.join("versions.env"))?;
    let prefix = format!("{version_key}=");
    let version = versions
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .ok_or_else(|| anyhow::anyhow!("no {version_key} in hack/versions.env"))?;
    let cache = std::env::var_os("ATOLL_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/atoll"),
        PathBuf::from,
    );
    let path = cache.join(format!("{tool}-{version}/bin/{binary}"));
    anyhow::ensure!(
        path.exists(),
        "{} is missing: run hack/build-tools.sh {tool}",
        path.display()
    );
    Ok(path)
}
