//! Shared by the fact targets: run one answer through every fact parser kwin has.

use kwin_engine::fact::{Fact, FactOutput};
use kwin_modules::windows::facts as win;

pub fn every_parser(out: &FactOutput) {
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
}
