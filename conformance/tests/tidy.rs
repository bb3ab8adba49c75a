//! Tidy checks over the workspace sources: every Rust file starts with a `//!` line saying what
//! it owns, no test is marked ignored, the crate dependency rules of `ARCHITECTURE.md` hold, and
//! no code outside a storage backend's own file names that backend's crate.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&workspace_root(), &mut files);
    assert!(files.len() > 10, "found only {} Rust files", files.len());
    files
}

#[test]
fn every_rust_file_starts_with_a_module_doc_line() {
    let missing: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(missing.is_empty(), "files without a leading `//!` line: {missing:?}");
}

#[test]
fn no_ignored_tests() {
    let marker = ["#[", "ignore"].concat();
    let offenders: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(&marker))
        .collect();
    assert!(
        offenders.is_empty(),
        "ignored tests in {offenders:?}; gate slow tests by environment instead"
    );
}

/// The workspace crates each crate's `Cargo.toml` names.
fn workspace_deps(folder: &str) -> Vec<String> {
    let manifest =
        std::fs::read_to_string(workspace_root().join(folder).join("Cargo.toml")).unwrap();
    ["ocm-proto", "ocm-storage", "ocm-apiserver", "ocm-agent", "ocm-conformance"]
        .into_iter()
        .filter(|name| manifest.lines().any(|l| l.trim_start().starts_with(name)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn crate_dependency_rules_hold() {
    assert_eq!(
        workspace_deps("proto"),
        Vec::<String>::new(),
        "proto depends on no workspace crate"
    );
    assert_eq!(
        workspace_deps("storage"),
        Vec::<String>::new(),
        "storage depends on no workspace crate"
    );
    assert_eq!(workspace_deps("agent"), ["ocm-proto"], "the agent depends on proto only");
    let apiserver = workspace_deps("apiserver");
    assert!(
        apiserver.iter().all(|d| d == "ocm-proto" || d == "ocm-storage"),
        "apiserver may depend on proto and storage only: {apiserver:?}"
    );
}

#[test]
fn storage_backends_stay_in_their_files() {
    let root = workspace_root();
    let allowed = |path: &Path, needle: &str| {
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if rel == "conformance/tests/tidy.rs" {
            return true; // this file names the crates in order to look for them
        }
        match needle {
            // The sled backend and its store of large values by content.
            "sled::" => rel == "storage/src/sled.rs" || rel == "storage/src/chunked.rs",
            // The benchmark measures raw etcd through its client, next to our backend.
            _ => rel == "storage/src/etcd.rs" || rel == "conformance/src/bin/storage-bench.rs",
        }
    };
    for file in all_rust_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in ["sled::", "etcd_client::"] {
            // The external crate's path, not our own module (`crate::sled::open`).
            let names_crate = text.match_indices(needle).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                !before.is_some_and(|c| c == ':' || c == '_' || c.is_alphanumeric())
            });
            if names_crate {
                assert!(
                    allowed(&file, needle),
                    "{} names `{needle}` outside its backend",
                    file.display()
                );
            }
        }
    }
}
