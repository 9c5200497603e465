//! A small reader of OpenSSH client configuration (`~/.ssh/config`), for the keys kwin
//! honours: `HostName`, `Port`, `User`, `IdentityFile`, `ProxyJump` (and whether a
//! `ProxyCommand` is set, which kwin refuses rather than ignores).
//!
//! Like OpenSSH: keywords are case-insensitive, `key value` or `key=value`, values may be
//! double-quoted; lines before the first `Host` apply to every host; a `Host` line lists
//! patterns with `*` and `?` and `!negation`; for each key the first value found wins, except
//! `IdentityFile`, whose values accumulate. `Include` is followed (relative paths are under
//! `~/.ssh`, `*`/`?` in the file name, nested at most 16 deep). `Match` blocks are not
//! evaluated: their keys are ignored. Tokens: `%h` (the host as given) in `HostName`; `~`,
//! `%d` (home), `%h`, `%r` (remote user), `%u` (local user) and `%%` in `IdentityFile`.

use std::path::{Path, PathBuf};

/// What the configuration says about one host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HostConfig {
    pub hostname: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    /// Raw values, tokens not yet expanded (that needs the final user).
    pub identity_files: Vec<String>,
    /// `ProxyJump` as written (`none` included).
    pub proxy_jump: Option<String>,
    /// Whether a `ProxyCommand` other than `none` applies.
    pub proxy_command: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    /// `Host` patterns; `None` for a `Match` block (never applies).
    Block(Option<Vec<String>>),
    Entry {
        key: String,
        value: String,
    },
}

/// `*` matches any run of characters, `?` any one character.
pub(crate) fn wildmatch(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Split a config line into keyword and value (`Key value`, `Key=value`, `Key = "v w"`).
fn split_line(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line.find(|c: char| c.is_whitespace() || c == '=')?;
    let key = line[..end].to_ascii_lowercase();
    let rest = line[end..].trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim();
    Some((key, rest.to_string()))
}

/// Split a value into words, honouring double quotes.
fn words(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in value.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn parse_into(text: &str, ssh_dir: &Path, depth: usize, out: &mut Vec<Line>) {
    for raw in text.lines() {
        let Some((key, value)) = split_line(raw) else {
            continue;
        };
        match key.as_str() {
            "host" => out.push(Line::Block(Some(words(&value)))),
            "match" => out.push(Line::Block(None)),
            "include" if depth < 16 => {
                for pat in words(&value) {
                    for file in include_files(&pat, ssh_dir) {
                        if let Ok(t) = std::fs::read_to_string(&file) {
                            parse_into(&t, ssh_dir, depth + 1, out);
                        }
                    }
                }
            }
            _ => out.push(Line::Entry {
                key,
                value: words(&value).into_iter().next().unwrap_or_default(),
            }),
        }
    }
}

/// The files an `Include` pattern names, sorted (wildcards only in the last component).
fn include_files(pattern: &str, ssh_dir: &Path) -> Vec<PathBuf> {
    let expanded = match pattern.strip_prefix("~/") {
        Some(rest) => ssh_dir.parent().map(|h| h.join(rest)),
        None => Some(PathBuf::from(pattern)),
    };
    let Some(path) = expanded else {
        return Vec::new();
    };
    let path = if path.is_absolute() {
        path
    } else {
        ssh_dir.join(path)
    };
    let Some(name) = path
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
    else {
        return Vec::new();
    };
    if !name.contains(['*', '?']) {
        return vec![path];
    }
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| wildmatch(&name, n) && !n.starts_with('.'))
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// A parsed configuration.
#[derive(Debug, Clone, Default)]
pub(crate) struct SshConfig {
    lines: Vec<Line>,
}

impl SshConfig {
    pub fn parse(text: &str, ssh_dir: &Path) -> Self {
        let mut lines = Vec::new();
        parse_into(text, ssh_dir, 0, &mut lines);
        SshConfig { lines }
    }

    /// `<ssh_dir>/config`; a missing file is an empty configuration.
    pub fn load(ssh_dir: &Path) -> Result<Self, String> {
        let path = ssh_dir.join("config");
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Self::parse(&t, ssh_dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The settings for `host` (matched as given, case-insensitively).
    pub fn resolve(&self, host: &str) -> HostConfig {
        let host_lc = host.to_ascii_lowercase();
        let mut active = true; // before the first Host line
        let mut hc = HostConfig::default();
        for line in &self.lines {
            match line {
                Line::Block(None) => active = false,
                Line::Block(Some(patterns)) => {
                    let mut positive = false;
                    let mut negated = false;
                    for p in patterns {
                        let p = p.to_ascii_lowercase();
                        if let Some(neg) = p.strip_prefix('!') {
                            negated |= wildmatch(neg, &host_lc);
                        } else {
                            positive |= wildmatch(&p, &host_lc);
                        }
                    }
                    active = positive && !negated;
                }
                Line::Entry { key, value } if active => match key.as_str() {
                    "hostname" if hc.hostname.is_none() => {
                        hc.hostname = Some(expand_hostname(value, host));
                    }
                    "port" if hc.port.is_none() => hc.port = value.parse().ok(),
                    "user" if hc.user.is_none() => hc.user = Some(value.clone()),
                    "identityfile" => hc.identity_files.push(value.clone()),
                    // The first of ProxyJump and ProxyCommand wins, as in OpenSSH.
                    "proxyjump" if hc.proxy_jump.is_none() && !hc.proxy_command => {
                        hc.proxy_jump = Some(value.clone());
                    }
                    "proxycommand" if hc.proxy_jump.is_none() && !hc.proxy_command => {
                        if value.eq_ignore_ascii_case("none") {
                            hc.proxy_jump = Some("none".into());
                        } else {
                            hc.proxy_command = true;
                        }
                    }
                    _ => {}
                },
                Line::Entry { .. } => {}
            }
        }
        hc
    }
}

fn expand_hostname(value: &str, host: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(host),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Expand `~` and `%` tokens of an `IdentityFile` value.
pub(crate) fn expand_identity(value: &str, home: &Path, host: &str, remote_user: &str) -> PathBuf {
    let local_user = std::env::var("USER").unwrap_or_default();
    let home_s = home.to_string_lossy();
    let mut out = String::new();
    let body = if let Some(rest) = value.strip_prefix("~/") {
        out.push_str(&home_s);
        out.push('/');
        rest
    } else if value == "~" {
        out.push_str(&home_s);
        ""
    } else {
        value
    };
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&home_s),
            Some('h') => out.push_str(host),
            Some('r') => out.push_str(remote_user),
            Some('u') => out.push_str(&local_user),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    PathBuf::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_patterns_match_as_in_ssh_config() {
        assert!(wildmatch("*", "anything"));
        assert!(wildmatch("web?", "web1"));
        assert!(!wildmatch("web?", "web10"));
        assert!(wildmatch("*.lab", "h1.lab"));
        assert!(wildmatch("h*1", "h21"));
        assert!(!wildmatch("h*1", "h12"));
        assert!(wildmatch("[10.0.0.*]:22*", "[10.0.0.7]:2222"));
        assert!(wildmatch("", ""));
        assert!(!wildmatch("", "x"));
    }

    #[test]
    fn first_value_wins_identity_files_accumulate() {
        let cfg = SshConfig::parse(
            "# global\n\
             IdentityFile ~/.ssh/global\n\
             Host cp1 cp2\n  HostName 10.0.0.%h.example\n  Port=2222\n  User admin\n\
             \x20 IdentityFile \"~/.ssh/with space\"\n\
             Host c*  !cx\n  Port 2200\n  User other\n  IdentityFile %d/.ssh/id_%r_%h\n\
             Match host cp1\n  User matched\n\
             Host *\n  User fallback\n",
            Path::new("/home/u/.ssh"),
        );
        let cp1 = cfg.resolve("CP1");
        assert_eq!(cp1.hostname.as_deref(), Some("10.0.0.CP1.example"));
        assert_eq!(cp1.port, Some(2222));
        assert_eq!(cp1.user.as_deref(), Some("admin"));
        assert_eq!(
            cp1.identity_files,
            vec!["~/.ssh/global", "~/.ssh/with space", "%d/.ssh/id_%r_%h"]
        );
        assert_eq!(cp1.proxy_jump, None);
        let cx = cfg.resolve("cx");
        assert_eq!(cx.port, None);
        assert_eq!(cx.user.as_deref(), Some("fallback"));
        let c9 = cfg.resolve("c9");
        assert_eq!((c9.port, c9.user.as_deref()), (Some(2200), Some("other")));
        assert_eq!(cfg.resolve("zzz").hostname, None);
        assert_eq!(
            expand_identity("%d/.ssh/id_%r_%h%%", Path::new("/home/u"), "c9", "root"),
            PathBuf::from("/home/u/.ssh/id_root_c9%")
        );
        assert_eq!(
            expand_identity("~/.ssh/k", Path::new("/home/u"), "c9", "root"),
            PathBuf::from("/home/u/.ssh/k")
        );
    }

    #[test]
    fn proxy_jump_and_proxy_command_first_wins() {
        let cfg = SshConfig::parse(
            "Host bastion\n  ProxyJump none\n\
             Host *.in\n  ProxyJump ops@bastion:2222\n\
             Host old\n  ProxyCommand ssh -W %h:%p gw\n\
             Host *\n  ProxyJump fallback\n  ProxyCommand nc %h %p\n",
            Path::new("/home/u/.ssh"),
        );
        assert_eq!(cfg.resolve("bastion").proxy_jump.as_deref(), Some("none"));
        let a = cfg.resolve("a.in");
        assert_eq!(a.proxy_jump.as_deref(), Some("ops@bastion:2222"));
        assert!(!a.proxy_command);
        let old = cfg.resolve("old");
        assert!(old.proxy_command && old.proxy_jump.is_none());
        assert_eq!(cfg.resolve("x").proxy_jump.as_deref(), Some("fallback"));
    }

    #[test]
    fn include_follows_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let ssh = dir.path().join(".ssh");
        let conf_d = ssh.join("conf.d");
        std::fs::create_dir_all(&conf_d).unwrap_or_else(|e| panic!("mkdir: {e}"));
        std::fs::write(conf_d.join("a.conf"), "Host lab1\n  HostName 10.1.1.1\n")
            .unwrap_or_else(|e| panic!("write: {e}"));
        std::fs::write(
            conf_d.join("b.conf"),
            "Host lab1\n  HostName 10.9.9.9\n  Port 23\n",
        )
        .unwrap_or_else(|e| panic!("write: {e}"));
        std::fs::write(
            ssh.join("config"),
            "Include conf.d/*.conf\nHost lab1\n  User me\n",
        )
        .unwrap_or_else(|e| panic!("write: {e}"));
        let cfg = SshConfig::load(&ssh).unwrap_or_else(|e| panic!("{e}"));
        let h = cfg.resolve("lab1");
        assert_eq!(h.hostname.as_deref(), Some("10.1.1.1"));
        assert_eq!(h.port, Some(23));
        assert_eq!(h.user.as_deref(), Some("me"));
        let missing = SshConfig::load(&dir.path().join("nope")).map(|c| c.resolve("x"));
        assert_eq!(missing, Ok(HostConfig::default()));
    }
}
