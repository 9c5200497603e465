//! The `repository` of the `package` module: an apt source with its own signing keyring, or
//! a dnf `.repo` file.
//!
//! apt: the key is fetched from `key_url`, checked against `key_sha256` and/or
//! `key_fingerprint` if given, converted from ASCII armor to a binary keyring without needing
//! gpg, and installed as `/etc/apt/keyrings/<name>.gpg`; `/etc/apt/sources.list.d/<name>.list`
//! holds one `deb [signed-by=...]` line. The list file also records which key it was written
//! for, so a new `key_url`, `key_sha256` or `key_fingerprint` installs the new key.
//!
//! `key_fingerprint` (40 hex digits, spaces allowed) is checked with `gpg --show-keys` on the
//! host (gpg must be installed: the `gnupg` package): the file must hold exactly one primary
//! key, with that fingerprint — another key, or a second one slipped in beside it, is refused.
//! A fingerprint survives the key file being re-exported (an extended expiry changes the file's
//! hash, not the fingerprint), so it is what recipes pin for repositories they do not control.
//!
//! dnf: `/etc/yum.repos.d/<name>.repo` with `gpgcheck=1` and `gpgkey=<key_url>`; dnf imports
//! the key itself on first use, unchecked, so `key_sha256` / `key_fingerprint` are refused
//! there (the `package` module fails the task rather than install a key it cannot check).

use super::download::{check_sha256, check_url};
use super::facts::file::FileFact;
use super::script::{die, die_after, fetch, Fetcher};
use kwin_engine::checksums::normalize_fingerprint;
use kwin_engine::module::ParamError;
use kwin_engine::quote::sh_quote;
use serde::Deserialize;

/// A package repository, as written in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Repository {
    /// File name stem: `[A-Za-z0-9_.-]+` (e.g. `kubernetes`).
    pub name: String,
    /// apt: the archive root; dnf: the `baseurl`.
    pub url: String,
    /// URL of the signing key.
    pub key_url: String,
    /// sha256 of the key as served.
    pub key_sha256: Option<String>,
    /// OpenPGP fingerprint of the key (40 hex digits; spaces allowed), checked with gpg.
    pub key_fingerprint: Option<String>,
    /// apt suite; `/` (the default) for flat repositories such as pkgs.k8s.io.
    #[serde(default = "default_suite")]
    pub suite: String,
    /// apt components (`["stable"]`); none for flat repositories.
    #[serde(default)]
    pub components: Vec<String>,
}

fn default_suite() -> String {
    "/".into()
}

pub const APT_KEYRINGS: &str = "/etc/apt/keyrings";

impl Repository {
    /// Check every field (`at` is the param path, `repository`).
    pub fn check(&mut self, at: &str) -> Result<(), ParamError> {
        let stem_ok = !self.name.is_empty()
            && !self.name.starts_with('.')
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !stem_ok {
            return Err(ParamError::at(
                format!("{at}.name"),
                format!("`{}` is not a repository name ([A-Za-z0-9_.-])", self.name),
            ));
        }
        check_url(&self.url, &format!("{at}.url"))?;
        check_url(&self.key_url, &format!("{at}.key_url"))?;
        if let Some(k) = &self.key_sha256 {
            self.key_sha256 = Some(check_sha256(k, &format!("{at}.key_sha256"))?);
        }
        if let Some(f) = &self.key_fingerprint {
            self.key_fingerprint = Some(normalize_fingerprint(f).ok_or_else(|| {
                ParamError::at(
                    format!("{at}.key_fingerprint"),
                    "expected an OpenPGP fingerprint: 40 hex digits",
                )
            })?);
        }
        // The key decides which packages the host trusts: one that comes over a connection
        // nobody authenticates (http, ftp) must be checked against a pin.
        let unauthenticated = !["https://", "file://"]
            .iter()
            .any(|s| self.key_url.starts_with(s));
        if unauthenticated && self.key_sha256.is_none() && self.key_fingerprint.is_none() {
            return Err(ParamError::at(
                format!("{at}.key_url"),
                format!(
                    "`{}` is not https, and neither `key_sha256` nor `key_fingerprint` checks the key: anyone on the way could hand the host a signing key of their own; use https or pin the key",
                    self.key_url
                ),
            ));
        }
        let word = |s: &str| {
            !s.is_empty()
                && !s
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == ']' || c == '[')
        };
        if !word(&self.suite) {
            return Err(ParamError::at(
                format!("{at}.suite"),
                "`suite` must be one word",
            ));
        }
        for (i, c) in self.components.iter().enumerate() {
            if !word(c) {
                return Err(ParamError::at(
                    format!("{at}.components.{i}"),
                    "a component must be one word",
                ));
            }
        }
        Ok(())
    }

    pub fn apt_list_path(&self) -> String {
        format!("/etc/apt/sources.list.d/{}.list", self.name)
    }

    pub fn apt_keyring_path(&self) -> String {
        format!("{APT_KEYRINGS}/{}.gpg", self.name)
    }

    pub fn dnf_repo_path(&self) -> String {
        format!("/etc/yum.repos.d/{}.repo", self.name)
    }

    pub fn list_fact(&self) -> FileFact {
        FileFact::content(self.apt_list_path())
    }

    pub fn keyring_fact(&self) -> FileFact {
        FileFact::meta(self.apt_keyring_path())
    }

    pub fn repo_fact(&self) -> FileFact {
        FileFact::content(self.dnf_repo_path())
    }

    /// The `.list` file: a comment naming the key, then the source line.
    pub fn apt_list(&self) -> String {
        let mut line = format!(
            "deb [signed-by={}] {} {}",
            self.apt_keyring_path(),
            self.url,
            self.suite
        );
        for c in &self.components {
            line.push(' ');
            line.push_str(c);
        }
        let check = match (&self.key_sha256, &self.key_fingerprint) {
            (None, None) => "sha256 unchecked".to_string(),
            (Some(h), None) => format!("sha256 {h}"),
            (None, Some(f)) => format!("fingerprint {f}"),
            (Some(h), Some(f)) => format!("sha256 {h} fingerprint {f}"),
        };
        format!("# managed by kwin; key {} {check}\n{line}\n", self.key_url)
    }

    /// The `.repo` file.
    pub fn dnf_repo(&self) -> String {
        format!(
            "# managed by kwin\n[{n}]\nname={n}\nbaseurl={}\nenabled=1\ngpgcheck=1\nrepo_gpgcheck=0\ngpgkey={}\n",
            self.url,
            self.key_url,
            n = self.name
        )
    }

    /// A script that fetches the key (checking its sha256 if given) and installs it as the
    /// binary keyring, atomically.
    pub fn install_key_script(&self, fetcher: Fetcher) -> String {
        let ring = self.apt_keyring_path();
        let rm = "rm -f -- \"$k\";";
        let mut s = format!(
            "mkdir -p -- {dir} || {}\nk=$(mktemp {tmp}) || {}\n",
            die(&format!("cannot create {APT_KEYRINGS}")),
            die(&format!("cannot create a temporary file in {APT_KEYRINGS}")),
            dir = APT_KEYRINGS,
            tmp = sh_quote(&format!("{APT_KEYRINGS}/.kwin-key-XXXXXX")),
        );
        s.push_str(&fetch(
            fetcher,
            &self.key_url,
            "k",
            self.key_sha256.as_deref(),
        ));
        if let Some(fp) = &self.key_fingerprint {
            s.push_str(&check_fingerprint("k", fp, &self.key_url, rm));
        }
        s.push_str(&dearmor("k", rm));
        s.push_str(&format!(
            "chmod 0644 \"$k\" && mv -f -- \"$k\" {} || {}\n",
            sh_quote(&ring),
            die_after(rm, &format!("cannot install {ring}"))
        ));
        s
    }
}

/// Commands failing the script (after `cleanup`) unless the OpenPGP key file named by shell
/// variable `var` holds exactly one primary key, with fingerprint `want` (40 upper-case hex
/// digits). gpg reads it in a throw-away home (`--show-keys` imports nothing); its
/// `--with-colons` output has a `pub` record per primary key, followed by that key's `fpr`
/// record, whose field 10 is the fingerprint (gnupg doc/DETAILS).
pub fn check_fingerprint(var: &str, want: &str, what: &str, cleanup: &str) -> String {
    format!(
        "command -v gpg >/dev/null 2>&1 || {}\n\
         g=$(mktemp -d) || {}\n\
         fp=$(GNUPGHOME=\"$g\" gpg --batch --no-tty --with-colons --show-keys -- \"${var}\" 2>/dev/null </dev/null | awk -F: '$1 == \"pub\" {{ n++; w = 1; next }} $1 == \"fpr\" && w {{ print $10; w = 0 }}' | tr '\\n' ' ')\n\
         rm -rf -- \"$g\"\n\
         if [ \"$fp\" != {want_sp} ]; then {cleanup} printf 'kwin: the signing key from %s has fingerprint(s) [%s], expected exactly %s\\n' {what} \"$fp\" {want} >&2; exit 1; fi\n",
        die_after(
            cleanup,
            "gpg is needed to check the signing key's fingerprint: install gnupg"
        ),
        die_after(cleanup, "cannot create a temporary directory"),
        want_sp = sh_quote(&format!("{want} ")),
        want = sh_quote(want),
        what = sh_quote(what),
    )
}

/// Commands converting the file named by shell variable `var` from an ASCII-armored OpenPGP
/// key to binary (what `gpg --dearmor` does) if it is armored; binary keys stay as they are.
/// The armor header ends at the first empty line; the body ends at the `=CRC` line.
pub fn dearmor(var: &str, cleanup: &str) -> String {
    format!(
        "if grep -q -e '-----BEGIN PGP' \"${var}\"; then\n\
         g=$(mktemp) || {}\n\
         tr -d '\\r' < \"${var}\" | sed -e '1,/^$/d' -e '/^=/,$d' -e '/^-----END/,$d' | base64 -d > \"$g\" && [ -s \"$g\" ] && cat \"$g\" > \"${var}\" || {}\n\
         rm -f -- \"$g\"\n\
         fi\n",
        die_after(cleanup, "cannot create a temporary file"),
        die_after(
            &format!("{cleanup} rm -f -- \"$g\";"),
            "the signing key is not a valid ASCII-armored OpenPGP key"
        ),
    )
}
