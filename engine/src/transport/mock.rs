//! A strict mock transport for engine tests.
//!
//! A test scripts, in order, every operation it expects on one host ([`Expect`]): a run whose
//! script contains (and does not contain) given text, a put of a path, a get. Each expectation
//! says how to answer: canned output, an error, a closure, or by running the script with a real
//! `/bin/sh` ([`Expect::sh`]), which keeps kwin's section markers honest without the test
//! reimplementing them. An operation that does not match the next expectation is an error
//! returned to the engine *and* recorded; [`MockTransport::finish`] reports it, together with
//! expectations never met. Connects succeed unless scripted otherwise
//! ([`MockTransport::connect_results`]). Every call is counted, so tests can assert round trips.

use super::output::{keep_output, Keep};
use super::{Output, Shell, Transport, TransportError};
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

type ErrFn = Arc<dyn Fn() -> TransportError + Send + Sync>;
type RunFn = Arc<dyn Fn(&str) -> Result<Output, TransportError> + Send + Sync>;

#[derive(Clone)]
enum Respond {
    /// Run the script with `/bin/sh -s`.
    Sh,
    Output(Output),
    Error(ErrFn),
    With(RunFn),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Run,
    Put(String),
    Get(String),
}

/// One expected operation and its answer.
#[derive(Clone)]
pub struct Expect {
    label: String,
    op: Op,
    contains: Vec<String>,
    excludes: Vec<String>,
    respond: Respond,
    delay: Option<Duration>,
}

impl Expect {
    /// A run, answered with empty success output unless told otherwise.
    pub fn run(label: impl Into<String>) -> Self {
        Expect {
            label: label.into(),
            op: Op::Run,
            contains: Vec::new(),
            excludes: Vec::new(),
            respond: Respond::Output(Output::default()),
            delay: None,
        }
    }
    /// A put of `path` (the answer is success unless [`Expect::fail`]).
    pub fn put(label: impl Into<String>, path: impl Into<String>) -> Self {
        Expect {
            op: Op::Put(path.into()),
            ..Self::run(label)
        }
    }
    /// A get of `path`, answered with the stdout of [`Expect::output`].
    pub fn get(label: impl Into<String>, path: impl Into<String>) -> Self {
        Expect {
            op: Op::Get(path.into()),
            ..Self::run(label)
        }
    }
    /// The script must contain `text`.
    pub fn contains(mut self, text: impl Into<String>) -> Self {
        self.contains.push(text.into());
        self
    }
    /// The script must not contain `text`.
    pub fn excludes(mut self, text: impl Into<String>) -> Self {
        self.excludes.push(text.into());
        self
    }
    /// Answer by running the script with a real `/bin/sh`.
    pub fn sh(mut self) -> Self {
        self.respond = Respond::Sh;
        self
    }
    pub fn output(mut self, out: Output) -> Self {
        self.respond = Respond::Output(out);
        self
    }
    pub fn stdout(self, text: &str) -> Self {
        self.output(Output {
            stdout: text.as_bytes().to_vec(),
            ..Output::default()
        })
    }
    pub fn fail(mut self, f: impl Fn() -> TransportError + Send + Sync + 'static) -> Self {
        self.respond = Respond::Error(Arc::new(f));
        self
    }
    pub fn with(
        mut self,
        f: impl Fn(&str) -> Result<Output, TransportError> + Send + Sync + 'static,
    ) -> Self {
        self.respond = Respond::With(Arc::new(f));
        self
    }
    /// Take this long before answering (for timeouts).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }

    fn matches(&self, op: &Op, script: &str) -> bool {
        &self.op == op
            && self.contains.iter().all(|c| script.contains(c.as_str()))
            && !self.excludes.iter().any(|c| script.contains(c.as_str()))
    }
}

/// A recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Connect,
    Run(String),
    Put(String),
    Get(String),
    Close,
}

#[derive(Default)]
struct State {
    expected: VecDeque<Expect>,
    connects: VecDeque<Option<ErrFn>>,
    calls: Vec<Call>,
    problems: Vec<String>,
}

/// See the module docs.
#[derive(Clone)]
pub struct MockTransport {
    name: String,
    shell: Shell,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for MockTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MockTransport({})", self.name)
    }
}

impl MockTransport {
    pub fn new(name: impl Into<String>, shell: Shell) -> Self {
        MockTransport {
            name: name.into(),
            shell,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Expect `e` after every expectation added before it.
    pub fn expect(&self, e: Expect) -> &Self {
        self.lock().expected.push_back(e);
        self
    }

    /// Script the next connects: `None` succeeds, `Some(f)` fails with `f()`. After these,
    /// connects succeed.
    pub fn connect_results(&self, results: Vec<Option<ErrFn>>) -> &Self {
        self.lock().connects.extend(results);
        self
    }

    /// Make the next `n` connects fail with `f()`.
    pub fn fail_connects(
        &self,
        n: usize,
        f: impl Fn() -> TransportError + Send + Sync + 'static,
    ) -> &Self {
        let f: ErrFn = Arc::new(f);
        let mut st = self.lock();
        for _ in 0..n {
            st.connects.push_back(Some(f.clone()));
        }
        drop(st);
        self
    }

    /// The next `n` connects (after those queued before) succeed.
    pub fn ok_connects(&self, n: usize) -> &Self {
        let mut st = self.lock();
        for _ in 0..n {
            st.connects.push_back(None);
        }
        drop(st);
        self
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Number of scripts run (round trips of `run`).
    pub fn runs(&self) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| matches!(c, Call::Run(_)))
            .count()
    }

    /// The scripts run, in order.
    pub fn scripts(&self) -> Vec<String> {
        self.lock()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Run(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn connects(&self) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| matches!(c, Call::Connect))
            .count()
    }

    /// `Ok` when every expectation was met and nothing unexpected happened; otherwise every
    /// problem, one per line.
    pub fn finish(&self) -> Result<(), String> {
        let st = self.lock();
        let mut problems = st.problems.clone();
        for e in &st.expected {
            problems.push(format!(
                "{}: expected `{}` never happened",
                self.name, e.label
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    async fn answer(&self, op: Op, script: &str) -> Result<Output, TransportError> {
        let next = {
            let mut st = self.lock();
            st.calls.push(match &op {
                Op::Run => Call::Run(script.to_string()),
                Op::Put(p) => Call::Put(p.clone()),
                Op::Get(p) => Call::Get(p.clone()),
            });
            match st.expected.front() {
                Some(e) if e.matches(&op, script) => st.expected.pop_front(),
                other => {
                    let wanted = other
                        .map(|e| format!("`{}`", e.label))
                        .unwrap_or_else(|| "nothing more".to_string());
                    let head: String = script.chars().take(2000).collect();
                    let msg = format!(
                        "{}: unexpected {:?} (expected {wanted}):\n{head}",
                        self.name, op
                    );
                    st.problems.push(msg.clone());
                    None
                }
            }
        };
        let Some(e) = next else {
            return Err(TransportError::Remote(format!(
                "mock {}: unexpected operation",
                self.name
            )));
        };
        if let Some(d) = e.delay {
            tokio::time::sleep(d).await;
        }
        match &e.respond {
            Respond::Sh => run_sh(script).await,
            Respond::Output(o) => Ok(o.clone()),
            Respond::Error(f) => Err(f()),
            Respond::With(f) => f(script),
        }
    }
}

async fn run_sh(script: &str) -> Result<Output, TransportError> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-s")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| TransportError::Local(format!("mock: cannot start /bin/sh: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| TransportError::Local(e.to_string()))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| TransportError::Local(e.to_string()))?;
    Ok(Output {
        stdout: out.stdout,
        stderr: out.stderr,
        exit: out.status.code().unwrap_or(-1),
    })
}

#[async_trait]
impl Transport for MockTransport {
    fn shell(&self) -> Shell {
        self.shell
    }

    async fn connect(&self) -> Result<(), TransportError> {
        let r = {
            let mut st = self.lock();
            st.calls.push(Call::Connect);
            st.connects.pop_front().flatten()
        };
        match r {
            Some(f) => Err(f()),
            None => Ok(()),
        }
    }

    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        let out = tokio::time::timeout(timeout, self.answer(Op::Run, script))
            .await
            .map_err(|_| TransportError::Timeout(timeout))??;
        Ok(keep_output(out, keep))
    }

    async fn put(
        &self,
        path: &str,
        _bytes: &[u8],
        _mode: Option<u32>,
    ) -> Result<(), TransportError> {
        self.answer(Op::Put(path.to_string()), "").await.map(|_| ())
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        self.answer(Op::Get(path.to_string()), "")
            .await
            .map(|o| o.stdout)
    }

    async fn close(&self) {
        self.lock().calls.push(Call::Close);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unexpected_script_is_an_error_and_reported() {
        let m = MockTransport::new("h1", Shell::Posix);
        m.expect(Expect::run("probe").contains("cat /a").stdout("x"));
        let t = Duration::from_secs(5);
        assert!(m.run("echo nope", t).await.is_err());
        let err = m.finish().expect_err("must report");
        assert!(err.contains("unexpected"), "{err}");
        assert!(err.contains("`probe` never happened"), "{err}");
    }

    #[tokio::test]
    async fn sh_answers_and_counts() {
        let m = MockTransport::new("h1", Shell::Posix);
        m.expect(Expect::run("a").contains("echo").sh());
        m.fail_connects(1, || TransportError::ConnectionLost("x".into()));
        assert!(m.connect().await.is_err());
        assert!(m.connect().await.is_ok());
        let out = m.run("echo hi", Duration::from_secs(5)).await.expect("run");
        assert_eq!(out.stdout, b"hi\n");
        assert_eq!((m.runs(), m.connects()), (1, 2));
        m.finish().expect("all met");
    }
}
