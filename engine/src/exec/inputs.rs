//! Task outputs, read once per producer and shared by every consumer.
//!
//! When a module's plan asks for an input (`ModuleError::InputPending`), the consumer's host
//! worker waits until the producer task finished OK, then asks this cache. The first asker
//! runs the producer module's `output` script on the producer's host; everyone else waits for
//! and shares that answer (a `OnceCell` per producer). Every value is a [`Secret`] and is added
//! to the run's scrubber before anything else sees it; the output's stdout is never logged.

use super::conn::{Backoff, LogStdout};
use super::walker::Shared;
use crate::secret::Secret;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

pub type Values = Arc<BTreeMap<String, Secret>>;
type Cell = Arc<OnceCell<Result<Values, String>>>;

#[derive(Default)]
pub struct Outputs {
    cells: Mutex<HashMap<NodeIndex, Cell>>,
}

impl Outputs {
    /// Outputs of `producer` (which must have finished OK), fetched at most once per run.
    pub(crate) async fn get(&self, sh: &Shared, producer: NodeIndex) -> Result<Values, String> {
        let cell = {
            let mut cells = match self.cells.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            cells.entry(producer).or_default().clone()
        };
        cell.get_or_init(|| fetch(sh, producer)).await.clone()
    }
}

async fn fetch(sh: &Shared, producer: NodeIndex) -> Result<Values, String> {
    let task = sh.graph.task(producer);
    let module = sh.modules[producer.index()]
        .as_ref()
        .map_err(|e| e.to_string())?;
    let conn = sh
        .conns
        .get(&task.id.host)
        .ok_or_else(|| format!("host `{}` is not part of this run", task.id.host))?;
    let script = module.output(conn.shell()).ok_or_else(|| {
        format!(
            "module `{}` has no outputs (this is a bug in kwin's recipes)",
            task.module
        )
    })?;
    let out = conn
        .run_idempotent(
            &format!("output of {}", task.id.name),
            &script,
            sh.opts.step_timeout,
            Backoff::new(sh.opts.retries, sh.opts.retry_delay),
            LogStdout::TaskOutputs,
        )
        .await
        .map_err(|e| e.to_string())?;
    let values = parse_outputs(&out.stdout);
    for v in values.values() {
        sh.scrubber.add(v);
    }
    if !out.success() {
        return Err(format!(
            "output script exited with {}: {}",
            out.exit,
            sh.scrubber
                .scrub(last_lines(&String::from_utf8_lossy(&out.stderr), 3).as_str())
        ));
    }
    Ok(Arc::new(values))
}

/// `key=value` lines; other lines are ignored.
pub fn parse_outputs(stdout: &[u8]) -> BTreeMap<String, Secret> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_end_matches('\r');
            let (k, v) = l.split_once('=')?;
            let k = k.trim();
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), Secret::new(v)))
        })
        .collect()
}

/// The last `n` non-empty lines of `text`, joined by `; `.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_key_value_lines() {
        let o = parse_outputs(b"token=abc.def\r\nnoise\nhash=sha256:1=2\n=x\n");
        assert_eq!(o.len(), 2);
        assert_eq!(o["token"].expose(), "abc.def");
        assert_eq!(o["hash"].expose(), "sha256:1=2");
        assert_eq!(last_lines("a\n\nb\nc\n", 2), "b; c");
    }
}
