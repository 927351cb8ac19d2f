//! Checkpoints of a distributed run that restart on any number of
//! processes.
//!
//! Each process writes its particles, in the caller's format, to
//! `DIR/part-<step>-<rank>`; once every process has, rank 0 writes
//! `DIR/manifest` (`processes P`, `step S`) under a temporary name and
//! renames it, and only then removes the parts of other steps. A write
//! cut short, on any process, leaves the last complete checkpoint as it
//! was, and a directory without a manifest never looks complete. A
//! restart on `Q` processes gives process `r` the parts `q` with
//! `q mod Q = r`, in increasing `q`: every particle is read once, and the
//! caller moves them to their part of space (`orb_partition`,
//! `Migration`). A failure on any process (a part missing, cut short,
//! unwritable) is the same error on every process ([`agreed`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use mpi::collective::SystemOperation;
use mpi::traits::Communicator;

use super::{agreed, all_reduce_within};
use crate::error::Error;

const MANIFEST: &str = "manifest";

/// The parts a checkpoint was read from.
#[derive(Debug)]
pub struct Restart<T> {
    /// The step the checkpoint was written at.
    pub step: u64,
    /// The processes that wrote it.
    pub processes: usize,
    /// This process's parts, as the caller's reader returned them.
    pub parts: Vec<T>,
}

/// The path of rank `rank`'s part at `step`.
fn part(dir: &Path, step: u64, rank: usize) -> PathBuf {
    dir.join(format!("part-{step}-{rank}"))
}

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("checkpoint {}: {e}", path.display()))
}

/// Writes `bytes` to `path` through a temporary name, synced, then
/// renamed.
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let tmp = path.with_extension("partial");
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| io(path, e))
}

/// The processes and step of the manifest in `dir`.
fn manifest(dir: &Path) -> Result<(usize, u64), Error> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| io(dir, format!("no complete checkpoint ({e})")))?;
    let field = |name: &str| -> Result<u64, Error> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .ok_or_else(|| io(&path, format!("no `{name}` line")))
    };
    Ok((field("processes")? as usize, field("step")?))
}

/// Writes this process's part of the checkpoint at `step` into `dir` by
/// `write` (given the part's path; write it whole, as [`write_whole`]
/// does), then the manifest; a collective call. A step the manifest
/// already names is not written again (its parts may be another
/// partition of the same particles, and would mix with them).
pub fn write_parts<C, E>(
    comm: &C,
    dir: &Path,
    step: u64,
    write: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), Error>
where
    C: Communicator,
    E: std::fmt::Display,
{
    let rank = comm.rank() as usize;
    let there = i64::from(manifest(dir).is_ok_and(|(_, s)| s == step));
    let mut everywhere = [0i64];
    all_reduce_within(
        comm,
        &[there],
        &mut everywhere,
        SystemOperation::min(),
        "a checkpoint",
    );
    if everywhere[0] == 1 {
        return Ok(());
    }
    let path = part(dir, step, rank);
    let mine = std::fs::create_dir_all(dir)
        .map_err(|e| io(dir, e))
        .and_then(|()| write(&path).map_err(|e| io(&path, e)));
    agreed(comm, mine)?;
    // Every part is written: the manifest makes the checkpoint complete.
    let done = if rank == 0 {
        let text = format!("processes {}\nstep {step}\n", comm.size());
        write_whole(&dir.join(MANIFEST), text.as_bytes())
    } else {
        Ok(())
    };
    agreed(comm, done)?;
    if rank == 0 {
        // The older parts go; one left behind (a removal refused) is
        // never read, the manifest naming the step.
        let keep = format!("part-{step}-");
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("part-") && !name.starts_with(&keep) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    Ok(())
}

/// Reads this process's parts of the checkpoint in `dir` by `read`
/// (given a part's path): the parts `q` with `q mod size = rank` of the
/// processes that wrote it, in increasing `q`; a collective call.
pub fn read_parts<C, T, E>(
    comm: &C,
    dir: &Path,
    mut read: impl FnMut(&Path) -> Result<T, E>,
) -> Result<Restart<T>, Error>
where
    C: Communicator,
    E: std::fmt::Display,
{
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let mine = manifest(dir).and_then(|(processes, step)| {
        let parts = (rank..processes)
            .step_by(size)
            .map(|q| {
                let path = part(dir, step, q);
                read(&path).map_err(|e| io(&path, e))
            })
            .collect::<Result<Vec<T>, Error>>()?;
        Ok(Restart {
            step,
            processes,
            parts,
        })
    });
    agreed(comm, mine)
}

/// Arrays of `f64` of one length in one part: the length (u64), then each
/// array, little-endian.
pub fn arrays_bytes(arrays: &[&[f64]]) -> Vec<u8> {
    let n = arrays.first().map_or(0, |a| a.len());
    let mut bytes = Vec::with_capacity(8 + 8 * n * arrays.len());
    bytes.extend((n as u64).to_le_bytes());
    for a in arrays {
        bytes.extend(a.iter().flat_map(|v| v.to_le_bytes()));
    }
    bytes
}

/// The `count` arrays [`arrays_bytes`] wrote to `path`; a file of another
/// length is refused, saying so.
pub fn read_arrays(path: &Path, count: usize) -> Result<Vec<Vec<f64>>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
        .ok_or("shorter than its length")?;
    let want = n.checked_mul(8 * count).and_then(|b| b.checked_add(8));
    if want != Some(bytes.len()) {
        return Err(format!(
            "{} bytes, not the {} of {count} arrays of {n}",
            bytes.len(),
            want.map_or("more".into(), |w| w.to_string())
        ));
    }
    Ok((0..count)
        .map(|k| {
            bytes[8 + 8 * n * k..8 + 8 * n * (k + 1)]
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect()
        })
        .collect())
}
