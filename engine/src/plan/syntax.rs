//! Formats of single values: names, addresses, fingerprints, taints, labels, versions, URLs.
//!
//! Pure functions, each `Ok(())` or `Err(reason)` where the reason completes the sentence
//! "`<key>` = "<value>" is not valid: <reason>".

use base64::Engine;
use std::net::IpAddr;

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// A lowercase RFC 1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn dns_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > 63 {
        return Err(format!(
            "it has {} characters, at most 63 are allowed",
            s.len()
        ));
    }
    if let Some(c) = s.chars().find(|c| !is_alnum_lower(*c) && *c != '-') {
        return Err(if c.is_ascii_uppercase() {
            "it must be lowercase".into()
        } else {
            format!("`{c}` is not allowed: use lowercase letters, digits and `-`")
        });
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A Kubernetes node name: a lowercase RFC 1123 subdomain, kept to at most 63 characters
/// (the hostname label limit; longer names break on some hosts).
pub fn node_name(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!(
            "it has {} characters, at most 63 are allowed",
            s.len()
        ));
    }
    labels(s, |label| {
        if label.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(format!(
                "node names must be lowercase (\"{}\")",
                s.to_ascii_lowercase()
            ));
        }
        dns_label(label)
    })
}

/// Check every dot-separated label of `s` with `check`; an empty one is "an empty part
/// between dots".
fn labels(s: &str, check: impl Fn(&str) -> Result<(), String>) -> Result<(), String> {
    for label in s.split('.') {
        if label.is_empty() {
            return Err("it has an empty part between dots".to_string());
        }
        check(label)?;
    }
    Ok(())
}

/// A DNS name (any case): dot-separated labels of letters, digits and `-`, at most 253.
pub fn dns_name(s: &str) -> Result<(), String> {
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > 253 {
        return Err("it is longer than 253 characters".into());
    }
    labels(s, |label| {
        dns_label(&label.to_ascii_lowercase()).map_err(|e| format!("in `{label}`: {e}"))
    })
}

/// An extra name of the API server's certificate as kubeadm takes it: an IP address, a
/// DNS-1123 subdomain (lowercase) or one with a `*.` wildcard first; kubeadm leaves anything
/// else out of the certificate with only a warning in its log (kubernetes/kubernetes
/// `cmd/kubeadm/app/util/pkiutil/pki_helpers.go`, `appendSANsToAltNames`, v1.37.2).
pub fn cert_san(s: &str) -> Result<(), String> {
    if s.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if s.contains(':') || s.contains('/') {
        return Err("it is neither an IP address nor a DNS name (no port or scheme)".into());
    }
    if s.chars().any(|c| c.is_ascii_uppercase()) {
        return Err("DNS names in a certificate are lowercase".into());
    }
    let name = s.strip_prefix("*.").unwrap_or(s);
    if name.ends_with('.') {
        return Err("it ends with a dot".into());
    }
    if name
        .split('.')
        .all(|p| p.chars().all(|c| c.is_ascii_digit()))
    {
        return Err("it is not a valid IPv4 address".into());
    }
    dns_name(name).map_err(|e| format!("it is neither an IP address nor a DNS name: {e}"))
}

/// An IP address or a DNS name.
pub fn address(s: &str) -> Result<(), String> {
    if s.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if s.contains(':') {
        return Err("it is neither an IP address nor a DNS name (ports go in `port`)".into());
    }
    if s.split('.').all(|p| p.chars().all(|c| c.is_ascii_digit())) {
        return Err("it is not a valid IPv4 address".into());
    }
    dns_name(s).map_err(|e| format!("it is neither an IP address nor a DNS name: {e}"))
}

/// `SHA256:` and 43 base64 characters (a SHA-256 digest), as `ssh-keygen -lf` prints it.
pub fn host_key(s: &str) -> Result<(), String> {
    let Some(b64) = s.strip_prefix("SHA256:") else {
        if s.starts_with("MD5:") || s.chars().filter(|c| *c == ':').count() == 15 {
            return Err("it is an MD5 fingerprint; kwin pins SHA-256 ones".into());
        }
        return Err("it must start with `SHA256:`".into());
    };
    let b64 = b64.trim_end_matches('=');
    if b64.len() != 43 {
        return Err(format!(
            "a SHA-256 fingerprint has 43 base64 characters after `SHA256:`, this has {}",
            b64.len()
        ));
    }
    match base64::engine::general_purpose::STANDARD_NO_PAD.decode(b64) {
        Ok(bytes) if bytes.len() == 32 => Ok(()),
        _ => Err("it is not valid base64".into()),
    }
}

/// A SHA-256 certificate fingerprint: 64 hex digits, colons optional.
pub fn cert_fingerprint(s: &str) -> Result<(), String> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    if let Some(c) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(format!("`{c}` is not a hex digit"));
    }
    match hex.len() {
        64 => Ok(()),
        40 => Err("it is a SHA-1 fingerprint (40 hex digits); kwin pins SHA-256 (64)".into()),
        n => Err(format!(
            "a SHA-256 fingerprint has 64 hex digits, this has {n}"
        )),
    }
}

/// A SHA-256 checksum: 64 hex digits.
pub fn sha256_hex(s: &str) -> Result<(), String> {
    if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err("a SHA-256 checksum is 64 hex digits".into())
    }
}

fn label_name_part(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("the name part is empty".into());
    }
    if s.len() > 63 {
        return Err(format!(
            "the name part has {} characters, at most 63",
            s.len()
        ));
    }
    let ok_inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if let Some(c) = s.chars().find(|c| !ok_inner(*c)) {
        return Err(format!(
            "`{c}` is not allowed (letters, digits, `-`, `_`, `.`)"
        ));
    }
    let first_last_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_last_ok(s.chars().next()) || !first_last_ok(s.chars().last()) {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A label (or taint) key: `[prefix/]name`, prefix a DNS subdomain, name at most 63.
pub fn label_key(s: &str) -> Result<(), String> {
    match s.split_once('/') {
        Some((prefix, name)) => {
            if prefix.len() > 253 {
                return Err("the prefix is longer than 253 characters".into());
            }
            node_name_like_subdomain(prefix).map_err(|e| format!("prefix `{prefix}`: {e}"))?;
            if name.contains('/') {
                return Err("it has more than one `/`".into());
            }
            label_name_part(name)
        }
        None => label_name_part(s),
    }
}

fn node_name_like_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    labels(s, dns_label)
}

/// A label (or taint) value: empty, or at most 63 of letters, digits, `-`, `_`, `.`,
/// starting and ending with a letter or digit.
pub fn label_value(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    label_name_part(s).map_err(|e| e.replace("the name part", "the value"))
}

/// Why the kubelet may not set label `key` on its own node, if it may not.
///
/// The kubelet refuses `--node-labels` in the kubernetes.io and k8s.io namespaces except a
/// fixed list and the `kubelet.kubernetes.io` / `node.kubernetes.io` namespaces, and the
/// NodeRestriction admission plugin refuses `node-restriction.kubernetes.io`.
pub fn kubelet_label_refusal(key: &str) -> Option<String> {
    const ALLOWED: &[&str] = &[
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    ];
    let (ns, _) = key.split_once('/')?;
    let in_ns = |n: &str, base: &str| n == base || n.ends_with(&format!(".{base}"));
    if in_ns(ns, "node-restriction.kubernetes.io") {
        return Some("the node-restriction.kubernetes.io namespace is reserved for labels set by administrators".into());
    }
    let kube_ns = in_ns(ns, "kubernetes.io") || in_ns(ns, "k8s.io");
    let allowed = ALLOWED.contains(&key)
        || in_ns(ns, "kubelet.kubernetes.io")
        || in_ns(ns, "node.kubernetes.io");
    (kube_ns && !allowed).then(|| format!("the kubelet may not set `{ns}` labels on its own node"))
}

pub const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A node taint as kwin writes it: `key=value:Effect` or `key:Effect`. The one parser of that
/// format: validation ([`taint`]), the kubeadm configuration of init and join
/// (`plan::kubeadm`) and the `kubeadm_join` module all read taints through [`Taint::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    /// `None` for `key:Effect`; `Some("")` for `key=:Effect`.
    pub value: Option<String>,
    /// One of [`TAINT_EFFECTS`].
    pub effect: String,
}

impl Taint {
    /// Parse and check `s`: the effect one of [`TAINT_EFFECTS`], the key a label key, the
    /// value a label value.
    pub fn parse(s: &str) -> Result<Taint, String> {
        let Some((kv, effect)) = s.rsplit_once(':') else {
            return Err(
                "expected `key=value:Effect` (Effect: NoSchedule, PreferNoSchedule or NoExecute)"
                    .into(),
            );
        };
        if !TAINT_EFFECTS.contains(&effect) {
            let hint = crate::diag::did_you_mean(effect, TAINT_EFFECTS.iter().copied())
                .map(|e| format!(" (did you mean `{e}`?)"))
                .unwrap_or_default();
            return Err(format!(
                "unknown effect `{effect}`{hint}: use NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (kv, None),
        };
        if key.is_empty() {
            return Err("the key is empty".into());
        }
        label_key(key).map_err(|e| format!("key `{key}`: {e}"))?;
        let v = value.unwrap_or("");
        label_value(v).map_err(|e| format!("value `{v}`: {e}"))?;
        Ok(Taint {
            key: key.to_string(),
            value: value.map(str::to_string),
            effect: effect.to_string(),
        })
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={v}:{}", self.key, self.effect),
            None => write!(f, "{}:{}", self.key, self.effect),
        }
    }
}

/// A taint: `key=value:Effect` or `key:Effect` ([`Taint::parse`]).
pub fn taint(s: &str) -> Result<(), String> {
    Taint::parse(s).map(|_| ())
}

/// A release version `x.y.z`, with a leading `v` when `v_ok`. A minor release (`1.31`,
/// `v1.31`) is refused with the form to write (`"1.31.<patch>"`), not a guessed patch
/// release that may not exist.
pub fn version(s: &str, v_ok: bool) -> Result<semver::Version, String> {
    let (bare, had_v) = match s.strip_prefix('v') {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let parsed = semver::Version::parse(bare);
    let numeric = !bare.is_empty() && bare.split('.').all(|p| p.parse::<u64>().is_ok());
    let parts = bare.split('.').count();
    let v = if had_v && v_ok { "v" } else { "" };
    let without_v = if had_v && !v_ok {
        " without the `v`"
    } else {
        ""
    };
    match parsed {
        Ok(version) if !had_v || v_ok => Ok(version),
        Ok(_) => Err(format!("write it without the `v`: \"{bare}\"")),
        Err(_) if numeric && parts == 2 => Err(format!(
            "it must be a full version `x.y.z`{without_v}: a patch release of {v}{bare}, \"{v}{bare}.<patch>\" (its release notes list them)"
        )),
        Err(_) if numeric && parts == 1 => Err(format!(
            "it must be a full version `x.y.z`{without_v}, e.g. \"{v}{bare}.<minor>.<patch>\""
        )),
        Err(_) => Err("it is not a version `x.y.z`".to_string()),
    }
}

/// A duration: a number of seconds (`90`) or numbers each followed by `h`, `m` or `s`
/// (`90s`, `10m`, `1h30m`); the grammar of the CLI's `--timeout`. `None` if `s` is not one.
pub fn duration_secs(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        let n: u64 = num.parse().ok()?;
        total = total.saturating_add(n.saturating_mul(unit));
        num.clear();
    }
    if !num.is_empty() {
        total = total.saturating_add(num.parse::<u64>().ok()?);
    }
    Some(total)
}

/// Why `s` holds a character that has no place unencoded in a URL (RFC 3986) and that would
/// change meaning where kwin writes URLs (systemd units, environment files, scripts): control
/// characters, whitespace, quotes, `\`, `` ` ``, `$`, `<`, `>`, `{`, `}`, `|`, `^`.
pub fn url_unsafe_char(s: &str) -> Option<String> {
    s.chars().find_map(|c| {
        let what = if c.is_control() {
            format!("a control character (U+{:04X})", u32::from(c))
        } else if c.is_whitespace() {
            "whitespace".to_string()
        } else if "\"'\\`$<>{}|^".contains(c) {
            format!("`{c}`")
        } else {
            return None;
        };
        Some(format!(
            "it contains {what}, which a URL must percent-encode"
        ))
    })
}

/// The `user[:password]` part of an http(s) URL, if it has one.
pub fn url_userinfo(s: &str) -> Option<&str> {
    let rest = s.split_once("://").map_or(s, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map(|(u, _)| u)
}

/// `s` with the `user[:password]` part of its authority shown as `***` (for messages).
pub fn url_without_userinfo(s: &str) -> String {
    match (s.split_once("://"), url_userinfo(s)) {
        (Some((scheme, rest)), Some(u)) => {
            format!("{scheme}://***{}", &rest[u.len()..])
        }
        _ => s.to_string(),
    }
}

/// One `no_proxy` entry: a host, domain (`.lab`), IP, CIDR or `*`; no separators (`,`), no
/// characters that change meaning in a unit file or environment variable.
pub fn no_proxy_entry(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.contains(',') {
        return Err("it contains `,`, the separator of the list: give one entry per item".into());
    }
    if let Some(why) = url_unsafe_char(s) {
        return Err(why.replace(", which a URL must percent-encode", ""));
    }
    Ok(())
}

/// An http or https URL with a host.
pub fn http_url(s: &str) -> Result<(), String> {
    if let Some(why) = url_unsafe_char(s) {
        return Err(why);
    }
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err("it must start with http:// or https://".into());
    };
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "scheme `{scheme}` is not supported: use http or https"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = split_host_port(hostport)?;
    if host.is_empty() {
        return Err("it has no host".into());
    }
    if let Some(p) = port {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port `{p}` is not a port number"))?;
    }
    Ok(())
}

/// `host` or `host:port`; `[v6]:port` for IPv6.
fn split_host_port(s: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "unclosed `[` around an IPv6 address".to_string())?;
        return Ok((host, after.strip_prefix(':')));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Ok((h, Some(p))),
        Some(_) => Ok((s, None)),
        None => Ok((s, None)),
    }
}

/// An API server endpoint: `host` or `host:port`, host an IP or DNS name.
pub fn endpoint(s: &str) -> Result<(String, Option<u16>), String> {
    if s.contains("://") {
        return Err("write `host:port` without a scheme".into());
    }
    let (host, port) = split_host_port(s)?;
    address(host)?;
    let port = match port {
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("port `{p}` is not a port number"))?,
        ),
        None => None,
    };
    Ok((host.to_string(), port))
}

/// An OpenPGP v4 fingerprint as 40 upper-case hex digits (spaces and a `0x` prefix dropped),
/// or `None` if it is not one.
pub fn normalize_fingerprint(s: &str) -> Option<String> {
    let t: String = s
        .trim()
        .trim_start_matches("0x")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (t.len() == 40 && t.bytes().all(|b| b.is_ascii_hexdigit())).then(|| t.to_ascii_uppercase())
}

/// An image reference (`registry.k8s.io/pause:3.10`, `repo@sha256:…`), by the grammar of
/// distribution/reference (github.com/distribution/reference, `reference.go` and `regexp.go`
/// at 0965666a6ade2e06035fe352e38344be1e68951a): `name [":" tag] ["@" digest]`, the name at
/// most 255 characters. Such a value holds no quote, backslash, space or line break, so it
/// reaches a unit file or a TOML string as one value.
pub fn image_reference(s: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "`{}` is not an image reference ({why})",
            s.escape_debug()
        ))
    };
    let alnum_lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // digest := algorithm ":" hex{32,}; algorithm := comp ([-_+.] comp)*; comp := [A-Za-z][A-Za-z0-9]*
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let Some((alg, hex)) = d.split_once(':') else {
            return bad("a digest is algorithm:hex");
        };
        let alg_ok = alg.split(['-', '_', '+', '.']).all(|c| {
            c.chars().next().is_some_and(|f| f.is_ascii_alphabetic())
                && c.chars().all(|x| x.is_ascii_alphanumeric())
        });
        if !alg_ok || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return bad("a digest is algorithm:hex, 32 hex digits at least");
        }
    }
    // tag := [\w][\w.-]{0,127}, after the last `/` (a `:` before it is a port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let ok = t.len() <= 128
            && t.chars().next().is_some_and(word)
            && t.chars().all(|c| word(c) || c == '.' || c == '-');
        if !ok {
            return bad("a tag is letters, digits, `_`, `.` and `-`, at most 128");
        }
    }
    if name.is_empty() || name.len() > 255 {
        return bad("a name is 1 to 255 characters");
    }
    // path-component := [a-z0-9]+ (separator [a-z0-9]+)*; separator := [._] | __ | -+
    let path_component = |c: &str| -> bool {
        let b = c.as_bytes();
        if b.is_empty() || !alnum_lower(b[0] as char) || !alnum_lower(b[b.len() - 1] as char) {
            return false;
        }
        let mut i = 0;
        while i < b.len() {
            if alnum_lower(b[i] as char) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && !alnum_lower(b[i] as char) {
                i += 1;
            }
            let sep = &c[start..i];
            if !(sep == "." || sep == "_" || sep == "__" || sep.chars().all(|x| x == '-')) {
                return false;
            }
        }
        true
    };
    let remote = |r: &str| r.split('/').all(path_component);
    // domain := host [":" port]; host := domain-name | "[" ipv6 "]"
    let domain = |d: &str| -> bool {
        let (host, port) = match d.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && !p.contains(']') => (h, Some(p)),
            _ => (d, None),
        };
        if port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit())) {
            return false;
        }
        if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return !v6.is_empty() && v6.chars().all(|c| c.is_ascii_hexdigit() || c == ':');
        }
        !host.is_empty()
            && host.split('.').all(|c| {
                let b = c.as_bytes();
                !b.is_empty()
                    && b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
            })
    };
    let ok = remote(name)
        || name
            .split_once('/')
            .is_some_and(|(d, r)| domain(d) && remote(r));
    if !ok {
        return bad("a name is an optional registry host, then lowercase path components");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_dns_labels_and_addresses_are_checked() {
        assert!(node_name("cp1").is_ok());
        assert!(node_name("node-1.lab").is_ok());
        assert!(node_name("CP1").expect_err("refused").contains("lowercase"));
        assert!(node_name("-a").is_err());
        assert!(node_name("a_b").is_err());
        assert!(node_name(&"a".repeat(64)).is_err());
        assert!(dns_label("lab-flannel").is_ok());
        assert!(dns_label("lab.flannel").is_err());
        assert!(address("192.168.56.10").is_ok());
        assert!(address("fe80::1").is_ok());
        assert!(address("win1.corp.example").is_ok());
        assert!(address("192.168.56.300").is_err());
        assert!(address("10.0.0.1:22").is_err());
        assert!(address("bad_name").is_err());
    }

    #[test]
    fn sha256_fingerprints_pass_and_md5_or_sha1_ones_are_refused() {
        let k = format!("SHA256:{}", "A".repeat(42) + "E");
        assert!(host_key(&k).is_ok(), "{:?}", host_key(&k));
        assert!(host_key("SHA256:abc").is_err());
        assert!(host_key("MD5:aa:bb").expect_err("refused").contains("MD5"));
        assert!(host_key(&"A".repeat(43)).is_err());
        let hex64 = "ab".repeat(32);
        assert!(cert_fingerprint(&hex64).is_ok());
        let colons: Vec<String> = (0..32).map(|_| "AB".to_string()).collect();
        assert!(cert_fingerprint(&colons.join(":")).is_ok());
        assert!(cert_fingerprint(&"ab".repeat(20))
            .expect_err("refused")
            .contains("SHA-1"));
        assert!(cert_fingerprint(&"zz".repeat(32)).is_err());
    }

    #[test]
    fn taints_and_labels_parse_or_say_what_is_wrong() {
        assert!(taint("os=windows:NoSchedule").is_ok());
        assert!(taint("dedicated:NoExecute").is_ok());
        assert!(taint("example.com/gpu=true:PreferNoSchedule").is_ok());
        assert!(taint("os=windows").is_err());
        assert!(taint("os=windows:noschedule")
            .expect_err("refused")
            .contains("did you mean `NoSchedule`"));
        assert!(taint("=x:NoSchedule").is_err());
        assert!(taint("a=b c:NoSchedule").is_err());
        let t = Taint::parse("example.com/gpu=true:PreferNoSchedule").expect("taint");
        assert_eq!(
            (t.key.as_str(), t.value.as_deref(), t.effect.as_str()),
            ("example.com/gpu", Some("true"), "PreferNoSchedule")
        );
        assert_eq!(t.to_string(), "example.com/gpu=true:PreferNoSchedule");
        assert_eq!(
            Taint::parse("dedicated:NoExecute").map(|t| t.value),
            Ok(None)
        );
        assert_eq!(
            Taint::parse("a=:NoSchedule").map(|t| t.value),
            Ok(Some(String::new()))
        );
        assert!(label_key("node.kubernetes.io/windows-build").is_ok());
        assert!(label_key("Example.com/x").is_err());
        assert!(label_key("a/b/c").is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("10.0.17763").is_ok());
        assert!(label_value("-x").is_err());
        assert!(kubelet_label_refusal("node-role.kubernetes.io/worker").is_some());
        assert!(kubelet_label_refusal("node.kubernetes.io/windows-build").is_none());
        assert!(kubelet_label_refusal("kubernetes.io/os").is_none());
        assert!(kubelet_label_refusal("example.com/tier").is_none());
        assert!(kubelet_label_refusal("node-restriction.kubernetes.io/x").is_some());
    }

    #[test]
    fn versions_urls_and_endpoints_are_checked() {
        assert!(version("1.31.4", false).is_ok());
        assert!(version("v1.31.4", false)
            .expect_err("refused")
            .contains("without the `v`"));
        assert!(version("1.31", false)
            .expect_err("refused")
            .contains("full version"));
        assert!(version("v0.26.2", true).is_ok());
        assert!(http_url("http://proxy.example.com:3128").is_ok());
        assert!(http_url("https://mirror.example/k8s/").is_ok());
        assert!(http_url("proxy:3128").is_err());
        assert!(http_url("http://proxy:3128/\"\nExecStartPre=/bin/true").is_err());
        assert!(http_url("http://proxy:3128/a b").is_err());
        assert!(http_url("http://proxy:3128/$x").is_err());
        assert_eq!(url_userinfo("http://u:p@proxy:3128/x@y"), Some("u:p"));
        assert_eq!(url_userinfo("http://proxy:3128/x@y"), None);
        assert_eq!(
            url_without_userinfo("http://u:p@proxy:3128/"),
            "http://***@proxy:3128/"
        );
        assert!(no_proxy_entry(".lab").is_ok());
        assert!(no_proxy_entry("10.0.0.0/8").is_ok());
        assert!(no_proxy_entry("a,b").is_err());
        assert!(no_proxy_entry("it's").is_err());
        assert!(no_proxy_entry("").is_err());
        assert!(http_url("ftp://x").is_err());
        assert!(http_url("http://x:99999").is_err());
        assert_eq!(endpoint("k8s.lab:6443"), Ok(("k8s.lab".into(), Some(6443))));
        assert_eq!(endpoint("10.0.0.5"), Ok(("10.0.0.5".into(), None)));
        assert!(endpoint("https://k8s.lab:6443").is_err());
        assert!(endpoint("k8s.lab:0").is_err());
    }

    #[test]
    fn image_references_follow_the_distribution_grammar() {
        for ok in [
            "registry.k8s.io/pause:3.10",
            "pause",
            "localhost:5000/a/b_c__d---e:v1.2-rc.1",
            "[::1]:5000/pause@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "mcr.microsoft.com/oss/kubernetes/pause:3.9",
            "10.0.0.1:80/x:y@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(image_reference(ok), Ok(()), "{ok}");
        }
        for bad in [
            "registry.k8s.io/pause:3.10\nExecStartPre=/bin/sh",
            "pause\" x",
            "reg.io/Pause:1",
            "reg.io/pause:",
            "a b",
            "reg.io/pause:3.10]\n[plugins",
            "reg.io/pause@sha256:short",
            "-x/pause",
            "",
        ] {
            assert!(image_reference(bad).is_err(), "{bad:?}");
        }
    }
}
