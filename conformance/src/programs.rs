//! Finding the real external programs the suites drive (etcd, kubectl): an override variable,
//! else the `PATH`.

use std::path::PathBuf;

/// `$override_var` when set, else the first `name` on the `PATH`.
pub fn find(name: &str, override_var: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|c| c.is_file())
}
