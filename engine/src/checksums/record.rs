//! `.kwin/checksums.toml`: the checksums kwin fetched over https, by the URL each came from
//! (the checksum file, or the artifact kwin hashed itself). Written 0600, replaced atomically.

use super::sums::is_sha256;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File name of the record, inside the plan's state directory.
pub const RECORD_FILE: &str = "checksums.toml";

/// One checksum taken from a published checksum file, or computed from the artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The artifact's file name, as the recipe named it.
    pub file: String,
    /// Lower-case hex SHA-256.
    pub sha256: String,
    /// For an artifact kwin fetched and hashed itself: the upstream's SHA-512 file it was
    /// checked against, when the upstream publishes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512_file: Option<String>,
}

/// Path of the record in `state_dir` (the plan's `.kwin/`).
pub fn record_path(state_dir: &Path) -> PathBuf {
    state_dir.join(RECORD_FILE)
}

/// Read the record; a missing file is an empty record. Errors name the file.
pub fn load_record(path: &Path) -> Result<BTreeMap<String, Recorded>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let map: BTreeMap<String, Recorded> =
        toml::from_str(&text).map_err(|e| format!("{} is not valid: {e}", path.display()))?;
    for (url, r) in &map {
        if !is_sha256(&r.sha256) {
            return Err(format!(
                "{}: the checksum recorded for {url} is not 64 hex digits (delete the entry to fetch it again)",
                path.display()
            ));
        }
    }
    Ok(map)
}

/// Write the record (0600, replaced atomically).
pub fn save_record(path: &Path, map: &BTreeMap<String, Recorded>) -> Result<(), String> {
    let mut text = String::from(
        "# SHA-256 checksums kwin fetched over https: from the upstream's published checksum\n\
         # files, by the checksum file's URL; for an artifact whose upstream publishes no SHA-256\n\
         # file, computed from the artifact itself (checked against its SHA-512 file where one is\n\
         # published, `sha512_file`), by the artifact's URL. Keep this file with the plan to fix\n\
         # the artifacts of every run; a pin in the plan's [artifacts.sha256] wins over it.\n\n",
    );
    text.push_str(
        &toml::to_string(map).map_err(|e| format!("cannot encode {}: {e}", path.display()))?,
    );
    crate::fs::write_private(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49";

    #[test]
    fn a_saved_record_loads_back_and_a_bad_digest_in_it_names_its_url() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join(RECORD_FILE);
        assert!(load_record(&p).expect("missing is empty").is_empty());
        let mut m = BTreeMap::new();
        m.insert(
            "https://dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256".to_string(),
            Recorded {
                file: "kubelet.exe".into(),
                sha256: A.into(),
                ..Recorded::default()
            },
        );
        save_record(&p, &m).expect("save");
        assert_eq!(load_record(&p).expect("load"), m);
        std::fs::write(
            &p,
            "[\"https://x/y.sha256\"]\nfile = \"y\"\nsha256 = \"nothex\"\n",
        )
        .expect("write");
        let e = load_record(&p).expect_err("bad record");
        assert!(
            e.contains("https://x/y.sha256") && e.contains("64 hex"),
            "{e}"
        );
    }
}
