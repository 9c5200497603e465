//! Round trips and processes per Windows host, counted by the WinRM stand-in itself.
//!
//! Two "Windows hosts" (the lab's stand-in, one listener each: NTLM with message encryption
//! over http, Basic over https) get a workload of independent tasks — 4 directories, 8 files,
//! 2 `creates`-guarded commands each — in a cold apply, then a warm one. The stand-in's
//! operations log (`--ops-log`: one JSON line per WS-Management operation, with the
//! listener it came in on) is the oracle, never kwin's own account of itself:
//!
//! - warm: ONE WinRS Command per host (the probe), in ONE shell;
//! - cold: TWO Commands per host (the probe, then ONE batch of every change), in ONE shell;
//! - every Command's command line is `powershell.exe ... -Command -`: on a Windows host each
//!   is one `powershell.exe` process (the stand-in starts one `/bin/sh` for it instead).
//!
//! kwin runs with `KWIN_WINRM_STAND_IN=1` (the stand-in runs scripts with `/bin/sh`, so the
//! tasks are built POSIX): what this proves is the traffic — how many commands and shells a
//! host gets — not anything about PowerShell itself.
#![allow(clippy::print_stderr)]

use kwin_testkit::kwin;
use kwin_testkit::winrm::TwoListeners;
use std::collections::BTreeMap;
use std::path::Path;

const PASSWORD: &str = "Stand-in-Passw0rd!";

/// What one host's listener saw: operations by name, and the Commands' executables.
#[derive(Debug, Default, PartialEq, Eq)]
struct Traffic {
    ops: BTreeMap<String, usize>,
    /// Executable of every Command, in order (`powershell` for kwin's runs).
    commands: Vec<String>,
    /// Shells those Commands ran in.
    shells: Vec<String>,
    faults: usize,
}

impl Traffic {
    fn n(&self, op: &str) -> usize {
        self.ops.get(op).copied().unwrap_or(0)
    }
}

/// The operations logged after byte `from`, by listener address.
fn traffic(ops: &Path, from: usize) -> BTreeMap<String, Traffic> {
    let text = std::fs::read_to_string(ops).unwrap_or_default();
    let mut by: BTreeMap<String, Traffic> = BTreeMap::new();
    for line in text.get(from..).unwrap_or("").lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("ops log line {line}: {e}"));
        let t = by
            .entry(v["listener"].as_str().unwrap_or("?").to_string())
            .or_default();
        let op = v["op"].as_str().unwrap_or("?").to_string();
        if v.get("fault").is_some() {
            t.faults += 1;
            continue;
        }
        if op == "Command" {
            t.commands
                .push(v["exe"].as_str().unwrap_or("?").to_string());
            t.shells
                .push(v["shell"].as_str().unwrap_or("?").to_string());
        }
        *t.ops.entry(op).or_default() += 1;
    }
    by
}

fn plan(s: &TwoListeners, work: &Path) -> String {
    let w = work.display();
    let mut p = s.hosts_toml();
    let root = format!("{w}/{{{{ host.name }}}}");
    for d in ["conf.d", "data", "state", "log"] {
        p.push_str(&format!(
            "\n[[tasks]]\nname = \"dir-{n}\"\nmodule = \"directory\"\nparams = {{ path = \"{root}/{d}\" }}\n",
            n = d.replace('.', "-")
        ));
    }
    for i in 1..=8 {
        p.push_str(&format!(
            "\n[[tasks]]\nname = \"file-{i}\"\nmodule = \"file\"\nafter = [\"dir-conf-d\"]\nparams = {{ path = \"{root}/conf.d/app-{i}.conf\", content = \"app {i}\\noption = {i}\\n\" }}\n"
        ));
    }
    p.push_str(&format!(
        "\n[[tasks]]\nname = \"token\"\nmodule = \"command\"\nafter = [\"dir-state\"]\nparams = {{ run = \"echo t > {root}/state/token\", creates = \"{root}/state/token\" }}\n"
    ));
    let files: Vec<String> = (1..=8).map(|i| format!("\"file-{i}\"")).collect();
    p.push_str(&format!(
        "\n[[tasks]]\nname = \"snapshot\"\nmodule = \"command\"\nafter = [{}, \"dir-data\"]\nparams = {{ run = \"cat {root}/conf.d/*.conf > {root}/data/snapshot\", creates = \"{root}/data/snapshot\" }}\n",
        files.join(", ")
    ));
    p
}

fn apply(dir: &Path) -> serde_json::Value {
    let r = kwin!(dir)
        .args(["apply", "plan.toml", "--output", "json"])
        .env("KWIN_WINRM_STAND_IN", "1")
        .env("KWIN_RT_WINRM_PASSWORD", PASSWORD)
        .run();
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    kwin_testkit::kwin::summary(&r.stdout)
}

kwin_testkit::lab_test! {
#[test]
fn a_windows_host_gets_one_probe_warm_and_one_probe_and_one_batch_cold() {
    let s = TwoListeners::start("KWIN_RT_WINRM_PASSWORD", PASSWORD);
    let dir = tempfile::tempdir().expect("tmp");
    let work = dir.path().join("hostfs");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(dir.path().join("plan.toml"), plan(&s, &work)).expect("plan");
    let hosts = [("ww1", s.http.clone()), ("ww2", s.https.clone())];

    let sum = apply(dir.path());
    assert_eq!(
        (sum["changed"].as_u64(), sum["failed"].as_u64()),
        (Some(28), Some(0)),
        "{sum}"
    );
    let cold = traffic(&s.ops, 0);
    let cold_logs = sum["logs"][0].as_str().expect("logs").to_string();
    let mark = std::fs::metadata(&s.ops).map(|m| m.len() as usize).unwrap_or(0);
    let sum = apply(dir.path());
    assert_eq!(
        (sum["changed"].as_u64(), sum["ok"].as_u64()),
        (Some(0), Some(28)),
        "{sum}"
    );
    let warm = traffic(&s.ops, mark);
    let warm_logs = sum["logs"][0].as_str().expect("logs").to_string();

    for (run, t, commands) in [("cold", &cold, 2), ("warm", &warm, 1)] {
        for (host, addr) in &hosts {
            let h = t.get(addr).unwrap_or_else(|| panic!("{run}: no traffic for {host}: {t:?}"));
            eprintln!("{run} {host}: {h:?}");
            assert_eq!(h.faults, 0, "{run} {host}: {h:?}");
            // The runs: the probe (and cold, the one batch), each ONE Command, every one a
            // `powershell.exe` command line, all in ONE shell created for the connection.
            assert_eq!(h.commands.len(), commands, "{run} {host}: {h:?}");
            assert!(h.commands.iter().all(|e| e == "powershell"), "{run} {host}: {h:?}");
            assert_eq!(h.n("Create"), 1, "{run} {host}: {h:?}");
            assert!(h.shells.windows(2).all(|w| w[0] == w[1]), "{run} {host}: {h:?}");
            // Each Command is released once (Signal terminate), the shell deleted at the end,
            // and the script goes in one Send.
            assert_eq!(h.n("Signal"), commands, "{run} {host}: {h:?}");
            assert_eq!(h.n("Send"), commands, "{run} {host}: {h:?}");
            assert_eq!(h.n("Delete"), 1, "{run} {host}: {h:?}");
        }
    }
    // `kwin facts`: what each host is comes in the probe, ONE Command per host. (The
    // stand-in answers the POSIX form of the script: what this proves is the traffic and the
    // event; the PowerShell form is checked by modules/tests/ps51_profile.rs and its parser
    // on Windows PowerShell 5.1's output in engine/src/fact/host.rs.)
    let mark = std::fs::metadata(&s.ops).map(|m| m.len() as usize).unwrap_or(0);
    let f = kwin!(dir.path())
        .args(["facts", "plan.toml", "--output", "json"])
        .env("KWIN_WINRM_STAND_IN", "1")
        .env("KWIN_RT_WINRM_PASSWORD", PASSWORD)
        .run();
    assert_eq!(f.code, 0, "facts:\n{f}");
    let facts = traffic(&s.ops, mark);
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    for (host, addr) in &hosts {
        let h = facts.get(addr).unwrap_or_else(|| panic!("facts: no traffic for {host}"));
        assert_eq!(h.commands.len(), 1, "facts {host}: {h:?}");
        let e = f
            .events()
            .into_iter()
            .find(|e| e["event"] == "host_facts" && e["host"] == *host)
            .unwrap_or_else(|| panic!("no host_facts for {host}:\n{f}"));
        assert_eq!(e["system"]["hostname"], machine.trim(), "{e}");
        assert!(e["system"]["cpus"].as_u64().is_some_and(|c| c > 0), "{e}");
        assert!(e["facts"].as_object().is_some_and(|m| !m.is_empty()), "{e}");
    }

    // kwin's host logs agree: as many scripts as the stand-in saw Commands.
    for (logs, commands) in [(&cold_logs, 2), (&warm_logs, 1)] {
        for (host, _) in &hosts {
            let log = std::fs::read_to_string(Path::new(logs).join(format!("{host}.log")))
                .expect("host log");
            let scripts = log
                .lines()
                .filter(|l| l.contains("] run #") && !l.contains(" exit "))
                .count();
            assert_eq!(scripts, commands, "{logs}:\n{log}");
        }
    }
}
}
