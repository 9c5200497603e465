//! What belongs to the process, around the engine's pipeline: the tokio runtime, the renderer
//! thread, Ctrl-C, and the exit code. The engine never prints and never exits.
//!
//! - [`prepare`]: `pipeline::prepare` on a small runtime of its own; [`ready`] prints what
//!   it found. [`pin_rows`] the same for `kwin checksums`.
//! - [`stage`]: one command's run with its own event stream (apply and its verify are one):
//!   a runtime, the renderer on its thread, Ctrl-C (first: stop scheduling, running steps
//!   finish, the summary and journal are written, exit 130; second: exit 130 at once), the
//!   host-key notes after the summary.
//! - [`exit_code`]: the exit code of an outcome, from the one table of exit codes,
//!   `EXIT_CODES` (`exit.rs`; docs/exit-codes.md lists exactly these:
//!   `tests/exit_codes.rs`).
//! - [`raise_open_files_limit`]: the soft limit of open files up to the hard one, before
//!   anything runs.

use crate::output::Output;
pub use crate::output::Render;
use kwin_engine::diag::Diagnostics;
use kwin_engine::event::{EventSink, Outcome};
use kwin_engine::exec::Cancel;
use kwin_engine::pipeline::{Ctl, Prepared, Request};
use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// Raise the process's soft limit of open files to its hard limit. A run holds a few files
/// open per host it reaches at the same time (its connection, its host log), which passes
/// the soft limit most sessions start with (1024) at a few hundred hosts; the hard limit is
/// what the administrator allows (`tests/scale_open_files.rs`). Where that cannot be done
/// the limit stays as it was, and a host it stops fails with "too many open files".
pub fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (limit.current, limit.maximum) {
        if soft < hard {
            limit.current = Some(hard);
            let _ = setrlimit(Resource::Nofile, limit);
        }
    }
}

/// End the process when a template render reaches its memory bound
/// (`kwin_engine::template::budget`, counted by the allocator of src/alloc.rs): renders
/// happen while tasks are expanded, before any host is changed.
pub fn bound_template_memory() {
    kwin_engine::template::budget::on_stop(template_stopped);
}

fn template_stopped(s: &kwin_engine::template::budget::Stop<'_>) -> ! {
    Output::template_stopped(s);
    std::process::exit(exit_code_of(Outcome::Failed).into())
}

/// The prepare phases of `req` (`pipeline::prepare`), on a small runtime of their own (the
/// network is used only to fetch missing checksums).
pub fn prepare(req: &Request<'_>) -> anyhow::Result<Result<Prepared, Diagnostics>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(kwin_engine::pipeline::prepare(req)))
}

/// `kwin checksums`: `pipeline::pin_rows` on a small runtime of its own, as [`prepare`].
pub fn pin_rows(req: &Request<'_>) -> anyhow::Result<Result<PinRows, Diagnostics>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(kwin_engine::pipeline::pin_rows(req)))
}

/// The prepared plan and the `[artifacts.sha256]` rows of `kwin checksums`.
pub type PinRows = (Prepared, Vec<kwin_engine::checksums::PinRow>);

/// The prepared plan of a command that runs it: its warnings printed, and the checksums
/// fetched; or `None` with every diagnostic printed (exit code 1).
pub fn ready(out: &Output, prepared: Result<Prepared, Diagnostics>) -> Option<Prepared> {
    match prepared {
        Ok(p) => {
            out.warnings(&p.warnings);
            out.checksums_fetched(&p.fetched);
            Some(p)
        }
        Err(d) => {
            out.diagnostics(&d);
            None
        }
    }
}

/// Run `body` as one stage: its events rendered, Ctrl-C handled; then the notes it returns
/// are printed, and its result returned.
pub fn stage<T, F, Fut>(out: &Output, render: Render, body: F) -> anyhow::Result<T>
where
    F: FnOnce(Ctl) -> Fut,
    Fut: Future<Output = anyhow::Result<(T, Vec<String>)>>,
{
    let (events, rx) = EventSink::channel();
    let renderer = out.spawn_renderer(rx, render);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let (canceller, cancel) = Cancel::pair();
        let end = out.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                canceller.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    // The stream still ends with its summary.
                    end.finish(Ok(Outcome::Interrupted));
                    std::process::exit(exit_code_of(Outcome::Interrupted).into());
                }
            }
        });
        body(Ctl { events, cancel }).await
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    let _ = renderer.join();
    let (result, notes) = result?;
    // After the summary, on stderr, so JSON output still ends with the summary line.
    out.notes(&notes);
    Ok(result)
}

pub use crate::exit::{exit_code_of, exit_codes_help};

/// The process's exit code for `o` (the table: `exit::EXIT_CODES`).
pub fn exit_code(o: Outcome) -> ExitCode {
    ExitCode::from(exit_code_of(o))
}
