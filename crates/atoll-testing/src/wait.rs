//! Waiting for the ClusterSet to show something, with the last observation in the error.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::bail;

/// Polls `probe` every 100 ms until it returns `Ok(Some(value))` or `timeout` passes. On
/// timeout the error names `what` and shows the last observation the probe reported.
pub async fn wait_for<T, O, F, Fut>(
    what: &str,
    timeout: Duration,
    mut probe: F,
) -> anyhow::Result<T>
where
    O: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<T, O>>>,
{
    let start = Instant::now();
    loop {
        let last = match probe().await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(observed)) => format!("{observed:?}"),
            Err(e) => format!("error: {e:#}"),
        };
        if start.elapsed() >= timeout {
            bail!(
                "timed out after {:.1} s waiting for {what}; last seen: {last}",
                timeout.as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
