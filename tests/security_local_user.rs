//! A hostile local user on a managed host: an unprivileged account (`mallory`, no sudo) on a
//! lab host races kwin's file writes with `security_local_user/attacker.py`, planting FIFOs
//! and links to FIFOs at the temporary names it can predict (the old ones,
//! `.kwin-<shell pid>-<tag>`, which need no secret: the pid is in /proc and the tag is the
//! same every time the same content is written) and swapping kwin's temporary file for a link
//! to a root-owned file in a directory it owns.
//!
//! Over several rounds, each starting from a drifted host (so kwin writes both files again):
//! - a 0600 secret root writes into a world-writable sticky directory never reaches the
//!   attacker (no byte of it in anything the attacker read), and the managed path is root's
//!   regular file with the secret, never the attacker's FIFO or link;
//! - a file root writes for the attacker in the attacker's own directory (`owner`, `mode`)
//!   never makes root `chown`/`chmod` another file: the root-owned victim keeps its owner,
//!   mode and content. kwin may refuse that write ("was replaced ...; refusing"), never
//!   follow the swap.
//!
//! Lab 8 (`KWIN_LAB_ID=8`); needs root (lab hosts), like every lab test. CI runs it as root.

use kwin_testkit::{kwin, lab::lab};
use std::sync::Mutex;
const LAB_ID: &str = "8";
/// The tests of this file share lab 8, one at a time.
static LAB8: Mutex<()> = Mutex::new(());
const ROUNDS: usize = 6;
const SHARED: &str = "/srv/shared";
const OWN: &str = "/srv/mallory";
const VICTIM: &str = "/etc/kwin-victim";
const ATTACKER: &str = include_str!("security_local_user/attacker.py");
const LINKS: &str = include_str!("security_local_user/links.py");

use kwin_modules::linux::script::sha256_hex;

kwin_testkit::lab_test! {
#[test]
fn a_hostile_local_user_reads_nothing_and_replaces_nothing() {
    let _one = LAB8.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("KWIN_LAB_ID", LAB_ID);
    let lab = lab(1);
    let secret = format!("db_password={}\n", kwin_engine::fact::new_nonce());
    let secret_path = format!("{SHARED}/app.conf");
    // The tag of the old temporary name: 12 hex digits of sha256(path, NUL, content).
    let old_tag = {
        let mut b = secret_path.as_bytes().to_vec();
        b.push(0);
        b.extend_from_slice(secret.as_bytes());
        sha256_hex(&b)[..12].to_string()
    };
    let q = kwin_engine::quote::sh_quote;
    lab.ssh(
        "h1",
        &format!(
            "set -e\n\
             id -u mallory >/dev/null 2>&1 || useradd -M -s /bin/sh mallory\n\
             rm -rf {SHARED} {OWN} /srv/loot /srv/stop /srv/attacker.log\n\
             mkdir -p -m 1777 {SHARED}\n\
             mkdir -m 0755 {OWN} && chown mallory:mallory {OWN}\n\
             printf 'victim\\n' > {VICTIM} && chown root:root {VICTIM} && chmod 0600 {VICTIM}\n\
             : > /srv/loot && chown mallory /srv/loot\n\
             printf '%s' {} > /srv/attacker.py\n",
            q(ATTACKER)
        ),
    );

    // mallory is an ordinary account: no sudo rule names it (kwuser's is the lab's only one).
    assert_eq!(
        lab.ssh(
            "h1",
            "grep -rl mallory /etc/sudoers /etc/sudoers.d 2>/dev/null | wc -l"
        )
        .trim(),
        "0"
    );

    let tool = "#!/bin/sh\necho tool\n";
    let plan = format!(
        r#"inventory = "x"

[settings]
retries = 0

[[hosts]]
name = "h1"
os = "linux"

[[tasks]]
name = "secret"
module = "file"
on = {{ os = "linux" }}
params = {{ path = "{secret_path}", content = {secret:?}, mode = "0600" }}

[[tasks]]
name = "tool"
module = "file"
on = {{ os = "linux" }}
after = ["secret"]
params = {{ path = "{OWN}/tool", content = {tool:?}, owner = "mallory", mode = "0755" }}
"#
    );
    let dir = lab.plan_dir(&plan);

    for round in 0..ROUNDS {
        // Drift: a large old content (kwin hashes it before writing: the attacker sees root's
        // sha256sum and its shell), the tool gone. Then the attacker starts, as mallory.
        lab.ssh(
            "h1",
            &format!(
                "set -e\n\
                 rm -f /srv/stop {secret_path} {OWN}/tool\n\
                 dd if=/dev/zero of={secret_path} bs=1M count=16 2>/dev/null\n\
                 chmod 0600 {secret_path}\n\
                 setsid -f setpriv --reuid=mallory --regid=mallory --clear-groups \
                 /usr/bin/python3 /srv/attacker.py {SHARED} {OWN} {VICTIM} {old_tag} \
                 .app.conf.kwin-put /srv/loot /srv/stop 60 \
                 </dev/null >>/srv/attacker.log 2>&1\n\
                 i=0; until [ \"$(grep -c '^attacker: ready' /srv/attacker.log)\" -gt {round} ]; do\n\
                 i=$((i+1)); [ $i -lt 300 ] || {{ echo attacker did not start >&2; exit 1; }}; sleep 0.1; done\n"
            ),
        );
        let r = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
        lab.ssh(
            "h1",
            &format!(
                "touch /srv/stop; i=0\n\
                 until [ \"$(grep -c '^attacker: done' /srv/attacker.log)\" -gt {round} ]; do\n\
                 i=$((i+1)); [ $i -lt 300 ] || {{ echo attacker did not stop >&2; exit 1; }}; sleep 0.1; done\n"
            ),
        );

        // No byte of the secret reached the attacker.
        let raw = lab.ssh("h1", "cat /srv/loot");
        assert!(
            !raw.contains(secret.trim_end()),
            "round {round}: the attacker read the secret ({} bytes of loot)\n{r}",
            raw.len()
        );
        // The managed path is root's regular file holding the secret.
        let st = lab.ssh(
            "h1",
            &format!("stat -c '%F %U %a' {secret_path}; sha256sum < {secret_path}"),
        );
        assert_eq!(
            st,
            format!(
                "regular file root 600\n{}  -\n",
                sha256_hex(secret.as_bytes())
            ),
            "round {round}: {secret_path} was replaced\n{r}"
        );
        // Root changed nothing of the victim.
        let v = lab.ssh(
            "h1",
            &format!("stat -c '%F %U %G %a' {VICTIM}; cat {VICTIM}"),
        );
        assert_eq!(
            v, "regular file root root 600\nvictim\n",
            "round {round}: root changed {VICTIM} through a swapped temporary file\n{r}"
        );
        let secret_task = r.task("h1", "secret");
        assert!(
            matches!(secret_task["status"].as_str(), Some("changed" | "ok")),
            "round {round}: the secret was not written\n{r}"
        );
        let tool_task = r.task("h1", "tool");
        let tool_ok = matches!(tool_task["status"].as_str(), Some("changed" | "ok"));
        assert!(
            tool_ok || tool_task.to_string().contains("refusing"),
            "round {round}: the tool write failed for another reason\n{r}"
        );

        eprintln!(
            "round {round}: secret {}, tool {}",
            secret_task["status"], tool_task["status"]
        );
        if tool_ok {
            let t = lab.ssh(
                "h1",
                &format!("stat -c '%F %U %a' {OWN}/tool; cat {OWN}/tool"),
            );
            assert!(
                t == format!("regular file mallory 755\n{tool}") || t.starts_with("symbolic link"),
                "round {round}: {t}"
            );
        }
    }

    // The attacker was there: it saw root's writes and planted names.
    let log = lab.ssh("h1", "cat /srv/attacker.log");
    let planted: usize = log
        .lines()
        .filter_map(|l| l.strip_prefix("attacker: done: planted "))
        .filter_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
        .sum();
    assert!(planted > ROUNDS, "the attacker planted nothing:\n{log}");
    eprintln!(
        "attacker: {planted} names planted, {} swaps in its own directory",
        log.lines().filter(|l| l.contains(": swapped ")).count()
    );
}
}

kwin_testkit::lab_test! {
/// The same account points names in its own directory at root's files: the file root writes
/// for it (`app.conf`, `owner = "mallory"`, `mode = "0644"`), a directory on the way to another
/// (`conf.d` of `conf.d/job`) and a directory root manages for it (`data`). First planted
/// before kwin looks, then flipped between its own file or directory and a link, one atomic
/// rename at a time, while kwin probes and writes (`security_local_user/links.py`).
///
/// Root never writes, `chown`s or `chmod`s what the links point to: the root-only file keeps
/// its owner, mode and content, the root-only directory stays root's and empty. Planted
/// links are refused at the plan; a flip kwin catches in the act makes the task refuse; a
/// task that went through leaves a plain file or directory of the account's. (Before: the
/// 0600 victim became `mallory 0644` with the plan's content, and `job` appeared in the
/// root-only directory.)
#[test]
fn links_at_and_above_managed_paths_redirect_nothing() {
    let _one = LAB8.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("KWIN_LAB_ID", LAB_ID);
    let lab = lab(1);
    let q = kwin_engine::quote::sh_quote;
    let vdir = format!("{VICTIM}.d");
    lab.ssh(
        "h1",
        &format!(
            "set -e\n\
             id -u mallory >/dev/null 2>&1 || useradd -M -s /bin/sh mallory\n\
             rm -rf {OWN} {vdir} /srv/stop /srv/links.log\n\
             mkdir -m 0755 {OWN} && chown mallory:mallory {OWN}\n\
             printf 'victim\\n' > {VICTIM} && chown root:root {VICTIM} && chmod 0600 {VICTIM}\n\
             mkdir -m 0700 {vdir}\n\
             printf '%s' {} > /srv/links.py\n",
            q(LINKS)
        ),
    );
    // One plan per task: a failed task stops the rest of its host's tasks.
    let tasks = [
        ("app-conf", "file", format!("path = \"{OWN}/app.conf\", content = \"a = 1\\n\", owner = \"mallory\", mode = \"0644\"")),
        ("job", "file", format!("path = \"{OWN}/conf.d/job\", content = \"* * * * * root touch /pwned\\n\", owner = \"mallory\"")),
        ("data", "directory", format!("path = \"{OWN}/data\", owner = \"mallory\", mode = \"0755\"")),
    ];
    let dirs: Vec<(&str, tempfile::TempDir)> = tasks
        .iter()
        .map(|(name, module, params)| {
            let plan = format!(
                "inventory = \"x\"\n\n[settings]\nretries = 0\n\n[[hosts]]\nname = \"h1\"\nos = \"linux\"\n\n\
                 [[tasks]]\nname = \"{name}\"\nmodule = \"{module}\"\non = {{ os = \"linux\" }}\nparams = {{ {params} }}\n"
            );
            (*name, lab.plan_dir(&plan))
        })
        .collect();
    let apply_each = || -> Vec<(&str, serde_json::Value, String)> {
        dirs.iter()
            .map(|(name, d)| {
                let r = kwin!(d.path(), &["apply", "plan.toml", "--output", "json"]);
                (*name, r.task("h1", name), r.to_string())
            })
            .collect()
    };
    let victims = || {
        let v = lab.ssh(
            "h1",
            &format!("stat -c '%F %U %G %a' {VICTIM} {vdir}; cat {VICTIM}; ls -A {vdir} | wc -l"),
        );
        assert_eq!(
            v,
            "regular file root root 600\ndirectory root root 700\nvictim\n0\n",
            "root changed a victim through a link"
        );
    };
    let as_mallory = |cmd: &str| {
        lab.ssh(
            "h1",
            &format!("setpriv --reuid=mallory --regid=mallory --clear-groups sh -c {}", q(cmd)),
        )
    };

    // Planted before kwin looks: every task refuses, at the plan.
    as_mallory(&format!(
        "ln -s {VICTIM} {OWN}/app.conf && ln -s {vdir} {OWN}/conf.d && ln -s {vdir} {OWN}/data"
    ));
    for (task, t, r) in apply_each() {
        assert_eq!(t["status"], "failed", "{task} went through a planted link\n{r}");
        assert!(t.to_string().contains("symbolic link"), "{task}: {t}");
    }
    victims();

    // Flipped while kwin works.
    const ROUNDS: usize = 6;
    let mut went_through = 0;
    for round in 0..ROUNDS {
        lab.ssh(
            "h1",
            &format!(
                "set -e\nrm -rf /srv/stop {OWN}/app.conf {OWN}/conf.d {OWN}/data {OWN}/.[!.]*\n\
                 setsid -f setpriv --reuid=mallory --regid=mallory --clear-groups \
                 /usr/bin/python3 /srv/links.py {OWN} {VICTIM} {vdir} /srv/stop 60 \
                 </dev/null >>/srv/links.log 2>&1\n\
                 i=0; until [ \"$(grep -c '^links: ready' /srv/links.log)\" -gt {round} ]; do\n\
                 i=$((i+1)); [ $i -lt 300 ] || {{ echo attacker did not start >&2; exit 1; }}; sleep 0.1; done\n"
            ),
        );
        let runs = apply_each();
        lab.ssh(
            "h1",
            &format!(
                "touch /srv/stop; i=0\n\
                 until [ \"$(grep -c '^links: done' /srv/links.log)\" -gt {round} ]; do\n\
                 i=$((i+1)); [ $i -lt 300 ] || {{ echo attacker did not stop >&2; exit 1; }}; sleep 0.1; done\n"
            ),
        );
        victims();
        for (task, t, r) in &runs {
            let text = t.to_string();
            match t["status"].as_str() {
                Some("changed" | "ok") => went_through += 1,
                // A refusal is always fine here (the victims are checked above); these are
                // its words. "a special file": the probe's type tests (-d, -f, -e, one after
                // the other) ran while a directory flip left the name absent between its two
                // renames, so the name read as neither a directory nor a file.
                _ => assert!(
                    ["symbolic link", "refusing", "not the directory kwin probed", "changed since it was probed", "changed while it was read", "did not converge", "cannot reach", "is not a directory (a special file)"]
                        .iter()
                        .any(|w| text.contains(w)),
                    "round {round}: {task} failed for another reason: {text}\n{r}"
                ),
            }
        }
        let statuses: Vec<String> = runs.iter().map(|(n, t, _)| format!("{n} {}", t["status"])).collect();
        eprintln!("round {round}: {}", statuses.join(", "));
    }
    let log = lab.ssh("h1", "cat /srv/links.log");
    let flips: usize = log
        .lines()
        .filter_map(|l| l.strip_prefix("links: done: "))
        .filter_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
        .sum();
    assert!(flips > ROUNDS * 10, "the attacker hardly flipped anything:\n{log}");
    eprintln!("attacker: {flips} flips; {went_through} of {} task runs went through", ROUNDS * 3);
}
}
