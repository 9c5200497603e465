//! Expansion of the upgrade features: `serial`, `delegate`, step guards, `step@host`.

use super::*;
use crate::graph::TaskGraph;

/// A cluster of one control plane and `workers` Linux workers (`w1`..), in plan order.
fn plan(workers: usize, tasks: &str) -> LoadedPlan {
    let mut text = String::from(
        "[cluster]\nname = \"lab\"\nkubernetes_version = \"1.31.4\"\n[cni]\nplugin = \"flannel\"\n\
         [[hosts]]\nname = \"cp1\"\naddress = \"192.168.1.10\"\nos = \"linux\"\nrole = \"control-plane\"\ntransport = \"local\"\n",
    );
    for i in 1..=workers {
        text.push_str(&format!(
            "[[hosts]]\nname = \"w{i}\"\naddress = \"192.168.1.{}\"\nos = \"linux\"\nrole = \"worker\"\ntransport = \"local\"\n",
            20 + i
        ));
    }
    text.push_str(tasks);
    crate::plan::load_str(std::path::Path::new("/lab/plan.toml"), &text).expect("plan loads")
}

const WORKER: &str = r#"
recipe = "up"
applies = { roles = ["worker"] }
serial = 2
[[steps]]
name = "drain"
module = "command"
delegate = "first_control_plane"
[steps.params]
run = "drain {{ host.name }}"
[[steps]]
name = "pkgs"
module = "command"
if_exists = "/etc/kubernetes/kubelet.conf"
[steps.params]
run = "upgrade"
[[steps]]
name = "uncordon"
module = "command"
delegate = "first_control_plane"
after = ["pkgs"]
[steps.params]
run = "uncordon {{ host.name }}"
"#;

const READY: &str = r#"
recipe = "ready"
applies = { first_control_plane = true }
[[steps]]
name = "nodes-ready"
module = "command"
after = ["@all:uncordon"]
[steps.params]
run = "true"
"#;

fn tasks(p: &LoadedPlan, recipes: &[(&str, &str)]) -> Vec<Task> {
    expand(p, recipes).unwrap_or_else(|d| panic!("{d}"))
}

fn find<'t>(ts: &'t [Task], id: &str) -> &'t Task {
    ts.iter()
        .find(|t| t.id.to_string() == id)
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn ids(v: &[TaskId]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

#[test]
fn delegated_steps_run_on_the_first_control_plane_for_their_host() {
    let p = plan(2, "");
    let ts = tasks(&p, &[("up.toml", WORKER), ("ready.toml", READY)]);
    let drain = find(&ts, "cp1/drain@w1");
    assert_eq!(drain.on_behalf_of.as_deref(), Some("w1"));
    // Rendered with w1's context.
    assert_eq!(drain.params["run"], "drain w1");
    // In w1's step order, across hosts.
    assert_eq!(ids(&find(&ts, "w1/pkgs").order), ["cp1/drain@w1"]);
    let unc = find(&ts, "cp1/uncordon@w2");
    assert_eq!(ids(&unc.order), ["w2/pkgs"]);
    // `after = ["pkgs"]` is w2's own step.
    assert_eq!(ids(&unc.after), ["w2/pkgs"]);
    // `@all:uncordon` names every host's delegated uncordon.
    let mut all = ids(&find(&ts, "cp1/nodes-ready").after);
    all.sort();
    assert_eq!(all, ["cp1/uncordon@w1", "cp1/uncordon@w2"]);
}

#[test]
fn serial_batches_chain_each_batch_after_the_one_before() {
    assert_eq!(
        serial_batches(&[1, 2, 3, 4, 5], 2),
        [&[1, 2][..], &[3, 4], &[5]]
    );
    assert_eq!(serial_batches(&[1, 2], 0), [&[1][..], &[2]]);
    assert!(serial_batches::<u8>(&[], 3).is_empty());
    let p = plan(5, "");
    let ts = tasks(&p, &[("up.toml", WORKER)]);
    // Batches of 2: [w1 w2] [w3 w4] [w5].
    for w in ["w1", "w2"] {
        assert!(find(&ts, &format!("cp1/drain@{w}")).serial.is_empty());
    }
    for w in ["w3", "w4"] {
        assert_eq!(
            ids(&find(&ts, &format!("cp1/drain@{w}")).serial),
            ["cp1/uncordon@w1", "cp1/uncordon@w2"]
        );
    }
    assert_eq!(
        ids(&find(&ts, "cp1/drain@w5").serial),
        ["cp1/uncordon@w3", "cp1/uncordon@w4"]
    );
    // Only a batch's first step waits.
    assert!(find(&ts, "w3/pkgs").serial.is_empty());
    let g = TaskGraph::build(ts).expect("graph");
    let text = g.to_text();
    assert!(
        text.contains("cp1/drain@w5 [command]\n    after-batch cp1/uncordon@w3\n    after-batch cp1/uncordon@w4\n"),
        "{text}"
    );
}

#[test]
fn serial_may_be_a_template_of_the_plan() {
    let up = WORKER.replace("serial = 2", "serial = \"{{ cluster.control_planes }}\"");
    let ts = tasks(&plan(3, ""), &[("up.toml", &up)]);
    assert_eq!(ids(&find(&ts, "cp1/drain@w2").serial), ["cp1/uncordon@w1"]);
    assert_eq!(ids(&find(&ts, "cp1/drain@w3").serial), ["cp1/uncordon@w2"]);
    let bad = WORKER.replace("serial = 2", "serial = \"{{ cluster.name }}\"");
    let err = expand(&plan(1, ""), &[("up.toml", &bad)])
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("recipe-serial") || err.contains("`serial` is \"lab\""),
        "{err}"
    );
    assert!(err.contains("up.toml:4:"), "{err}");
    let zero = WORKER.replace("serial = 2", "serial = 0");
    let err = expand(&plan(1, ""), &[("up.toml", &zero)])
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(err.contains("`serial = 0`"), "{err}");
}

#[test]
fn guards_are_carried_to_the_task() {
    let ts = tasks(&plan(1, ""), &[("up.toml", WORKER)]);
    assert_eq!(
        find(&ts, "w1/pkgs").guard,
        Some(Guard {
            path: "/etc/kubernetes/kubelet.conf".into(),
            exists: true
        })
    );
    assert_eq!(find(&ts, "cp1/drain@w1").guard, None);
}

#[test]
fn malformed_features_are_refused_at_the_step() {
    let bad = WORKER
        .replace(
            "delegate = \"first_control_plane\"\n[steps.params]\nrun = \"drain",
            "delegate = \"cp1\"\n[steps.params]\nrun = \"drain",
        )
        .replace(
            "if_exists = \"/etc/kubernetes/kubelet.conf\"",
            "if_exists = \"/a\"\nunless_exists = \"/b\"",
        )
        .replace(
            "after = [\"pkgs\"]",
            "after = [\"pkgs\"]\nunless_exists = \"/c\"",
        );
    let err = RecipeSet::parse(&[("up.toml", &bad)])
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("the only value is \"first_control_plane\""),
        "{err}"
    );
    assert!(
        err.contains("`if_exists` and `unless_exists` together"),
        "{err}"
    );
    assert!(
        err.contains("on a delegated step would read the path"),
        "{err}"
    );
}

#[test]
fn plan_tasks_name_a_delegated_step_as_step_at_host() {
    let user = "[[tasks]]\nname = \"after-drain\"\nmodule = \"command\"\non = { hosts = [\"cp1\"] }\nafter = [\"cp1:drain@w2\"]\nparams = { run = \"true\" }\n";
    let ts = tasks(&plan(2, user), &[("up.toml", WORKER)]);
    assert_eq!(ids(&find(&ts, "cp1/after-drain").after), ["cp1/drain@w2"]);
    // Same host (the task runs on cp1, where the delegated step runs).
    let same = user.replace("cp1:drain@w2", "drain@w2");
    let ts = tasks(&plan(2, &same), &[("up.toml", WORKER)]);
    assert_eq!(ids(&find(&ts, "cp1/after-drain").after), ["cp1/drain@w2"]);
    // A host the plan does not have.
    let bad = user.replace("cp1:drain@w2", "cp1:drain@w9");
    let err = expand(&plan(2, &bad), &[("up.toml", WORKER)])
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(err.contains("the plan has no host `w9`"), "{err}");
}
