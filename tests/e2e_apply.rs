//! End to end: `kwin plan` / `apply --check` / `apply` of examples/lab.toml against three
//! real sshd lab hosts. Needs root (the test brings the lab up itself).

use kwin_testkit::{
    kwin,
    kwin::round_trips,
    lab::{lab, Lab},
};
const MANAGED: &[&str] = &[
    "/etc/motd",
    "/etc/kwin-lab/lab.conf",
    "/etc/kwin-lab/stamp",
    "/etc/hosts",
    "/etc/sysctl.d/99-kwin-net.ipv4.ip_forward.conf",
];
const HOSTS: &[&str] = &["h1", "h2", "h3"];

fn all_hashes(lab: &Lab) -> Vec<String> {
    HOSTS
        .iter()
        .map(|h| {
            format!(
                "{}{}",
                lab.hashes(h, MANAGED),
                lab.ssh(h, "cat /proc/sys/net/ipv4/ip_forward")
            )
        })
        .collect()
}

kwin_testkit::lab_test! {
#[test]
fn lab_plan_converges_idempotently_and_plan_changes_nothing() {
    let lab = lab(3);
    let dir = lab.plan_dir(include_str!("../examples/lab.toml"));
    let d = dir.path();
    let before = all_hashes(&lab);

    // plan: changes pending (exit 2 with --detailed-exitcode), diffs shown, nothing changed.
    let p = kwin!(d, &["plan", "plan.toml", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{p}");
    for h in HOSTS {
        assert!(
            p.stdout
                .contains(&format!("{h}: update motd (content differs)")),
            "{p}"
        );
    }
    assert!(
        p.stdout.contains("    +This host is managed by kwin."),
        "{p}"
    );
    assert_eq!(all_hashes(&lab), before, "kwin plan changed a host");

    // apply --check: the same, exit 0.
    let c = kwin!(d, &["apply", "--check", "plan.toml"]);
    assert_eq!(c.code, 0, "{c}");
    assert!(c.last_line().starts_with("plan: 3 hosts"), "{c}");
    assert_eq!(
        all_hashes(&lab),
        before,
        "kwin apply --check changed a host"
    );

    // apply: every host converges; JSON lines, the last one the summary.
    let a = kwin!(d, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(a.code, 0, "{a}");
    let last: serde_json::Value = serde_json::from_str(a.last_line()).expect("JSON");
    let s = a.summary();
    assert_eq!(last, s, "{a}");
    assert_eq!(
        (&s["command"], &s["outcome"], &s["exit_code"]),
        (&"apply".into(), &"success".into(), &0.into()),
        "{a}"
    );
    assert_eq!(
        (&s["hosts"], &s["hosts_reached"], &s["failed"], &s["skipped"]),
        (&3.into(), &3.into(), &0.into(), &0.into()),
        "{a}"
    );
    assert_eq!(s["changed"], 3 * 6, "{a}");
    let run = a.run_id();
    for h in HOSTS {
        let n = round_trips(d, &run, h);
        eprintln!("cold apply: {h}: {n} round trips");
        assert!(n <= 4, "cold apply of {h} took {n} round trips");
    }
    assert_eq!(
        lab.ssh("h2", "cat /etc/motd"),
        "This host is managed by kwin.\nLocal changes are overwritten.\n"
    );
    assert_eq!(
        lab.ssh("h3", "cat /proc/sys/net/ipv4/ip_forward").trim(),
        "1"
    );

    // Second apply: nothing to do, one round trip per host.
    let again = kwin!(d, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");
    assert_eq!(again.summary()["failed"], 0, "{again}");
    let run = again.run_id();
    for h in HOSTS {
        assert_eq!(round_trips(d, &run, h), 1, "warm apply of {h}");
    }
    let human = kwin!(d, &["apply", "plan.toml"]);
    assert_eq!(human.code, 0, "{human}");
    let last = human.last_line();
    assert!(
        last.starts_with("apply: 3 hosts, 18 ok, 0 changed, 0 failed, 0 skipped in "),
        "{human}"
    );
    assert!(last.ends_with("(no changes)"), "{human}");

    // A hand edit on one host: plan shows exactly that diff; apply restores it.
    let converged = all_hashes(&lab);
    lab.ssh("h2", "printf 'edited by hand\\n' > /etc/motd");
    let p = kwin!(d, &["plan", "plan.toml", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{p}");
    let changes: Vec<&str> = p
        .stdout
        .lines()
        .filter(|l| l.starts_with("h1:") || l.starts_with("h2:") || l.starts_with("h3:"))
        .collect();
    assert_eq!(changes, ["h2: update motd (content differs)"], "{p}");
    assert!(p.stdout.contains("    -edited by hand"), "{p}");
    assert!(
        p.stdout.contains("    +This host is managed by kwin."),
        "{p}"
    );
    let fix = kwin!(d, &["apply", "plan.toml"]);
    assert_eq!(fix.code, 0, "{fix}");
    assert!(
        fix.stdout
            .contains("h2: changed motd (update: content differs)"),
        "{fix}"
    );
    assert!(
        fix.last_line()
            .starts_with("apply: 3 hosts, 17 ok, 1 changed, 0 failed, 0 skipped"),
        "{fix}"
    );
    assert_eq!(all_hashes(&lab), converged);
    let p = kwin!(d, &["plan", "plan.toml", "--detailed-exitcode"]);
    assert_eq!(p.code, 0, "{p}");

    // The journal and logs are private.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    assert_eq!(mode(&d.join(".kwin")), 0o700);
    let journal = d.join(".kwin/runs").join(format!("{run}.json"));
    assert_eq!(mode(&journal), 0o600);
    assert_eq!(mode(&d.join(".kwin/logs").join(&run).join("h1.log")), 0o600);
}
}
