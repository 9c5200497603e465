//! Load + validate + expand + graph + build of a plan with 1,000 Linux hosts, each with the
//! benchmark workload's 20 user tasks (bench/workload/gen.py): 20,000 task instances.
//! Goal (bench/README.md): the whole pipeline in < 100 ms.
//!
//!     cargo bench -p kwin-engine --bench plan_graph
//!
//! Each stage is also measured alone, so a regression points at its stage.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kwin_engine::expand::expand;
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::build_all;
use kwin_engine::module::Registry;
use kwin_engine::plan::load_str;
use kwin_engine::plan::validate::{validate, Names};
use kwin_modules::recipes::RECIPES;
use kwin_modules::Builtin;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

const HOSTS: usize = 1000;

/// The plan text: hosts with inline connection settings (no inventory file to read), and the
/// 20 tasks of the benchmark workload on every host.
fn plan_text(hosts: usize, key: &Path) -> String {
    let mut s = String::new();
    s.push_str("[settings]\nparallelism = 100\n\n");
    s.push_str("[defaults.linux]\nuser = \"root\"\nport = 22\n");
    let _ = writeln!(s, "private_key = \"{}\"\n", key.display());
    for i in 1..=hosts {
        let base = 4 * i;
        let _ = writeln!(
            s,
            "[[hosts]]\nname = \"h{i}\"\nos = \"linux\"\naddress = \"10.213.{}.{}\"\n\
             host_key = \"SHA256:bGFiLWhvc3Qta2V5LWZpbmdlcnByaW50{:010}A\"\n",
            base / 256,
            base % 256 + 2,
            i
        );
    }
    let task = |s: &mut String, name: &str, module: &str, after: &[&str], params: &str| {
        let _ = writeln!(s, "[[tasks]]\nname = \"{name}\"\nmodule = \"{module}\"");
        if !after.is_empty() {
            let a: Vec<String> = after.iter().map(|x| format!("\"{x}\"")).collect();
            let _ = writeln!(s, "after = [{}]", a.join(", "));
        }
        let _ = writeln!(s, "params = {{ {params} }}\n");
    };
    for (name, dir, mode) in [
        ("dir-conf", "conf.d", "0755"),
        ("dir-data", "data", "0750"),
        ("dir-state", "state", "0700"),
        ("dir-log", "log", "0755"),
    ] {
        task(
            &mut s,
            name,
            "directory",
            &[],
            &format!("path = \"/srv/bench/{dir}\", mode = \"{mode}\", owner = \"root\", group = \"root\""),
        );
    }
    let mut files = Vec::new();
    for i in 1..=8 {
        let mut content = format!("# app-{i}.conf\\n[section-{i}]\\n");
        for k in 0..12 * i {
            let _ = write!(
                content,
                "option_{i}_{k:03} = value-{:05}\\n",
                (i * 7919 + k * 104_729) % 100_000
            );
        }
        let name = format!("file-app-{i}");
        task(
            &mut s,
            &name,
            "file",
            &["dir-conf"],
            &format!(
                "path = \"/srv/bench/conf.d/app-{i}.conf\", content = \"{content}\", mode = \"0644\", \
                 owner = \"root\", group = \"root\""
            ),
        );
        files.push(name);
    }
    for (i, re, line) in [
        (1, Some("^listen_port *="), "listen_port = 8081"),
        (2, Some("^workers *="), "workers = 8"),
        (3, None, "max_connections = 512"),
        (4, None, "log_level = info"),
    ] {
        let re = re
            .map(|r| format!(", regexp = \"{r}\""))
            .unwrap_or_default();
        task(
            &mut s,
            &format!("line-svc-{i}"),
            "line_in_file",
            &[],
            &format!("path = \"/srv/bench/lines/svc-{i}.conf\", line = \"{line}\"{re}"),
        );
    }
    for (key, value) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.ipv4.conf.all.accept_redirects", "0"),
    ] {
        task(
            &mut s,
            &format!("sysctl-{}", key.replace('.', "-")),
            "sysctl",
            &[],
            &format!("key = \"{key}\", value = \"{value}\", file = \"/etc/sysctl.d/90-bench-{key}.conf\""),
        );
    }
    task(
        &mut s,
        "command-token",
        "command",
        &["dir-state"],
        "run = \"head -c 32 /dev/urandom | od -An -tx1 > /srv/bench/state/token\", creates = \"/srv/bench/state/token\"",
    );
    let after: Vec<&str> = files.iter().map(String::as_str).collect();
    task(
        &mut s,
        "command-snapshot",
        "command",
        &after,
        "run = \"tar -C /srv/bench/conf.d -cf /srv/bench/data/conf-snapshot.tar .\", \
         creates = \"/srv/bench/data/conf-snapshot.tar\"",
    );
    s
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    text: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("id_ed25519");
    std::fs::write(&key, "not a real key; never read by load/validate/graph\n").expect("key");
    let path = dir.path().join("plan.toml");
    let text = plan_text(HOSTS, &key);
    std::fs::write(&path, &text).expect("plan");
    Fixture {
        _dir: dir,
        path,
        text,
    }
}

/// What validation checks names against: the built-in modules (no recipe steps: the
/// workload's tasks name none).
fn known<'a>(modules: &'a [&'a str]) -> Names<'a> {
    Names {
        modules,
        recipe_steps: &[],
    }
}

/// The pipeline under test; panics on any diagnostic error so a broken plan cannot look fast.
fn pipeline(path: &Path, text: &str) -> TaskGraph {
    let plan = match load_str(path, text) {
        Ok(p) => p,
        Err(d) => panic!("load: {d:?}"),
    };
    let diags = validate(&plan, known(&Builtin.names()));
    assert!(!diags.has_errors(), "validate: {diags:?}");
    let tasks = match expand(&plan, RECIPES) {
        Ok(t) => t,
        Err(d) => panic!("expand: {d:?}"),
    };
    let graph = match TaskGraph::build(tasks) {
        Ok(g) => g,
        Err(d) => panic!("graph: {d:?}"),
    };
    if let Err(d) = build_all(&plan, &graph, &Builtin) {
        panic!("build: {d:?}");
    }
    graph
}

fn bench(c: &mut Criterion) {
    let f = fixture();
    let g = pipeline(&f.path, &f.text);
    assert_eq!(
        g.len(),
        HOSTS * 20,
        "expected 20 tasks on each of {HOSTS} hosts"
    );

    let mut group = c.benchmark_group("plan_1000_hosts");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    // The graph is kept until the end of a run, so its drop is measured apart.
    group.bench_function("load+validate+expand+graph", |b| {
        b.iter_with_large_drop(|| pipeline(&f.path, &f.text))
    });
    group.bench_function("load+validate+expand+graph+drop", |b| {
        b.iter(|| black_box(pipeline(&f.path, &f.text)))
    });
    group.bench_function("load", |b| {
        b.iter_with_large_drop(|| {
            load_str(&f.path, &f.text)
                .map_err(|d| format!("{d:?}"))
                .expect("load")
        })
    });
    let plan = load_str(&f.path, &f.text)
        .map_err(|d| format!("{d:?}"))
        .expect("load");
    let modules = Builtin.names();
    group.bench_function("validate", |b| {
        b.iter(|| black_box(validate(&plan, known(&modules))))
    });
    group.bench_function("expand", |b| {
        b.iter_with_large_drop(|| {
            expand(&plan, RECIPES)
                .map_err(|d| format!("{d:?}"))
                .expect("expand")
        })
    });
    let tasks = expand(&plan, RECIPES)
        .map_err(|d| format!("{d:?}"))
        .expect("expand");
    group.bench_function("graph", |b| {
        b.iter_batched(
            || tasks.clone(),
            |t| {
                TaskGraph::build(t)
                    .map_err(|d| format!("{d:?}"))
                    .expect("graph")
            },
            BatchSize::LargeInput,
        )
    });
    let graph = TaskGraph::build(tasks)
        .map_err(|d| format!("{d:?}"))
        .expect("graph");
    group.bench_function("build", |b| {
        b.iter_with_large_drop(|| {
            build_all(&plan, &graph, &Builtin)
                .map_err(|d| format!("{d:?}"))
                .expect("build")
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
