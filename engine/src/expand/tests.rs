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

/// Template files (`plans/<recipe>/<file>.j2`) and the step library (`plans/lib/steps.toml`).
mod files {
    use super::*;

    const NODES: &str = r#"
recipe = "nodes"
applies = { roles = ["worker"] }
[[steps]]
name = "node-file"
module = "command"
[steps.params]
run = '''
{%- set body -%}{% include "nodes/body.sh.j2" %}{%- endset -%}
{{ body | trim }}'''
"#;

    #[test]
    fn an_included_file_that_reads_host_renders_per_host() {
        let p = plan(2, "");
        let body = "echo {{ host.name | sh }}\n";
        let ts = tasks(
            &p,
            &[
                ("plans/nodes.toml", NODES),
                ("plans/nodes/body.sh.j2", body),
            ],
        );
        assert_eq!(find(&ts, "w1/node-file").params["run"], "echo w1");
        assert_eq!(find(&ts, "w2/node-file").params["run"], "echo w2");
    }

    #[test]
    fn an_error_in_an_included_file_points_at_its_line() {
        let p = plan(1, "");
        let body = "line one\necho {{ host.nmae }}\n";
        let msg = expand(
            &p,
            &[
                ("plans/nodes.toml", NODES),
                ("plans/nodes/body.sh.j2", body),
            ],
        )
        .expect_err("undefined value")
        .to_string();
        assert!(msg.contains("plans/nodes/body.sh.j2:2:"), "{msg}");
        assert!(msg.contains("step `node-file`"), "{msg}");
    }

    #[test]
    fn a_template_file_is_named_by_one_known_string() {
        let p = plan(1, "");
        let unknown = NODES.replace("nodes/body.sh.j2", "nodes/bdy.sh.j2");
        let msg = expand(
            &p,
            &[
                ("plans/nodes.toml", &unknown),
                ("plans/nodes/body.sh.j2", "x\n"),
            ],
        )
        .expect_err("unknown file")
        .to_string();
        assert!(msg.contains("no template file `nodes/bdy.sh.j2`"), "{msg}");
        let computed = NODES.replace("\"nodes/body.sh.j2\"", "'nodes/' ~ host.name");
        let msg = expand(
            &p,
            &[
                ("plans/nodes.toml", &computed),
                ("plans/nodes/body.sh.j2", "x\n"),
            ],
        )
        .expect_err("computed name")
        .to_string();
        assert!(msg.contains("named by one quoted string"), "{msg}");
        assert!(msg.contains("plans/nodes.toml:9:"), "{msg}");
    }

    #[test]
    fn macros_of_a_template_file_are_imported() {
        let p = plan(1, "");
        let recipe = r#"
recipe = "m"
applies = { roles = ["worker"] }
[[steps]]
name = "greet"
module = "command"
[steps.params]
run = '{% from "lib/words.j2" import hello %}{{ hello(host.name) }}'
"#;
        let words = "{% macro hello(who) %}echo hello {{ who | sh }}{% endmacro %}\n";
        let ts = tasks(
            &p,
            &[("plans/m.toml", recipe), ("plans/lib/words.j2", words)],
        );
        assert_eq!(find(&ts, "w1/greet").params["run"], "echo hello w1");
    }

    const STEPS: &str = r#"
# Shared steps.
[say-name]
module = "command"
[say-name.params]
run = "echo {{ host.name | sh }}"
creates = "/tmp/{{ host.nme }}"
"#;

    #[test]
    fn a_step_with_use_takes_the_shared_module_and_params() {
        let p = plan(1, "");
        let two = r#"
recipe = "two"
applies = { roles = ["worker"] }
[[steps]]
name = "first"
use = "say-name"
when = "{{ true }}"
[[steps]]
name = "again"
use = "say-name"
after = ["first"]
"#;
        let ok_steps = STEPS.replace("host.nme", "host.name");
        let ts = tasks(
            &p,
            &[("plans/two.toml", two), ("plans/lib/steps.toml", &ok_steps)],
        );
        let (a, b) = (find(&ts, "w1/first"), find(&ts, "w1/again"));
        assert_eq!(a.module, "command");
        assert_eq!(a.params, b.params);
        assert_eq!(a.params["run"], "echo w1");
        // A template error in a shared step's params points into the step library.
        let msg = expand(
            &p,
            &[("plans/two.toml", two), ("plans/lib/steps.toml", STEPS)],
        )
        .expect_err("undefined")
        .to_string();
        assert!(msg.contains("plans/lib/steps.toml:7:"), "{msg}");
    }

    #[test]
    fn use_names_a_shared_step_and_replaces_module_and_params() {
        let bad = r#"
recipe = "bad"
applies = {}
[[steps]]
name = "a"
use = "say-nam"
[[steps]]
name = "b"
use = "say-name"
module = "command"
[[steps]]
name = "c"
"#;
        let msg = RecipeSet::parse(&[("plans/bad.toml", bad), ("plans/lib/steps.toml", STEPS)])
            .expect_err("bad use")
            .to_string();
        assert!(
            msg.contains("the step library has no step `say-nam`"),
            "{msg}"
        );
        assert!(msg.contains("did you mean `say-name`?"), "{msg}");
        assert!(msg.contains("leave out `module` and `params`"), "{msg}");
        assert!(
            msg.contains("step `c`: a step needs `module` (or `use`)"),
            "{msg}"
        );
    }
}
