//! `--limit SELECTOR`: which of the plan's hosts a command changes.
//!
//! A selector is a comma-separated list of items, each a host name, `role:R` (the plan's
//! roles: `control-plane`, `worker`) or `os:O` (`linux`, `windows`); repeated `--limit`
//! options and the items of one are united. An item that names nothing the plan has, or
//! matches no host, is a `limit` error naming the candidates (the closest first) — all of
//! them at once, before anything connects. `failed` chooses the hosts that did not finish
//! cleanly in the plan's last run ([`select_with`]). What the chosen hosts need from the others (the
//! hosts that are read, not changed) is the task graph's business: `graph::scope`.

use super::model::{Os, Role};
use super::LoadedPlan;
use crate::diag::{did_you_mean, Diagnostic, Diagnostics};
use std::collections::BTreeSet;

/// The hosts `selectors` choose, in a set; `Ok(None)` without selectors (every host).
pub fn select(
    plan: &LoadedPlan,
    selectors: &[String],
) -> Result<Option<BTreeSet<String>>, Diagnostics> {
    select_with(plan, selectors, &|| {
        Err("kwin knows no earlier run of this plan here".into())
    })
}

/// [`select`], where the item `failed` (unless a host has that name) is every host that did
/// not finish cleanly in the plan's last run, as `failed` gives them (the pipeline reads
/// them from the run's journal): Ansible's retry file, without a file.
pub fn select_with(
    plan: &LoadedPlan,
    selectors: &[String],
    failed: &dyn Fn() -> Result<Vec<String>, String>,
) -> Result<Option<BTreeSet<String>>, Diagnostics> {
    if selectors.is_empty() {
        return Ok(None);
    }
    let mut chosen = BTreeSet::new();
    let mut diags = Diagnostics::default();
    for sel in selectors {
        for item in sel.split(',').map(str::trim) {
            if item == FAILED && plan.host(FAILED).is_none() {
                match failed() {
                    // Hosts the plan no longer has are not chosen.
                    Ok(hosts) => {
                        chosen.extend(hosts.into_iter().filter(|h| plan.host(h).is_some()))
                    }
                    Err(why) => diags.push(
                        Diagnostic::error("limit", format!("--limit failed: {why}")).with_hint(
                            "`kwin show` tells the last run; name hosts, role:R or os:O instead",
                        ),
                    ),
                }
                continue;
            }
            match matches(plan, item) {
                Ok(hosts) => chosen.extend(hosts),
                Err(d) => diags.push(d),
            }
        }
    }
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(Some(chosen))
}

/// The selector item for the hosts that did not finish cleanly in the last run.
pub const FAILED: &str = "failed";

/// Why `kwin reset --limit` must not run: it chose the first control plane while other
/// nodes of the plan stay (their cluster would lose its API server and etcd under them).
/// `None`: no limit, or a subset that can go.
pub fn reset_refusal(plan: &LoadedPlan) -> Option<String> {
    plan.limit.as_ref()?;
    let first = plan.first_control_plane()?;
    if !plan.chosen(&first.name) {
        return None;
    }
    let staying: Vec<&str> = plan
        .nodes()
        .filter(|h| !plan.chosen(&h.name))
        .map(|h| h.name.as_str())
        .collect();
    if staying.is_empty() {
        return None;
    }
    Some(format!(
        "refusing `kwin reset --limit` with the first control plane {} while {} stay in the cluster: reset the whole cluster (without --limit), or reset those nodes first (--limit {})",
        first.name,
        staying.join(", "),
        staying.join(",")
    ))
}

/// The hosts one item matches (never none: that is the error).
fn matches(plan: &LoadedPlan, item: &str) -> Result<Vec<String>, Diagnostic> {
    let names: Vec<&str> = plan.hosts.iter().map(|h| h.name.as_str()).collect();
    let error = |summary: String, hint: String| Diagnostic::error("limit", summary).with_hint(hint);
    if item.is_empty() {
        return Err(error(
            "--limit: an empty item".into(),
            "give host names, role:R or os:O, separated by commas (e.g. --limit ww2,role:control-plane)"
                .into(),
        ));
    }
    let pick = |f: &dyn Fn(&super::ResolvedHost) -> bool| -> Vec<String> {
        plan.hosts
            .iter()
            .filter(|h| f(h))
            .map(|h| h.name.clone())
            .collect()
    };
    let (hosts, what) = if let Some(r) = item.strip_prefix("role:") {
        let roles = [
            ("control-plane", Role::ControlPlane),
            ("worker", Role::Worker),
        ];
        let Some((_, role)) = roles.iter().find(|(n, _)| *n == r) else {
            return Err(error(
                format!("--limit {item}: no role `{r}`"),
                candidates(r, roles.iter().map(|(n, _)| *n), "roles are"),
            ));
        };
        (pick(&|h| h.role == Some(*role)), "role")
    } else if let Some(o) = item.strip_prefix("os:") {
        let oses = [("linux", Os::Linux), ("windows", Os::Windows)];
        let Some((_, os)) = oses.iter().find(|(n, _)| *n == o) else {
            return Err(error(
                format!("--limit {item}: no OS `{o}`"),
                candidates(o, oses.iter().map(|(n, _)| *n), "the OSes are"),
            ));
        };
        (pick(&|h| h.os == *os), "os")
    } else {
        if !names.contains(&item) {
            return Err(error(
                format!("--limit {item}: the plan has no host `{item}`"),
                candidates(item, names.iter().copied(), "its hosts are"),
            ));
        }
        (vec![item.to_string()], "host")
    };
    if hosts.is_empty() {
        return Err(error(
            format!("--limit {item}: no host of the plan has this {what}"),
            candidates(item, names.iter().copied(), "its hosts are"),
        ));
    }
    Ok(hosts)
}

/// Candidates listed at most (a plan of 1,000 hosts names the first ones and the count).
const LISTED: usize = 20;

/// "did you mean `x`? the hosts are: a, b, c".
fn candidates<'a>(word: &str, all: impl Iterator<Item = &'a str> + Clone, are: &str) -> String {
    let all_list: Vec<&str> = all.clone().collect();
    let mut list = all_list
        .iter()
        .take(LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if all_list.len() > LISTED {
        list.push_str(&format!(", … ({} in all)", all_list.len()));
    }
    match did_you_mean(word, all) {
        Some(m) => format!("did you mean `{m}`? {are}: {list}"),
        None => format!("{are}: {list}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> LoadedPlan {
        let text = r#"
[[hosts]]
name = "cp1"
address = "10.0.0.1"
os = "linux"
role = "control-plane"

[[hosts]]
name = "ww1"
address = "10.0.0.2"
os = "windows"
role = "worker"
password_env = "P"

[[hosts]]
name = "ww2"
address = "10.0.0.3"
os = "windows"
role = "worker"
password_env = "P"

[[hosts]]
name = "plain"
address = "10.0.0.4"
os = "linux"
"#;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("plan.toml");
        std::fs::write(&path, text).expect("write");
        crate::plan::load(&path).unwrap_or_else(|d| panic!("{d}"))
    }

    fn sel(args: &[&str]) -> Result<Vec<String>, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        select(&plan(), &args)
            .map(|s| s.map(|s| s.into_iter().collect()).unwrap_or_default())
            .map_err(|d| d.to_string())
    }

    #[test]
    fn hosts_roles_and_oses_unite() {
        assert_eq!(sel(&[]), Ok(vec![]));
        assert_eq!(sel(&["ww2"]), Ok(vec!["ww2".to_string()]));
        assert_eq!(sel(&["os:windows"]), Ok(vec!["ww1".into(), "ww2".into()]));
        assert_eq!(
            sel(&["role:control-plane, plain", "ww1"]),
            Ok(vec!["cp1".into(), "plain".into(), "ww1".into()])
        );
    }

    #[test]
    fn reset_keeps_the_first_control_plane_while_nodes_stay() {
        let mut p = plan();
        p.limit = select(&p, &["ww2".to_string()]).expect("select");
        assert_eq!(reset_refusal(&p), None);
        p.limit = select(&p, &["cp1,ww1".to_string()]).expect("select");
        let e = reset_refusal(&p).expect("refused");
        assert!(e.contains("first control plane cp1 while ww2 stay"), "{e}");
        assert!(e.contains("--limit ww2"), "{e}");
        p.limit = select(&p, &["role:control-plane,os:windows".to_string()]).expect("select");
        assert_eq!(reset_refusal(&p), None, "every node goes");
        p.limit = None;
        assert_eq!(reset_refusal(&p), None);
    }

    #[test]
    fn unknown_names_and_empty_matches_name_the_candidates() {
        let e = sel(&["ww3"]).expect_err("unknown host");
        assert!(e.contains("error[limit]"), "{e}");
        assert!(
            e.contains("no host `ww3`") && e.contains("did you mean `ww2`?"),
            "{e}"
        );
        assert!(e.contains("cp1, ww1, ww2, plain"), "{e}");
        let e = sel(&["role:workers"]).expect_err("unknown role");
        assert!(e.contains("did you mean `worker`?"), "{e}");
        let e = sel(&["os:macos"]).expect_err("unknown os");
        assert!(e.contains("linux, windows"), "{e}");
        let e = sel(&["ww1,"]).expect_err("empty item");
        assert!(e.contains("empty item"), "{e}");
        // Every problem at once.
        let e = sel(&["nope", "role:boss"]).expect_err("two");
        assert!(e.contains("`nope`") && e.contains("`boss`"), "{e}");
    }
}
