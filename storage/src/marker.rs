//! Module `marker` of the sled backend (a child of `sled.rs`, beside it as `chunked.rs` is):
//! the format marker file `format` beside sled's own files, naming the store's format as
//! `m/format` in the tree does. It is read before sled opens the files (sled writes as it opens
//! them, even to read one key), so a store in a newer release's format is refused with every
//! file as it was. Stores of the releases that wrote no such file (formats 1 to 3 before it)
//! have their format read from the tree, and get the file once they are in this build's format.

use std::io::Write as _;
use std::path::Path;

use super::{FORMAT, unreadable_format};
use crate::error::{Error, Result};

/// The marker file's name in the store's directory.
const FILE: &str = "format";

/// The marker file's bytes for this build's format.
fn contents() -> Vec<u8> {
    let mut bytes = FORMAT.to_vec();
    bytes.push(b'\n');
    bytes
}

/// Refuses a store whose marker file names a format this build does not read (a newer one:
/// [`Error::NewerFormat`]), before anything of it is opened. No file: nothing to refuse yet.
pub(super) fn check(dir: &Path) -> Result<()> {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) if bytes == contents() => Ok(()),
        Ok(bytes) => Err(unreadable_format(bytes.strip_suffix(b"\n").unwrap_or(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::unavailable(format!("cannot read {}", path.display()), e)),
    }
}

/// Writes the marker file unless it names this format already: a temporary file, synced, then
/// renamed over it and the directory synced, so a crash leaves the old file or the new one.
pub(super) fn write(dir: &Path) -> Result<()> {
    let path = dir.join(FILE);
    if std::fs::read(&path).is_ok_and(|bytes| bytes == contents()) {
        return Ok(());
    }
    let temporary = dir.join(format!("{FILE}.new"));
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&contents())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    written.map_err(|e| Error::unavailable(format!("cannot write {}", path.display()), e))
}
