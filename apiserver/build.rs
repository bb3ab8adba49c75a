//! Build script: records the git commit the hub was built from (`ocm_build_info`, `--version`).

use std::process::Command;

fn main() {
    // A new commit or checkout moves HEAD's reflog; without a repository the commit is unknown.
    for path in ["../.git/HEAD", "../.git/logs/HEAD"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=OCM_GIT_COMMIT={commit}");
}
