//! `archive` (Windows): expand a .zip or .tar.gz that is on the host into a directory, once.
//!
//! Parameters: `src` (archive path on the host, usually from `download`), `dest` (directory),
//! `sha256` (of the archive; identifies this content — a new archive expands again).
//! No-op when the marker `dest\.kwin-archive-<first 16 hex of sha256>` exists. Changes: expands
//! with `Expand-Archive` (.zip) or the built-in `tar.exe` (.tar.gz/.tgz), then writes the
//! marker. Existing files in `dest` are overwritten.
//!
//! ```toml
//! [[tasks]]
//! name = "containerd-unpack"
//! module = "archive"
//! on = { os = "windows" }
//! params = { src = 'C:\k\containerd.tar.gz', dest = 'C:\Program Files\containerd', sha256 = "…" }
//! ```

use super::download::check_sha256;
use super::facts::{PathFact, PathState};
use super::step;
use crate::paths::{windows_abs, windows_resource};
use crate::shared::archive::ArchiveParams;
use crate::shared::linux_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Zip,
    TarGz,
}

#[derive(Debug, Clone)]
pub struct Archive {
    src: String,
    dest: String,
    sha256: String,
    format: Format,
}

impl Described for Archive {
    const NAME: &'static str = "archive";
    const DOC: &'static str = "an archive extracted into a directory, once per archive content";
    type Params = ArchiveParams;

    fn from_params(p: ArchiveParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("archive", &p.linux_fields())?;
        let src = p
            .src
            .ok_or_else(|| ParamError::at("src", "`src` is required on Windows"))?;
        windows_abs("src", &src)?;
        windows_abs("dest", &p.dest)?;
        let sha256 = check_sha256(
            "sha256",
            p.sha256
                .as_deref()
                .ok_or_else(|| ParamError::at("sha256", "`sha256` is required on Windows"))?,
        )?;
        let lower = src.to_ascii_lowercase();
        let format = if lower.ends_with(".zip") {
            Format::Zip
        } else if lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
            Format::TarGz
        } else {
            return Err(ParamError::at(
                "src",
                "expected a .zip, .tar.gz or .tgz file",
            ));
        };
        Ok(Archive {
            src,
            dest: p.dest,
            sha256,
            format,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(PathFact {
            path: "C:\\k\\x".into(),
            content_limit: 0,
        })]
    }
}

impl Archive {
    fn marker(&self) -> String {
        format!(
            "{}\\.kwin-archive-{}",
            self.dest.trim_end_matches(['\\', '/']),
            &self.sha256[..16]
        )
    }
    fn fact(&self) -> PathFact {
        PathFact {
            path: self.marker(),
            content_limit: 0,
        }
    }
}

impl Module for Archive {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![windows_resource(&self.marker())]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: PathState = facts.get(&self.fact())?;
        if st.exists {
            return Ok(Plan::noop("already expanded"));
        }
        let (s, d, m) = (
            ps_quote(&self.src),
            ps_quote(&self.dest),
            ps_quote(&self.marker()),
        );
        let expand = match self.format {
            Format::Zip => format!("Expand-Archive -LiteralPath {s} -DestinationPath {d} -Force"),
            Format::TarGz => format!("& tar.exe -xzf {s} -C {d}\nif ($LASTEXITCODE -ne 0) {{ throw \"tar.exe failed with exit code $LASTEXITCODE\" }}"),
        };
        Ok(Plan::Change(Change {
            action: Action::Create,
            reason: "not expanded".into(),
            diff: Some(format!("+ {} expanded into {}", self.src, self.dest)),
            steps: vec![step(format!(
                "$src = {s}\n\
                 $h = (Get-FileHash -LiteralPath $src -Algorithm SHA256).Hash.ToLowerInvariant()\n\
                 if ($h -ne '{want}') {{ throw \"archive $src has sha256 $h, expected {want}\" }}\n\
                 New-Item -ItemType Directory -Force -Path {d} | Out-Null\n\
                 {expand}\n\
                 Set-Content -LiteralPath {m} -Value '{want}' -Encoding Ascii",
                want = self.sha256,
            ))],
            touches: Touches::Resources(vec![windows_resource(&self.dest)]),
        }))
    }
}
