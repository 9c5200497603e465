//! The task graph: a DAG of tasks with edges from recipe order, `after` and data.
//!
//! [`TaskGraph::build`] adds one node per task, then runs an ordered list of small named
//! transforms ([`TRANSFORMS`]), each adding one kind of edge or checking one property:
//!
//! 1. [`AddRecipeOrderEdges`]: `Task::order` (a step follows the previous step of its recipe);
//! 2. [`AddAfterEdges`]: explicit `after`;
//! 3. [`AddSerialEdges`]: `serial` recipes (the first step of a batch's host follows the last
//!    steps of the batch before, `Task::serial`);
//! 4. [`AddDataEdges`]: `inputs` (a worker's join reads the control plane's join data);
//! 5. [`CheckCycles`]: a cycle is a diagnostic naming every task in it.
//!
//! An edge points from the dependency to the dependent. Two transforms adding the same pair keep
//! one edge of the stronger kind (data > after > serial > order). Every transform is linear in
//! tasks + edges, so 1,000 hosts build in milliseconds.
//!
//! The graph prints as Graphviz DOT (`kwin graph`: a cluster per host, data edges dashed) or as
//! sorted text (`--format text`, stable for golden tests).

pub mod scope;

use crate::diag::{Diagnostic, Diagnostics};
use crate::task::{Task, TaskId};
use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write;

/// Why one task waits for another. Ordered by strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// Recipe order.
    Order,
    /// A `serial` recipe's batch follows the batch before it.
    Serial,
    /// An explicit `after`.
    After,
    /// The target reads an output of the source.
    Data,
}

impl EdgeKind {
    /// The word `--format text` prints before the dependency.
    pub fn label(self) -> &'static str {
        match self {
            EdgeKind::Order => "follows",
            EdgeKind::Serial => "after-batch",
            EdgeKind::After => "after",
            EdgeKind::Data => "reads",
        }
    }
}

/// A graph under construction, handed to each [`Transform`] in turn.
#[derive(Debug)]
pub struct Builder {
    pub graph: DiGraph<Task, EdgeKind>,
    index: HashMap<TaskId, NodeIndex>,
    edges: HashMap<(NodeIndex, NodeIndex), EdgeIndex>,
    pub diags: Diagnostics,
}

impl Builder {
    fn new(tasks: Vec<Task>) -> Self {
        let mut graph = DiGraph::with_capacity(tasks.len(), tasks.len() * 2);
        let mut index = HashMap::with_capacity(tasks.len());
        let mut diags = Diagnostics::default();
        for t in tasks {
            let id = t.id.clone();
            let location = t.location.clone();
            let n = graph.add_node(t);
            if index.insert(id.clone(), n).is_some() {
                diags.push(
                    Diagnostic::error("task-duplicate", format!("task `{id}` is defined twice"))
                        .at(location),
                );
            }
        }
        Builder {
            graph,
            index,
            edges: HashMap::new(),
            diags,
        }
    }

    pub fn node(&self, id: &TaskId) -> Option<NodeIndex> {
        self.index.get(id).copied()
    }

    /// Add `from → to` of `kind`, or strengthen the existing edge between them.
    pub fn add_edge(&mut self, from: NodeIndex, to: NodeIndex, kind: EdgeKind) {
        match self.edges.get(&(from, to)) {
            Some(&e) => {
                if self.graph[e] < kind {
                    self.graph[e] = kind;
                }
            }
            None => {
                let e = self.graph.add_edge(from, to, kind);
                self.edges.insert((from, to), e);
            }
        }
    }

    /// Add an edge of `kind` from every dependency `deps(task)` names to the task. A dependency
    /// that is not in the graph is a diagnostic.
    pub fn add_edges_from(&mut self, kind: EdgeKind, deps: impl Fn(&Task) -> Vec<&TaskId>) {
        let mut add = Vec::new();
        for n in self.graph.node_indices() {
            let t = &self.graph[n];
            for dep in deps(t) {
                match self.index.get(dep) {
                    Some(&d) => add.push((d, n)),
                    None => self.diags.push(
                        Diagnostic::error(
                            "task-unknown-dep",
                            format!("task `{}` depends on `{dep}`, which does not exist", t.id),
                        )
                        .at(t.location.clone()),
                    ),
                }
            }
        }
        for (d, n) in add {
            self.add_edge(d, n, kind);
        }
    }
}

/// One step of graph construction.
pub trait Transform: Sync {
    fn name(&self) -> &'static str;
    fn transform(&self, b: &mut Builder);
}

pub struct AddRecipeOrderEdges;
pub struct AddAfterEdges;
pub struct AddSerialEdges;
pub struct AddDataEdges;
pub struct CheckCycles;

impl Transform for AddRecipeOrderEdges {
    fn name(&self) -> &'static str {
        "add-recipe-order-edges"
    }
    fn transform(&self, b: &mut Builder) {
        b.add_edges_from(EdgeKind::Order, |t| t.order.iter().collect());
    }
}

impl Transform for AddAfterEdges {
    fn name(&self) -> &'static str {
        "add-after-edges"
    }
    fn transform(&self, b: &mut Builder) {
        b.add_edges_from(EdgeKind::After, |t| t.after.iter().collect());
    }
}

impl Transform for AddSerialEdges {
    fn name(&self) -> &'static str {
        "add-serial-edges"
    }
    fn transform(&self, b: &mut Builder) {
        b.add_edges_from(EdgeKind::Serial, |t| t.serial.iter().collect());
    }
}

impl Transform for AddDataEdges {
    fn name(&self) -> &'static str {
        "add-data-edges"
    }
    fn transform(&self, b: &mut Builder) {
        b.add_edges_from(EdgeKind::Data, |t| {
            t.inputs.values().map(|i| &i.from).collect()
        });
    }
}

impl Transform for CheckCycles {
    fn name(&self) -> &'static str {
        "check-cycles"
    }
    fn transform(&self, b: &mut Builder) {
        for scc in petgraph::algo::kosaraju_scc(&b.graph) {
            let cyclic = scc.len() > 1 || b.graph.find_edge(scc[0], scc[0]).is_some();
            if cyclic {
                let d = cycle_diagnostic(&b.graph, &scc);
                b.diags.push(d);
            }
        }
    }
}

/// The transforms of [`TaskGraph::build`], in order.
pub const TRANSFORMS: &[&dyn Transform] = &[
    &AddRecipeOrderEdges,
    &AddAfterEdges,
    &AddSerialEdges,
    &AddDataEdges,
    &CheckCycles,
];

/// A cycle through the smallest task of a strongly connected component, naming every task of
/// the component.
fn cycle_diagnostic(g: &DiGraph<Task, EdgeKind>, scc: &[NodeIndex]) -> Diagnostic {
    let members: HashSet<NodeIndex> = scc.iter().copied().collect();
    let start = scc
        .iter()
        .copied()
        .min_by(|a, b| g[*a].id.cmp(&g[*b].id))
        .unwrap_or(scc[0]);
    // Shortest path start → ... → start inside the component (BFS over successors).
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    'bfs: while let Some(n) = queue.pop_front() {
        let mut next: Vec<NodeIndex> = g.neighbors(n).filter(|m| members.contains(m)).collect();
        next.sort_by(|a, b| g[*a].id.cmp(&g[*b].id));
        for m in next {
            if m == start {
                last = Some(n);
                break 'bfs;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(m) {
                e.insert(n);
                queue.push_back(m);
            }
        }
    }
    let mut path = Vec::new();
    let mut cur = last.unwrap_or(start);
    while cur != start {
        path.push(cur);
        match parent.get(&cur) {
            Some(&p) => cur = p,
            None => break,
        }
    }
    path.push(start);
    path.reverse();
    let mut names: Vec<String> = path.iter().map(|n| g[*n].id.to_string()).collect();
    names.push(g[start].id.to_string());
    let mut summary = format!("tasks form a cycle: {}", names.join(" -> "));
    let on_path: HashSet<NodeIndex> = path.iter().copied().collect();
    let mut others: Vec<String> = scc
        .iter()
        .filter(|n| !on_path.contains(n))
        .map(|n| g[*n].id.to_string())
        .collect();
    if !others.is_empty() {
        others.sort();
        let _ = write!(summary, " (also caught in it: {})", others.join(", "));
    }
    // Point at a task the user wrote, if any.
    let located = path
        .iter()
        .find(|n| matches!(g[**n].origin, crate::task::Origin::User { .. }))
        .or(path.first())
        .and_then(|n| g[*n].location.clone());
    Diagnostic::error("task-cycle", summary)
        .with_hint("remove one of the `after` entries that close the cycle")
        .at(located)
}

#[derive(Debug, Clone)]
pub struct TaskGraph {
    pub graph: DiGraph<Task, EdgeKind>,
    index: HashMap<TaskId, NodeIndex>,
}

impl TaskGraph {
    /// Build the DAG with [`TRANSFORMS`]. Errors: duplicate ids, unknown dependencies, cycles
    /// (each naming every task in it).
    pub fn build(tasks: Vec<Task>) -> Result<TaskGraph, Diagnostics> {
        Self::build_with(tasks, TRANSFORMS)
    }

    /// Build with a custom transform list (tests, tools).
    pub fn build_with(
        tasks: Vec<Task>,
        transforms: &[&dyn Transform],
    ) -> Result<TaskGraph, Diagnostics> {
        let mut b = Builder::new(tasks);
        for t in transforms {
            // A cycle check on a graph with dangling edges would report noise.
            if t.name() == CheckCycles.name() && b.diags.has_errors() {
                break;
            }
            t.transform(&mut b);
        }
        if b.diags.has_errors() {
            return Err(b.diags);
        }
        Ok(TaskGraph {
            graph: b.graph,
            index: b.index,
        })
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

    /// The direct dependencies of `n` with the kind of each edge.
    pub fn dependencies(&self, n: NodeIndex) -> impl Iterator<Item = (NodeIndex, EdgeKind)> + '_ {
        self.graph
            .edges_directed(n, Direction::Incoming)
            .map(|e| (e.source(), *e.weight()))
    }

    /// Whether `to` depends on `from`, directly or through other tasks.
    pub fn reaches(&self, from: NodeIndex, to: NodeIndex) -> bool {
        petgraph::algo::has_path_connecting(&self.graph, from, to, None)
    }

    /// All tasks in a topological order; ties broken by insertion order (plan and recipe
    /// order), so each host's tasks keep their written order where the edges allow.
    pub fn topo_order(&self) -> Vec<NodeIndex> {
        let mut indeg: Vec<usize> = self
            .graph
            .node_indices()
            .map(|n| {
                self.graph
                    .neighbors_directed(n, Direction::Incoming)
                    .count()
            })
            .collect();
        let mut ready: BTreeSet<usize> = (0..indeg.len()).filter(|&i| indeg[i] == 0).collect();
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

    /// Sorted text: one line per task (`host/task [module]`), then one indented line per
    /// dependency (`follows`, `after`, `reads`), sorted.
    pub fn to_text(&self) -> String {
        let mut blocks: Vec<(&TaskId, String)> = self
            .graph
            .node_indices()
            .map(|n| {
                let t = &self.graph[n];
                let mut deps: Vec<(&TaskId, &str)> = self
                    .dependencies(n)
                    .map(|(d, k)| (&self.graph[d].id, k.label()))
                    .collect();
                deps.sort();
                let mut s = format!("{} [{}]\n", t.id, t.module);
                for (id, label) in deps {
                    let _ = writeln!(s, "    {label} {id}");
                }
                (&t.id, s)
            })
            .collect();
        blocks.sort_by(|a, b| a.0.cmp(b.0));
        blocks.into_iter().map(|(_, s)| s).collect()
    }

    /// Graphviz DOT: one cluster per host, data edges dashed.
    pub fn to_dot(&self) -> String {
        let mut out = String::from(
            "digraph kwin {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
        );
        let mut by_host: BTreeMap<&str, Vec<NodeIndex>> = BTreeMap::new();
        for n in self.graph.node_indices() {
            by_host
                .entry(self.graph[n].id.host.as_str())
                .or_default()
                .push(n);
        }
        for (i, (host, nodes)) in by_host.iter_mut().enumerate() {
            nodes.sort_by(|a, b| self.graph[*a].id.cmp(&self.graph[*b].id));
            let _ = writeln!(
                out,
                "  subgraph cluster_{i} {{\n    label={};",
                dot_str(host)
            );
            for n in nodes.iter() {
                let t = &self.graph[*n];
                let label = format!("{}\\n[{}]", dot_escape(&t.id.name), dot_escape(&t.module));
                let _ = writeln!(
                    out,
                    "    {} [label=\"{label}\"];",
                    dot_str(&t.id.to_string())
                );
            }
            out.push_str("  }\n");
        }
        let mut edges: Vec<String> = self
            .graph
            .edge_references()
            .map(|e| {
                let style = match e.weight() {
                    EdgeKind::Order | EdgeKind::After => "",
                    EdgeKind::Serial => " [style=bold]",
                    EdgeKind::Data => " [style=dashed, label=\"data\"]",
                };
                format!(
                    "  {} -> {}{style};",
                    dot_str(&self.graph[e.source()].id.to_string()),
                    dot_str(&self.graph[e.target()].id.to_string())
                )
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

/// Escape `s` for the inside of a DOT double-quoted string.
fn dot_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out
}

/// `s` as a DOT double-quoted string.
fn dot_str(s: &str) -> String {
    format!("\"{}\"", dot_escape(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::InputRef;

    fn t(host: &str, name: &str, after: &[(&str, &str)]) -> Task {
        let mut task = Task::new(TaskId::new(host, name), "command", serde_json::json!({}));
        task.after = after.iter().map(|(h, n)| TaskId::new(*h, *n)).collect();
        task
    }

    #[test]
    fn cycle_names_every_task() {
        let err = TaskGraph::build(vec![
            t("h", "a", &[("h", "c")]),
            t("h", "b", &[("h", "a")]),
            t("h", "c", &[("h", "b")]),
            t("h", "d", &[]),
        ])
        .expect_err("cycle");
        let msg = err.to_string();
        assert!(
            msg.contains("tasks form a cycle: h/a -> h/b -> h/c -> h/a"),
            "{msg}"
        );
        assert!(!msg.contains("h/d"), "{msg}");
    }

    #[test]
    fn cycle_lists_members_off_the_shortest_path() {
        let err = TaskGraph::build(vec![
            t("h", "a", &[("h", "b"), ("h", "c")]),
            t("h", "b", &[("h", "a")]),
            t("h", "c", &[("h", "b")]),
        ])
        .expect_err("cycle");
        let msg = err.to_string();
        assert!(msg.contains("h/a -> h/b -> h/a"), "{msg}");
        assert!(msg.contains("also caught in it: h/c"), "{msg}");
    }

    #[test]
    fn self_loop_is_a_cycle() {
        let err = TaskGraph::build(vec![t("h", "a", &[("h", "a")])]).expect_err("cycle");
        assert!(err.to_string().contains("h/a -> h/a"), "{err}");
    }

    #[test]
    fn a_dependency_on_an_unknown_task_is_refused() {
        let err = TaskGraph::build(vec![t("h", "a", &[("h", "zz")])]).expect_err("dangling");
        assert!(err.to_string().contains("depends on `h/zz`"), "{err}");
    }

    #[test]
    fn a_task_defined_twice_is_refused() {
        let err = TaskGraph::build(vec![t("h", "a", &[]), t("h", "a", &[])]).expect_err("dup");
        assert!(err.to_string().contains("defined twice"), "{err}");
    }

    #[test]
    fn tasks_come_after_their_dependencies_and_print_as_text() {
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

    #[test]
    fn strongest_edge_kind_wins() {
        let a = t("cp", "join-data", &[]);
        let mut b = t("w", "join", &[("cp", "join-data")]);
        b.order = vec![TaskId::new("cp", "join-data")];
        b.inputs.insert(
            "token".into(),
            InputRef {
                from: TaskId::new("cp", "join-data"),
                key: "token".into(),
            },
        );
        let g = TaskGraph::build(vec![a, b]).expect("graph");
        assert_eq!(g.graph.edge_count(), 1);
        assert_eq!(
            g.to_text(),
            "cp/join-data [command]\nw/join [command]\n    reads cp/join-data\n"
        );
        let dot = g.to_dot();
        assert!(
            dot.contains("\"cp/join-data\" -> \"w/join\" [style=dashed, label=\"data\"];"),
            "{dot}"
        );
        assert!(
            dot.contains("subgraph cluster_0 {\n    label=\"cp\";"),
            "{dot}"
        );
    }

    #[test]
    fn transforms_are_named_and_ordered() {
        let names: Vec<&str> = TRANSFORMS.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "add-recipe-order-edges",
                "add-after-edges",
                "add-serial-edges",
                "add-data-edges",
                "check-cycles"
            ]
        );
        // Without the after transform, an `after`-only graph has no edges.
        let g = TaskGraph::build_with(
            vec![t("h", "b", &[("h", "a")]), t("h", "a", &[])],
            &[&AddRecipeOrderEdges, &CheckCycles],
        )
        .expect("graph");
        assert_eq!(g.graph.edge_count(), 0);
    }

    #[test]
    fn dot_escapes_quotes() {
        assert_eq!(dot_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
