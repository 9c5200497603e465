//! The task graph: a DAG of tasks with edges from recipe order, `after`, and data (inputs).
//!
//! Built by [`TaskGraph::build`] from expanded tasks; a dangling reference or a cycle is a
//! diagnostic naming the tasks involved. Prints as DOT (`kwin graph`) or as sorted text
//! (`--format text`, stable for golden tests).

use crate::diag::{Diagnostic, Diagnostics};
use crate::task::{Task, TaskId};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// Recipe order or `after`.
    Order,
    /// The target reads an output of the source.
    Data,
}

#[derive(Debug, Clone)]
pub struct TaskGraph {
    pub graph: DiGraph<Task, EdgeKind>,
    index: HashMap<TaskId, NodeIndex>,
}

impl TaskGraph {
    /// Build the DAG. Errors: unknown dependency ids, cycles (naming every task in them).
    pub fn build(tasks: Vec<Task>) -> Result<TaskGraph, Diagnostics> {
        let mut graph = DiGraph::with_capacity(tasks.len(), tasks.len() * 2);
        let mut index = HashMap::with_capacity(tasks.len());
        let mut diags = Diagnostics::default();
        for t in tasks {
            let id = t.id.clone();
            let n = graph.add_node(t);
            if index.insert(id.clone(), n).is_some() {
                diags.push(Diagnostic::error(
                    "task-duplicate",
                    format!("task `{id}` is defined twice"),
                ));
            }
        }
        let nodes: Vec<NodeIndex> = graph.node_indices().collect();
        for n in nodes {
            let t = &graph[n];
            let mut edges = Vec::new();
            for dep in &t.after {
                edges.push((dep.clone(), EdgeKind::Order));
            }
            for input in t.inputs.values() {
                edges.push((input.from.clone(), EdgeKind::Data));
            }
            let me = t.id.clone();
            for (dep, kind) in edges {
                match index.get(&dep) {
                    Some(&d) => {
                        if graph.find_edge(d, n).is_none() {
                            graph.add_edge(d, n, kind);
                        }
                    }
                    None => diags.push(Diagnostic::error(
                        "task-unknown-dep",
                        format!("task `{me}` depends on `{dep}`, which does not exist"),
                    )),
                }
            }
        }
        if diags.has_errors() {
            return Err(diags);
        }
        let g = TaskGraph { graph, index };
        if let Some(cycle) = g.find_cycle() {
            let names: Vec<String> = cycle.iter().map(|n| g.graph[*n].id.to_string()).collect();
            return Err(Diagnostics(vec![Diagnostic::error(
                "task-cycle",
                format!("tasks form a cycle: {} -> {}", names.join(" -> "), names[0]),
            )
            .with_hint("remove one of the `after` entries in the cycle")]));
        }
        Ok(g)
    }

    fn find_cycle(&self) -> Option<Vec<NodeIndex>> {
        let sccs = petgraph::algo::kosaraju_scc(&self.graph);
        for scc in sccs {
            if scc.len() > 1 {
                // Order the members along the cycle.
                let set: std::collections::HashSet<_> = scc.iter().copied().collect();
                let mut cycle = vec![scc[0]];
                let mut cur = scc[0];
                loop {
                    let next = self
                        .graph
                        .neighbors(cur)
                        .find(|n| set.contains(n) && (!cycle.contains(n) || *n == scc[0]));
                    match next {
                        Some(n) if n == scc[0] => break,
                        Some(n) => {
                            cycle.push(n);
                            cur = n;
                        }
                        None => break,
                    }
                }
                return Some(cycle);
            }
            if scc.len() == 1 && self.graph.find_edge(scc[0], scc[0]).is_some() {
                return Some(scc);
            }
        }
        None
    }

    pub fn node(&self, id: &TaskId) -> Option<NodeIndex> {
        self.index.get(id).copied()
    }

    pub fn task(&self, n: NodeIndex) -> &Task {
        &self.graph[n]
    }

    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// All tasks in a topological order that keeps each host's tasks in plan order where the
    /// edges allow (stable: ties broken by insertion order).
    pub fn topo_order(&self) -> Vec<NodeIndex> {
        let mut indeg: Vec<usize> = self
            .graph
            .node_indices()
            .map(|n| {
                self.graph
                    .neighbors_directed(n, petgraph::Direction::Incoming)
                    .count()
            })
            .collect();
        let mut ready: std::collections::BTreeSet<usize> =
            (0..indeg.len()).filter(|&i| indeg[i] == 0).collect();
        let mut out = Vec::with_capacity(indeg.len());
        while let Some(i) = ready.pop_first() {
            let n = NodeIndex::new(i);
            out.push(n);
            for m in self.graph.neighbors(n) {
                indeg[m.index()] -= 1;
                if indeg[m.index()] == 0 {
                    ready.insert(m.index());
                }
            }
        }
        out
    }

    /// Sorted text form: one line per task (`host/task [module]`), then its dependencies.
    pub fn to_text(&self) -> String {
        let mut lines: Vec<String> = self
            .graph
            .node_indices()
            .map(|n| {
                let t = &self.graph[n];
                let mut deps: Vec<String> = self
                    .graph
                    .edges_directed(n, petgraph::Direction::Incoming)
                    .map(|e| {
                        use petgraph::visit::EdgeRef;
                        let kind = match e.weight() {
                            EdgeKind::Order => "after",
                            EdgeKind::Data => "reads",
                        };
                        format!("    {kind} {}", self.graph[e.source()].id)
                    })
                    .collect();
                deps.sort();
                let mut s = format!("{} [{}]", t.id, t.module);
                for d in deps {
                    s.push('\n');
                    s.push_str(&d);
                }
                s
            })
            .collect();
        lines.sort();
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }

    /// Graphviz DOT, one cluster per host.
    pub fn to_dot(&self) -> String {
        let mut out = String::from(
            "digraph kwin {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
        );
        let mut by_host: std::collections::BTreeMap<&str, Vec<NodeIndex>> = Default::default();
        for n in self.graph.node_indices() {
            by_host
                .entry(self.graph[n].id.host.as_str())
                .or_default()
                .push(n);
        }
        for (i, (host, nodes)) in by_host.iter().enumerate() {
            let _ = writeln!(out, "  subgraph cluster_{i} {{\n    label={:?};", host);
            for n in nodes {
                let t = &self.graph[*n];
                let _ = writeln!(
                    out,
                    "    {:?} [label={:?}];",
                    t.id.to_string(),
                    format!("{}\n[{}]", t.id.name, t.module)
                );
            }
            out.push_str("  }\n");
        }
        let mut edges: Vec<String> = self
            .graph
            .edge_indices()
            .filter_map(|e| {
                let (a, b) = self.graph.edge_endpoints(e)?;
                let style = match self.graph[e] {
                    EdgeKind::Order => "",
                    EdgeKind::Data => " [style=dashed, label=\"data\"]",
                };
                Some(format!(
                    "  {:?} -> {:?}{style};",
                    self.graph[a].id.to_string(),
                    self.graph[b].id.to_string()
                ))
            })
            .collect();
        edges.sort();
        for e in edges {
            out.push_str(&e);
            out.push('\n');
        }
        out.push_str("}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Origin;

    fn t(host: &str, name: &str, after: &[(&str, &str)]) -> Task {
        Task {
            id: TaskId::new(host, name),
            module: "command".into(),
            params: serde_json::json!({}),
            origin: Origin::User { index: 0 },
            after: after.iter().map(|(h, n)| TaskId::new(*h, *n)).collect(),
            inputs: Default::default(),
        }
    }

    #[test]
    fn cycle_names_every_task() {
        let err = TaskGraph::build(vec![
            t("h", "a", &[("h", "c")]),
            t("h", "b", &[("h", "a")]),
            t("h", "c", &[("h", "b")]),
        ])
        .expect_err("cycle");
        let msg = err.to_string();
        for n in ["h/a", "h/b", "h/c"] {
            assert!(msg.contains(n), "{msg}");
        }
    }

    #[test]
    fn topo_and_text() {
        let g =
            TaskGraph::build(vec![t("h", "b", &[("h", "a")]), t("h", "a", &[])]).expect("graph");
        let order: Vec<String> = g
            .topo_order()
            .iter()
            .map(|n| g.task(*n).id.to_string())
            .collect();
        assert_eq!(order, ["h/a", "h/b"]);
        assert_eq!(g.to_text(), "h/a [command]\nh/b [command]\n    after h/a\n");
    }
}
