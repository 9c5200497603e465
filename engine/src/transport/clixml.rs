//! Decoding PowerShell's CLIXML error stream, for both Windows transports (WinRM and
//! ssh-powershell).
//!
//! When `powershell.exe` runs with redirected streams it writes its error (and progress,
//! warning, ...) records to stderr as serialized objects after a `#< CLIXML` line:
//!
//! ```text
//! #< CLIXML
//! <Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04">
//!   <Obj S="progress" RefId="0">...</Obj>
//!   <S S="Error">boom_x000D__x000A_</S>
//! </Objs>
//! ```
//!
//! [`decode_stderr`] turns that into the text a console would have shown: the `Error` strings
//! (and `Warning`/`Verbose`/`Debug` ones with their console prefix), `_xHHHH_` escapes undone,
//! progress records dropped. Anything that is not CLIXML passes through unchanged.

const MARKER: &str = "#< CLIXML";

/// Undo the `_xHHHH_` escaping of serialized strings (UTF-16 code units; `_x005F_` is `_`).
pub fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut units: Vec<u16> = Vec::with_capacity(s.len());
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let flush = |units: &mut Vec<u16>, out: &mut String| {
        if !units.is_empty() {
            out.push_str(&String::from_utf16_lossy(units));
            units.clear();
        }
    };
    while i < bytes.len() {
        if bytes[i] == b'_'
            && i + 7 <= bytes.len()
            && bytes[i + 1] == b'x'
            && bytes[i + 6] == b'_'
            && bytes[i + 2..i + 6].iter().all(u8::is_ascii_hexdigit)
        {
            // the four bytes are ASCII hex digits, so the slice is valid UTF-8
            if let Ok(unit) = u16::from_str_radix(&s[i + 2..i + 6], 16) {
                units.push(unit);
                i += 7;
                continue;
            }
        }
        flush(&mut units, &mut out);
        let ch_len = s[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&s[i..i + ch_len]);
        i += ch_len;
    }
    flush(&mut units, &mut out);
    out
}

/// The console text of the records in one `<Objs>` document.
fn records(xml: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let mut out = String::new();
    for node in doc.root_element().children().filter(|n| n.is_element()) {
        if node.tag_name().name() != "S" {
            continue;
        }
        let text = unescape(node.text().unwrap_or(""));
        let stream = node.attribute("S").map(str::to_ascii_lowercase);
        match stream.as_deref() {
            Some("error") | Some("information") => out.push_str(&text),
            Some("warning") => {
                out.push_str("WARNING: ");
                out.push_str(&text);
            }
            Some("verbose") => {
                out.push_str("VERBOSE: ");
                out.push_str(&text);
            }
            Some("debug") => {
                out.push_str("DEBUG: ");
                out.push_str(&text);
            }
            _ => {}
        }
    }
    Some(out)
}

/// Readable stderr: CLIXML records decoded, line ends normalised to `\n`; other bytes as-is.
pub fn decode_stderr(stderr: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(stderr);
    let Some(at) = text.find(MARKER) else {
        return stderr.to_vec();
    };
    let mut out = text[..at].to_string();
    let mut rest = &text[at + MARKER.len()..];
    loop {
        rest = rest.trim_start_matches(['\r', '\n']);
        let Some(start) = rest.find("<Objs") else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..]
            .find("</Objs>")
            .map(|e| start + e + "</Objs>".len())
        else {
            // truncated document: show it rather than lose it
            out.push_str(&rest[start..]);
            break;
        };
        match records(&rest[start..end]) {
            Some(t) => out.push_str(&t),
            None => out.push_str(&rest[start..end]),
        }
        rest = &rest[end..];
        if let Some(next) = rest.find(MARKER) {
            out.push_str(&rest[..next]);
            rest = &rest[next + MARKER.len()..];
        }
    }
    out.replace("\r\n", "\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    // stderr of `powershell -Command -` running `Write-Error "bad"` (Windows PowerShell 5.1),
    // including the progress record the first module load emits.
    const SAMPLE: &str = "#< CLIXML\r\n<Objs Version=\"1.1.0.1\" xmlns=\"http://schemas.microsoft.com/powershell/2004/04\"><Obj S=\"progress\" RefId=\"0\"><TN RefId=\"0\"><T>System.Management.Automation.PSCustomObject</T><T>System.Object</T></TN><MS><I64 N=\"SourceId\">1</I64><PR N=\"Record\"><AV>Preparing modules for first use.</AV><AI>0</AI><Nil /><PI>-1</PI><PC>-1</PC><T>Completed</T><SR>-1</SR><SD> </SD></PR></MS></Obj><S S=\"Error\">Write-Error \"bad\" : bad_x000D__x000A_</S><S S=\"Error\">    + CategoryInfo          : NotSpecified: (:) [Write-Error], WriteErrorException_x000D__x000A_</S><S S=\"Error\">    + FullyQualifiedErrorId : Microsoft.PowerShell.Commands.WriteErrorException_x000D__x000A_</S><S S=\"Error\"> _x000D__x000A_</S><S S=\"Warning\">careful_x000D__x000A_</S></Objs>";

    #[test]
    fn decodes_error_records() {
        let text = String::from_utf8(decode_stderr(SAMPLE.as_bytes())).expect("utf-8");
        assert_eq!(
            text,
            "Write-Error \"bad\" : bad\n    + CategoryInfo          : NotSpecified: (:) [Write-Error], WriteErrorException\n    + FullyQualifiedErrorId : Microsoft.PowerShell.Commands.WriteErrorException\n \nWARNING: careful\n"
        );
    }

    #[test]
    fn entities_stream_names_and_information_records_decode() {
        let raw = "#< CLIXML\r\n<Objs Version=\"1.1.0.1\" xmlns=\"http://schemas.microsoft.com/powershell/2004/04\">\
<S S=\"Error\">    + CategoryInfo : ObjectNotFound: (C:\\nope:String) [Get-Item], &lt;x&gt; &amp; _x000D__x000A_</S>\
<S S=\"warning\">careful_x000A_</S><S S=\"Information\">note_x000A_</S></Objs>";
        let text = String::from_utf8(decode_stderr(raw.as_bytes())).expect("utf-8");
        assert_eq!(
            text,
            "    + CategoryInfo : ObjectNotFound: (C:\\nope:String) [Get-Item], <x> & \nWARNING: careful\nnote\n"
        );
    }

    #[test]
    fn unescapes_code_units() {
        assert_eq!(unescape("a_x000D__x000A_b"), "a\r\nb");
        assert_eq!(unescape("under_x005F_score"), "under_score");
        assert_eq!(unescape("smile _xD83D__xDE00_!"), "smile 😀!");
        assert_eq!(unescape("not _x00G1_ an escape_"), "not _x00G1_ an escape_");
        assert_eq!(unescape("한국어_x0021_"), "한국어!");
    }

    #[test]
    fn other_text_passes_through() {
        assert_eq!(decode_stderr(b"plain error\n"), b"plain error\n");
        let mixed = format!("native tool said no\r\n{SAMPLE}");
        let text = String::from_utf8(decode_stderr(mixed.as_bytes())).expect("utf-8");
        assert!(
            text.starts_with("native tool said no\nWrite-Error"),
            "{text}"
        );
        let truncated = "#< CLIXML\r\n<Objs Version=\"1.1.0.1\"><S S=\"Error\">x";
        assert!(String::from_utf8_lossy(&decode_stderr(truncated.as_bytes())).contains("<Objs"));
    }
}
