//! Reboot as a first-class step: trigger, wait down, wait up with a new boot id.
//!
//! One script reads the boot id and schedules the restart a moment later (so the script's
//! answer gets back first). Then the connection is dropped and polled: the host is "down" once
//! a connect fails (or, for a very fast reboot, answers with a different boot id), and "up"
//! once a connect succeeds and the boot id differs from the one read before. The caller
//! re-probes afterwards: a reboot touches anything. The scripts follow the host's
//! `reboot_shell` (a WinRM host is restarted as Windows even when its module scripts are POSIX).

use super::conn::{Conn, LogStdout};
use super::text::last_lines;
use crate::module::RebootSpec;
use crate::shell::Shell;
use std::time::{Duration, Instant};

/// The script that prints the host's boot id (one line).
pub fn boot_id_script(shell: Shell) -> &'static str {
    match shell {
        Shell::Posix => "cat /proc/sys/kernel/random/boot_id",
        // The marker line is a comment to PowerShell; the lab's WinRM stand-in host answers
        // a script carrying it with its simulated boot time.
        Shell::PowerShell => {
            "# kwin:boot-time\n(Get-CimInstance -ClassName Win32_OperatingSystem).LastBootUpTime.ToUniversalTime().ToString('o')"
        }
    }
}

/// Print the boot id, then restart in the background a few seconds later.
pub fn trigger_script(shell: Shell) -> String {
    match shell {
        Shell::Posix => format!(
            "{}\nnohup sh -c 'sleep 2; reboot || systemctl reboot || shutdown -r now' </dev/null >/dev/null 2>&1 &",
            boot_id_script(shell)
        ),
        Shell::PowerShell => format!(
            "{}\nshutdown.exe /r /t 5 /d p:4:1 /c \"kwin: reboot requested by a task\" | Out-Null",
            boot_id_script(shell)
        ),
    }
}

async fn read_boot_id(conn: &Conn, timeout: Duration) -> Option<String> {
    let out = conn
        .run(
            "boot id",
            boot_id_script(conn.reboot_shell()),
            timeout,
            LogStdout::Yes,
        )
        .await
        .ok()?;
    first_line(&out.stdout).filter(|_| out.success())
}

fn first_line(b: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(b);
    let l = s.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(l.to_string())
}

/// Restart the host behind `conn` and wait for it to come back: each script within
/// `step_timeout`, the host polled every `poll`.
pub async fn reboot(
    conn: &Conn,
    spec: &RebootSpec,
    step_timeout: Duration,
    poll: Duration,
) -> Result<(), String> {
    let out = conn
        .run(
            "reboot",
            &trigger_script(conn.reboot_shell()),
            step_timeout,
            LogStdout::Yes,
        )
        .await
        .map_err(|e| format!("cannot trigger the reboot: {e}"))?;
    if !out.success() {
        return Err(format!(
            "reboot command failed with exit code {}: {}",
            out.exit,
            last_lines(&String::from_utf8_lossy(&out.stderr), 3)
        ));
    }
    let before = first_line(&out.stdout).ok_or("cannot read the boot id before rebooting")?;
    conn.close().await;
    let probe_timeout = step_timeout.min(Duration::from_secs(30));

    let down_by = Instant::now() + Duration::from_secs(spec.down_timeout_secs);
    loop {
        if Instant::now() > down_by {
            return Err(format!(
                "host did not go down within {}s after the reboot was triggered",
                spec.down_timeout_secs
            ));
        }
        tokio::time::sleep(poll).await;
        if conn.connect().await.is_err() {
            break;
        }
        match read_boot_id(conn, probe_timeout).await {
            Some(id) if id != before => {
                conn.log("reboot: back with a new boot id");
                return Ok(());
            }
            Some(_) => conn.close().await,
            None => {
                conn.close().await;
                break;
            }
        }
    }
    conn.log("reboot: host is down");

    let up_by = Instant::now() + Duration::from_secs(spec.up_timeout_secs);
    loop {
        if Instant::now() > up_by {
            return Err(format!(
                "host did not come back within {}s after rebooting",
                spec.up_timeout_secs
            ));
        }
        tokio::time::sleep(poll).await;
        if conn.connect().await.is_err() {
            continue;
        }
        match read_boot_id(conn, probe_timeout).await {
            Some(id) if id != before => {
                conn.log("reboot: back with a new boot id");
                return Ok(());
            }
            _ => conn.close().await,
        }
    }
}
