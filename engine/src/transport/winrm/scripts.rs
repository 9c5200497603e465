//! The scripts the WinRM transport itself runs on a host: the wrapper that carries a user
//! script over stdin, file upload (`put`) and download (`get`).
//!
//! Each has a PowerShell form (what Windows hosts run) and a POSIX form used only against the
//! lab's WinRM stand-in host, which speaks the real protocol but runs scripts with `/bin/sh`
//! (see `lab/winrm-stand-in/README.md`). The protocol path is the same for both: same command
//! lines, same stdin chunking, same checksum comparison and rename. The PowerShell generators
//! are public so the Windows modules' PowerShell syntax harness can check them.

use crate::quote::{ps_quote, sh_quote};
use base64::Engine as _;

/// Which language the transport's own scripts are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// Windows PowerShell 5.1 (real Windows hosts).
    #[default]
    PowerShell,
    /// POSIX sh, for the lab's WinRM stand-in host only.
    PosixStandIn,
}

/// The program every command runs.
pub const POWERSHELL: &str = "powershell.exe";

/// Arguments of a `run`: the script comes over stdin, never on the command line (cmd.exe
/// limits a command line to 8191 characters).
pub const RUN_ARGS: [&str; 6] = [
    "-NoProfile",
    "-NonInteractive",
    "-ExecutionPolicy",
    "Bypass",
    "-Command",
    "-",
];

/// Longest command line cmd.exe accepts.
pub const COMMAND_LINE_LIMIT: usize = 8191;

/// `-EncodedCommand` arguments for a short fixed script whose stdin carries data.
pub fn encoded_command_args(script: &str) -> Vec<String> {
    let utf16: Vec<u8> = script.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(utf16);
    vec![
        "-NoProfile".into(),
        "-NonInteractive".into(),
        "-ExecutionPolicy".into(),
        "Bypass".into(),
        "-EncodedCommand".into(),
        encoded,
    ]
}

/// The full command line WinRS builds (for the length check).
pub fn command_line_len(command: &str, args: &[String]) -> usize {
    command.len() + args.iter().map(|a| a.len() + 1).sum::<usize>()
}

/// What a `run` sends over stdin for `script`.
pub fn run_stdin(dialect: Dialect, script: &str) -> Vec<u8> {
    match dialect {
        Dialect::PowerShell => powershell_run_wrapper(script).into_bytes(),
        Dialect::PosixStandIn => script.as_bytes().to_vec(),
    }
}

/// The single line `powershell.exe -Command -` reads from stdin to run `script`.
///
/// `-Command -` executes stdin like console input, line by line: a multi-line statement
/// followed by a blank line, or a trailing one without a final newline, would be cut or
/// dropped, and non-ASCII text would be decoded with the console code page. So the script
/// travels as base64 of its UTF-8 text on one line and runs as one script block; output is
/// UTF-8 without a byte order mark.
pub fn powershell_run_wrapper(script: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(script.as_bytes());
    format!(
        "try {{ [Console]::OutputEncoding = New-Object System.Text.UTF8Encoding $false }} catch {{ }}; \
         & ([scriptblock]::Create([System.Text.Encoding]::UTF8.GetString([System.Convert]::FromBase64String('{b64}'))))\r\n"
    )
}

/// Upload receiver: reads base64 lines from stdin into `<path>.kwin-tmp-<nonce>`, prints the
/// SHA-256 of what it wrote, and only if that equals `sha256` renames it over `path`.
pub fn upload_script(
    dialect: Dialect,
    path: &str,
    sha256: &str,
    nonce: &str,
    mode: Option<u32>,
) -> String {
    match dialect {
        Dialect::PowerShell => powershell_upload_script(path, sha256, nonce),
        Dialect::PosixStandIn => posix_upload_script(path, sha256, nonce, mode),
    }
}

/// PowerShell form of [`upload_script`]. Runs under `-EncodedCommand` with the data on
/// stdin (`$input`, one base64 chunk per line). The file mode does not apply on Windows.
pub fn powershell_upload_script(path: &str, sha256: &str, nonce: &str) -> String {
    let dst = ps_quote(path);
    let tmp = ps_quote(&format!("{path}.kwin-tmp-{nonce}"));
    let expected = ps_quote(sha256);
    format!(
        "$ErrorActionPreference = 'Stop'
$dst = {dst}
$tmp = {tmp}
try {{
    $fs = [System.IO.File]::Open($tmp, [System.IO.FileMode]::Create, [System.IO.FileAccess]::Write)
    try {{
        foreach ($line in $input) {{
            if ($line.Length -gt 0) {{
                $bytes = [System.Convert]::FromBase64String($line)
                $fs.Write($bytes, 0, $bytes.Length)
            }}
        }}
    }} finally {{
        $fs.Dispose()
    }}
    $sha = [System.Security.Cryptography.SHA256]::Create()
    $rs = [System.IO.File]::OpenRead($tmp)
    try {{
        $actual = ([System.BitConverter]::ToString($sha.ComputeHash($rs)) -replace '-', '').ToLowerInvariant()
    }} finally {{
        $rs.Dispose()
    }}
    [Console]::Out.WriteLine($actual)
    if ($actual -ne {expected}) {{
        Remove-Item -LiteralPath $tmp -Force
        [Console]::Error.WriteLine('checksum mismatch: expected ' + {expected} + ', got ' + $actual)
        exit 3
    }}
    if ([System.IO.File]::Exists($dst)) {{
        [System.IO.File]::Replace($tmp, $dst, [NullString]::Value)
    }} else {{
        [System.IO.File]::Move($tmp, $dst)
    }}
}} catch {{
    if (Test-Path -LiteralPath $tmp) {{ Remove-Item -LiteralPath $tmp -Force }}
    [Console]::Error.WriteLine($_.Exception.Message)
    exit 1
}}
exit 0
"
    )
}

fn posix_upload_script(path: &str, sha256: &str, nonce: &str, mode: Option<u32>) -> String {
    let dst = sh_quote(path);
    let tmp = sh_quote(&format!("{path}.kwin-tmp-{nonce}"));
    let chmod = match mode {
        Some(m) => format!("chmod {m:o} \"$tmp\"\n"),
        None => String::new(),
    };
    format!(
        "set -eu
dst={dst}
tmp={tmp}
trap 'rm -f \"$tmp\"' EXIT
base64 -d > \"$tmp\"
actual=$(sha256sum \"$tmp\" | cut -d' ' -f1)
echo \"$actual\"
if [ \"$actual\" != {sha256} ]; then
    echo \"checksum mismatch: expected {sha256}, got $actual\" >&2
    exit 3
fi
{chmod}mv -f \"$tmp\" \"$dst\"
"
    )
}

/// Prints the file at `path` as base64 on stdout (run through the normal `run` path).
pub fn get_script(dialect: Dialect, path: &str) -> String {
    match dialect {
        Dialect::PowerShell => powershell_get_script(path),
        Dialect::PosixStandIn => format!("set -e\nbase64 < {}\n", sh_quote(path)),
    }
}

/// PowerShell form of [`get_script`].
pub fn powershell_get_script(path: &str) -> String {
    format!(
        "try {{
    $bytes = [System.IO.File]::ReadAllBytes({})
    [Console]::Out.Write([System.Convert]::ToBase64String($bytes))
}} catch {{
    [Console]::Error.WriteLine($_.Exception.Message)
    exit 1
}}
",
        ps_quote(path)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_wrapper_is_one_line_of_ascii() {
        let w = powershell_run_wrapper("if ($true) {\n\n  'é ✓'\n}\n");
        assert_eq!(w.matches("\r\n").count(), 1);
        assert!(w.ends_with("\r\n"));
        assert!(w.is_ascii());
        assert_eq!(run_stdin(Dialect::PosixStandIn, "echo hi"), b"echo hi");
    }

    #[test]
    fn upload_command_lines_fit_cmd_exe() {
        let long_path = format!("C:\\k\\{}\\kubeconfig", "d".repeat(200));
        for dialect in [Dialect::PowerShell, Dialect::PosixStandIn] {
            let s = upload_script(
                dialect,
                &long_path,
                &"a".repeat(64),
                "0123456789abcdef",
                Some(0o600),
            );
            let args = encoded_command_args(&s);
            assert!(
                command_line_len(POWERSHELL, &args) < COMMAND_LINE_LIMIT,
                "{dialect:?}: {}",
                command_line_len(POWERSHELL, &args)
            );
        }
    }

    #[test]
    fn paths_are_quoted() {
        let s = powershell_upload_script("C:\\it's\\$x", "ab", "n");
        assert!(s.contains("$dst = 'C:\\it''s\\$x'"), "{s}");
        let s = get_script(Dialect::PosixStandIn, "/tmp/a b");
        assert!(s.contains("base64 < '/tmp/a b'"), "{s}");
        assert!(powershell_get_script("C:\\a'b").contains("ReadAllBytes('C:\\a''b')"));
    }
}
