//! `local` transport: runs scripts on the machine kwin runs on (`/bin/sh`, optionally under
//! `sudo -n`).

use super::output::{Collector, Keep, Live, Stream};
use super::{Output, Shell, Transport, TransportError};
use async_trait::async_trait;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone)]
pub struct LocalTransport {
    pub become_root: bool,
}

async fn read_bounded<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    keep: &Keep,
    stream: Stream,
) -> Result<Vec<u8>, TransportError> {
    let mut buf = Collector::new(keep, stream, Live::Lines);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = r
            .read(&mut chunk)
            .await
            .map_err(|e| TransportError::Local(e.to_string()))?;
        if n == 0 {
            return Ok(buf.finish());
        }
        buf.push(&chunk[..n])?;
    }
}

#[async_trait]
impl Transport for LocalTransport {
    fn shell(&self) -> Shell {
        Shell::Posix
    }

    async fn connect(&self) -> Result<(), TransportError> {
        Ok(())
    }

    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        let mut cmd = if self.become_root {
            let mut c = tokio::process::Command::new("sudo");
            c.args(["-n", "/bin/sh", "-s"]);
            c
        } else {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-s");
            c
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| TransportError::Local(format!("cannot start /bin/sh: {e}")))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| TransportError::Local("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| TransportError::Local("no stdout".into()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| TransportError::Local("no stderr".into()))?;
        let script = script.as_bytes().to_vec();
        let work = async move {
            let write = async move {
                let r = stdin.write_all(&script).await;
                drop(stdin);
                r
            };
            let (w, out, err) = tokio::join!(
                write,
                read_bounded(stdout, keep, Stream::Stdout),
                read_bounded(stderr, keep, Stream::Stderr)
            );
            w.map_err(|e| TransportError::Local(format!("writing script: {e}")))?;
            let status = child
                .wait()
                .await
                .map_err(|e| TransportError::Local(e.to_string()))?;
            Ok::<_, TransportError>(Output {
                stdout: out?,
                stderr: err?,
                exit: status.code().unwrap_or(-1),
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| TransportError::Timeout(timeout))?
    }

    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError> {
        let p = std::path::Path::new(path);
        let dir = p.parent().unwrap_or(std::path::Path::new("/"));
        // A new file (never one planted at the name, nor through a link), private until its
        // mode is set.
        let tmp = dir.join(format!(".kwin-tmp-{}", crate::fs::new_nonce()));
        let write = async {
            use tokio::io::AsyncWriteExt;
            let mut f = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .await?;
            f.write_all(bytes).await?;
            f.flush().await
        };
        write
            .await
            .map_err(|e| TransportError::Local(format!("{}: {e}", tmp.display())))?;
        if let Some(m) = mode {
            use std::os::unix::fs::PermissionsExt;
            tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(m))
                .await
                .map_err(|e| TransportError::Local(e.to_string()))?;
        }
        tokio::fs::rename(&tmp, p)
            .await
            .map_err(|e| TransportError::Local(format!("{path}: {e}")))
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        tokio::fs::read(path)
            .await
            .map_err(|e| TransportError::Local(format!("{path}: {e}")))
    }

    async fn close(&self) {}
}
