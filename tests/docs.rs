//! README.md and docs/ against the code: README's first screen gets a newcomer from install to
//! a lab and to a real-VM plan (the Rust version it names is Cargo.toml's, each command it
//! gives is a real one); every command of the binary is in README's command table or the
//! docs; the docs' contents table lists every page; every link between them resolves.

use kwin_testkit::kwin;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Pages of docs/ that other parts of the project write (host subsets and ad-hoc commands,
/// the JSON event stream, the exit codes): linked from the contents before they exist.
const WRITTEN_ELSEWHERE: &[&str] = &["operating.md", "json-events.md", "exit-codes.md"];

/// Every subcommand of `kwin --help`.
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
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

/// The first screen: README's first 50 lines.
fn first_screen() -> String {
    read("README.md")
        .lines()
        .take(50)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `sh` blocks of `text`.
fn sh_blocks(text: &str) -> Vec<String> {
    text.split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_first_screen_has_install_the_lab_the_real_vm_path_and_the_tests() {
    let screen = first_screen();
    // the Rust version is the one Cargo.toml requires
    let cargo: toml::Table = toml::from_str(&read("Cargo.toml")).expect("Cargo.toml");
    let rust = cargo["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("workspace rust-version");
    let pkg = &cargo["package"]["rust-version"];
    assert_eq!(
        pkg.get("workspace").and_then(|w| w.as_bool()),
        Some(true),
        "the kwin package takes the workspace's rust-version"
    );
    assert!(
        screen.contains(&format!("Rust {rust} or newer")),
        "README's first screen must name Rust {rust}:\n{screen}"
    );
    // what building needs besides Rust (libssh2 links OpenSSL), and the way from Windows
    for needed in ["libssl-dev", "pkg-config", "WSL2"] {
        assert!(
            screen.contains(needed),
            "README's install names no {needed}:\n{screen}"
        );
    }
    assert!(
        read("docs/real-vms.md").contains("\n## The controller on Windows (WSL2)\n"),
        "the WSL2 section README links"
    );
    let blocks = sh_blocks(&screen);
    // the lab: ONE command line that sets up the lab and runs kwin's main job on it
    let lab = blocks
        .iter()
        .find(|b| b.contains("lab/up.sh"))
        .expect("a lab block");
    assert_eq!(lab.trim().lines().count(), 1, "{lab}");
    // ... a real cluster: the lab's build, hosts able to run a kubelet, its registry and mirror,
    // then the plan lab/cluster/up.sh writes, as tests/e2e_real_cluster.rs runs them
    for step in [
        "lab/build/build.sh",
        "lab/up.sh 3 --nodes",
        "lab/cluster/up.sh",
        "apply target/lab/cluster/plan.toml",
    ] {
        assert!(
            lab.contains(step),
            "README's lab command runs no {step}: {lab}"
        );
    }
    for script in ["lab/build/build.sh", "lab/up.sh", "lab/cluster/up.sh"] {
        assert!(root().join(script).is_file(), "{script}");
    }
    let real = read("tests/e2e_real_cluster.rs");
    for used in [
        "\"lab/up.sh\", &[\"3\", \"--nodes\"]",
        "\"lab/cluster/up.sh\"",
    ] {
        assert!(
            real.contains(used),
            "tests/e2e_real_cluster.rs no longer runs {used}"
        );
    }
    // the real-VM path: five commands, init → validate → plan → apply → kubeconfig
    let vms = blocks
        .iter()
        .find(|b| b.contains("kwin init"))
        .expect("a real-VM block");
    let verbs: Vec<&str> = vms
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        verbs,
        ["init", "validate", "plan", "apply", "kubeconfig"],
        "{vms}"
    );
    let known = subcommands();
    for v in &verbs {
        assert!(known.iter().any(|k| k == v), "`kwin {v}` is no command");
    }
    // the init line's flags are accepted (into a temporary directory)
    let init = vms.lines().next().unwrap_or("");
    let args: Vec<&str> = init
        .split('#')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .collect();
    let dir = tempfile::tempdir().expect("tmp");
    let r = kwin!(dir.path(), args);
    assert_eq!(r.code, 0, "{init}: {r}");
    assert!(dir.path().join("plan.toml").is_file(), "{init}: {r}");
    // the tests: the one command, in the section testkit's tier check reads
    assert!(screen.contains("\n## Tests\n"), "{screen}");
    assert!(blocks
        .iter()
        .any(|b| b.trim() == "cargo test --workspace -- --include-ignored"));
}

/// README's command table: the first word after `kwin ` of each row's first cell (a cell may
/// name two commands, `kwin modules`, `kwin doc MODULE`).
fn readme_table_commands() -> Vec<String> {
    let readme = read("README.md");
    let section = readme
        .split("\n## Commands\n")
        .nth(1)
        .expect("README has a Commands section")
        .split("\n## ")
        .next()
        .unwrap_or("");
    let mut out = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `kwin ")) {
        let cell = line.split('|').nth(1).unwrap_or("");
        for part in cell.split("`kwin ").skip(1) {
            if let Some(w) = part.split(['`', ' ']).next() {
                out.push(w.to_string());
            }
        }
    }
    out
}

#[test]
fn every_command_is_in_the_readme_table_or_the_docs() {
    let table = readme_table_commands();
    assert!(table.len() >= 10, "{table:?}");
    let docs: String = std::fs::read_dir(root().join("docs"))
        .expect("docs")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let mut missing = Vec::new();
    for cmd in subcommands() {
        let in_docs =
            docs.contains(&format!("`kwin {cmd} ")) || docs.contains(&format!("`kwin {cmd}`"));
        if !table.contains(&cmd) && !in_docs {
            missing.push(cmd);
        }
    }
    assert!(
        missing.is_empty(),
        "commands neither in README's table nor in docs/: {missing:?}"
    );
    // and the table names no command that does not exist
    let known = subcommands();
    let stale: Vec<&String> = table.iter().filter(|c| !known.contains(c)).collect();
    assert!(stale.is_empty(), "README's table names {stale:?}");
}

#[test]
fn the_contents_table_lists_every_page_and_every_link_resolves() {
    let contents = read("docs/README.md");
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    pages.sort();
    assert!(pages.len() >= 8, "{pages:?}");
    for p in &pages {
        assert!(
            contents.contains(&format!("]({p})")),
            "docs/README.md does not list {p}"
        );
    }
    for p in WRITTEN_ELSEWHERE {
        assert!(contents.contains(&format!("]({p})")), "{p}");
    }
    // every relative link of README.md and docs/*.md resolves (anchors dropped)
    let mut files = vec![PathBuf::from("README.md")];
    files.extend(pages.iter().map(|p| Path::new("docs").join(p)));
    files.push(PathBuf::from("docs/README.md"));
    let mut broken = Vec::new();
    for f in &files {
        let text = read(f.to_str().expect("utf-8"));
        let dir = f.parent().unwrap_or(Path::new(""));
        for link in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
            if link.starts_with("http") || link.starts_with('#') {
                continue;
            }
            let path = link.split('#').next().unwrap_or(link);
            let name = Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            if WRITTEN_ELSEWHERE.contains(&name) {
                continue;
            }
            if !root().join(dir).join(path).exists() {
                broken.push(format!("{}: {link}", f.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// README's own words do not describe the JSON output or the exit codes: the pages that do
/// are linked instead.
#[test]
fn readme_links_the_json_and_exit_code_pages_instead_of_describing_them() {
    let readme = read("README.md");
    assert!(readme.contains("(docs/json-events.md)"));
    assert!(readme.contains("(docs/exit-codes.md)"));
    for words in [
        "JSON lines",
        "one event per line",
        "exit 1",
        "--detailed-exitcode",
    ] {
        assert!(!readme.contains(words), "README describes `{words}` itself");
    }
}
