//! Building blocks of the POSIX scripts the Kubernetes modules send to a control plane.

use base64::Engine as _;
use kwin_engine::quote::sh_quote;

/// `kubectl --kubeconfig '<path>'`.
pub(crate) fn kubectl(kubeconfig: &str) -> String {
    format!("kubectl --kubeconfig {}", sh_quote(kubeconfig))
}

/// Guards at the top of every script that talks to the API server: without kubectl or the
/// kubeconfig, print `kwin: no-kubectl` / `kwin: no-kubeconfig` and stop (exit 0: that is an
/// answer, not a failure, e.g. in `kwin plan` before `kubeadm init` ran).
pub(crate) fn cluster_guard(kubeconfig: &str) -> String {
    format!(
        "command -v kubectl >/dev/null 2>&1 || {{ echo 'kwin: no-kubectl'; exit 0; }}\n\
         [ -r {kc} ] || {{ echo 'kwin: no-kubeconfig'; exit 0; }}\n\
         unset KUBECTL_EXTERNAL_DIFF\n",
        kc = sh_quote(kubeconfig)
    )
}

/// A private temporary directory in `$d`, removed when the (sub)shell exits.
pub(crate) const TEMP_DIR: &str = "d=$(mktemp -d) || exit 1\ntrap 'rm -rf \"$d\"' EXIT\n";

/// Write `bytes` to `target` (a shell word, already quoted) from a base64 here-document: any
/// content, no quoting concerns, no stdin needed.
pub(crate) fn write_b64(target: &str, bytes: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut s = format!("base64 -d > {target} <<'KWIN_B64'\n");
    for chunk in b64.as_bytes().chunks(76) {
        s.push_str(&String::from_utf8_lossy(chunk));
        s.push('\n');
    }
    s.push_str("KWIN_B64\n");
    s
}

/// Print `msg` to stderr and exit 1.
pub(crate) fn die(msg: &str) -> String {
    format!("{{ printf '%s\\n' {} >&2; exit 1; }}", sh_quote(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> (String, String, i32) {
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .output()
            .expect("run /bin/sh");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }

    #[test]
    fn b64_round_trips_any_bytes() {
        let content = "line 1\nKWIN_B64\n'quote' $(x) `y`\n\u{fffd} end without newline";
        let s = format!(
            "{TEMP_DIR}{}cat \"$d/f\"",
            write_b64("\"$d/f\"", content.as_bytes())
        );
        let (out, err, rc) = sh(&s);
        assert_eq!((out.as_str(), rc), (content, 0), "{err}");
    }

    #[test]
    fn guard_answers_without_kubeconfig() {
        let (out, _, rc) = sh(&format!(
            "PATH=/nonexistent\n{}echo reached",
            cluster_guard("/nonexistent/admin.conf")
        ));
        assert_eq!((out.as_str(), rc), ("kwin: no-kubectl\n", 0));
        let (out, _, rc) = sh(&format!(
            "kubectl() {{ :; }}\n{}echo reached",
            cluster_guard("/nonexistent/admin.conf")
        ));
        assert_eq!((out.as_str(), rc), ("kwin: no-kubeconfig\n", 0));
    }
}
