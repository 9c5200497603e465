//! `NO_PROXY` matching, as curl does it (curl/curl docs/cmdline-opts/noproxy.d, and the
//! `no_proxy` environment variable it shares the rules with): a comma-separated list (curl
//! also splits on spaces); a lone `*` matches every host; every other entry matches the host
//! itself or any host inside that domain (`local.com` matches `local.com` and `www.local.com`,
//! not `www.notlocal.com`), a leading `.` is dropped (`.local.com` = `local.com`); names
//! compare case-insensitively; since curl 7.86 an IP address entry may carry a CIDR prefix
//! (`192.168.0.0/16` matches every address starting with 192.168). Windows PowerShell 5.1's
//! `Invoke-WebRequest` has no notion of `NO_PROXY` at all (its `-Proxy` is all or nothing;
//! reference/5.1/Microsoft.PowerShell.Utility/Invoke-WebRequest.md), so kwin decides per
//! download which of the two it passes.

use std::net::IpAddr;

/// The host part of an http(s) URL: no scheme, user info, port or IPv6 brackets, lowercase,
/// without a trailing dot.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        hostport.split(':').next()?
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// The first entry of `list` that sends `host` around the proxy, if any.
pub fn matching_entry(host: &str, list: &str) -> Option<String> {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let host_ip: Option<IpAddr> = host.parse().ok();
    for raw in list.split([',', ' ', '\t', '\n', '\r']) {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            return Some(entry.to_string());
        }
        if let Some((net, bits)) = entry.split_once('/') {
            if let (Some(ip), Ok(net), Ok(bits)) =
                (host_ip, net.parse::<IpAddr>(), bits.parse::<u32>())
            {
                if in_cidr(ip, net, bits) {
                    return Some(entry.to_string());
                }
            }
            continue;
        }
        let name = entry
            .trim_start_matches('.')
            .trim_end_matches('.')
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if name.is_empty() {
            continue;
        }
        if let (Some(ip), Ok(e)) = (host_ip, name.parse::<IpAddr>()) {
            if ip == e {
                return Some(entry.to_string());
            }
            continue;
        }
        if host == name
            || (host_ip.is_none()
                && host.len() > name.len()
                && host.ends_with(&name)
                && host.as_bytes()[host.len() - name.len() - 1] == b'.')
        {
            return Some(entry.to_string());
        }
    }
    None
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u32) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_urls() {
        let h = |u: &str| url_host(u);
        assert_eq!(
            h("https://dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe").as_deref(),
            Some("dl.k8s.io")
        );
        assert_eq!(
            h("http://user:p@ss@Mirror.Lab:8080/x").as_deref(),
            Some("mirror.lab")
        );
        assert_eq!(h("http://[fd00::1]:3128/").as_deref(), Some("fd00::1"));
        assert_eq!(h("https://github.com./x").as_deref(), Some("github.com"));
        assert_eq!(h("https://10.0.0.5?x=1").as_deref(), Some("10.0.0.5"));
        assert_eq!(h("no-scheme"), None);
    }

    #[test]
    fn curl_rules() {
        let m = |host: &str, list: &str| matching_entry(host, list);
        // The documented examples: a domain matches itself and what is inside it.
        assert!(m("local.com", "local.com").is_some());
        assert!(m("www.local.com", "local.com").is_some());
        assert!(m("www.notlocal.com", "local.com").is_none());
        // A leading dot is dropped; case does not matter; spaces separate too.
        assert!(m("local.com", ".local.com").is_some());
        assert!(m("WWW.Local.COM", " .LOCAL.com ").is_some());
        assert!(m("b.lab", "a.lab b.lab").is_some());
        // `*` alone matches everything; as part of a name it is not a wildcard.
        assert!(m("dl.k8s.io", "x.lab,*").is_some());
        assert!(m("dl.k8s.io", "*.k8s.io").is_none());
        // IP addresses: exact, and CIDR (curl 7.86+); no suffix matching on addresses.
        assert!(m("10.96.0.1", "10.96.0.0/12").is_some());
        assert!(m("10.112.0.1", "10.96.0.0/12").is_none());
        assert!(m("192.168.56.10", "192.168.56.10").is_some());
        assert!(m("10.0.0.5", "0.0.5").is_none());
        assert!(m("fd00::5", "fd00::/64").is_some());
        assert!(m("10.0.0.1", "fd00::/64").is_none());
        assert!(m("10.0.0.1", "0.0.0.0/0").is_some());
        // A CIDR entry never matches a name; garbage is skipped.
        assert!(m("svc.lab", "10.0.0.0/8,/,x/y,").is_none());
        // What kwin adds to the plan's list: the cluster domain as `.cluster.local`.
        assert_eq!(
            m(
                "kubernetes.default.svc.cluster.local",
                "localhost,127.0.0.1,10.244.0.0/16,10.96.0.0/12,.svc,.cluster.local"
            )
            .as_deref(),
            Some(".cluster.local")
        );
        assert!(m("kubernetes.default.svc", ".svc").is_some());
        assert!(m("dl.k8s.io", "").is_none());
    }
}
