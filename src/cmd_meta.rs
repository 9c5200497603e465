//! What kwin says about itself: `kwin --version` (the build's commit and the component
//! versions kwin pins, read from the engine's defaults and kwin's digests), `kwin completions
//! SHELL` (clap_complete) and `kwin man` (clap_mangen), both from the one command-line
//! definition in `args.rs`.

use crate::output::Output;
use anyhow::Context;
use clap::CommandFactory;
use kwin_engine::event::Outcome;
use kwin_engine::plan::effective::defaults::windows;
use kwin_engine::plan::{support, versions};
use std::fmt::Write as _;
use std::path::Path;

/// The command line of this process: `--version` shows the commit and the component versions
/// kwin pins ([`long_version`]), `-V` the first line only.
pub fn command() -> clap::Command {
    crate::args::Cli::command()
        .version(short_version())
        .long_version(long_version())
}

/// `X.Y.Z (commit abcdef1[-dirty])`: the package version and the commit `build.rs` found.
pub fn short_version() -> String {
    format!(
        "{} (commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("KWIN_BUILD_COMMIT")
    )
}

/// The components kwin installs by default, each as (name, version, note): the support
/// matrix's pins (`versions.toml` `[matrix.defaults]`), the Windows constants of
/// `defaults::windows`, the Kubernetes minors of the version table and kubeadm's pause image
/// per minor.
pub fn components() -> Vec<(&'static str, String, &'static str)> {
    let t = versions::table();
    let pins = support::pins();
    let mut pause: Vec<String> = t
        .pause
        .minors
        .iter()
        .map(|(minor, v)| format!("{minor}: {v}"))
        .collect();
    pause.sort_by_key(|s| versions::Version::parse(s.split(':').next().unwrap_or("")));
    vec![
        (
            "kubernetes",
            format!("{} to {}", versions::oldest(), versions::newest()),
            "the plan's cluster.kubernetes_version; kwin's flag tables know these minors",
        ),
        (
            "kubernetes (kwin init)",
            support::newest_release(),
            "written into a starter plan: the newest release of the support matrix",
        ),
        ("containerd", pins.containerd.clone(), "versions.containerd"),
        ("runc", pins.runc.clone(), "with a containerd release"),
        ("flannel", pins.flannel.clone(), "versions.flannel"),
        ("calico", pins.calico.clone(), "versions.calico"),
        (
            "cni-plugins",
            pins.cni_plugins.clone(),
            "versions.cni_plugins",
        ),
        (
            "cri-dockerd",
            pins.cri_dockerd.clone(),
            "versions.cri_dockerd",
        ),
        (
            "crictl",
            "v<kubernetes minor>.0".to_string(),
            "versions.crictl; cri-tools follows the Kubernetes minor",
        ),
        (
            "pause",
            format!("{} ({})", t.pause.image, pause.join(", ")),
            "runtime.sandbox_image; kubeadm's per minor",
        ),
        (
            "flannel cni-plugin (windows)",
            windows::FLANNEL_CNI_PLUGIN.to_string(),
            "flannel-io/cni-plugin",
        ),
        (
            "windows-container-networking",
            windows::SDN_CNI.to_string(),
            "sdnoverlay.exe",
        ),
        (
            "host-process image (windows)",
            windows::HOST_PROCESS_IMAGE.to_string(),
            "the Windows DaemonSets' image",
        ),
        (
            "cni directories (windows)",
            format!("{}, {}", windows::CNI_BIN_DIR, windows::CNI_CONF_DIR),
            "plugins, configurations",
        ),
    ]
}

/// The support matrix in a few lines: per minor its status today, patch releases and the
/// containerd it takes.
pub fn matrix_lines() -> Vec<String> {
    let t = versions::table();
    let today = support::Day::today();
    t.matrix
        .minors
        .iter()
        .rev()
        .map(|r| {
            let minor = versions::Version::parse(&r.minor);
            let status = match minor.as_ref().and_then(|m| support::status(m, today)) {
                Some(support::Status::EndOfLife { since }) => format!("end of life since {since}"),
                Some(support::Status::Supported { until }) => format!("supported until {until}"),
                None => String::new(),
            };
            format!(
                "{}  {status}; {}.0 to {}; containerd {}",
                r.minor,
                r.minor,
                r.latest_patch,
                r.containerd
                    .iter()
                    .map(|c| format!("{c}+"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect()
}

/// `kwin --version`: the short version, the pinned components, and what kwin's digests cover.
pub fn long_version() -> String {
    let mut o = format!(
        "{}\n\ncomponents kwin installs by default (a plan's [versions] overrides them):\n",
        short_version()
    );
    let rows = components();
    let w = rows.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
    for (name, version, note) in &rows {
        let _ = writeln!(o, "  {name:<w$}  {version}  ({note})");
    }
    let _ = writeln!(
        o,
        "\nKubernetes support matrix (checked {}; docs/versions.md has every row and its source):",
        versions::table().matrix.checked
    );
    for l in matrix_lines() {
        let _ = writeln!(o, "  {l}");
    }
    let _ = writeln!(o, "\nSHA-256 digests kwin ships (plans/digests.toml):");
    for (file, versions) in digests() {
        let span = match (versions.first(), versions.last()) {
            (Some(a), Some(b)) if a != b => format!("{a} to {b}"),
            (Some(a), _) => a.clone(),
            _ => String::new(),
        };
        let _ = writeln!(o, "  {file}  {span} ({} versions)", versions.len());
    }
    o
}

/// Every artifact of kwin's digests: its file name (the URL's last part, `{version}` as it
/// is) and the versions it has a digest of, oldest first.
pub fn digests() -> Vec<(String, Vec<String>)> {
    #[derive(serde::Deserialize)]
    struct Digests {
        #[serde(default)]
        artifact: Vec<Artifact>,
    }
    #[derive(serde::Deserialize)]
    struct Artifact {
        url: String,
        #[serde(default)]
        sha256: std::collections::BTreeMap<String, String>,
    }
    let Ok(d) = toml::from_str::<Digests>(kwin_modules::recipes::DIGESTS) else {
        return Vec::new();
    };
    d.artifact
        .into_iter()
        .map(|a| {
            let file = a.url.rsplit('/').next().unwrap_or(&a.url).to_string();
            let mut vs: Vec<String> = a.sha256.into_keys().collect();
            vs.sort_by_key(|v| versions::Version::parse(v));
            (file, vs)
        })
        .collect()
}

/// `kwin completions SHELL`.
pub fn completions(shell: clap_complete::Shell, out: &Output) -> anyhow::Result<Outcome> {
    let mut cmd = crate::args::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "kwin", &mut buf);
    out.text(&String::from_utf8_lossy(&buf));
    Ok(Outcome::Success)
}

/// `kwin man [--out-dir DIR]`: kwin.1 on stdout, or kwin.1 and kwin-<command>.1 in DIR.
pub fn man(out_dir: Option<&Path>, out: &Output) -> anyhow::Result<Outcome> {
    let cmd = crate::args::Cli::command()
        .version(short_version())
        .long_version(long_version());
    let Some(dir) = out_dir else {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut buf)?;
        out.text(&String::from_utf8_lossy(&buf));
        return Ok(Outcome::Success);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Each page rendered here and written as a new file renamed into place
    // (`fs::write_output`): a link another user planted at a page's name never receives it.
    let mut pages = Vec::new();
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    fn collect(cmd: clap::Command, pages: &mut Vec<clap_mangen::Man>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            collect(sub, pages);
        }
        pages.push(clap_mangen::Man::new(cmd));
    }
    collect(cmd, &mut pages);
    let mut written = Vec::new();
    for page in pages {
        let name = page.get_filename();
        let mut buf = Vec::new();
        page.render(&mut buf)?;
        kwin_engine::fs::write_output(&dir.join(&name), &buf, 0o644)
            .with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
        written.push(name);
    }
    written.sort();
    out.notes(&[format!(
        "wrote {} manual pages into {}: {}",
        written.len(),
        dir.display(),
        written.join(", ")
    )]);
    Ok(Outcome::Success)
}
