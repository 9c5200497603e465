//! Secrets: values that must never reach output, logs or the journal.
//!
//! A [`Secret`] prints as `***` through `Debug` and `Display`; the only way to the value is
//! [`Secret::expose`], which call sites use when building the byte stream sent to a host.
//! A [`Scrubber`] knows every secret value of a run and replaces it in any text before that
//! text is shown or written anywhere — the value itself and every form kwin's own encoders
//! can give it on the way to a host ([`encoded_forms`]): quoted for sh or PowerShell, escaped
//! for `printf`, JSON or XML, and base64 (of UTF-8 or UTF-16LE text, at any alignment,
//! wrapped over lines or not) of each of those.

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, RwLock};

/// Shorter values cannot be masked without masking ordinary text; secret sources refuse them
/// (`plan::SecretSource::read`), and the scrubber ignores them.
pub const MIN_SECRET_LEN: usize = 4;

/// A secret value (password, join token, certificate key, passphrase).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The value itself. Only for bytes that go to a host or a library, never to output.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Marks a diff line that shows a hash instead of content; such lines are shown as they are.
pub const SENSITIVE_MARK: &str = "(sensitive)";

/// How sensitive content shows in diffs, events and logs: `sha256:<first 16 hex digits>…
/// (sensitive)`. Enough to tell two contents apart, nothing of the content itself.
pub fn sensitive_hash(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sensitive_digest(&hex::encode(sha2::Sha256::digest(bytes)))
}

/// [`sensitive_hash`] of content known by its SHA-256 (lowercase hex) only.
pub fn sensitive_digest(sha256_hex: &str) -> String {
    let short = sha256_hex.get(..16).unwrap_or(sha256_hex);
    format!("sha256:{short}… {SENSITIVE_MARK}")
}

/// The forms `v` takes as text inside what kwin builds: itself; the inside of `sh_quote`
/// (`'\''`) and of `ps_quote` (doubled quotes); the inside of `printf_format` (octal
/// escapes, a leading `-` escaped too), as the Linux file writer embeds small contents; the
/// inside of `systemd_quote` (unit files); JSON string escapes; XML escapes (the WinRM
/// envelope, `soap::escape`).
fn text_forms(v: &str) -> Vec<String> {
    let inner = |q: &str| -> String {
        q.strip_prefix('\'')
            .and_then(|q| q.strip_suffix('\''))
            .unwrap_or(q)
            .to_string()
    };
    let mut forms = vec![
        v.to_string(),
        inner(&crate::quote::sh_quote(v)),
        inner(&crate::quote::ps_quote(v)),
        // At the start of a content, and anywhere after it (`a` stands for what precedes).
        inner(&crate::quote::printf_format(v.as_bytes())),
        inner(&crate::quote::printf_format(format!("a{v}").as_bytes()))
            .strip_prefix('a')
            .unwrap_or_default()
            .to_string(),
        crate::quote::xml_escape(v),
    ];
    if let Ok(q) = crate::quote::systemd_quote(v) {
        forms.push(inner_json(&q));
    }
    if let Ok(js) = serde_json::to_string(v) {
        forms.push(inner_json(&js));
    }
    forms.retain(|f| f.len() >= MIN_SECRET_LEN);
    forms.sort();
    forms.dedup();
    forms
}

fn inner_json(js: &str) -> String {
    js.strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(js)
        .to_string()
}

/// The base64 characters that encode `bytes` wherever they sit in a longer input: one core
/// per alignment (0, 1 or 2 bytes before them in their group of three), each without the
/// characters that also depend on the neighbouring bytes.
fn base64_cores(bytes: &[u8]) -> Vec<String> {
    let mut cores = Vec::new();
    for k in 0..3usize {
        let mut padded = vec![0u8; k];
        padded.extend_from_slice(bytes);
        let enc = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&padded);
        // Character c covers bits [6c, 6c + 6); the value's bits are [8k, 8(k + len)).
        let start = (8 * k).div_ceil(6);
        let end = (8 * (k + bytes.len()) / 6).min(enc.len());
        if end > start && end - start >= MIN_SECRET_LEN {
            cores.push(enc[start..end].to_string());
        }
    }
    cores
}

/// Every form of `v` the scrubber replaces (see the module docs): the text forms, and base64
/// of each text form as UTF-8 (the WinRM run wrapper, `decode_to`, the `b64` filter, the
/// Windows file writer, upload chunks, Basic auth) and as UTF-16LE (`-EncodedCommand`), and
/// base64 of those base64 forms (a WinRM `Send` carries the run wrapper's or an upload's
/// base64 text base64-encoded again).
pub fn encoded_forms(v: &str) -> Vec<String> {
    let mut forms = Vec::new();
    for t in text_forms(v) {
        for core in base64_cores(t.as_bytes()) {
            if core.len() >= 2 * MIN_SECRET_LEN {
                forms.extend(base64_cores(core.as_bytes()));
            }
            forms.push(core);
        }
        let utf16: Vec<u8> = t.encode_utf16().flat_map(u16::to_le_bytes).collect();
        forms.extend(base64_cores(&utf16));
        forms.push(t);
    }
    forms.sort();
    forms.dedup();
    forms
}

/// The forms of every secret, compiled for one pass over a text.
#[derive(Default)]
struct Forms {
    all: Vec<String>,
    /// The base64 forms, matched again across line breaks (base64 wrapped at 76 columns).
    base64: Vec<String>,
    matcher: Option<AhoCorasick>,
    base64_matcher: Option<AhoCorasick>,
}

fn matcher(patterns: &[String]) -> Option<AhoCorasick> {
    if patterns.is_empty() {
        return None;
    }
    // Leftmost-longest: a secret that contains another is replaced whole.
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(patterns)
        .ok()
}

/// Shortest line a text shown line by line holds back ([`holds_line`]).
pub const WRAPPED_LINE_MIN: usize = 16;

/// Whether a line shown as it arrives (`-v`) waits for the next one before it is scrubbed:
/// a line of base64 at least [`WRAPPED_LINE_MIN`] long may be one piece of a wrapped
/// encoding, which the scrubber matches across line breaks, so the run of such lines and
/// the line after it are scrubbed as one text, as the whole output is in the host log.
/// `line` without its line break.
pub fn holds_line(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.len() >= WRAPPED_LINE_MIN
        && line
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

fn is_base64_line(l: &str) -> bool {
    !l.is_empty()
        && l.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

/// Replaces every known secret value in text with `***`. Cheap to clone; shared by every
/// component of a run. Secrets learned during the run (a join token read from the control
/// plane) are added with [`Scrubber::add`] before anything else sees them.
#[derive(Clone, Default)]
pub struct Scrubber {
    forms: Arc<RwLock<Forms>>,
}

impl Scrubber {
    pub fn new() -> Self {
        Self::default()
    }

    /// Remember a secret value, with every form it takes on the way to a host
    /// ([`encoded_forms`]). Values shorter than 4 bytes are ignored (they would scrub ordinary
    /// text).
    pub fn add(&self, secret: &Secret) {
        let v = secret.expose();
        if v.len() < MIN_SECRET_LEN {
            return;
        }
        // A value of several lines is also shown a line at a time: as a diff (`+` before
        // each line), and as output told line by line as it arrives (`-v`). Each line is
        // masked on its own too (those of at least 4 bytes; a shorter one could not be
        // masked without masking ordinary text).
        if v.contains('\n') {
            for line in v.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
                if line.len() >= MIN_SECRET_LEN && line != v {
                    self.add(&Secret::new(line));
                }
            }
        }
        let text: Vec<String> = text_forms(v);
        let mut forms = match self.forms.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let before = forms.all.len();
        for f in encoded_forms(v) {
            if forms.all.contains(&f) {
                continue;
            }
            if !text.contains(&f) {
                forms.base64.push(f.clone());
            }
            forms.all.push(f);
        }
        if forms.all.len() != before {
            forms.matcher = matcher(&forms.all);
            forms.base64_matcher = matcher(&forms.base64);
        }
    }

    /// `text` with every known secret replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        self.scrub_cow(text).into_owned()
    }

    /// [`Scrubber::scrub`] without a copy when nothing is replaced.
    pub fn scrub_cow<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let forms = match self.forms.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let Some(m) = &forms.matcher else {
            return Cow::Borrowed(text);
        };
        let unwrapped = match &forms.base64_matcher {
            Some(b) => scrub_wrapped_base64(text, b),
            None => None,
        };
        match unwrapped {
            Some(u) if m.is_match(&u) => {
                Cow::Owned(m.replace_all(&u, &vec!["***"; forms.all.len()]))
            }
            Some(u) => Cow::Owned(u),
            None if m.is_match(text) => {
                Cow::Owned(m.replace_all(text, &vec!["***"; forms.all.len()]))
            }
            None => Cow::Borrowed(text),
        }
    }

    /// Lossy UTF-8 decode and scrub, for remote output.
    pub fn scrub_bytes(&self, bytes: &[u8]) -> String {
        self.scrub(&String::from_utf8_lossy(bytes))
    }

    /// [`Scrubber::scrub_bytes`] without a copy when the bytes are UTF-8 and hold no secret.
    pub fn scrub_bytes_cow<'t>(&self, bytes: &'t [u8]) -> Cow<'t, str> {
        match String::from_utf8_lossy(bytes) {
            Cow::Borrowed(t) => self.scrub_cow(t),
            Cow::Owned(t) => Cow::Owned(self.scrub_cow(&t).into_owned()),
        }
    }
}

/// Runs of two or more lines of base64 (a long encoding wrapped over lines) read as one text:
/// a secret's base64 form that a line break cuts in two is replaced too; the line breaks
/// outside it stay. `None` when nothing matched.
fn scrub_wrapped_base64(text: &str, m: &AhoCorasick) -> Option<String> {
    // (start, end) byte ranges of the runs' lines, `end` before the newline.
    let mut out: Option<String> = None;
    let mut copied = 0usize;
    let mut run: Vec<(usize, usize)> = Vec::new();
    let mut pos = 0usize;
    let flush = |run: &mut Vec<(usize, usize)>, out: &mut Option<String>, copied: &mut usize| {
        if run.len() >= 2 {
            let joined: String = run.iter().map(|&(s, e)| &text[s..e]).collect();
            if m.is_match(&joined) {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                let (first, last) = (run[0].0, run[run.len() - 1].1);
                o.push_str(&text[*copied..first]);
                // Where each line ends in `joined`.
                let mut ends = Vec::with_capacity(run.len());
                let mut acc = 0;
                for &(s, e) in run.iter() {
                    acc += e - s;
                    ends.push(acc);
                }
                let matches: Vec<(usize, usize)> =
                    m.find_iter(&joined).map(|x| (x.start(), x.end())).collect();
                let mut i = 0;
                let mut mi = 0;
                let mut li = 0;
                while i < joined.len() {
                    if let Some(&(ms, me)) = matches.get(mi) {
                        if i == ms {
                            o.push_str("***");
                            i = me;
                            mi += 1;
                            while li < ends.len() && ends[li] <= i {
                                if ends[li] == i && li + 1 < ends.len() {
                                    o.push('\n');
                                }
                                li += 1;
                            }
                            continue;
                        }
                    }
                    let next_end = ends.get(li).copied().unwrap_or(joined.len());
                    let next_match = matches.get(mi).map_or(joined.len(), |&(ms, _)| ms);
                    let stop = next_end.min(next_match);
                    o.push_str(&joined[i..stop]);
                    i = stop;
                    if i == next_end {
                        if li + 1 < ends.len() {
                            o.push('\n');
                        }
                        li += 1;
                    }
                }
                *copied = last;
            }
        }
        run.clear();
    };
    for line in text.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let body = body.strip_suffix('\r').unwrap_or(body);
        if is_base64_line(body) {
            run.push((pos, pos + body.len()));
        } else {
            flush(&mut run, &mut out, &mut copied);
        }
        pos += line.len();
    }
    flush(&mut run, &mut out, &mut copied);
    out.map(|mut o| {
        o.push_str(&text[copied..]);
        o
    })
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scrubber(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("hunter22");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        assert_eq!(s.expose(), "hunter22");
    }

    #[test]
    fn scrubber_knows_the_quoted_forms() {
        let sc = Scrubber::new();
        let pw = Secret::new("it's a s3cret");
        sc.add(&pw);
        let script = format!(
            "printf '%s' {} | login; $p = {}",
            crate::quote::sh_quote(pw.expose()),
            crate::quote::ps_quote(pw.expose())
        );
        let shown = sc.scrub(&script);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(shown, "printf '%s' '***' | login; $p = '***'");
    }

    #[test]
    fn scrubber_replaces_longest_first() {
        let sc = Scrubber::new();
        sc.add(&Secret::new("abcd"));
        sc.add(&Secret::new("abcdefgh"));
        assert_eq!(sc.scrub("x abcdefgh y abcd z"), "x *** y *** z");
        assert_eq!(sc.scrub_bytes(b"no secrets"), "no secrets");
    }
    /// Every way kwin's own encoders can carry a secret into a script, an error or a log.
    fn b64(bytes: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn utf16(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    const PW: &str = "Pa'ss \"w$rd\u{2019}-%x";

    fn scrubbed(text: &str) -> String {
        let sc = Scrubber::new();
        sc.add(&Secret::new(PW));
        sc.scrub(text)
    }

    #[test]
    fn scrubber_knows_the_printf_form_of_the_file_writer() {
        // A file content that holds the secret, as the Linux file writer sends it.
        for content in [
            format!("password={PW}\n"),
            format!("{PW}\n"),
            format!("-{PW}"),
        ] {
            let script = format!(
                "printf {} >\"$t\"",
                crate::quote::printf_format(content.as_bytes())
            );
            let shown = scrubbed(&script);
            assert!(shown.contains("***"), "{shown}");
            assert!(
                !shown.contains("w$rd") && !shown.contains("\\042w"),
                "{shown}"
            );
        }
        // A secret starting with `-` at the start of the content (escaped as `\055`).
        let sc = Scrubber::new();
        sc.add(&Secret::new("-leading-dash-secret"));
        let f = crate::quote::printf_format(b"-leading-dash-secret\n");
        assert_eq!(sc.scrub(&f), "'***\\012'");
    }

    #[test]
    fn scrubber_knows_base64_at_every_alignment() {
        for prefix in ["", "a", "ab", "abc", "password: "] {
            let content = format!("{prefix}{PW} and more");
            let text = format!("FromBase64String('{}')", b64(content.as_bytes()));
            let shown = scrubbed(&text);
            assert!(shown.contains("***"), "prefix {prefix:?}: {shown}");
            // What is left of the encoding cannot be decoded back to the secret.
            assert!(!shown.contains(&b64(PW.as_bytes())[..8]), "{shown}");
        }
    }

    #[test]
    fn scrubber_knows_base64_wrapped_at_76_columns() {
        // `decode_to` (the Linux file writer for larger content) wraps base64 at 76 columns;
        // wherever the secret falls, it may straddle a line break.
        for pad in 0..80 {
            let content = format!("{}{PW}{}", "x".repeat(pad), "y".repeat(100));
            let encoded = b64(content.as_bytes());
            let mut script = String::from("{ base64 -d >\"$t\" <<'KWIN_B64'\n");
            for chunk in encoded.as_bytes().chunks(76) {
                script.push_str(&String::from_utf8_lossy(chunk));
                script.push('\n');
            }
            script.push_str("KWIN_B64\n}");
            let shown = scrubbed(&script);
            assert!(shown.contains("***"), "pad {pad}: {shown}");
            let joined: String = shown.lines().collect();
            assert!(
                !joined.contains(&b64(PW.as_bytes())[4..12]),
                "pad {pad}: {shown}"
            );
            assert!(
                shown.starts_with("{ base64 -d") && shown.ends_with("KWIN_B64\n}"),
                "{shown}"
            );
        }
    }

    #[test]
    fn scrubber_knows_the_powershell_encodings() {
        // `-EncodedCommand`: base64 of UTF-16LE text, of a script holding the quoted secret.
        let script = format!("$p = {}; Do-Something $p", crate::quote::ps_quote(PW));
        let shown = scrubbed(&format!(
            "powershell.exe -EncodedCommand {}",
            b64(&utf16(&script))
        ));
        assert!(shown.contains("***"), "{shown}");
        // The WinRM run wrapper: base64 of the script's UTF-8 text.
        let shown = scrubbed(&format!("FromBase64String('{}')", b64(script.as_bytes())));
        assert!(shown.contains("***"), "{shown}");
        // The doubled-quote literal itself, as a PowerShell error quotes the line.
        let shown = scrubbed(&script);
        assert_eq!(shown, "$p = '***'; Do-Something $p");
    }

    #[test]
    fn scrubber_knows_the_winrm_send_encoding() {
        // A WinRM `Send` carries the run wrapper (base64 of the script) base64-encoded again.
        let script = format!("$p = {}", crate::quote::ps_quote(PW));
        let wrapper = format!("FromBase64String('{}')", b64(script.as_bytes()));
        let envelope = format!(
            "<rsp:Stream Name=\"stdin\">{}</rsp:Stream>",
            b64(wrapper.as_bytes())
        );
        let shown = scrubbed(&envelope);
        assert!(shown.contains("***"), "{shown}");
    }

    #[test]
    fn scrubber_knows_the_systemd_form() {
        let q = crate::quote::systemd_quote(PW).unwrap_or_default();
        assert_eq!(scrubbed(&format!("Environment={q}")), "Environment=\"***\"");
    }

    #[test]
    fn scrubber_knows_json_and_xml_escapes() {
        let js = serde_json::to_string(PW).unwrap_or_default();
        assert_eq!(scrubbed(&format!("{{\"v\":{js}}}")), "{\"v\":\"***\"}");
        let xml = PW
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&apos;");
        assert_eq!(scrubbed(&format!("<a>{xml}</a>")), "<a>***</a>");
    }

    /// A multi-line value shown a line at a time (a diff's `+` lines, `-v` output told line
    /// by line) is masked line by line.
    #[test]
    fn scrubber_masks_each_line_of_a_multi_line_secret() {
        let s = Scrubber::new();
        s.add(&Secret::new(
            "-----BEGIN KEY-----\nMIIEvQIBADANBgkqh\r\nend-of-key\n",
        ));
        for shown in [
            "+-----BEGIN KEY-----\n+MIIEvQIBADANBgkqh\n+end-of-key\n",
            "    > MIIEvQIBADANBgkqh",
            "{\"diff\":\"+MIIEvQIBADANBgkqh\\n\"}",
        ] {
            let out = s.scrub(shown);
            assert!(
                !out.contains("MIIEvQIBADANBgkqh") && !out.contains("end-of-key"),
                "{out}"
            );
        }
    }

    #[test]
    fn scrubber_leaves_ordinary_text_alone() {
        let text = "kwin: cannot write /etc/x\nabcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/\nQUJDREVGR0g=\nKWIN_B64\n";
        assert_eq!(scrubbed(text), text);
    }
}
