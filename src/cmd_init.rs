//! `kwin init`: a commented starter plan (`kwin_engine::plan::starter`), written to a new file
//! (never over an existing one) or printed with `-o -`.
//!
//! The plan is validated before it is written, as `kwin validate` would (without a file on
//! this machine: the starter names none), so `kwin init` never hands out a plan that fails.

use crate::args::InitArgs;
use crate::output::Output;
use anyhow::Context;
use kwin_engine::event::Outcome;
use kwin_engine::plan::validate::{load_and_validate_str, Names};
use std::io::Write;
use std::path::Path;

pub fn init(args: &InitArgs, out: &Output) -> anyhow::Result<Outcome> {
    let starter = args.starter();
    let text = starter.render();
    let to_stdout = args.out.as_os_str() == "-";
    let shown = if to_stdout {
        Path::new("plan.toml")
    } else {
        args.out.as_path()
    };
    let checked = load_and_validate_str(shown, &text, Names::default());
    if checked.diags.has_errors() {
        out.diagnostics(&checked.diags);
        anyhow::bail!("the starter plan does not validate (a bug in kwin): nothing written");
    }
    if to_stdout {
        out.text(&text);
        return Ok(Outcome::Success);
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&args.out)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} exists: kwin init never overwrites a file (name another with -o FILE, or -o - to print)",
                args.out.display()
            ),
            _ => anyhow::anyhow!("cannot create {}: {e}", args.out.display()),
        })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let p = args.out.display();
    out.notes(&[format!(
        "wrote {p}: {}, {}; edit the lines marked EDIT, then: kwin validate {p}",
        starter.hosts(),
        starter.cni_name()
    )]);
    Ok(Outcome::Success)
}
