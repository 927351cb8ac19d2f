//! Output files written whole or not at all: each goes to its name with
//! `.part` added, is flushed to the disk, and only then renamed over the
//! name, so an interrupted run leaves the last complete file as it was
//! and no partial file that looks complete.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes `path` by `write` into a buffered `path.part`, flushed, synced
/// and renamed.
pub fn write_whole(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    let mut f = BufWriter::new(File::create(&part)?);
    write(&mut f)?;
    f.flush()?;
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&part, path)
}
