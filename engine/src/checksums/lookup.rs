//! The answer to `sha256_of` / `openpgp_of` during one expansion ([`Checksums`]): the plan's
//! pin, kwin's digests, the https records, in that order (see the module docs of
//! `checksums`); what nobody answered is remembered with who asked.

use super::known::Known;
use super::record::Recorded;
use super::wanted::{Wanted, WantedKind};
use crate::plan::syntax::normalize_fingerprint;
use crate::task::Origin;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The checksums known to one expansion, and what was asked for in vain.
#[derive(Debug, Clone, Default)]
pub struct Checksums {
    pins: BTreeMap<String, String>,
    openpgp_pins: BTreeMap<String, String>,
    known: Arc<Known>,
    mirror: Option<String>,
    recorded: BTreeMap<String, Recorded>,
    /// Every request nobody answered, with the tasks whose params asked for it.
    wanted: Arc<Mutex<BTreeMap<Wanted, BTreeSet<Origin>>>>,
    /// The recipe step or plan task whose params are being rendered (set by expansion).
    asking: Arc<Mutex<Option<Origin>>>,
}

impl Checksums {
    /// Pins from the plan (`[artifacts.sha256]`, by file name) and records by checksum-file URL.
    pub fn new(pins: BTreeMap<String, String>, recorded: BTreeMap<String, Recorded>) -> Self {
        let pins = pins
            .into_iter()
            .map(|(k, v)| (k, v.to_ascii_lowercase()))
            .collect();
        Checksums {
            pins,
            recorded,
            ..Checksums::default()
        }
    }

    /// Everything the plan says (pins, mirror) and kwin knows, with the records so far.
    pub fn for_plan(
        file: &crate::plan::PlanFile,
        recorded: BTreeMap<String, Recorded>,
        known: Arc<Known>,
    ) -> Self {
        let mut c = Checksums::new(file.artifacts.sha256.clone(), recorded);
        c.openpgp_pins = file
            .artifacts
            .openpgp
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    normalize_fingerprint(v).unwrap_or_else(|| v.clone()),
                )
            })
            .collect();
        c.known = known;
        c.mirror = file.artifacts.mirror.clone();
        c
    }

    /// The upstream URL of `url`: under the plan's mirror (`<mirror>/<site>/...`) it is
    /// `https://<site>/...`; any other URL is itself.
    pub fn upstream_url(&self, url: &str) -> String {
        if let Some(m) = &self.mirror {
            let m = m.trim_end_matches('/');
            if let Some(rest) = url.strip_prefix(m).and_then(|r| r.strip_prefix('/')) {
                return format!("https://{rest}");
            }
        }
        url.to_string()
    }

    /// The answer to `sha256_pin(file)`: the plan's pin or none, for artifacts whose checksum is
    /// optional. Never remembered as wanted.
    pub fn pin(&self, file: &str) -> Option<String> {
        self.pins.get(file).cloned()
    }

    /// The answer to `sha256_of(file, sums_url, url=..., sha512=...)`; a miss is remembered.
    pub fn lookup(
        &self,
        file: &str,
        sums_url: Option<&str>,
        url: Option<&str>,
        sha512_url: Option<&str>,
    ) -> Option<String> {
        if let Some(pin) = self.pins.get(file) {
            return Some(pin.clone());
        }
        if let Some(h) = url.and_then(|u| self.known.sha256(&self.upstream_url(u))) {
            return Some(h.to_string());
        }
        let w = Wanted {
            kind: WantedKind::Sha256,
            file: file.to_string(),
            sums_url: sums_url.map(str::to_string),
            url: url.map(str::to_string),
            sha512_url: sha512_url.map(str::to_string),
        };
        if let Some(h) = self.recorded_answer(&w) {
            return Some(h.to_string());
        }
        self.remember(w);
        None
    }

    /// The answer `.kwin/checksums.toml` gives to `w` (step 3): only checksums that came over
    /// https are trusted — from the checksum file when there is one, else computed from the
    /// artifact — and only for the file name they were recorded for.
    pub fn recorded_answer(&self, w: &Wanted) -> Option<&str> {
        if w.kind != WantedKind::Sha256 {
            return None;
        }
        w.sums_url
            .as_deref()
            .or(w.url.as_deref())
            .filter(|u| u.starts_with("https://"))
            .and_then(|u| self.recorded.get(u))
            .filter(|r| r.file == w.file)
            .map(|r| r.sha256.as_str())
    }

    /// A request nobody answered, with who is asking.
    fn remember(&self, w: Wanted) {
        let who = self.asking.lock().ok().and_then(|a| a.clone());
        if let Ok(mut m) = self.wanted.lock() {
            let askers = m.entry(w).or_default();
            askers.extend(who);
        }
    }

    /// Expansion says whose params it renders next (`None` when done): a request made
    /// meanwhile is needed by that recipe step or plan task ([`Checksums::needed_by`]).
    pub fn asking(&self, who: Option<Origin>) {
        if let Ok(mut a) = self.asking.lock() {
            *a = who;
        }
    }

    /// The recipe steps and plan tasks whose params asked for `w`.
    pub fn needed_by(&self, w: &Wanted) -> Vec<Origin> {
        self.wanted
            .lock()
            .ok()
            .and_then(|m| m.get(w).map(|s| s.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// The answer to `openpgp_of(file, url)`: the plan's pin, else kwin's; a miss is remembered.
    pub fn fingerprint(&self, file: &str, url: &str) -> Option<String> {
        if let Some(pin) = self.openpgp_pins.get(file) {
            return Some(pin.clone());
        }
        if let Some(f) = self.known.fingerprint(&self.upstream_url(url)) {
            return Some(f.to_string());
        }
        self.remember(Wanted {
            kind: WantedKind::OpenPgp,
            file: file.to_string(),
            sums_url: None,
            url: Some(url.to_string()),
            sha512_url: None,
        });
        None
    }

    /// Every lookup that found nothing, sorted.
    pub fn wanted(&self) -> Vec<Wanted> {
        self.wanted
            .lock()
            .map(|w| w.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The records, to save after adding fetched ones.
    pub fn recorded(&self) -> &BTreeMap<String, Recorded> {
        &self.recorded
    }

    /// Record `r` under `url`: the checksum file's URL, or the artifact's when kwin hashed it.
    pub fn record(&mut self, url: String, r: Recorded) {
        self.recorded.insert(url, r);
    }

    /// The same knowledge with new records and nothing wanted yet.
    pub fn with_records(&self, recorded: BTreeMap<String, Recorded>) -> Self {
        Checksums {
            recorded,
            wanted: Arc::default(),
            asking: Arc::default(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49";
    const B: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_pin_wins_then_a_record_and_a_miss_is_remembered() {
        let mut pins = BTreeMap::new();
        pins.insert("kubelet.exe".to_string(), A.to_ascii_uppercase());
        let mut rec = BTreeMap::new();
        rec.insert(
            "https://m/kubeadm.exe.sha256".to_string(),
            Recorded {
                file: "kubeadm.exe".into(),
                sha256: B.into(),
                ..Recorded::default()
            },
        );
        let c = Checksums::new(pins, rec);
        assert_eq!(
            c.lookup(
                "kubelet.exe",
                Some("https://m/kubelet.exe.sha256"),
                None,
                None
            )
            .as_deref(),
            Some(A)
        );
        assert_eq!(
            c.lookup(
                "kubeadm.exe",
                Some("https://m/kubeadm.exe.sha256"),
                None,
                None
            )
            .as_deref(),
            Some(B)
        );
        // a record for another file name under that URL does not answer
        assert_eq!(
            c.lookup(
                "other.exe",
                Some("https://m/kubeadm.exe.sha256"),
                None,
                None
            ),
            None
        );
        assert_eq!(c.lookup("containerd.service", None, None, None), None);
        let w = c.wanted();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].file, "containerd.service");
        assert_eq!(w[0].sums_url, None);
        assert_eq!(w[1].file, "other.exe");
    }

    const TABLE: &str = r#"
[[artifact]]
url = "https://raw.githubusercontent.com/o/r/{version}/m.yml"
source = "test"
[artifact.sha256]
"v1.0.0" = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49"

[[signing_key]]
url = "https://pkgs.example/{minor}/deb/Release.key"
fingerprint = "DE15B14486CD377B9E876E1A234654DA9A296436"
source = "test"
"#;

    fn plan_file(mirror: Option<&str>) -> crate::plan::PlanFile {
        let mut f: crate::plan::PlanFile = toml::from_str("").expect("empty plan");
        f.artifacts.mirror = mirror.map(str::to_string);
        f
    }

    #[test]
    fn known_digests_answer_by_upstream_url_also_under_a_mirror() {
        let known = Arc::new(Known::parse(TABLE).expect("table"));
        let c = Checksums::for_plan(&plan_file(None), BTreeMap::new(), known.clone());
        let url = "https://raw.githubusercontent.com/o/r/v1.0.0/m.yml";
        assert_eq!(c.lookup("m.yml", None, Some(url), None).as_deref(), Some(A));
        assert_eq!(
            c.lookup(
                "m.yml",
                None,
                Some("https://raw.githubusercontent.com/o/r/v2.0.0/m.yml"),
                None
            ),
            None
        );
        // under a mirror, the URL maps back to the upstream one
        let c = Checksums::for_plan(
            &plan_file(Some("http://mirror.lab:8080/")),
            BTreeMap::new(),
            known,
        );
        assert_eq!(
            c.lookup(
                "m.yml",
                None,
                Some("http://mirror.lab:8080/raw.githubusercontent.com/o/r/v1.0.0/m.yml"),
                None
            )
            .as_deref(),
            Some(A)
        );
        assert_eq!(
            c.fingerprint(
                "Release.key",
                "http://mirror.lab:8080/pkgs.example/v1.31/deb/Release.key"
            )
            .as_deref(),
            Some("DE15B14486CD377B9E876E1A234654DA9A296436")
        );
        assert_eq!(
            c.fingerprint("Release.key", "https://pkgs.example/latest/deb/Release.key"),
            None
        );
        let w = c.wanted();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].kind, WantedKind::OpenPgp);
    }

    #[test]
    fn a_record_fetched_over_http_is_no_answer() {
        let mut rec = BTreeMap::new();
        rec.insert(
            "http://m/kubelet.exe.sha256".to_string(),
            Recorded {
                file: "kubelet.exe".into(),
                sha256: A.into(),
                ..Recorded::default()
            },
        );
        let c = Checksums::new(BTreeMap::new(), rec);
        assert_eq!(
            c.lookup(
                "kubelet.exe",
                Some("http://m/kubelet.exe.sha256"),
                None,
                None
            ),
            None
        );
    }

    #[test]
    fn an_artifact_without_a_checksum_file_is_answered_by_its_url_record() {
        let url = "https://github.com/o/r/releases/download/v1/tool-v1.zip";
        let sha512 = "https://github.com/o/r/releases/download/v1/tool-v1.zip.sha512";
        let c = Checksums::new(BTreeMap::new(), BTreeMap::new());
        assert_eq!(c.lookup("tool-v1.zip", None, Some(url), Some(sha512)), None);
        let w = c.wanted();
        assert_eq!(w.len(), 1);
        assert!(w[0].from_artifact());
        assert_eq!(w[0].source(), Some(url));
        assert_eq!(w[0].sha512_url.as_deref(), Some(sha512));
        // recorded by the artifact's URL: the answer, for that file name only
        let mut rec = BTreeMap::new();
        rec.insert(
            url.to_string(),
            Recorded {
                file: "tool-v1.zip".into(),
                sha256: A.into(),
                sha512_file: Some(sha512.into()),
            },
        );
        let c = Checksums::new(BTreeMap::new(), rec.clone());
        assert_eq!(
            c.lookup("tool-v1.zip", None, Some(url), Some(sha512))
                .as_deref(),
            Some(A)
        );
        assert_eq!(c.lookup("other.zip", None, Some(url), None), None);
        // a record under a plain-HTTP URL is no answer
        let http = url.replacen("https://", "http://", 1);
        let mut rec = BTreeMap::new();
        rec.insert(
            http.clone(),
            Recorded {
                file: "tool-v1.zip".into(),
                sha256: A.into(),
                ..Recorded::default()
            },
        );
        let c = Checksums::new(BTreeMap::new(), rec);
        assert_eq!(c.lookup("tool-v1.zip", None, Some(&http), None), None);
        // a signing key is never fetched
        let c = Checksums::new(BTreeMap::new(), BTreeMap::new());
        assert_eq!(c.fingerprint("Release.key", "https://x/Release.key"), None);
        assert_eq!(c.wanted()[0].source(), None);
    }
}
