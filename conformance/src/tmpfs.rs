//! A small filesystem of a test's own: a tmpfs of a given size mounted on a temporary dir
//! (unmounted on drop), filled with a file until only a little room is left, and freed again,
//! so a store on it meets a full disk on demand. Mounting needs root; without it the test fails
//! saying so, unless the run is told to do without (`OCM_SKIP_TMPFS=1`, reported as a skip).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// Whether this run skips the tests that mount a tmpfs (`OCM_SKIP_TMPFS=1`, for a run without
/// root); if it does, the running test is reported as skipping `what`
/// ([`crate::skip::requested`]).
pub fn skip(what: &str) -> bool {
    crate::skip::requested("OCM_SKIP_TMPFS", what)
}

/// A mounted tmpfs, unmounted (and its mount point removed) on drop.
#[derive(Debug)]
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB on a new temporary dir.
    pub fn mount(mib: u64) -> anyhow::Result<Tmpfs> {
        let dir = tempfile::tempdir()?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .context("running mount (this test needs the mount program and root)")?;
        anyhow::ensure!(
            out.status.success(),
            "cannot mount a tmpfs on {}: {}; this test needs root, to make a small filesystem \
             it can fill (OCM_SKIP_TMPFS=1 skips it)",
            dir.path().display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(Tmpfs { dir })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the filesystem with the file `filler` until at most `leave` bytes are free (and
    /// at least `leave` less a page, the filesystem's unit); [`Tmpfs::free`] removes it.
    pub fn fill(&self, leave: u64) -> anyhow::Result<()> {
        let path = self.filler();
        let mut file = std::fs::File::create(&path)?;
        let block = vec![0x5a_u8; 1 << 20];
        let mut written: u64 = 0;
        // Whole blocks, then single pages, until the filesystem refuses more.
        for size in [block.len(), 4096] {
            loop {
                match file.write(&block[..size]) {
                    Ok(0) => break,
                    Ok(n) => written += n as u64,
                    Err(e) if e.raw_os_error() == Some(28) => break,
                    Err(e) => return Err(e).context("filling the tmpfs"),
                }
            }
        }
        file.set_len(written.saturating_sub(leave))?;
        file.sync_all()?;
        Ok(())
    }

    /// Removes the filler: the filesystem has room again.
    pub fn free(&self) -> anyhow::Result<()> {
        std::fs::remove_file(self.filler()).context("removing the filler")
    }

    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a store that has not finished closing may still hold a file there.
        let out = Command::new("umount").arg("-l").arg(self.dir.path()).output();
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "umount {}: {}",
                self.dir.path().display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("umount {}: {e}", self.dir.path().display()),
        }
    }
}
