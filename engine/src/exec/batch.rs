//! Apply batches: several tasks' changes, each verified, and a trailing re-probe, in ONE script.
//!
//! Layout of a batch (POSIX; PowerShell mirrors it with script blocks):
//!
//! ```text
//! task 0:  begin marker | each Run step in its own subshell, each Inline step as a function in
//!          the batch's shell (umask and `set -C` restored after it); stop at the first
//!          non-zero exit
//!          | end marker with the exit code | on failure: no later task runs
//!          | task 0's facts, re-read right after its steps, if a later task may touch them
//! task 1:  ...
//! end:     ONE read (fact::batch_script, own nonce) of the facts of every task not re-read
//!          yet, and of later tasks that the batch's changes may have touched
//! ```
//!
//! A task's convergence check must not be disturbed by a later task of the same batch: its
//! facts are re-read right after its own steps when a later task may touch what it reads
//! (`Item::verify_now`), otherwise in the single read at the end, which answers all path facts
//! of the batch with one `stat` and one `sha256sum` (see `fact::paths`). The first failing
//! task stops the batch (the end read still runs, for the tasks done before it; POSIX), so the
//! tasks after it never run and are reported as skipped. Markers carry a random nonce, so a
//! step's own output cannot forge them.

use crate::fact::{self, FactError, FactQuery, Facts};
use crate::shell::{Output, Shell};

/// One step script of an item.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub text: String,
    /// A [`Step::Inline`](crate::module::Step::Inline) script: the body of a function the
    /// batch's shell calls, no subshell (POSIX; the same as the others on PowerShell).
    pub inline: bool,
}

/// A script run in its own subshell.
impl From<&str> for Script {
    fn from(text: &str) -> Script {
        Script {
            text: text.into(),
            inline: false,
        }
    }
}

/// A script run in its own subshell.
impl From<String> for Script {
    fn from(text: String) -> Script {
        Script {
            text,
            inline: false,
        }
    }
}

/// One task's part of a batch: its `Run` / `Inline` scripts and the facts to re-read after
/// them.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub steps: Vec<Script>,
    pub verify: Vec<FactQuery>,
    /// Re-read `verify` right after the steps (a later task of the batch may touch what they
    /// read); otherwise in the batch's end read. Always right after on PowerShell.
    pub verify_now: bool,
    /// A sensitive task: its steps and their output are left out of the host log.
    pub sensitive: bool,
}

/// What became of one item.
#[derive(Debug, Clone)]
pub(crate) enum ItemResult {
    /// The steps exited 0; `verify` holds the re-read facts (or why they could not be read).
    Done {
        /// Kept for callers that show a task's output; the host log has it too.
        #[allow(dead_code)]
        out: Section,
        verify: Result<Facts, FactError>,
    },
    /// A step exited non-zero.
    Failed { exit: i32, out: Section },
    /// The script ended inside this item without an end marker (killed, `exec`'d away).
    Died { out: Section, script_exit: i32 },
    /// Never started: an earlier item failed.
    NotRun,
}

/// Output of one item's steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Section {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[derive(Debug, Clone)]
pub(crate) struct Batch {
    pub script: String,
    /// `script` as the host log shows it when that differs (a sensitive task's steps are
    /// replaced by a comment with their size and hash); `None`: as it is. Not a second copy
    /// of every batch: a run on hundreds of hosts holds one batch per host at once.
    pub log_script: Option<String>,
    nonce: String,
    shell: Shell,
    items: Vec<Item>,
    probe: Vec<FactQuery>,
    /// Everything the end read asks: deferred verifies and the probe.
    end: Vec<FactQuery>,
}

impl Batch {
    pub fn new(shell: Shell, mut items: Vec<Item>, probe: Vec<FactQuery>) -> Batch {
        let nonce = crate::fs::new_nonce();
        if shell == Shell::PowerShell {
            for item in &mut items {
                item.verify_now = true;
            }
        }
        let (mut script, end) = build(shell, &items, &probe, &nonce, false);
        let log_script = items
            .iter()
            .any(|i| i.sensitive)
            .then(|| build(shell, &items, &probe, &nonce, true).0);
        script.shrink_to_fit();
        // The steps are in the script now; what is kept of the items is what reading the
        // output needs.
        for item in &mut items {
            item.steps = Vec::new();
        }
        Batch {
            script,
            log_script,
            nonce,
            shell,
            items,
            probe,
            end,
        }
    }

    /// The nonce of the batch's markers (`transport::output::Keep::sections`).
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// Items whose step output the run's output budget cut, with how many bytes were not
    /// kept (both streams).
    pub fn cuts(&self, out: &Output) -> Vec<(usize, u64)> {
        let mut cuts: Vec<(usize, u64)> = Vec::new();
        let cut = format!("\n@@kwin:{}:cut:", self.nonce);
        let begin = format!("\n@@kwin:{}:task:", self.nonce);
        for stream in [&out.stdout, &out.stderr] {
            let mut from = 0;
            while let Some(at) = find(&stream[from..], cut.as_bytes()).map(|i| from + i) {
                let n: u64 = stream[at + cut.len()..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .fold(0u64, |acc, &b| {
                        acc.saturating_mul(10).saturating_add(u64::from(b - b'0'))
                    });
                // The item: the last begin marker before the cut.
                let item = rfind(&stream[..at], begin.as_bytes()).and_then(|b| {
                    let rest = &stream[b + begin.len()..at];
                    let digits: Vec<u8> = rest
                        .iter()
                        .copied()
                        .take_while(u8::is_ascii_digit)
                        .collect();
                    std::str::from_utf8(&digits).ok()?.parse::<usize>().ok()
                });
                if let Some(i) = item {
                    match cuts.iter_mut().find(|c| c.0 == i) {
                        Some(c) => c.1 += n,
                        None => cuts.push((i, n)),
                    }
                }
                from = at + cut.len();
            }
        }
        cuts
    }

    /// Whether the host log shows the script otherwise than it is sent: a sensitive task's
    /// steps are in it (`log_script`).
    pub fn hides_steps(&self) -> bool {
        self.log_script.is_some()
    }

    /// Whether [`Batch::log_output`] may hide anything, known before the batch runs: a
    /// sensitive task's output, or an answer [`fact::may_redact`] says may be hidden. When
    /// not, its output is logged (and shown with `-v`, as it arrives) as received.
    pub fn may_hide_output(&self, sensitive: &dyn Fn(&str) -> bool) -> bool {
        self.hides_steps()
            || self.items.iter().any(|i| {
                i.verify_now
                    && !i.verify.is_empty()
                    && fact::may_redact(self.shell, &i.verify, sensitive)
            })
            || (!self.end.is_empty() && fact::may_redact(self.shell, &self.end, sensitive))
    }

    /// `out` as the host log shows it: the step output of sensitive tasks (but for kwin's own
    /// `kwin: ` messages) and the answers `sensitive` names, or that read files private by
    /// mode, replaced by their size and hash.
    /// `None`: log `out` as it is.
    pub fn log_output(&self, out: &Output, sensitive: &dyn Fn(&str) -> bool) -> Option<Output> {
        let mut o: Option<Output> = None;
        for (i, item) in self.items.iter().enumerate() {
            if item.sensitive {
                let o = o.get_or_insert_with(|| out.clone());
                let begin = format!("\n@@kwin:{}:task:{i}:begin\n", self.nonce);
                let end = format!("\n@@kwin:{}:task:{i}:end", self.nonce);
                o.stdout =
                    fact::replace_section(&o.stdout, begin.as_bytes(), end.as_bytes(), |b| {
                        hidden_output(b)
                    });
                o.stderr =
                    fact::replace_section(&o.stderr, begin.as_bytes(), end.as_bytes(), |b| {
                        hidden_output(b)
                    });
            }
            if item.verify_now && !item.verify.is_empty() {
                let nonce = format!("{}v{i}", self.nonce);
                let cur = o.as_ref().unwrap_or(out);
                if let Some(r) =
                    fact::redact_for_log(self.shell, &item.verify, cur, &nonce, sensitive)
                {
                    o = Some(r);
                }
            }
        }
        if !self.end.is_empty() {
            let nonce = format!("{}e", self.nonce);
            let cur = o.as_ref().unwrap_or(out);
            if let Some(r) = fact::redact_for_log(self.shell, &self.end, cur, &nonce, sensitive) {
                o = Some(r);
            }
        }
        o
    }
}

/// A sensitive task's step output as logged: its size and hash, and kwin's own `kwin: `
/// lines (which name paths and reasons, never content).
pub(crate) fn hidden_output(b: &[u8]) -> Vec<u8> {
    if b.is_empty() {
        return Vec::new();
    }
    let mut v = format!(
        "({} bytes of a sensitive task's output, {}, not logged)",
        b.len(),
        crate::secret::sensitive_hash(b)
    )
    .into_bytes();
    for line in b.split(|&c| c == b'\n') {
        if line.starts_with(b"kwin: ") {
            v.push(b'\n');
            v.extend_from_slice(line);
        }
    }
    v
}

/// The script of a batch (with `redact`: as logged) and the queries of its end read.
fn build(
    shell: Shell,
    items: &[Item],
    probe: &[FactQuery],
    nonce: &str,
    redact: bool,
) -> (String, Vec<FactQuery>) {
    let mut s = String::new();
    match shell {
        Shell::PowerShell => s.push_str("$ProgressPreference = 'SilentlyContinue'\n[Console]::OutputEncoding = [System.Text.Encoding]::UTF8\n"),
        Shell::Posix => {
            s.push_str("__kw_stop=\n");
            if items.iter().any(|i| i.steps.iter().any(|st| st.inline)) {
                s.push_str(POSIX_UMASK);
            }
        }
    }
    let mut end: Vec<FactQuery> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let hidden;
        let steps: &[Script] = if redact && item.sensitive {
            hidden = item
                .steps
                .iter()
                .map(|st| Script {
                    text: format!(
                        "# ({} bytes of a sensitive task's step, {}, not logged)",
                        st.text.len(),
                        crate::secret::sensitive_hash(st.text.as_bytes())
                    ),
                    inline: st.inline,
                })
                .collect::<Vec<_>>();
            &hidden
        } else {
            &item.steps
        };
        match shell {
            Shell::Posix => posix_item(&mut s, nonce, i, steps),
            Shell::PowerShell => ps_item(&mut s, nonce, i, steps),
        }
        if item.verify.is_empty() {
            continue;
        }
        if !item.verify_now {
            end.extend(item.verify.iter().cloned());
            continue;
        }
        let read = fact::batch_script(shell, &item.verify, &format!("{nonce}v{i}"));
        match shell {
            Shell::Posix => {
                s.push_str(&format!("if [ -z \"$__kw_stop\" ]; then\n{read}fi\n"));
            }
            Shell::PowerShell => s.push_str(&read),
        }
    }
    end.extend(probe.iter().cloned());
    if !end.is_empty() {
        s.push_str(&fact::batch_script(shell, &end, &format!("{nonce}e")));
    }
    if shell == Shell::Posix {
        s.push_str("if [ -n \"$__kw_stop\" ]; then exit \"$__kw_stop\"; fi\n");
    }
    (s, end)
}

impl Batch {
    /// Results per item, in order, and the trailing probe's facts (`None` without a probe or
    /// when the script stopped early).
    pub fn parse(&self, out: &Output) -> (Vec<ItemResult>, Option<Result<Facts, FactError>>) {
        let stdout = strip_cr(&out.stdout);
        let stderr = strip_cr(&out.stderr);
        let mut results = Vec::with_capacity(self.items.len());
        let mut stopped = false;
        let mut end_read: Option<Result<Facts, FactError>> = None;
        // The answers to `queries` from the end read (parsed once).
        let mut end_facts = |queries: &[FactQuery]| -> Result<Facts, FactError> {
            match end_read.get_or_insert_with(|| {
                fact::parse_batch_for(self.shell, &self.end, out, &format!("{}e", self.nonce))
            }) {
                Ok(f) => Ok(f.subset(queries.iter().map(|q| q.key.as_str()))),
                Err(e) => Err(e.clone()),
            }
        };
        for (i, item) in self.items.iter().enumerate() {
            if stopped {
                results.push(ItemResult::NotRun);
                continue;
            }
            let begin = format!("\n@@kwin:{}:task:{i}:begin\n", self.nonce);
            let end = format!("\n@@kwin:{}:task:{i}:end", self.nonce);
            let Some(b) = find(&stdout, begin.as_bytes()) else {
                stopped = true;
                results.push(ItemResult::NotRun);
                continue;
            };
            let body_start = b + begin.len();
            let err_section = |hay: &[u8]| -> Vec<u8> {
                let Some(eb) = find(hay, begin.as_bytes()) else {
                    return Vec::new();
                };
                let from = eb + begin.len();
                let to = find(&hay[from..], format!("{end}\n").as_bytes())
                    .map(|e| from + e)
                    .unwrap_or(hay.len());
                hay[from..to].to_vec()
            };
            let marker = format!("{end}:");
            let Some(e) = find(&stdout[body_start..], marker.as_bytes()).map(|e| body_start + e)
            else {
                stopped = true;
                results.push(ItemResult::Died {
                    out: Section {
                        stdout: without_cut_lines(stdout[body_start..].to_vec(), &self.nonce),
                        stderr: without_cut_lines(err_section(&stderr), &self.nonce),
                    },
                    script_exit: out.exit,
                });
                continue;
            };
            let section = Section {
                stdout: without_cut_lines(stdout[body_start..e].to_vec(), &self.nonce),
                stderr: without_cut_lines(err_section(&stderr), &self.nonce),
            };
            let rest = &stdout[e + marker.len()..];
            let code_end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            let exit = std::str::from_utf8(&rest[..code_end])
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                .unwrap_or(-1);
            if exit != 0 {
                stopped = true;
                results.push(ItemResult::Failed { exit, out: section });
                continue;
            }
            let verify = if item.verify_now || item.verify.is_empty() {
                fact::parse_batch_for(
                    self.shell,
                    &item.verify,
                    out,
                    &format!("{}v{i}", self.nonce),
                )
            } else {
                end_facts(&item.verify)
            };
            results.push(ItemResult::Done {
                out: section,
                verify,
            });
        }
        let probe = if self.probe.is_empty() || stopped {
            None
        } else {
            Some(end_facts(&self.probe))
        };
        (results, probe)
    }
}

/// The batch's umask and working directory, for restoring them after each inline step
/// (which may set its own umask to create a file with its mode, and enter the directory it
/// writes in): the umask read from the shell's own `/proc/self/status` with builtins
/// (`Umask:`, Linux 4.7 and later), else from `umask` in a command substitution (a fork).
const POSIX_UMASK: &str = "__kw_umask=\n__kw_cwd=$PWD\n\
while IFS=' \t:' read -r __kw_k __kw_v; do if [ \"$__kw_k\" = Umask ]; then __kw_umask=$__kw_v; break; fi; done 2>/dev/null </proc/self/status\n\
case $__kw_umask in [0-7][0-7][0-7]|[0-7][0-7][0-7][0-7]) ;; *) __kw_umask=$(umask) ;; esac\n\
unset __kw_k __kw_v\n";

fn posix_item(s: &mut String, nonce: &str, i: usize, steps: &[Script]) {
    s.push_str(&format!(
        "if [ -z \"$__kw_stop\" ]; then\nprintf '\\n@@kwin:{nonce}:task:{i}:begin\\n'; printf '\\n@@kwin:{nonce}:task:{i}:begin\\n' >&2\n__kw_rc=0\n"
    ));
    for step in steps {
        let text = &step.text;
        if !step.inline {
            s.push_str(&format!(
                "if [ \"$__kw_rc\" -eq 0 ]; then\n(\n{text}\n) </dev/null\n__kw_rc=$?\nfi\n"
            ));
        } else if text.trim().is_empty() {
            continue;
        } else {
            // No subshell: a function of this shell (see `Step::Inline` for what it may do),
            // then the umask, noclobber and working directory as they were, whatever it
            // returned.
            s.push_str(&format!(
                "if [ \"$__kw_rc\" -eq 0 ]; then\n__kw_step() {{\n{text}\n}}\n__kw_step </dev/null\n__kw_rc=$?\nset +C; umask \"$__kw_umask\"; [ \"$PWD\" = \"$__kw_cwd\" ] || cd -- \"$__kw_cwd\" 2>/dev/null || cd /\nfi\n"
            ));
        }
    }
    s.push_str(&format!(
        "printf '\\n@@kwin:{nonce}:task:{i}:end:%d\\n' \"$__kw_rc\"; printf '\\n@@kwin:{nonce}:task:{i}:end\\n' >&2\nif [ \"$__kw_rc\" -ne 0 ]; then __kw_stop=$__kw_rc; fi\nfi\n"
    ));
}

fn ps_item(s: &mut String, nonce: &str, i: usize, steps: &[Script]) {
    s.push_str(&format!(
        "[Console]::Out.Write(\"`n@@kwin:{nonce}:task:{i}:begin`n\"); [Console]::Error.Write(\"`n@@kwin:{nonce}:task:{i}:begin`n\")\n$__kw_rc = 0\n"
    ));
    for step in steps.iter().map(|st| &st.text) {
        s.push_str(&format!(
            "if ($__kw_rc -eq 0) {{\ntry {{ $global:LASTEXITCODE = 0\n$ErrorActionPreference = 'Stop'\n& {{\n{step}\n}} | Out-String -Stream | ForEach-Object {{ [Console]::Out.Write($_ + \"`n\") }}\nif ($global:LASTEXITCODE) {{ $__kw_rc = $global:LASTEXITCODE }} }} catch {{ [Console]::Error.Write($_.ToString() + \"`n\"); $__kw_rc = 1 }}\n}}\n"
        ));
    }
    s.push_str(&format!(
        "[Console]::Out.Write(\"`n@@kwin:{nonce}:task:{i}:end:$__kw_rc`n\"); [Console]::Error.Write(\"`n@@kwin:{nonce}:task:{i}:end`n\")\nif ($__kw_rc -ne 0) {{ exit $__kw_rc }}\n"
    ));
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(hay, needle)
}

/// A section's output without the budget's cut lines (they are the executor's business).
fn without_cut_lines(b: Vec<u8>, nonce: &str) -> Vec<u8> {
    let cut = format!("@@kwin:{nonce}:cut:");
    if find(&b, cut.as_bytes()).is_none() {
        return b;
    }
    let mut v = Vec::with_capacity(b.len());
    let mut first = true;
    for line in b.split(|&c| c == b'\n') {
        if line.starts_with(cut.as_bytes()) {
            continue;
        }
        if !first {
            v.push(b'\n');
        }
        v.extend_from_slice(line);
        first = false;
    }
    v
}

fn strip_cr(b: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if find(b, b"\r\n").is_none() {
        return std::borrow::Cow::Borrowed(b);
    }
    let mut v = Vec::with_capacity(b.len());
    for (i, &c) in b.iter().enumerate() {
        if c == b'\r' && b.get(i + 1) == Some(&b'\n') {
            continue;
        }
        v.push(c);
    }
    std::borrow::Cow::Owned(v)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    memchr::memmem::find(hay, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `script` as `Conn::run` sends a POSIX script: in a brace group reading from
    /// /dev/null.
    fn sh(script: &str) -> Output {
        crate::testing::run_sh(&format!("{{\n{script}\n}} </dev/null\n"))
    }

    fn runs(v: Vec<String>) -> Vec<Script> {
        v.into_iter().map(Script::from).collect()
    }

    fn q(key: &str, cmd: &str) -> FactQuery {
        FactQuery {
            key: key.into(),
            command: cmd.into(),
            path: None,
        }
    }

    #[test]
    fn first_failure_stops_the_batch_and_is_attributed() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("f");
        let fs = f.display().to_string();
        let b = Batch::new(
            Shell::Posix,
            vec![
                Item {
                    steps: runs(vec![format!("echo one > {fs}"), "echo step2".into()]),
                    verify: vec![q("f", &format!("cat {fs}"))],
                    verify_now: true,
                    sensitive: false,
                },
                Item {
                    steps: runs(vec!["echo bad >&2; exit 7".into(), "echo never".into()]),
                    verify: vec![],
                    verify_now: true,
                    sensitive: false,
                },
                Item {
                    steps: runs(vec![format!("echo three > {fs}")]),
                    verify: vec![],
                    verify_now: true,
                    sensitive: false,
                },
            ],
            vec![q("g", "echo probe")],
        );
        let out = sh(&b.script);
        assert_eq!(out.exit, 7);
        let (res, probe) = b.parse(&out);
        assert!(probe.is_none());
        match &res[0] {
            ItemResult::Done { out, verify } => {
                assert_eq!(out.stdout, b"step2\n");
                let facts = verify.as_ref().expect("verify facts");
                assert_eq!(
                    facts.raw("f").map(|o| o.stdout.clone()),
                    Some(b"one\n".to_vec())
                );
            }
            other => panic!("{other:?}"),
        }
        match &res[1] {
            ItemResult::Failed { exit, out } => {
                assert_eq!(*exit, 7);
                assert_eq!(out.stderr, b"bad\n");
                assert!(out.stdout.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(res[2], ItemResult::NotRun));
        assert_eq!(std::fs::read_to_string(&f).expect("f"), "one\n");
    }

    #[test]
    fn trailing_probe_and_stdin_is_not_the_script() {
        let b = Batch::new(
            Shell::Posix,
            vec![Item {
                // A step reading stdin must not eat the rest of the script.
                steps: runs(vec!["cat; echo read-done".into()]),
                verify: vec![],
                verify_now: true,
                sensitive: false,
            }],
            vec![q("p", "echo probed")],
        );
        let out = sh(&b.script);
        let (res, probe) = b.parse(&out);
        assert!(matches!(res[0], ItemResult::Done { .. }), "{res:?}");
        let facts = probe.expect("probe").expect("facts");
        assert_eq!(
            facts.raw("p").map(|o| o.stdout.clone()),
            Some(b"probed\n".to_vec())
        );
    }

    fn inline(text: &str) -> Script {
        Script {
            text: text.into(),
            inline: true,
        }
    }

    fn item(steps: Vec<Script>) -> Item {
        Item {
            steps,
            verify: vec![],
            verify_now: true,
            sensitive: false,
        }
    }

    /// The shells a POSIX host may have as `/bin/sh`.
    fn shells() -> Vec<&'static str> {
        ["/bin/sh", "/bin/dash", "/bin/bash", "/usr/bin/busybox"]
            .into_iter()
            .filter(|s| std::path::Path::new(s).exists())
            .collect()
    }

    fn run_with(shell: &str, script: &str) -> Output {
        let wrapped = format!("{{\n{script}\n}} </dev/null\n");
        if shell.ends_with("busybox") {
            let dir = tempfile::tempdir().expect("tmp");
            let sh = dir.path().join("sh");
            std::os::unix::fs::symlink(shell, &sh).expect("symlink");
            return crate::testing::run_in(&sh.display().to_string(), &wrapped);
        }
        crate::testing::run_in(shell, &wrapped)
    }

    #[test]
    fn inline_steps_run_in_the_batch_shell_and_leave_umask_and_noclobber_as_they_were() {
        for shell in shells() {
            let b = Batch::new(
                Shell::Posix,
                vec![
                    // Sets a variable and the umask and noclobber, as a file write does.
                    item(vec![inline("__kw_mark=$$; umask 077; set -C")]),
                    // A subshell step between them sees what the inline one set.
                    item(vec!["echo \"run:$__kw_mark\"".into()]),
                    item(vec![inline(
                        "echo \"inline:$__kw_mark\"; umask; case $- in *C*) echo noclobber ;; esac",
                    )]),
                ],
                vec![],
            );
            assert!(b.script.contains("__kw_step() {"), "{}", b.script);
            let out = run_with(shell, &b.script);
            let (res, _) = b.parse(&out);
            assert!(
                res.iter().all(|r| matches!(r, ItemResult::Done { .. })),
                "{shell}: {res:?}"
            );
            let text = |r: &ItemResult| match r {
                ItemResult::Done { out, .. } => String::from_utf8_lossy(&out.stdout).to_string(),
                other => panic!("{other:?}"),
            };
            // No subshell: the mark is the batch shell's pid, seen by the steps after it.
            let mark = text(&res[1]);
            assert!(
                mark.starts_with("run:") && mark.trim().len() > 4,
                "{shell}: {mark}"
            );
            let third = text(&res[2]);
            assert_eq!(
                third.lines().next(),
                Some(format!("inline:{}", &mark.trim()[4..]).as_str()),
                "{shell}"
            );
            // The umask as the batch started (this test's, 0022 or so), noclobber off.
            let umask = third.lines().nth(1).unwrap_or_default().to_string();
            assert_ne!(umask.trim_start_matches('0'), "77", "{shell}: {third}");
            assert!(!third.contains("noclobber"), "{shell}: {third}");
        }
    }

    #[test]
    fn a_failing_inline_step_stops_the_batch_with_its_marker_and_code() {
        for shell in shells() {
            let dir = tempfile::tempdir().expect("tmp");
            let f = dir.path().join("f");
            let fs = f.display().to_string();
            let b = Batch::new(
                Shell::Posix,
                vec![
                    item(vec![
                        inline("umask 077; set -C; echo before; { false || { echo 'kwin: no' >&2; return 5; }; }; echo after"),
                        inline(&format!("echo second > {fs}")),
                    ]),
                    item(vec![inline(&format!("echo never > {fs}"))]),
                ],
                vec![q("p", "umask; echo probed")],
            );
            let out = run_with(shell, &b.script);
            assert_eq!(out.exit, 5, "{shell}");
            let (res, probe) = b.parse(&out);
            match &res[0] {
                ItemResult::Failed { exit, out } => {
                    assert_eq!(*exit, 5, "{shell}");
                    assert_eq!(out.stdout, b"before\n", "{shell}");
                    assert_eq!(out.stderr, b"kwin: no\n", "{shell}");
                }
                other => panic!("{shell}: {other:?}"),
            }
            assert!(matches!(res[1], ItemResult::NotRun), "{shell}: {res:?}");
            assert!(probe.is_none());
            assert!(!f.exists(), "{shell}: a step after the failure ran");
        }
    }

    /// An inline step must never `exit`: it would end the whole batch, which is then reported
    /// as died inside that item (never as done).
    #[test]
    fn an_inline_step_that_exits_ends_the_batch_and_is_reported_as_died() {
        let b = Batch::new(
            Shell::Posix,
            vec![
                item(vec![inline("exit 0")]),
                item(vec![inline("echo never")]),
            ],
            vec![],
        );
        let (res, _) = b.parse(&sh(&b.script));
        assert!(matches!(res[0], ItemResult::Died { .. }), "{res:?}");
        assert!(matches!(res[1], ItemResult::NotRun), "{res:?}");
    }

    /// A run on hundreds of hosts holds one batch per host at once: its steps are in memory
    /// once (in the script), not also in the items or in a log copy.
    #[test]
    fn a_batch_holds_its_steps_once() {
        let step = format!("printf '%s' {} >/dev/null", "x".repeat(10_000));
        let b = Batch::new(
            Shell::Posix,
            vec![item(vec![inline(&step)]), item(vec![step.as_str().into()])],
            vec![],
        );
        assert!(b.script.contains(&step));
        assert!(
            b.log_script.is_none(),
            "a log copy of a batch without secrets"
        );
        assert!(b.items.iter().all(|i| i.steps.is_empty()), "{:?}", b.items);
        assert!(b.script.capacity() < b.script.len() + 1024);
    }

    #[test]
    fn a_script_killed_inside_an_item_is_reported_as_died() {
        let b = Batch::new(
            Shell::Posix,
            vec![Item {
                steps: runs(vec!["kill -9 $$".into()]),
                verify: vec![],
                verify_now: true,
                sensitive: false,
            }],
            vec![],
        );
        let (res, _) = b.parse(&sh(&b.script));
        assert!(matches!(res[0], ItemResult::Died { .. }), "{res:?}");
    }

    #[test]
    fn the_log_form_leaves_out_a_sensitive_tasks_steps_and_output() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("f");
        let fs = f.display().to_string();
        let b = Batch::new(
            Shell::Posix,
            vec![
                Item {
                    steps: runs(vec![format!(
                        "echo plain-step > {fs}.plain; echo plain-out"
                    )]),
                    verify: vec![],
                    verify_now: true,
                    sensitive: false,
                },
                Item {
                    steps: runs(vec![format!(
                        "printf 'Hunter2step' > {fs}; echo Hunter2out; echo 'kwin: a message' >&2"
                    )]),
                    verify: vec![q("f", &format!("cat {fs}"))],
                    verify_now: true,
                    sensitive: true,
                },
            ],
            vec![q("g", &format!("cat {fs}"))],
        );
        assert!(b.script.contains("Hunter2step"));
        let log_script = b.log_script.as_deref().expect("a log form");
        assert!(!log_script.contains("Hunter2"), "{log_script}");
        assert!(log_script.contains("plain-step"), "{log_script}");
        assert!(
            log_script.contains("bytes of a sensitive task's step, sha256:"),
            "{log_script}"
        );
        let out = sh(&b.script);
        let (res, probe) = b.parse(&out);
        assert!(matches!(res[1], ItemResult::Done { .. }), "{res:?}");
        assert!(probe.is_some());
        let sensitive = |k: &str| k == "f" || k == "g";
        let shown = b.log_output(&out, &sensitive).expect("a sensitive item");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&shown.stdout),
            String::from_utf8_lossy(&shown.stderr)
        );
        assert!(!text.contains("Hunter2"), "{text}");
        assert!(
            text.contains("plain-out") && text.contains("kwin: a message"),
            "{text}"
        );
        // The log form still parses: markers and exit codes are untouched.
        let (res, _) = b.parse(&shown);
        assert!(
            res.iter().all(|r| matches!(r, ItemResult::Done { .. })),
            "{res:?}"
        );
    }
}
