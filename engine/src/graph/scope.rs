//! Which tasks of the graph a run under `--limit` works on ([`Scope`]).
//!
//! The chosen hosts' tasks run ([`TaskScope::Run`]); so does a task that acts for the chosen
//! hosts from another host (`Task::acts_for_chosen`: reset's drain on the first control
//! plane), and a step delegated on behalf of a chosen host (`Task::on_behalf_of`: an
//! upgrade's drain and uncordon of that node, run on the first control plane). Every task these depend on, directly or through others, on a host that is not
//! chosen is [`TaskScope::ReadOnly`]: its host is probed and the task planned, and it passes
//! only when its plan changes nothing (then its outputs, e.g. join data, may be read); a plan
//! that would change the host fails it, and its dependents, naming the host to include.
//! Everything else is [`TaskScope::Out`]: not part of the run, and a host with no task in the
//! run and not chosen is not connected to at all.

use super::TaskGraph;
use petgraph::graph::NodeIndex;
use petgraph::Direction;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What a run does with one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskScope {
    /// Planned and applied as without `--limit`.
    Run,
    /// Planned; it may not change its host.
    ReadOnly,
    /// Not part of the run.
    Out,
}

/// A host that is part of a limited run without being chosen, and why.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadOnlyHost {
    /// Its read-only tasks a task of another host in the run depends on directly.
    pub tasks: Vec<String>,
    /// The hosts of those dependents.
    pub for_hosts: Vec<String>,
    /// Its tasks that act for the chosen hosts (they may change it).
    pub acting: Vec<String>,
}

/// The tasks and hosts of a run: everything, or what `--limit` needs.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// `None`: no `--limit`, every task runs.
    limited: Option<Limited>,
}

#[derive(Debug, Clone)]
struct Limited {
    chosen: BTreeSet<String>,
    tasks: Vec<TaskScope>,
    read_only: BTreeMap<String, ReadOnlyHost>,
}

impl Scope {
    /// Every task, every host.
    pub fn all() -> Scope {
        Scope { limited: None }
    }

    /// The scope of `chosen` hosts in `graph` (see the module docs).
    pub fn limited(graph: &TaskGraph, chosen: &BTreeSet<String>) -> Scope {
        let g = &graph.graph;
        let mut tasks = vec![TaskScope::Out; g.node_count()];
        let mut queue = VecDeque::new();
        for n in g.node_indices() {
            let t = &g[n];
            let for_chosen = t.on_behalf_of.as_ref().is_some_and(|h| chosen.contains(h));
            if chosen.contains(&t.id.host) || t.acts_for_chosen || for_chosen {
                tasks[n.index()] = TaskScope::Run;
                queue.push_back(n);
            }
        }
        while let Some(n) = queue.pop_front() {
            for p in g.neighbors_directed(n, Direction::Incoming) {
                if tasks[p.index()] == TaskScope::Out {
                    tasks[p.index()] = TaskScope::ReadOnly;
                    queue.push_back(p);
                }
            }
        }
        let mut read_only: BTreeMap<String, ReadOnlyHost> = BTreeMap::new();
        for n in g.node_indices() {
            let t = &g[n];
            let host = &t.id.host;
            if chosen.contains(host) {
                continue;
            }
            match tasks[n.index()] {
                TaskScope::Out => {}
                TaskScope::Run => {
                    let r = read_only.entry(host.clone()).or_default();
                    r.acting.push(t.id.name.clone());
                }
                TaskScope::ReadOnly => {
                    let r = read_only.entry(host.clone()).or_default();
                    let mut frontier = false;
                    for d in g.neighbors_directed(n, Direction::Outgoing) {
                        let dep = &g[d];
                        if tasks[d.index()] != TaskScope::Out && dep.id.host != *host {
                            frontier = true;
                            if !r.for_hosts.contains(&dep.id.host) {
                                r.for_hosts.push(dep.id.host.clone());
                            }
                        }
                    }
                    if frontier {
                        r.tasks.push(t.id.name.clone());
                    }
                }
            }
        }
        for r in read_only.values_mut() {
            r.for_hosts.sort();
        }
        Scope {
            limited: Some(Limited {
                chosen: chosen.clone(),
                tasks,
                read_only,
            }),
        }
    }

    /// Only the chosen hosts' own tasks (`kwin facts`): nothing read only, nothing acting
    /// for them from elsewhere.
    pub fn chosen_only(&self, graph: &TaskGraph) -> Scope {
        let Some(l) = &self.limited else {
            return Scope::all();
        };
        let tasks = graph
            .graph
            .node_indices()
            .map(|n| {
                if l.chosen.contains(&graph.task(n).id.host) {
                    TaskScope::Run
                } else {
                    TaskScope::Out
                }
            })
            .collect();
        Scope {
            limited: Some(Limited {
                chosen: l.chosen.clone(),
                tasks,
                read_only: BTreeMap::new(),
            }),
        }
    }

    /// Whether `--limit` applies.
    pub fn is_limited(&self) -> bool {
        self.limited.is_some()
    }

    /// What the run does with task `n`.
    pub fn task(&self, n: NodeIndex) -> TaskScope {
        match &self.limited {
            None => TaskScope::Run,
            Some(l) => l.tasks.get(n.index()).copied().unwrap_or(TaskScope::Out),
        }
    }

    /// Whether host `name` is part of the run (connected to): chosen, or needed.
    pub fn has_host(&self, name: &str) -> bool {
        match &self.limited {
            None => true,
            Some(l) => l.chosen.contains(name) || l.read_only.contains_key(name),
        }
    }

    /// Whether `--limit` chose host `name` (every host without it).
    pub fn chosen(&self, name: &str) -> bool {
        self.limited
            .as_ref()
            .is_none_or(|l| l.chosen.contains(name))
    }

    /// The hosts that are part of the run without being chosen, and why.
    pub fn read_only_hosts(&self) -> Vec<(String, ReadOnlyHost)> {
        self.limited
            .as_ref()
            .map(|l| {
                l.read_only
                    .iter()
                    .map(|(h, r)| (h.clone(), r.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What to tell the operator to let `host` change: `--limit <chosen>,<host>`.
    pub fn include_hint(&self, host: &str) -> String {
        let mut all: Vec<&str> = self
            .limited
            .as_ref()
            .map(|l| l.chosen.iter().map(String::as_str).collect())
            .unwrap_or_default();
        all.push(host);
        format!("include it: --limit {}", all.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Task, TaskId};

    fn task(host: &str, name: &str, after: &[(&str, &str)]) -> Task {
        let mut t = Task::new(TaskId::new(host, name), "command", serde_json::json!({}));
        t.after = after.iter().map(|(h, n)| TaskId::new(*h, *n)).collect();
        t
    }

    fn chosen(hosts: &[&str]) -> BTreeSet<String> {
        hosts.iter().map(|h| h.to_string()).collect()
    }

    /// cp1: init → join-data → cni (after every join); ww1, ww2: join (after join-data); h3
    /// alone.
    fn graph() -> TaskGraph {
        let mut drain = task("cp1", "drain", &[]);
        drain.acts_for_chosen = true;
        let mut upgrade_drain = task("cp1", "upgrade-drain@ww2", &[]);
        upgrade_drain.on_behalf_of = Some("ww2".into());
        let mut other_drain = task("cp1", "upgrade-drain@ww1", &[]);
        other_drain.on_behalf_of = Some("ww1".into());
        TaskGraph::build(vec![
            upgrade_drain,
            other_drain,
            task("cp1", "init", &[]),
            task("cp1", "join-data", &[("cp1", "init")]),
            task("ww1", "join", &[("cp1", "join-data")]),
            task("ww2", "join", &[("cp1", "join-data")]),
            task("cp1", "cni", &[("ww1", "join"), ("ww2", "join")]),
            task("h3", "motd", &[]),
            drain,
        ])
        .unwrap_or_else(|d| panic!("{d}"))
    }

    fn scope_of(s: &Scope, g: &TaskGraph, host: &str, name: &str) -> TaskScope {
        s.task(g.node(&TaskId::new(host, name)).expect("task"))
    }

    #[test]
    fn the_chosen_run_what_they_need_is_read_only_the_rest_is_out() {
        let g = graph();
        let s = Scope::limited(&g, &chosen(&["ww2"]));
        assert_eq!(scope_of(&s, &g, "ww2", "join"), TaskScope::Run);
        assert_eq!(scope_of(&s, &g, "cp1", "join-data"), TaskScope::ReadOnly);
        assert_eq!(scope_of(&s, &g, "cp1", "init"), TaskScope::ReadOnly);
        assert_eq!(scope_of(&s, &g, "cp1", "cni"), TaskScope::Out);
        assert_eq!(scope_of(&s, &g, "ww1", "join"), TaskScope::Out);
        assert_eq!(scope_of(&s, &g, "cp1", "drain"), TaskScope::Run);
        // A step delegated on behalf of the chosen host runs; one for another host does not.
        assert_eq!(scope_of(&s, &g, "cp1", "upgrade-drain@ww2"), TaskScope::Run);
        assert_eq!(scope_of(&s, &g, "cp1", "upgrade-drain@ww1"), TaskScope::Out);
        assert!(s.has_host("ww2") && s.has_host("cp1"));
        assert!(!s.has_host("ww1") && !s.has_host("h3"));
        let ro = s.read_only_hosts();
        assert_eq!(ro.len(), 1);
        assert_eq!(ro[0].0, "cp1");
        assert_eq!(ro[0].1.tasks, vec!["join-data".to_string()]);
        assert_eq!(ro[0].1.for_hosts, vec!["ww2".to_string()]);
        let mut acting = ro[0].1.acting.clone();
        acting.sort();
        assert_eq!(acting, ["drain", "upgrade-drain@ww2"]);
        assert_eq!(s.include_hint("cp1"), "include it: --limit ww2,cp1");
        let own = s.chosen_only(&g);
        assert_eq!(scope_of(&own, &g, "ww2", "join"), TaskScope::Run);
        assert_eq!(scope_of(&own, &g, "cp1", "drain"), TaskScope::Out);
        assert!(!own.has_host("cp1") && own.read_only_hosts().is_empty());
    }

    #[test]
    fn without_limit_everything_runs() {
        let g = graph();
        let s = Scope::all();
        assert!(g.graph.node_indices().all(|n| s.task(n) == TaskScope::Run));
        assert!(s.has_host("h3") && s.read_only_hosts().is_empty());
        // A chosen host that depends on nobody needs no other host.
        let s = Scope::limited(&g, &chosen(&["h3"]));
        assert!(s.has_host("h3") && !s.has_host("ww2"));
        assert_eq!(scope_of(&s, &g, "cp1", "init"), TaskScope::Out);
    }
}
