//! Kubernetes rules with one owner, seen from every side that reads them: what validation
//! accepts, what the recipes render for `kubeadm init` and what the `kubeadm_join` module
//! writes come from the same code, so they cannot drift apart.
//!
//! - kubeadm's configuration (`kwin_engine::plan::kubeadm`): the first control plane's
//!   InitConfiguration and a joining control plane's JoinConfiguration register the node
//!   alike, at the same API version, for every minor.
//! - taints (`kwin_engine::plan::syntax::Taint`): a taint validation refuses is refused by the
//!   join module and by the init configuration, and one it accepts renders the same in both.
//! - `cni.vni` (`CniSettings::uses_vni`): rendered exactly where validation says it is used.

mod kube_common;

use kube_common::{expand, plan_text, task};
use kwin_engine::module::Registry;
use kwin_engine::plan::kubeadm::ApiVersion;
use kwin_engine::plan::syntax;
use kwin_engine::task::Task;
use kwin_engine::transport::Shell;
use kwin_modules::kube::kubeadm_join::{JoinInputs, KubeadmJoin};
use kwin_modules::table::Described;
use serde::Deserialize;
use serde_json::{json, Value};

const HA: &str = "tests/plans/good/ha-control-plane.toml";

fn inputs() -> JoinInputs {
    JoinInputs {
        token: "abcdef.0123456789abcdef".into(),
        ca_cert_hash: format!("sha256:{}", "0".repeat(64)),
        api_endpoint: "k8s-api.lab:6443".into(),
        certificate_key: Some("1".repeat(64)),
    }
}

/// The HA plan at `1.<minor>.4`, cp1 and cp2 with the same labels and `taints`.
fn ha_tasks(minor: u32, taints: &str) -> Vec<Task> {
    let extra = format!("labels = {{ \"example.com/tier\" = \"infra\" }}\ntaints = {taints}\n");
    let text = plan_text(
        HA,
        &[
            (
                "kubernetes_version = \"1.37.2\"",
                &format!("kubernetes_version = \"1.{minor}.4\""),
            ),
            (
                "name = \"cp1\"\naddress = \"192.168.56.10\"\n",
                &format!("name = \"cp1\"\naddress = \"192.168.56.10\"\n{extra}"),
            ),
            (
                "name = \"cp2\"\naddress = \"192.168.56.11\"\n",
                &format!("name = \"cp2\"\naddress = \"192.168.56.11\"\n{extra}"),
            ),
        ],
    );
    expand(HA, &text)
}

/// The documents of cp1's kubeadm configuration file, by kind.
fn init_documents(tasks: &[Task]) -> Vec<Value> {
    let content = task(tasks, "cp1", "kubeadm-config").params["content"]
        .as_str()
        .expect("kubeadm-config content")
        .to_string();
    serde_yaml_ng::Deserializer::from_str(&content)
        .map(|d| Value::deserialize(d).expect("kubeadm-config is YAML"))
        .collect()
}

/// cp2's JoinConfiguration for the API version kwin picks for `minor`.
fn join_document(tasks: &[Task], minor: u32) -> Value {
    let t = task(tasks, "cp2", "kubeadm-join");
    let m = KubeadmJoin::from_json(&t.params, Shell::Posix).expect("join params");
    let text = m.join_config(ApiVersion::for_minor(minor), &inputs());
    serde_json::from_str(&text).expect("join configuration is JSON")
}

/// `v` with the node's own name and address replaced, to compare two nodes' registrations.
fn anonymous(v: &Value, name: &str, ip: &str) -> Value {
    let text = serde_json::to_string(v).expect("json");
    serde_json::from_str(&text.replace(name, "NODE").replace(ip, "NODE-IP")).expect("json")
}

#[test]
fn init_and_join_register_control_planes_alike_for_every_minor() {
    for minor in [29, 30, 31, 35, 37] {
        let tasks = ha_tasks(minor, "[\"dedicated=infra:NoSchedule\", \"gpu:NoExecute\"]");
        let docs = init_documents(&tasks);
        let init = docs
            .iter()
            .find(|d| d["kind"] == "InitConfiguration")
            .expect("InitConfiguration");
        let join = join_document(&tasks, minor);
        assert_eq!(init["apiVersion"], join["apiVersion"], "1.{minor}");
        for d in &docs {
            if d["kind"] != "KubeletConfiguration" {
                assert_eq!(d["apiVersion"], join["apiVersion"], "1.{minor}");
            }
        }
        assert_eq!(
            anonymous(&init["nodeRegistration"], "cp1", "192.168.56.10"),
            anonymous(&join["nodeRegistration"], "cp2", "192.168.56.11"),
            "1.{minor}: init and join register the node differently"
        );
        let taints = &join["nodeRegistration"]["taints"];
        assert_eq!(
            taints,
            &json!([
                { "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" },
                { "key": "dedicated", "value": "infra", "effect": "NoSchedule" },
                { "key": "gpu", "effect": "NoExecute" },
            ]),
            "1.{minor}"
        );
        assert_eq!(
            init["localAPIEndpoint"]["advertiseAddress"], "192.168.56.10",
            "1.{minor}"
        );
        assert_eq!(
            join["controlPlane"]["localAPIEndpoint"]["advertiseAddress"], "192.168.56.11",
            "1.{minor}"
        );
    }
}

#[test]
fn a_taint_is_read_by_one_parser_for_validation_init_and_join() {
    for taint in [
        "dedicated=infra:NoSchedule",
        "example.com/gpu:PreferNoSchedule",
        "a=:NoExecute",
        "dedicated=infra:Sometimes",
        "dedicated=in fra:NoSchedule",
        "=x:NoSchedule",
        "a/b/c:NoSchedule",
        "dedicated=infra",
    ] {
        let valid = syntax::taint(taint).is_ok();
        let join = KubeadmJoin::from_json(
            &json!({ "node_name": "lw1", "taints": [taint] }),
            Shell::Posix,
        );
        assert_eq!(join.is_ok(), valid, "{taint}: join and validation disagree");
        let init = kwin_engine::plan::kubeadm::init_config_of(
            serde_json::from_value(
                json!({ "name": "cp1", "taints": [taint], "is_control_plane": true }),
            )
            .expect("host"),
            serde_json::from_value(json!({
                "name": "lab", "kubernetes_version": "1.31.4", "minor_version": 31,
                "control_plane_endpoint": "10.0.0.10:6443", "api_server_port": 6443,
                "pod_cidr": "10.244.0.0/16", "service_cidr": "10.96.0.0/12",
                "dns_domain": "cluster.local", "dns_service_ip": "10.96.0.10",
                "max_pods_per_node": 110, "kubelet_cgroup_driver": "systemd"
            }))
            .expect("cluster"),
        );
        assert_eq!(init.is_ok(), valid, "{taint}: init and validation disagree");
    }
}

#[test]
fn a_node_name_and_a_node_label_are_checked_by_the_plans_rules_in_every_kube_module() {
    let long = "n".repeat(64);
    for name in [
        "lw1",
        "lw1.example.com",
        "LW1",
        "-lw1",
        "lw1-",
        "a..b",
        "a.-b",
        "a;b",
        "",
        long.as_str(),
    ] {
        let valid = syntax::node_name(name).is_ok();
        let join = KubeadmJoin::from_json(&json!({ "node_name": name }), Shell::Posix);
        assert_eq!(
            join.is_ok(),
            valid,
            "{name:?}: kubeadm_join and validation disagree"
        );
        for (module, params) in [
            ("kube_drain", json!({ "node": name, "only_if": "x" })),
            (
                "kube_uncordon",
                json!({ "node": name, "until": { "kubelet": "1.31.4" } }),
            ),
            ("kubelet_restart", json!({ "node": name })),
            (
                "kubeadm_upgrade",
                json!({ "node": name, "version": "1.31.4", "mode": "node" }),
            ),
        ] {
            let built = kwin_modules::Builtin.build(module, Shell::Posix, &params);
            assert_eq!(
                built.is_ok(),
                valid,
                "{name:?}: {module} and validation disagree: {:?}",
                built.err()
            );
        }
    }
    for (key, value) in [
        ("example.com/tier", "infra"),
        ("tier", ""),
        ("-tier", "infra"),
        ("example.com/a/b", "x"),
        ("tier", "in fra"),
        ("tier", "-infra"),
        ("Example.com/tier", "x"),
    ] {
        let valid = syntax::label_key(key).is_ok() && syntax::label_value(value).is_ok();
        let join = KubeadmJoin::from_json(
            &json!({ "node_name": "lw1", "labels": { key: value } }),
            Shell::Posix,
        );
        assert_eq!(
            join.is_ok(),
            valid,
            "{key}={value}: kubeadm_join and validation disagree"
        );
    }
}

/// Every string in `v`.
fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(o) => o.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn vni_is_rendered_exactly_where_validation_says_it_is_used() {
    let cases: [(&str, &str, &str); 3] = [
        (
            "examples/calico.toml",
            "plugin = \"calico\"",
            "plugin = \"calico\"\nvni = 5000",
        ),
        (
            "tests/plans/good/calico-ipip-linux.toml",
            "plugin = \"calico\"",
            "plugin = \"calico\"\nvni = 5000",
        ),
        (
            "tests/plans/good/flannel-host-gw-linux.toml",
            "plugin = \"flannel\"",
            "plugin = \"flannel\"\nvni = 5000",
        ),
    ];
    for (plan, find, replace) in cases {
        let text = plan_text(plan, &[(find, replace)]);
        let loaded = kwin_engine::plan::load_str(&kube_common::root().join(plan), &text)
            .unwrap_or_else(|d| panic!("{plan}: {d}"));
        let cni = loaded.file.cni.as_ref().expect("[cni]");
        let used = kwin_engine::plan::net::CniSettings::from_cni(cni).uses_vni();
        let rendered = expand(plan, &text).iter().any(|t| {
            strings(&t.params)
                .iter()
                .any(|s| s.lines().any(|l| l.contains("VNI") && l.contains("5000")))
        });
        assert_eq!(
            rendered, used,
            "{plan}: rendered {rendered}, validation says used {used}"
        );
    }
}
