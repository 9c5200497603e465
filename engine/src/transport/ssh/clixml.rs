//! Windows PowerShell started with `-EncodedCommand` writes its error stream (and progress
//! records) to stderr as CLIXML: `#< CLIXML` then `<Objs>` with `<S S="Error">` strings.
//! This turns such stderr back into the plain text a script author expects; anything else
//! passes through unchanged.

/// Plain text of a CLIXML stderr stream: the `Error`, `Warning`, `Verbose`, `Debug` and
/// `Information` strings in order; progress records are dropped.
pub(crate) fn decode_stderr(stderr: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(stderr).ok()?;
    let body = text
        .trim_start_matches('\u{feff}')
        .strip_prefix("#< CLIXML")?;
    let mut out = String::new();
    let mut rest = body;
    while let Some(start) = rest.find("<S S=\"") {
        rest = &rest[start + 6..];
        let Some(q) = rest.find('"') else { break };
        let stream = &rest[..q];
        let Some(gt) = rest.find('>') else { break };
        let Some(end) = rest.find("</S>") else { break };
        if end < gt {
            rest = &rest[end + 4..];
            continue;
        }
        let value = &rest[gt + 1..end];
        rest = &rest[end + 4..];
        match stream.to_ascii_lowercase().as_str() {
            "error" | "warning" | "verbose" | "debug" | "information" => {
                out.push_str(&unescape(value))
            }
            _ => {}
        }
    }
    Some(out.into_bytes())
}

/// XML entities and PowerShell's `_xHHHH_` escapes (`_x000D__x000A_` is CR LF).
fn unescape(s: &str) -> String {
    let s = s
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find("_x") {
        out.push_str(&rest[..i]);
        let cand = &rest[i..];
        let code = cand
            .get(2..6)
            .filter(|_| cand.get(6..7) == Some("_"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32);
        match code {
            Some(c) => {
                out.push(c);
                rest = &cand[7..];
            }
            None => {
                out.push_str("_x");
                rest = &cand[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_errors_and_drops_progress() {
        let raw = "#< CLIXML\r\n<Objs Version=\"1.1.0.1\" xmlns=\"http://schemas.microsoft.com/powershell/2004/04\">\
<Obj S=\"progress\" RefId=\"0\"><TN RefId=\"0\"><T>System.Management.Automation.PSCustomObject</T></TN>\
<MS><I64 N=\"SourceId\">1</I64><PR N=\"Record\"><AV>Preparing modules for first use.</AV></PR></MS></Obj>\
<S S=\"Error\">Get-Item : Cannot find path 'C:\\nope' because it does not exist._x000D__x000A_</S>\
<S S=\"Error\">    + CategoryInfo : ObjectNotFound: (C:\\nope:String) [Get-Item], &lt;x&gt; &amp; _x000D__x000A_</S>\
<S S=\"warning\">careful_x000A_</S></Objs>";
        let plain = decode_stderr(raw.as_bytes()).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&plain),
            "Get-Item : Cannot find path 'C:\\nope' because it does not exist.\r\n    \
             + CategoryInfo : ObjectNotFound: (C:\\nope:String) [Get-Item], <x> & \r\ncareful\n"
        );
        assert_eq!(decode_stderr(b"plain error\n"), None);
        assert_eq!(unescape("a_x_b_x0041_"), "a_x_bA");
    }
}
