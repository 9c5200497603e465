//! Shared by the fact targets: run one answer through every fact parser kwin has.

#![allow(dead_code)]

use kwin_engine::fact::{Fact, FactOutput};
use kwin_modules::linux::facts as lx;
use kwin_modules::windows::facts as win;

/// Every Linux fact parser (file, sysctl, kernel module, packages, systemd, swaps, probes).
pub fn linux_parsers(out: &FactOutput) {
    for f in [
        lx::file::FileFact::meta("/etc/motd"),
        lx::file::FileFact::hash("/etc/motd"),
        lx::file::FileFact::content("/etc/motd"),
    ] {
        if let Ok(s) = f.parse(out) {
            let _ = s.kind();
        }
    }
    let _ = (lx::sysctl::SysctlFact {
        key: "net.ipv4.ip_forward".into(),
    })
    .parse(out);
    let _ = (lx::kmod::KernelModuleFact {
        name: "br_netfilter".into(),
    })
    .parse(out);
    let _ = (lx::packages::PackagesFact {
        names: vec!["containerd".into(), "kubelet".into()],
    })
    .parse(out);
    let _ = (lx::systemd::UnitFact {
        name: "kubelet".into(),
    })
    .parse(out);
    let _ = lx::swaps::SwapsFact.parse(out);
    let _ = (lx::probe::CommandsFact {
        names: vec!["apt-get".into(), "dnf".into()],
    })
    .parse(out);
    let _ = (lx::probe::GuardFact {
        code: "true".into(),
    })
    .parse(out);
}

/// Every Windows fact parser.
pub fn windows_parsers(out: &FactOutput) {
    let _ = out.stdout_str();
    if let Ok(p) = (win::PathFact {
        path: "C:\\k\\x".into(),
        content_limit: 1024,
    })
    .parse(out)
    {
        let _ = p.content();
    }
    if let Ok(f) = (win::FeatureFact {
        name: "Containers".into(),
    })
    .parse(out)
    {
        let _ = (f.installed(), f.install_pending(), f.removal_pending());
    }
    let _ = win::RebootPendingFact.parse(out);
    let _ = (win::ServiceFact {
        name: "kubelet".into(),
    })
    .parse(out);
    let _ = (win::EnvVarFact { name: "X".into() }).parse(out);
    let _ = (win::FirewallRuleFact { name: "r".into() }).parse(out);
    let _ = (win::RegistryValueFact {
        path: "HKLM:\\X".into(),
        name: "v".into(),
    })
    .parse(out);
    let _ = win::MachinePathFact.parse(out);
    if let Ok(b) = win::OsBuildFact.parse(out) {
        let _ = (b.windows_build(), b.version_tuple());
    }
    let _ = kwin_modules::windows::preflight::PreflightFact {
        drive: "C:".into(),
        reach: Some("192.168.56.10".into()),
    }
    .parse(out);
}

/// Both families.
pub fn every_parser(out: &FactOutput) {
    linux_parsers(out);
    windows_parsers(out);
}
