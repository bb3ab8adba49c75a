//! The hub's identity as files: every regular file under a data dir's `pki/` (names relative to
//! it, with their modes), read for a backup or an upload of the certificates, and written into
//! a new data dir by a restore or a joining replica: each file private from its creation,
//! synced, and named only inside `pki/`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// Why the identity files could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The data dir holds no hub CA.
    #[error(
        "{} holds no hub CA: --data-dir must name the hub's data dir (its pki/ is the hub's \
         identity)", .0.display()
    )]
    NoCa(PathBuf),
    /// A file named outside `pki/`.
    #[error("an identity file {0:?} outside pki/")]
    Outside(String),
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

/// One identity file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityFile {
    /// Its name under `pki/` (`/`-separated).
    pub name: String,
    /// Its permission bits.
    pub mode: u32,
    pub contents: Bytes,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IdentityError + '_ {
    move |source| IdentityError::Io { path: path.to_path_buf(), source }
}

/// The identity files under `data_dir/pki`, sorted by name; refused without a CA key.
pub fn read(data_dir: &Path) -> Result<Vec<IdentityFile>, IdentityError> {
    let pki = data_dir.join("pki");
    if !pki.join("ca.key").is_file() {
        return Err(IdentityError::NoCa(pki));
    }
    let mut files = Vec::new();
    let mut dirs = vec![(pki.clone(), String::new())];
    while let Some((dir, prefix)) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let kind = entry.file_type().map_err(io(&entry.path()))?;
            if kind.is_dir() {
                dirs.push((entry.path(), format!("{name}/")));
            } else if kind.is_file() && !name.ends_with(".tmp") {
                let path = entry.path();
                let contents = std::fs::read(&path).map_err(io(&path))?;
                files.push(IdentityFile { name, mode: mode_of(&path)?, contents: contents.into() });
            }
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Writes `files` under `data_dir/pki` (which must not hold them yet), each created private,
/// given its mode (never more than 0755) and synced, then the folder synced.
pub fn write(data_dir: &Path, files: &[IdentityFile]) -> Result<(), IdentityError> {
    let pki = data_dir.join("pki");
    for IdentityFile { name, mode, contents } in files {
        let safe = !name.is_empty()
            && name.split('/').all(|part| !part.is_empty() && part != "." && part != "..");
        if !safe {
            return Err(IdentityError::Outside(name.clone()));
        }
        let path = pki.join(name);
        if let Some(parent) = path.parent() {
            create_private_dir(parent).map_err(io(parent))?;
        }
        let mut file = create_private(&path).map_err(io(&path))?;
        file.write_all(contents).map_err(io(&path))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let perms = std::fs::Permissions::from_mode(mode & 0o755);
            std::fs::set_permissions(&path, perms).map_err(io(&path))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        file.sync_all().map_err(io(&path))?;
    }
    sync_dir(&pki.join("x"));
    Ok(())
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Result<u32, IdentityError> {
    use std::os::unix::fs::PermissionsExt as _;
    Ok(std::fs::metadata(path).map_err(io(path))?.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn mode_of(_: &Path) -> Result<u32, IdentityError> {
    Ok(0o600)
}

/// Creates `path` for writing, readable by its owner only from the start.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)
}

/// Creates `dir` (and its parents) readable by its owner only.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Syncs the directory holding `path`, so a file created or renamed into it survives a crash.
pub fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
