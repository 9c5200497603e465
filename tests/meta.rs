//! What kwin says about itself, through the binary: `kwin --version` (the commit, every
//! component version kwin pins by default and what its digests cover — read here from the
//! source of the defaults and from plans/digests.toml, not from the binary's own list),
//! `kwin completions bash` loaded by the real bash, and `kwin man` checked by groff.

use kwin_testkit::kwin;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every subcommand name of `kwin --help` ("Commands:" up to the next blank line).
fn subcommands() -> Vec<String> {
    let r = kwin!(".", ["--help"]);
    assert_eq!(r.code, 0, "{r}");
    let list = r
        .stdout
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .next()
        .unwrap_or("");
    let names: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 14, "{names:?}");
    names
}

/// The string constants of `mod windows { ... }` in defaults.rs (`pub const X: &str = "v";`),
/// and the support matrix's default pins (`versions.toml` `[matrix.defaults]`).
fn pinned_in_source() -> Vec<(String, String)> {
    let src = std::fs::read_to_string(root().join("engine/src/plan/effective/defaults.rs"))
        .expect("defaults.rs");
    let ast = syn::parse_file(&src).expect("defaults.rs parses");
    let mut out = Vec::new();
    for item in &ast.items {
        if let syn::Item::Mod(m) = item {
            if m.ident != "windows" {
                continue;
            }
            for item in &m.content.as_ref().expect("inline module").1 {
                if let syn::Item::Const(c) = item {
                    if let syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) = &*c.expr
                    {
                        out.push((format!("windows::{}", c.ident), s.value()));
                    }
                }
            }
        }
    }
    let table: toml::Table = toml::from_str(
        &std::fs::read_to_string(root().join("engine/src/plan/versions.toml")).expect("table"),
    )
    .expect("TOML");
    for (k, v) in table["matrix"]["defaults"]
        .as_table()
        .expect("[matrix.defaults]")
    {
        if k != "source" {
            out.push((
                format!("matrix.defaults.{k}"),
                v.as_str().unwrap_or("?").into(),
            ));
        }
    }
    out
}

#[test]
fn version_names_the_commit_and_every_pinned_default() {
    let r = kwin!(".", ["--version"]);
    assert_eq!(r.code, 0, "{r}");
    let first = r.stdout.lines().next().unwrap_or("");
    let version = env!("CARGO_PKG_VERSION");
    let rest = first
        .strip_prefix(&format!("kwin {version} (commit "))
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("first line: {first}"));
    let hex = rest.strip_suffix("-dirty").unwrap_or(rest);
    assert!(
        hex == "unknown" || (hex.len() == 7 && hex.chars().all(|c| c.is_ascii_hexdigit())),
        "{first}"
    );
    // in a git checkout, the commit is HEAD's
    if root().join(".git").exists() {
        let head = Command::new("git")
            .arg("-C")
            .arg(root())
            .args(["rev-parse", "--short=7", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        if let Some(head) = head {
            assert_eq!(hex, head, "{first}");
        }
    }
    // -V is the first line alone
    let short = kwin!(".", ["-V"]);
    assert_eq!(short.stdout.trim(), first);

    let pinned = pinned_in_source();
    // CNI/runtime versions and the Windows ones
    assert!(pinned.len() >= 11, "{pinned:?}");
    let missing: Vec<String> = pinned
        .iter()
        .filter(|(_, v)| !r.stdout.contains(v.as_str()))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    assert!(missing.is_empty(), "not in --version: {missing:?}\n{r}");

    // the Kubernetes minors and kubeadm's pause per minor, from the version table
    let table: toml::Table = toml::from_str(
        &std::fs::read_to_string(root().join("engine/src/plan/versions.toml")).expect("table"),
    )
    .expect("TOML");
    let k = &table["kubernetes"];
    let range = format!(
        "{} to {}",
        k["oldest"].as_str().expect("oldest"),
        k["newest"].as_str().expect("newest")
    );
    assert!(r.stdout.contains(&range), "{range}: {r}");
    for (minor, v) in table["pause"]["minors"].as_table().expect("minors") {
        let want = format!("{minor}: {}", v.as_str().unwrap_or("?"));
        assert!(r.stdout.contains(&want), "{want}: {r}");
    }
    // the support matrix: each minor with its patch releases, and the starter's release
    for row in table["matrix"]["minors"].as_array().expect("rows") {
        let (minor, latest) = (row["minor"].as_str(), row["latest_patch"].as_str());
        let want = format!("{}.0 to {}", minor.unwrap_or("?"), latest.unwrap_or("?"));
        assert!(r.stdout.contains(&want), "{want}: {r}");
    }
    let newest = kwin_engine::plan::support::newest_release();
    let init = r.stdout.lines().find(|l| l.contains("(kwin init)"));
    assert!(
        init.is_some_and(|l| l.split_whitespace().any(|w| w == newest)),
        "{r}"
    );

    // every artifact kwin ships digests of, with its newest version
    let digests: toml::Table = toml::from_str(
        &std::fs::read_to_string(root().join("plans/digests.toml")).expect("digests"),
    )
    .expect("TOML");
    let artifacts = digests["artifact"].as_array().expect("artifacts");
    assert!(artifacts.len() >= 5);
    for a in artifacts {
        let url = a["url"].as_str().expect("url");
        let file = url.rsplit('/').next().unwrap_or(url);
        let line = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{file} ")))
            .unwrap_or_else(|| panic!("{file} not in --version:\n{r}"));
        let n = a["sha256"].as_table().map_or(0, |t| t.len());
        assert!(line.contains(&format!("({n} versions)")), "{line}");
    }
}

#[test]
fn bash_completion_defines_its_function_and_completes_subcommands() {
    let dir = tempfile::tempdir().expect("tmp");
    let r = kwin!(".", ["completions", "bash"]);
    assert_eq!(r.code, 0, "{r}");
    let script = dir.path().join("kwin.bash");
    std::fs::write(&script, &r.stdout).expect("write");
    // Source it in the real bash, then ask its completion function what `kwin <prefix>`
    // completes to, as bash's programmable completion would.
    let complete = |line: &str| -> Vec<String> {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "source {script:?} || exit 3\n\
             complete -p kwin || exit 4\n\
             fn=$(complete -p kwin | sed -n 's/.*-F \\([^ ]*\\) kwin$/\\1/p')\n\
             COMP_WORDS=({words})\n\
             COMP_CWORD={cword}\n\
             COMP_LINE={line:?}\n\
             COMP_POINT={point}\n\
             \"$fn\" kwin {cur:?} {prev:?}\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            words = words
                .iter()
                .map(|w| format!("{w:?}"))
                .collect::<Vec<_>>()
                .join(" "),
            cword = words.len() - 1,
            point = line.len(),
            cur = words.last().copied().unwrap_or(""),
            prev = words
                .get(words.len().saturating_sub(2))
                .copied()
                .unwrap_or(""),
        );
        let out = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &program])
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines();
        let registered = lines.next().unwrap_or("");
        assert!(registered.starts_with("complete "), "{registered}");
        lines.map(str::to_string).collect()
    };
    let all = complete("kwin ");
    for cmd in subcommands() {
        assert!(all.contains(&cmd), "`kwin <TAB>` lacks {cmd}: {all:?}");
    }
    assert_eq!(complete("kwin va"), ["validate"]);
    let init = complete("kwin init --");
    for flag in ["--cni", "--windows-workers", "--linux-workers", "--out"] {
        assert!(init.iter().any(|f| f == flag), "{flag}: {init:?}");
    }
    assert!(complete("kwin apply --").iter().any(|f| f == "--var"));
}

#[test]
fn every_shell_gets_a_script() {
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kwin"),
        ("fish", "complete -c kwin"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[kwin]"),
    ] {
        let r = kwin!(".", ["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {r}");
        assert!(r.stdout.contains(mark), "{shell}: {}", r.stdout);
        assert!(r.stdout.contains("validate"), "{shell}");
    }
}

/// groff's warnings on a page (`-ww`: all of them); the page must format with none.
fn groff_warnings(page: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("groff")
        .args(["-man", "-Tutf8", "-z", "-ww"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("groff (apt groff-base)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(page.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("groff");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn man_pages_are_valid_roff_and_name_every_command() {
    let r = kwin!(".", ["man"]);
    assert_eq!(r.code, 0, "{r}");
    let page = &r.stdout;
    assert!(page.contains(".TH kwin 1"), "{page}");
    assert_eq!(groff_warnings(page), "");
    // the check is not blind: an unknown macro is reported
    assert_ne!(groff_warnings(&format!("{page}\n.NOSUCHMACRO x\n")), "");
    let commands = subcommands();
    for cmd in &commands {
        assert!(
            page.contains(&format!("kwin\\-{cmd}(1)")),
            "kwin.1 does not name {cmd}"
        );
    }
    // one page per command in a directory, each valid
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("man1");
    let r = kwin!(".", ["man", "--out-dir", out.to_str().expect("utf-8")]);
    assert_eq!(r.code, 0, "{r}");
    for cmd in &commands {
        let p = out.join(format!("kwin-{cmd}.1"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(text.contains(&format!(".TH kwin-{cmd} 1")), "{text}");
        assert_eq!(groff_warnings(&text), "", "kwin-{cmd}.1");
    }
    assert!(out.join("kwin.1").is_file());
    // the init page documents its options
    let init = std::fs::read_to_string(out.join("kwin-init.1")).expect("kwin-init.1");
    assert!(init.contains("windows\\-transport"), "{init}");
}

/// `kwin man --out-dir` into a directory where links were planted at the pages' names: the
/// links' targets get nothing, the pages are new files of the user running kwin; a directory
/// other accounts may rename entries in is refused. (Before: the pages were written through
/// the links.)
#[test]
fn man_pages_never_go_through_a_planted_link() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("man1");
    std::fs::create_dir(&out).expect("mkdir");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "victim\n").expect("write");
    for page in ["kwin.1", "kwin-init.1"] {
        std::os::unix::fs::symlink(&victim, out.join(page)).expect("symlink");
    }
    let r = kwin!(".", ["man", "--out-dir", out.to_str().expect("utf-8")]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "victim\n");
    for page in ["kwin.1", "kwin-init.1"] {
        let m = std::fs::symlink_metadata(out.join(page)).expect("page");
        assert!(m.is_file(), "{page} is still a link");
    }
    // A directory any account may rename entries in (no sticky bit).
    use std::os::unix::fs::PermissionsExt;
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let r = kwin!(".", ["man", "--out-dir", open.to_str().expect("utf-8")]);
    assert_ne!(r.code, 0, "{r}");
    assert!(r.stderr.contains("writable by other accounts"), "{r}");
}
