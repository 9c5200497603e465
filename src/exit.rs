//! The one table of `kwin`'s exit codes: [`EXIT_CODES`], the code of each
//! [`Outcome`] ([`exit_code_of`]) and the table in `kwin --help` ([`exit_codes_help`]).
//! docs/exit-codes.md lists exactly these codes (`tests/exit_codes.rs`).

use kwin_engine::event::Outcome;

/// Every exit code of `kwin`, with what it means: the one table (docs/exit-codes.md, the help
/// of `--detailed-exitcode` and [`exit_code_of`] agree: `tests/exit_codes.rs`).
pub const EXIT_CODES: &[(u8, &str)] = &[
    (0, "success"),
    (
        1,
        "failure: the plan is invalid, a task or check failed, a host was not reached, or the command could not start",
    ),
    (
        2,
        "changes pending (`kwin plan --detailed-exitcode` only)",
    ),
    (64, "usage error: the command line is wrong"),
    (130, "interrupted (Ctrl-C)"),
];

/// The table for `kwin --help`: `Exit codes:` and one `  N  meaning` line per code.
pub fn exit_codes_help() -> String {
    let mut s = String::from("Exit codes (docs/exit-codes.md):");
    for (code, meaning) in EXIT_CODES {
        s.push_str(&format!("\n  {code:>3}  {meaning}"));
    }
    s
}

/// The exit code of an outcome.
pub fn exit_code_of(o: Outcome) -> u8 {
    match o {
        Outcome::Success => 0,
        Outcome::Failed => 1,
        Outcome::ChangesPending => 2,
        Outcome::UsageError => 64,
        Outcome::Interrupted => 130,
    }
}
