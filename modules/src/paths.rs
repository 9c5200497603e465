//! Path checks of module params, for every family (a family never imports another: the
//! Kubernetes join reads both kinds of path from here).

use kwin_engine::module::ParamError;

/// An absolute POSIX path without a NUL byte (which no file name can hold).
pub fn posix_abs(field: &str, p: &str) -> Result<(), ParamError> {
    if !p.starts_with('/') {
        return Err(ParamError::at(
            field,
            format!("`{p}` is not an absolute path"),
        ));
    }
    if p.contains('\0') {
        return Err(ParamError::at(field, "path contains a NUL byte"));
    }
    Ok(())
}

/// [`posix_abs`], on one line: for paths that go into generated configuration too.
pub fn posix_abs_line(field: &str, p: &str) -> Result<(), ParamError> {
    posix_abs(field, p)?;
    if p.contains(['\n', '\r']) {
        return Err(ParamError::at(field, "path contains a line break"));
    }
    Ok(())
}

/// An absolute Windows path (a drive, `C:\k\file` or `c:/k`, or UNC, `\\srv\share`) on one
/// line.
pub fn windows_abs(field: &str, p: &str) -> Result<(), ParamError> {
    let b = p.as_bytes();
    let drive = b.len() >= 3
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b[2] == b'\\' || b[2] == b'/');
    let unc = p.starts_with("\\\\");
    if !(drive || unc) {
        return Err(ParamError::at(
            field,
            format!("`{p}` is not an absolute Windows path (e.g. C:\\k\\file)"),
        ));
    }
    if p.contains(['\n', '\r', '\0']) {
        return Err(ParamError::at(field, "path contains a line break or NUL"));
    }
    Ok(())
}

/// Case-insensitive Windows path identity for resources (`C:/K/` ≡ `c:\k`).
pub fn windows_resource(p: &str) -> String {
    let mut s = p.replace('/', "\\").to_ascii_lowercase();
    while s.len() > 3 && s.ends_with('\\') {
        s.pop();
    }
    s
}

/// The directory holding `path` (absolute, trimmed): a POSIX path's, for every family.
pub fn parent_dir(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => path[..i].to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix() {
        assert!(posix_abs("p", "/etc/x").is_ok());
        assert!(posix_abs("p", "etc/x").is_err());
        assert!(posix_abs("p", "/a\0b").is_err());
        assert!(posix_abs("p", "/a\nb").is_ok());
        assert_eq!(
            posix_abs_line("p", "/a\nb").map_err(|e| e.path),
            Err(Some("p".to_string()))
        );
    }

    #[test]
    fn windows() {
        assert!(windows_abs("p", "C:\\k\\x").is_ok());
        assert!(windows_abs("p", "c:/k").is_ok());
        assert!(windows_abs("p", "\\\\srv\\share").is_ok());
        assert!(windows_abs("p", "k\\x").is_err());
        assert!(windows_abs("p", "/etc/x").is_err());
        assert_eq!(windows_resource("C:/K/"), "c:\\k");
    }
}
