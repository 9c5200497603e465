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
        // mode is set — on the open file: another account that owns the directory may rename
        // the name away and put a link there meanwhile, and a mode set by name would follow it.
        let tmp = dir.join(format!(".kwin-tmp-{}", crate::fs::new_nonce()));
        let err = |e: std::io::Error| TransportError::Local(format!("{}: {e}", tmp.display()));
        let mut f = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .await
            .map_err(err)?;
        f.write_all(bytes).await.map_err(err)?;
        f.flush().await.map_err(err)?;
        if let Some(m) = mode {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(m))
                .await
                .map_err(err)?;
        }
        // The name must still be the file written (a rename moves only a name, but what
        // reads the path next should find this file or nothing).
        let ours = f.metadata().await.map_err(err)?;
        let now = tokio::fs::symlink_metadata(&tmp).await.map_err(err)?;
        {
            use std::os::unix::fs::MetadataExt;
            if (now.dev(), now.ino()) != (ours.dev(), ours.ino()) {
                return Err(TransportError::Local(format!(
                    "{}: replaced while it was written; refusing",
                    tmp.display()
                )));
            }
        }
        drop(f);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Another account that owns the directory swaps the file being written for a link to a
    /// root-only file: the mode goes to the file written, never through the link.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn put_sets_the_mode_on_the_file_it_wrote_not_on_a_link_swapped_in() {
        let d = tempfile::tempdir().expect("tmp");
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"secret\n").expect("write");
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let attacker = {
            let (dir, victim, stop, swaps) = (
                d.path().to_path_buf(),
                victim.clone(),
                stop.clone(),
                swaps.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(rd) = std::fs::read_dir(&dir) else {
                        continue;
                    };
                    for e in rd.flatten() {
                        let name = e.file_name();
                        let is_tmp = name.to_string_lossy().starts_with(".kwin-tmp-");
                        let is_file = e.file_type().is_ok_and(|t| t.is_file());
                        if is_tmp && is_file {
                            n += 1;
                            let away = dir.join(format!("moved-{n}"));
                            if std::fs::rename(e.path(), &away).is_ok()
                                && std::os::unix::fs::symlink(&victim, e.path()).is_ok()
                            {
                                swaps.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
            })
        };
        let t = LocalTransport { become_root: false };
        let big = vec![b'x'; 32 << 20];
        for i in 0..5 {
            let dest = d.path().join(format!("out-{i}"));
            let _ = t
                .put(dest.to_str().expect("utf-8"), &big, Some(0o644))
                .await;
        }
        stop.store(true, Ordering::Relaxed);
        attacker.join().expect("attacker");
        assert!(
            swaps.load(Ordering::Relaxed) > 0,
            "the attacker never swapped a file"
        );
        let mode = std::fs::metadata(&victim)
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(mode, 0o600, "the mode went through the swapped-in link");
        assert_eq!(std::fs::read(&victim).expect("read"), b"secret\n");
    }
}
