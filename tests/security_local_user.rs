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
const LAB_ID: &str = "8";
const ROUNDS: usize = 6;
const SHARED: &str = "/srv/shared";
const OWN: &str = "/srv/mallory";
const VICTIM: &str = "/etc/kwin-victim";
const ATTACKER: &str = include_str!("security_local_user/attacker.py");

use kwin_modules::linux::script::sha256_hex;

kwin_testkit::lab_test! {
#[test]
fn a_hostile_local_user_reads_nothing_and_replaces_nothing() {
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
