//! `kwin graph`.

use crate::GraphFormat;
use std::path::Path;
use std::process::ExitCode;

pub fn graph(path: &Path, format: GraphFormat) -> anyhow::Result<ExitCode> {
    let _ = (path, format);
    anyhow::bail!("`kwin graph` is not available in this build")
}
