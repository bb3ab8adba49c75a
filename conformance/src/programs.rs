//! Finding the real external programs the suites drive (etcd, kubectl, python3, curl): an
//! override variable, else the `PATH`.

use std::path::PathBuf;

/// `$override_var` when set, else the first `name` on the `PATH`.
pub fn find(name: &str, override_var: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|c| c.is_file())
}

/// The `ocm-hub` binary of this build (the README's test command builds it beside the tests),
/// or `$OCM_HUB_BIN`.
pub fn ocm_hub() -> anyhow::Result<PathBuf> {
    built("ocm-hub", "ocm-apiserver", "OCM_HUB_BIN")
}

/// The `klusterlet` binary of this build, or `$OCM_KLUSTERLET_BIN`.
pub fn klusterlet() -> anyhow::Result<PathBuf> {
    built("klusterlet", "ocm-agent", "OCM_KLUSTERLET_BIN")
}

/// `$override_var` when set (a build directory shared by several checkouts holds whichever
/// checkout's binary was built last), else the binary beside the test.
fn built(name: &str, package: &str, override_var: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<test> -> target/<profile>/<name>; a benchmark's
    // target/<profile>/<bench> -> the same.
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let beside = exe.ancestors().skip(1).take(2).map(|d| d.join(&file)).find(|p| p.is_file());
    match beside {
        Some(p) => Ok(p),
        _ => anyhow::bail!(
            "the {name} binary is not built next to the tests: run `cargo build -p {package}` \
             (the README's test command builds it)"
        ),
    }
}

/// Fails unless every `--flag` of `args` is one `binary subcommand --help` lists (how the
/// deployment files are checked against the binaries they run).
pub fn check_flags(
    binary: &std::path::Path,
    subcommand: &[&str],
    args: &[&str],
) -> anyhow::Result<()> {
    let help = std::process::Command::new(binary).args(subcommand).arg("--help").output()?;
    let help = String::from_utf8_lossy(&help.stdout);
    // The flags help lists, as whole words (`--listen` is not `--grpc-listen`).
    let listed: std::collections::BTreeSet<&str> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == ']')
        .filter(|w| w.starts_with("--"))
        .collect();
    for arg in args.iter().filter(|a| a.starts_with("--")) {
        let flag = arg.split('=').next().unwrap_or(arg);
        anyhow::ensure!(
            listed.contains(flag),
            "{} {} does not accept {flag}",
            binary.display(),
            subcommand.join(" ")
        );
    }
    Ok(())
}

/// `name` on the `PATH` (or `$override_var`), or an error naming what to install: for tests
/// that drive a real client (python3, curl) and fail, never skip, without it.
pub fn required(name: &str, override_var: &str, install: &str) -> anyhow::Result<PathBuf> {
    find(name, override_var).ok_or_else(|| {
        anyhow::anyhow!("{name} is not on the PATH (nor in ${override_var}): install {install}")
    })
}
