//! Task outputs, read once per producer and shared by every consumer.
//!
//! When a module's plan asks for an input (`ModuleError::InputPending`), the consumer's host
//! worker waits until the producer task finished OK, then asks this cache. The first asker
//! runs the producer module's `output` script on the producer's host (the worker gives the
//! fetch); everyone else waits for and shares that answer (a `OnceCell` per producer). Every
//! value is a [`Secret`] and is added to the run's scrubber before anything else sees it; the
//! output's stdout is never logged.

use crate::secret::Secret;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

pub type Values = Arc<BTreeMap<String, Secret>>;
type Cell = Arc<OnceCell<Result<Values, String>>>;

#[derive(Default)]
pub struct Outputs {
    cells: Mutex<HashMap<NodeIndex, Cell>>,
}

impl Outputs {
    /// Outputs of `producer` (which must have finished OK): `fetch`ed by the first asker,
    /// shared with every later one.
    pub(crate) async fn get(
        &self,
        producer: NodeIndex,
        fetch: impl Future<Output = Result<Values, String>>,
    ) -> Result<Values, String> {
        let cell = {
            let mut cells = match self.cells.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            cells.entry(producer).or_default().clone()
        };
        cell.get_or_init(|| fetch).await.clone()
    }
}
