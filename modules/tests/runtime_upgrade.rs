//! containerd version changes on joined nodes follow the drained-node discipline, as the
//! recipes render them: the install path (runtime-containerd, windows-worker) leaves joined
//! nodes alone (`unless_exists` the kubelet's kubeconfig), and its twins in the upgrade
//! recipes (same params, `if_exists`) run between the node's drain and its uncordon, whose
//! `until` names the containerd version wherever kwin pins it (Linux release source, Windows
//! always), and nowhere else (Linux distribution package: unpinned).

mod kube_common;

use kube_common::{expand, plan_text, task};
use kwin_engine::task::Task;

const CONF: &str = "/etc/kubernetes/kubelet.conf";
const WIN_CONF: &str = "C:\\etc\\kubernetes\\kubelet.conf";

fn guard(t: &Task) -> Option<(String, bool)> {
    t.guard.as_ref().map(|g| (g.path.clone(), g.exists))
}

/// examples/flannel.toml (cp1, lw1, ww1, ww2), with containerd from its release on Linux.
fn release_plan() -> Vec<Task> {
    let text = plan_text(
        "examples/flannel.toml",
        &[(
            "linux = \"containerd\"",
            "linux = \"containerd\"\ncontainerd_source = \"release\"",
        )],
    );
    expand("examples/flannel.toml", &text)
}

/// examples/flannel.toml with the distribution's containerd package on Linux (the default
/// only before Kubernetes 1.36: the examples' 1.37 takes containerd's release).
fn package_plan() -> Vec<Task> {
    let text = plan_text(
        "examples/flannel.toml",
        &[(
            "linux = \"containerd\"",
            "linux = \"containerd\"\ncontainerd_source = \"package\"",
        )],
    );
    expand("examples/flannel.toml", &text)
}

/// The step `upgrade` of an upgrade recipe is the twin of the install step `install` (one
/// shared step of plans/lib/steps.toml): same module and params, opposite guards on the
/// kubelet's kubeconfig.
fn assert_twins(tasks: &[Task], host: &str, install: &str, upgrade: &str, conf: &str) {
    let i = task(tasks, host, install);
    let u = task(tasks, host, upgrade);
    assert_eq!(i.module, u.module, "{host}: {install} / {upgrade}");
    assert_eq!(
        i.params, u.params,
        "{host}: {install} and {upgrade} drifted apart"
    );
    assert_eq!(
        guard(i),
        Some((conf.to_string(), false)),
        "{host}/{install}"
    );
    assert_eq!(guard(u), Some((conf.to_string(), true)), "{host}/{upgrade}");
}

/// Index of `name` in the host's step order (the order its tasks follow each other).
fn follows(tasks: &[Task], host: &str, later: &str, earlier: &str) -> bool {
    let t = tasks
        .iter()
        .find(|t| t.id.host == host && t.id.name == later)
        .unwrap_or_else(|| panic!("no task {host}/{later}"));
    t.order.iter().any(|f| f.name == earlier)
}

/// `later` comes after `earlier` in the host's step order, directly or through steps between
/// them (a delegated step of the host is named `name@host` in its order).
fn comes_after(tasks: &[Task], host: &str, later: &str, earlier: &str) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![later.to_string()];
    while let Some(name) = todo.pop() {
        let Some(t) = tasks.iter().find(|t| {
            (t.id.host == host || t.id.name.ends_with(&format!("@{host}"))) && t.id.name == name
        }) else {
            continue;
        };
        for f in &t.order {
            if f.name == earlier {
                return true;
            }
            if seen.insert(f.name.clone()) {
                todo.push(f.name.clone());
            }
        }
    }
    false
}

#[test]
fn linux_release_containerd_is_replaced_only_inside_the_drained_window() {
    let tasks = release_plan();
    for (host, prefix) in [("cp1", "cp-upgrade-"), ("lw1", "upgrade-")] {
        for step in [
            "containerd-release",
            "runc",
            "containerd-unit",
            "containerd-config",
            "containerd",
        ] {
            assert_twins(&tasks, host, step, &format!("{prefix}{step}"), CONF);
        }
        // drain → containerd's binaries, runc, unit → the service restart → the rest.
        let drain = if host == "cp1" {
            "cp-upgrade-drain@cp1"
        } else {
            "upgrade-drain@lw1"
        };
        assert!(
            comes_after(&tasks, host, &format!("{prefix}containerd-release"), drain),
            "{host}: the release follows the drain"
        );
        // the configuration (version 2 → 3 with containerd 2.x) before the restart
        assert!(follows(
            &tasks,
            host,
            &format!("{prefix}containerd-config"),
            &format!("{prefix}containerd-unit")
        ));
        assert!(follows(
            &tasks,
            host,
            &format!("{prefix}containerd"),
            &format!("{prefix}containerd-config")
        ));
        let config = task(&tasks, host, &format!("{prefix}containerd-config"));
        let content = config.params["content"].as_str().unwrap_or_default();
        assert!(content.contains("version = 4"), "{content}");
    }
    // The drains and uncordons know the version the Node must report.
    for (host, drain, uncordon) in [
        ("cp1", "cp-upgrade-drain@cp1", "cp-upgrade-uncordon@cp1"),
        ("cp1", "upgrade-drain@lw1", "upgrade-uncordon@lw1"),
        ("cp1", "upgrade-drain@ww1", "upgrade-uncordon@ww1"),
    ] {
        for name in [drain, uncordon] {
            let t = task(&tasks, host, name);
            assert_eq!(t.params["until"]["containerd"], "2.3.7", "{name}");
            assert_eq!(t.params["until"]["kubelet"], "1.37.2", "{name}");
        }
    }
}

#[test]
fn distribution_containerd_is_not_pinned_and_restarts_only_inside_the_window() {
    let tasks = package_plan();
    for host in ["cp1", "lw1"] {
        assert!(
            !tasks
                .iter()
                .any(|t| t.id.host == host && t.id.name.contains("containerd-release")),
            "{host}: no release steps for the package source"
        );
    }
    assert_twins(&tasks, "cp1", "containerd", "cp-upgrade-containerd", CONF);
    assert_twins(&tasks, "lw1", "containerd", "upgrade-containerd", CONF);
    assert_twins(
        &tasks,
        "cp1",
        "containerd-config",
        "cp-upgrade-containerd-config",
        CONF,
    );
    assert_twins(
        &tasks,
        "lw1",
        "containerd-config",
        "upgrade-containerd-config",
        CONF,
    );
    // containerd 1.x of the package reads configuration version 2.
    let content = task(&tasks, "lw1", "containerd-config").params["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(content.contains("version = 2"), "{content}");
    // The package is unpinned: its version is not what the drain waits for; Windows
    // workers' containerd (a release there) still is.
    for name in [
        "cp-upgrade-drain@cp1",
        "upgrade-drain@lw1",
        "upgrade-uncordon@lw1",
    ] {
        assert!(
            task(&tasks, "cp1", name).params["until"]["containerd"].is_null(),
            "{name}"
        );
    }
    assert_eq!(
        task(&tasks, "cp1", "upgrade-drain@ww1").params["until"]["containerd"],
        "2.3.7"
    );
}

#[test]
fn windows_containerd_service_is_replaced_only_inside_the_drained_window() {
    let tasks = package_plan();
    for host in ["ww1", "ww2"] {
        assert_twins(
            &tasks,
            host,
            "containerd",
            "upgrade-containerd-service",
            WIN_CONF,
        );
        assert_twins(
            &tasks,
            host,
            "containerd-config",
            "upgrade-containerd-config-windows",
            WIN_CONF,
        );
        assert!(follows(
            &tasks,
            host,
            "upgrade-containerd-service",
            "upgrade-containerd-config-windows"
        ));
        assert!(comes_after(
            &tasks,
            host,
            "upgrade-containerd-config-windows",
            &format!("upgrade-drain@{host}")
        ));
        // The staging steps stay unguarded: they only put the version in the cache.
        for staged in ["containerd-download", "containerd-unpack"] {
            assert_eq!(guard(task(&tasks, host, staged)), None, "{host}/{staged}");
        }
    }
}

/// The gate of `kwin plan` knows which nodes have a pinned containerd: Windows workers
/// always, Linux nodes only with the release source.
#[test]
fn the_upgrade_gate_pins_containerd_where_the_recipes_do() {
    use kwin_modules::kube::upgrade::gate::GateSpec;
    let pinned = |text: &str| {
        let path = kube_common::root().join("examples/flannel.toml");
        let plan = kwin_engine::plan::load_str(&path, text).expect("plan loads");
        let eff = kwin_engine::plan::effective::Effective::build(&plan).expect("effective");
        let spec = GateSpec::for_plan(&eff, &plan).expect("a cluster plan has a gate");
        spec.nodes
            .iter()
            .map(|n| (n.name.clone(), n.containerd.clone()))
            .collect::<Vec<_>>()
    };
    let v = Some("2.3.7".to_string());
    let package = plan_text(
        "examples/flannel.toml",
        &[(
            "linux = \"containerd\"",
            "linux = \"containerd\"\ncontainerd_source = \"package\"",
        )],
    );
    assert_eq!(
        pinned(&package),
        [
            ("cp1".to_string(), None),
            ("lw1".to_string(), None),
            ("ww1".to_string(), v.clone()),
            ("ww2".to_string(), v.clone()),
        ]
    );
    let release = plan_text(
        "examples/flannel.toml",
        &[(
            "linux = \"containerd\"",
            "linux = \"containerd\"\ncontainerd_source = \"release\"",
        )],
    );
    assert!(pinned(&release).iter().all(|(_, c)| c == &v));
}

/// A changed containerd configuration on a joined Windows worker is written, and containerd
/// restarted, only inside a drained window, and the node is drained for it though it already
/// runs the versions `until` names (the Node does not report its runtime's configuration):
/// windows-worker's `containerd-config` leaves joined nodes alone and says in its output
/// `differs` whether the file is the plan's; upgrade-worker's `upgrade-drain-runtime` drains
/// while it is not; the twin writes it after that drain and before the service step, whose
/// `restart_on` restarts containerd. Before, the install step rewrote the file on a joined
/// node at any apply, and the service step restarted containerd and the kubelet behind a
/// drain that was a no-op (the node ran the versions).
#[test]
fn windows_containerd_configuration_changes_only_inside_a_drained_window() {
    let tasks = package_plan();
    for host in ["ww1", "ww2"] {
        assert_twins(
            &tasks,
            host,
            "containerd-config",
            "upgrade-containerd-config-windows",
            WIN_CONF,
        );
        let drain = task(&tasks, "cp1", &format!("upgrade-drain-runtime@{host}"));
        assert_eq!(drain.module, "kube_drain");
        assert_eq!(drain.params["only_if"], "runtime_config", "{host}");
        let input = drain
            .inputs
            .get("runtime_config")
            .unwrap_or_else(|| panic!("{host}: the runtime drain reads no input"));
        assert!(
            format!("{input:?}").contains("containerd-config")
                && format!("{input:?}").contains("differs"),
            "{host}: {input:?}"
        );
        for later in [
            "upgrade-containerd-config-windows",
            "upgrade-containerd-service",
        ] {
            assert!(
                comes_after(
                    &tasks,
                    host,
                    later,
                    &format!("upgrade-drain-runtime@{host}")
                ),
                "{host}: {later} before the runtime drain"
            );
        }
        assert!(follows(
            &tasks,
            host,
            "upgrade-containerd-service",
            "upgrade-containerd-config-windows"
        ));
        let svc = task(&tasks, host, "upgrade-containerd-service");
        assert!(
            svc.params["restart_on"].as_array().is_some_and(|r| r
                .iter()
                .any(|p| p == "C:\\Program Files\\containerd\\config.toml")),
            "{host}: the service restarts for its configuration"
        );
    }
}

/// The Linux counterpart: a changed containerd configuration on a joined Linux node (a new
/// `runtime.cgroup_driver`, `restrict_oom_score_adj`, the sandbox image of a new minor) is
/// written, and containerd restarted, only after a drain, though the node runs the versions
/// its upgrade drain waits for — with the distribution's package (whose version kwin does not
/// pin) and with the release. One rule with Windows: the same shared drain step
/// (`runtime-config-drain`), reading the same install step's output `differs`, on workers
/// and control planes. Before, the twins rewrote the file and restarted containerd behind a
/// drain that was a no-op (the node ran the versions).
#[test]
fn linux_containerd_configuration_changes_only_inside_a_drained_window() {
    for tasks in [package_plan(), release_plan()] {
        for (host, prefix) in [("cp1", "cp-upgrade-"), ("lw1", "upgrade-")] {
            assert_twins(
                &tasks,
                host,
                "containerd-config",
                &format!("{prefix}containerd-config"),
                CONF,
            );
            let name = format!("{prefix}drain-runtime@{host}");
            let drain = task(&tasks, "cp1", &name);
            assert_eq!(drain.module, "kube_drain", "{name}");
            assert_eq!(drain.params["only_if"], "runtime_config", "{name}");
            assert_eq!(drain.params["reason"], "runtime", "{name}");
            let input = drain
                .inputs
                .get("runtime_config")
                .unwrap_or_else(|| panic!("{name} reads no input"));
            let input = format!("{input:?}");
            assert!(
                input.contains("containerd-config") && input.contains("differs"),
                "{name}: {input}"
            );
            for later in [
                format!("{prefix}containerd-config"),
                format!("{prefix}containerd"),
            ] {
                assert!(
                    comes_after(&tasks, host, &later, &name),
                    "{host}: {later} before the runtime drain"
                );
            }
            let svc = task(&tasks, host, &format!("{prefix}containerd"));
            assert!(
                svc.params["restart_on"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|p| p == "/etc/containerd/config.toml")),
                "{host}: the service restarts for its configuration"
            );
        }
        // Windows workers keep theirs: the same shared step.
        let win = task(&tasks, "cp1", "upgrade-drain-runtime@ww1");
        let lin = task(&tasks, "cp1", "upgrade-drain-runtime@lw1");
        assert_eq!(win.module, lin.module);
        for key in ["only_if", "reason", "timeout", "force"] {
            assert_eq!(win.params[key], lin.params[key], "{key}");
        }
    }
}
