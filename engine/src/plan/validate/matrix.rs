//! Rules of the support matrix (`plan/support.rs`, data in `plan/versions.toml`): the
//! component versions a plan installs must be ones upstream supports with its Kubernetes
//! minor, and the Windows builds its hosts name must suit its pod network. Each refusal names
//! the versions to use and the matrix row's source.
//!
//! Checked only for a Kubernetes version that parses and whose minor the matrix holds
//! (`cluster.rs` reports the others).

use super::pass::V;
use crate::diag::Diagnostic;
use crate::plan::model::{CniPlugin, ContainerdSource, Os, RuntimeKind};
use crate::plan::spans::PlanPath;
use crate::plan::support::{self, Fit};
use crate::plan::versions::{self, Version};

pub(super) fn check(v: &mut V<'_>) {
    let Some(k) = v.plan.kubernetes_version() else {
        return;
    };
    let minor = Version(vec![k.major, k.minor]);
    if support::minor_row(&minor).is_none() {
        return;
    }
    containerd(v, &minor);
    components(v, &minor);
    windows_builds(v);
}

/// The plan's value of `versions.<key>`, else kwin's pin.
fn effective(v: &V<'_>, key: &str) -> Option<(String, bool)> {
    let vs = &v.plan.file.versions;
    let pins = support::pins();
    let (given, pin) = match key {
        "containerd" => (&vs.containerd, Some(&pins.containerd)),
        "flannel" => (&vs.flannel, Some(&pins.flannel)),
        "calico" => (&vs.calico, Some(&pins.calico)),
        "cni_plugins" => (&vs.cni_plugins, Some(&pins.cni_plugins)),
        "runc" => (&vs.runc, Some(&pins.runc)),
        "cri_dockerd" => (&vs.cri_dockerd, Some(&pins.cri_dockerd)),
        "crictl" => (&vs.crictl, None),
        _ => return None,
    };
    match (given, pin) {
        (Some(g), _) => Some((g.clone(), true)),
        (None, Some(p)) => Some((p.clone(), false)),
        (None, None) => None,
    }
}

/// Where a component's version diagnostic points: the plan's `versions.<key>`, else the
/// Kubernetes version that the default does not suit.
fn path_of(given: bool, key: &str) -> String {
    if given {
        format!("versions.{key}")
    } else {
        "cluster.kubernetes_version".to_string()
    }
}

fn containerd(v: &mut V<'_>, minor: &Version) {
    let rt = &v.plan.file.runtime;
    let windows = v.plan.has_windows() && rt.windows == RuntimeKind::Containerd;
    let linux_containerd = rt.linux == RuntimeKind::Containerd
        && v.plan
            .hosts
            .iter()
            .any(|h| h.os == Os::Linux && h.role.is_some());
    let source = rt
        .containerd_source
        .unwrap_or(if support::package_containerd_fits(minor) {
            ContainerdSource::Package
        } else {
            ContainerdSource::Release
        });
    if linux_containerd
        && source == ContainerdSource::Package
        && !support::package_containerd_fits(minor)
    {
        let distros: Vec<String> = versions::table()
            .matrix
            .linux
            .iter()
            .map(|d| format!("{} {}", d.name, d.containerd_package))
            .collect();
        let row = support::minor_row(minor).map(|r| r.containerd.join("+, ") + "+");
        v.at(
            "runtime.containerd_source",
            Diagnostic::error(
                "containerd-package",
                format!(
                    "Kubernetes {minor} supports containerd {} only, and the distributions' own containerd packages are 1.x ({})",
                    row.unwrap_or_default(),
                    distros.join(", ")
                ),
            )
            .with_hint(format!(
                "remove containerd_source (with Kubernetes {minor} kwin installs containerd's release, {}) or set containerd_source = \"release\" ({})",
                support::pins().containerd,
                versions::table().matrix.containerd_source
            )),
        );
    }
    // kwin pins containerd on Windows and with the Linux release source.
    let pinned = windows || (linux_containerd && source == ContainerdSource::Release);
    let Some((c, given)) = effective(v, "containerd").filter(|_| pinned) else {
        return;
    };
    let Some(cv) = Version::parse(&c) else {
        return; // `bad-version`, reported by cluster.rs
    };
    if let Fit::Outside { allowed, source } = support::containerd_fits(minor, &cv) {
        let suggestion = if support::containerd_fits(
            minor,
            &Version::parse(&support::pins().containerd).unwrap_or_else(|| cv.clone()),
        ) == Fit::Ok
        {
            format!("versions.containerd = \"{}\"", support::pins().containerd)
        } else {
            format!("a containerd of {allowed}")
        };
        v.at(
            &path_of(given, "containerd"),
            Diagnostic::error(
                "containerd-version",
                format!(
                    "containerd {c} is not supported with Kubernetes {minor}: upstream supports {allowed}"
                ),
            )
            .with_hint(format!("use {suggestion} ({source})")),
        );
        return;
    }
    if let Some(since) = support::containerd_branch_ended(&cv, support::Day::today()) {
        v.at(
            &path_of(given, "containerd"),
            Diagnostic::warning(
                "containerd-end-of-life",
                format!(
                    "containerd {} reached its end of life on {since}: it gets no more fixes",
                    cv.minor()
                ),
            )
            .with_hint(format!(
                "use a supported containerd, e.g. versions.containerd = \"{}\" if Kubernetes {minor} allows it (docs/versions.md)",
                support::pins().containerd
            )),
        );
    }
}

fn components(v: &mut V<'_>, minor: &Version) {
    let plugin = v.plan.file.cni.as_ref().map(|c| c.plugin);
    let rt = &v.plan.file.runtime;
    let docker = rt.linux == RuntimeKind::Docker && rt.cri_dockerd;
    for (key, used) in [
        ("calico", plugin == Some(CniPlugin::Calico)),
        ("flannel", plugin == Some(CniPlugin::Flannel)),
        ("cni_plugins", true),
        ("runc", true),
        ("crictl", true),
        ("cri_dockerd", docker),
    ] {
        if !used {
            continue;
        }
        let Some((val, given)) = effective(v, key) else {
            continue;
        };
        let Some(ver) = Version::parse(&val) else {
            continue; // `bad-version`
        };
        match support::component_fits(key, minor, &ver) {
            Fit::Ok => {}
            Fit::Outside { allowed, source } => {
                let pin = effective_pin(key);
                let hint = match pin {
                    Some(p)
                        if support::component_fits(
                            key,
                            minor,
                            &Version::parse(&p).unwrap_or(ver.clone()),
                        ) == Fit::Ok =>
                    {
                        format!("use versions.{key} = \"{p}\", or leave it out for kwin's pin ({source})")
                    }
                    _ => format!("use a {key} of {allowed} ({source})"),
                };
                v.at(
                    &path_of(given, key),
                    Diagnostic::error(
                        "component-version",
                        format!(
                            "{key} {val} is not supported with Kubernetes {minor}: upstream supports {allowed}"
                        ),
                    )
                    .with_hint(hint),
                );
            }
            Fit::Refused { why, source } => {
                v.at(
                    "runtime.linux",
                    Diagnostic::error(
                        "docker-kubernetes",
                        format!("Docker with Kubernetes {minor}: {why}"),
                    )
                    .with_hint(format!(
                        "use linux = \"containerd\", or Kubernetes 1.35 or older with Docker ({source})"
                    )),
                );
            }
        }
    }
}

fn effective_pin(key: &str) -> Option<String> {
    let p = support::pins();
    Some(
        match key {
            "calico" => &p.calico,
            "flannel" => &p.flannel,
            "cni_plugins" => &p.cni_plugins,
            "runc" => &p.runc,
            "cri_dockerd" => &p.cri_dockerd,
            _ => return None,
        }
        .clone(),
    )
}

/// The Windows Server build a host's `node.kubernetes.io/windows-build` label names: Calico
/// refused where Calico does not support it, a warning where Kubernetes no longer lists it
/// (`support::windows_server_verdict`, the words windows-worker's `windows-build` step gives
/// for the build it probes).
fn windows_builds(v: &mut V<'_>) {
    let plan = v.plan;
    let calico = plan.file.cni.as_ref().map(|c| c.plugin) == Some(CniPlugin::Calico);
    for (i, h) in plan.file.hosts.iter().enumerate() {
        if plan.hosts.get(i).map(|rh| rh.os) != Some(Os::Windows) {
            continue;
        }
        let Some(build) = h.labels.get("node.kubernetes.io/windows-build") else {
            continue;
        };
        let Some(verdict) =
            support::windows_server(build).and_then(|w| support::windows_server_verdict(w, calico))
        else {
            continue;
        };
        let path = PlanPath::root()
            .key("hosts")
            .index(i)
            .key("labels")
            .key("node.kubernetes.io/windows-build")
            .to_string();
        let summary = format!("`{}` runs {}", h.name, verdict.what);
        let d = if verdict.refused {
            Diagnostic::error("calico-windows-server", summary)
        } else {
            Diagnostic::warning("windows-server-unsupported", summary)
        };
        v.at(&path, d.with_hint(verdict.fix));
    }
}
