//! kwin's digests (`plans/digests.toml`): the table parses, and every file it pins at a git tag
//! (`https://raw.githubusercontent.com/<owner>/<repo>/<tag>/<path>`, which serves the git blob
//! as it is) has exactly the SHA-256 of that blob in the upstream repository — recomputed from
//! git mirrors of the repositories when they are at hand (`KWIN_UPSTREAM_MIRRORS`, a directory
//! of `<owner>+<repo>/repo` git directories; default `/work/.mirror`). Without the mirrors only
//! the table itself is checked, and the test says so.

use kwin_engine::checksums::Known;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_table_parses_and_pins_the_default_versions() {
    let k = Known::parse(kwin_modules::recipes::DIGESTS).expect("plans/digests.toml");
    let all = k.all_sha256();
    assert!(all.len() > 100, "{} digests", all.len());
    for url in [
        "https://raw.githubusercontent.com/flannel-io/flannel/v0.26.7/Documentation/kube-flannel.yml",
        "https://raw.githubusercontent.com/projectcalico/calico/v3.29.7/manifests/tigera-operator.yaml",
        "https://raw.githubusercontent.com/containerd/containerd/v1.7.29/containerd.service",
        "https://github.com/containerd/containerd/releases/download/v1.7.29/containerd-1.7.29-linux-amd64.tar.gz",
        "https://github.com/opencontainers/runc/releases/download/v1.3.3/runc.amd64",
        "https://github.com/Mirantis/cri-dockerd/releases/download/v0.3.17/cri-dockerd-0.3.17.amd64.tgz",
    ] {
        assert!(k.sha256(url).is_some(), "no digest of {url}");
    }
    assert_eq!(
        k.fingerprint("https://pkgs.k8s.io/core:/stable:/v1.31/deb/Release.key"),
        Some("DE15B14486CD377B9E876E1A234654DA9A296436")
    );
    assert_eq!(
        k.fingerprint("https://pkgs.k8s.io/core:/stable:/v1.31/rpm/Release.key"),
        None
    );
    assert_eq!(
        k.fingerprint("https://pkgs.k8s.io/core:/stable:/x/deb/Release.key"),
        None
    );
}

#[test]
#[allow(clippy::print_stderr)]
fn git_tag_digests_are_the_blobs_of_the_tags() {
    let mirrors = PathBuf::from(
        std::env::var("KWIN_UPSTREAM_MIRRORS").unwrap_or_else(|_| "/work/.mirror".into()),
    );
    let k = Known::parse(kwin_modules::recipes::DIGESTS).expect("plans/digests.toml");
    let (mut checked, mut missing) = (0, Vec::new());
    for (url, want) in k.all_sha256() {
        let Some(rest) = url.strip_prefix("https://raw.githubusercontent.com/") else {
            continue;
        };
        let mut parts = rest.splitn(4, '/');
        let (Some(owner), Some(repo), Some(tag), Some(path)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            panic!("not a raw tag URL: {url}");
        };
        let git_dir = mirrors.join(format!("{owner}+{repo}")).join("repo");
        if !git_dir.exists() {
            missing.push(format!("{owner}/{repo}"));
            continue;
        }
        // A mirror older than the tag cannot tell (the snapshot lags upstream): named below.
        let has_tag = Command::new("git")
            .arg("-C")
            .arg(&git_dir)
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{tag}^{{commit}}"),
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has_tag {
            missing.push(format!("{owner}/{repo}@{tag}"));
            continue;
        }
        let out = Command::new("git")
            .arg("-C")
            .arg(&git_dir)
            .args(["show", &format!("{tag}:{path}")])
            .output()
            .expect("git");
        assert!(out.status.success(), "{url}: {out:?}");
        use sha2::Digest;
        let got = hex::encode(sha2::Sha256::digest(&out.stdout));
        assert_eq!(got, want, "{url}: the blob at the tag has another SHA-256");
        checked += 1;
    }
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        eprintln!(
            "no git mirror of {} under {}: their digests were not recomputed",
            missing.join(", "),
            mirrors.display()
        );
    }
    eprintln!("{checked} git-tag digests recomputed from the mirrors");
}
