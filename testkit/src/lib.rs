//! kwin's test kit (crate `kwin-testkit`, not published): what kwin's tests share.
//!
//! | module | what |
//! |---|---|
//! | [`tier`] | the lab tier: [`lab_test!`] marks tests that need root and the lab's peers (`#[ignore = "lab: ..."]`); they fail, never pass, when run without them |
//! | [`host`] | facts about the machine the tests run on (`is_root`, `has_command`) |
//! | [`scripts`] | script checks: `sh -n`, tree-sitter-powershell syntax errors, `"` in native-command arguments, wildcard parameters |
//! | [`lab`] | lab hosts (`lab/up.sh`: sshd hosts in network namespaces), torn down on drop |
//! | [`sshd`] | a private sshd on 127.0.0.1 in a mount namespace, with users of its own |
//! | [`winrm`] | the WinRM stand-in: its Python environment, a stand-in process, the isolated stand-in host |
//! | [`api`] | the Kubernetes API tier (`lab/apiserver`: kube-apiserver, etcd, kubeadm and kubectl of one Kubernetes version) |
//! | [`cluster`] | a lab cluster (lab hosts + `lab/cluster-stand-in`), the example plans rewritten for its lab, and the stand-ins' records (violations, kubeadm calls, node timeline) |
//! | [`kwin`] | the `kwin` binary (`kwin!(dir, args)`, or spawned and read line by line as it runs), its events, round trips from its logs |
//! | [`scan`] | where a secret shows up in what a run left (events, logs, journal) |
//! | [`exec`] | executor fixtures: a file fact, params, tasks with `after` and inputs, one run of `exec::execute` and its events |
//! | [`cases`] | the one runner of the data-driven module cases (`modules/tests/{cases,windows_cases,kube_cases}`) |
//!
//! Engine unit tests (`#[cfg(test)]` inside `engine/src`) cannot use this crate: a
//! dev-dependency would link a second copy of `kwin_engine`.

pub mod api;
pub mod cases;
pub mod cluster;
pub mod converge;
pub mod exec;
pub mod host;
pub mod kwin;
pub mod lab;
pub mod scan;
pub mod scripts;
pub mod sshd;
pub mod tier;
pub mod winrm;
