//! What the operator sees in the human form, through the binary (local hosts and a closed
//! port; no lab):
//! - on a terminal with `TERM=dumb` `kwin plan` keeps its diffs and per-task lines (plain
//!   lines, no cursor movement); with `TERM=xterm` they are printed above the progress bars
//!   (a pseudo-terminal from util-linux `script`);
//! - a run that reached no host says so and fails, never "(no changes)"; "1 host";
//! - the table's `failed` column and the last line's `failed` count the same tasks;
//! - the host logs' folder on stderr at the end of every run and on failure;
//! - a heartbeat for a long task when stdout is not a terminal (`KWIN_HEARTBEAT_SECS`);
//! - `kwin show` prints the last run's table and last line again.

use kwin_testkit::kwin::Run;
use std::path::Path;
use std::process::Command;

fn run(dir: &Path, args: &[&str]) -> Run {
    kwin_testkit::kwin!(dir).args(args).run()
}

fn write_plan(dir: &Path, body: &str) {
    let plan = format!("[settings]\nretries = 0\n\n{body}");
    std::fs::write(dir.join("plan.toml"), plan).expect("plan");
}

fn local_host(name: &str) -> String {
    format!("[[hosts]]\nname = \"{name}\"\nos = \"linux\"\ntransport = \"local\"\n\n")
}

fn gone_host(name: &str) -> String {
    format!(
        "[[hosts]]\nname = \"{name}\"\naddress = \"127.0.0.1\"\nport = 1\nos = \"linux\"\nuser = \"root\"\n\n"
    )
}

fn file_task(dir: &Path, name: &str) -> String {
    format!(
        "[[tasks]]\nname = \"{name}\"\nmodule = \"file\"\nparams = {{ path = \"{}/{name}\", content = \"hi\\n\" }}\n\n",
        dir.display()
    )
}

/// `kwin` on a pseudo-terminal (`script -qec`), with `TERM`: what the terminal got.
fn on_terminal(dir: &Path, term: &str, args: &str) -> String {
    let bin = std::env::var("KWIN_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kwin").into());
    let out = Command::new("script")
        .args(["-qec", &format!("{bin} {args}"), "/dev/null"])
        .current_dir(dir)
        .env("TERM", term)
        .output()
        .expect("script (util-linux) runs");
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

#[test]
fn plan_on_a_dumb_terminal_keeps_its_diffs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write_plan(d, &(local_host("l1") + &file_task(d, "motd")));
    let dumb = on_terminal(d, "dumb", "plan plan.toml");
    for want in [
        "l1: create motd (missing)",
        "    +hi",
        "plan: 1 host, 0 ok, 1 to change",
    ] {
        assert!(
            dumb.lines().any(|l| l.starts_with(want)),
            "TERM=dumb: no line `{want}`:\n{dumb}"
        );
    }
    assert!(
        !dumb.contains('\u{1b}'),
        "cursor movement on a dumb terminal:\n{dumb:?}"
    );
    // A capable terminal gets the same lines, above its progress bars.
    let xterm = on_terminal(d, "xterm", "plan plan.toml");
    for want in [
        "l1: create motd (missing)",
        "+hi",
        "plan: 1 host, 0 ok, 1 to change",
    ] {
        assert!(xterm.contains(want), "TERM=xterm: no `{want}`:\n{xterm:?}");
    }
    assert!(
        xterm.contains('\u{1b}'),
        "no progress bars on xterm:\n{xterm:?}"
    );
}

#[test]
fn a_run_that_reached_no_host_says_so_and_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write_plan(d, &(gone_host("g1") + &file_task(d, "motd")));
    let r = run(d, &["plan", "plan.toml"]);
    assert_eq!(r.code, 1, "{r}");
    let last = r.last_line();
    assert!(
        last.starts_with("plan: no host reached (1 host failed)"),
        "{r}"
    );
    assert!(!last.contains("no changes"), "{r}");
    assert!(r.stdout.starts_with("plan: 1 host, 1 task\n"), "{r}");
}

#[test]
fn failed_counts_the_same_tasks_in_the_table_and_the_last_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let fails = format!(
        "[[tasks]]\nname = \"fails\"\nmodule = \"command\"\non = {{ hosts = [\"l1\"] }}\nparams = {{ run = \"false\", creates = \"{}/never\" }}\n\n",
        d.display()
    );
    write_plan(
        d,
        &(local_host("l1") + &local_host("l2") + &gone_host("g1") + &fails + &file_task(d, "motd")),
    );
    let r = run(d, &["apply", "plan.toml"]);
    assert_eq!(r.code, 1, "{r}");
    // host  ok  changed  failed  skipped  time
    let column: usize = r
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("host "))
        .skip(1)
        .take_while(|l| !l.starts_with("apply:"))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
        .sum();
    let last = r.last_line();
    assert!(
        last.contains(&format!(", {column} failed,")),
        "the table's failed column sums to {column}:\n{r}"
    );
    assert!(last.starts_with("apply: 3 hosts (1 failed),"), "{r}");
    // The logs' folder, on stderr, exists.
    let logs = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("logs: "))
        .unwrap_or_else(|| panic!("no logs line:\n{r}"));
    let folder = logs.split(' ').next().unwrap_or("");
    assert!(d.join(folder).join("l1.log").is_file(), "{r}");

    // `kwin show` tells the same run again.
    let show = run(d, &["show"]);
    assert_eq!(show.code, 0, "{show}");
    let head = last.split(" in ").next().unwrap_or(last);
    assert!(show.last_line().starts_with(head), "{show}\n{r}");
    assert!(show.stdout.contains("l1: failed fails"), "{show}");
}

#[test]
fn a_long_task_gives_a_heartbeat_when_not_on_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let slow = format!(
        "[[tasks]]\nname = \"slow\"\nmodule = \"command\"\nparams = {{ run = \"sleep 2.5\", creates = \"{}/never\" }}\n",
        d.display()
    );
    write_plan(d, &(local_host("l1") + &slow));
    // The command never creates its file: it runs (and fails) every time, 2.5 s long.
    let r = kwin_testkit::kwin!(d)
        .args(["apply", "plan.toml"])
        .env("KWIN_HEARTBEAT_SECS", "1")
        .run();
    for want in ["still running: l1 slow (1s)", "still running: l1 slow (2s)"] {
        assert!(r.stdout.lines().any(|l| l == want), "no `{want}`:\n{r}");
    }
    let json = kwin_testkit::kwin!(d)
        .args(["apply", "plan.toml", "--output", "json"])
        .env("KWIN_HEARTBEAT_SECS", "1")
        .run();
    assert!(
        json.events()
            .iter()
            .any(|e| e["event"] == "still_running" && e["task"] == "slow"),
        "{json}"
    );
}

/// Bytes a host controls never reach the operator's terminal as control sequences: an OSC 52
/// clipboard write, a window title, an erase-line and a carriage return that would forge an
/// `ok` row, a C1 CSI — in `kwin exec`'s output, a plan's diff of a file's current content, a
/// failed step's error excerpt, `-v` output, and `kwin show`. They show as escapes (`\x1b`,
/// `\r`, `\u{9b}`); newlines and tabs stay. (Before: every one reached the terminal raw.)
#[test]
fn control_characters_from_hosts_show_as_escapes() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let hostile = "\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2K\rh1: ok\u{9b}31m";
    std::fs::write(d.join("motd"), format!("old\t{hostile}\n")).expect("write");
    std::fs::write(d.join("evil.sh"), format!("printf '%s\\n' '{hostile}'\n")).expect("write");
    write_plan(
        d,
        &format!(
            "{}[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ path = \"{}/motd\", content = \"new\\n\" }}\n\n\
             [[tasks]]\nname = \"evil\"\nmodule = \"command\"\nparams = {{ run = \"sh {}/evil.sh; sh {}/evil.sh >&2; false\", creates = \"{}/never\" }}\n",
            local_host("h1"),
            d.display(),
            d.display(),
            d.display(),
            d.display()
        ),
    );
    let evil = format!("sh {}/evil.sh; sh {}/evil.sh >&2", d.display(), d.display());
    let runs = [
        ("exec", run(d, &["exec", "plan.toml", "--", &evil])),
        ("plan", run(d, &["plan", "plan.toml"])),
        ("apply -v", run(d, &["apply", "plan.toml", "-v"])),
        ("show", run(d, &["show", "plan.toml"])),
    ];
    for (what, r) in &runs {
        let text = r.out();
        assert!(
            text.contains("h1: ok") || text.contains("owned"),
            "{what}: the host's text is shown: {text}"
        );
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| {
                (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
            })
            .collect();
        assert!(
            raw.is_empty(),
            "{what}: control characters reach the terminal: {raw:?}\n{text:?}"
        );
        assert!(
            text.contains("\\x1b]52;c;"),
            "{what}: shown as an escape: {text}"
        );
    }
    // The host logs, read with `cat`, too.
    for f in kwin_testkit::kwin::walk(&d.join(".kwin/logs")) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).expect("log")).into_owned();
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{}: {text:?}",
            f.display()
        );
    }
}
