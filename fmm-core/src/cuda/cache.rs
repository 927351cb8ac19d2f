//! The on-disk cache of compiled GPU modules.
//!
//! A compiled module (CUBIN) depends on the source, the GPU architecture,
//! the compiler options, the NVRTC and driver versions and this crate's
//! version. All of these go into the cache key, and the whole key is stored
//! in the entry and compared on every load, so a hash collision, a newer
//! NVRTC, a different GPU or a truncated file can never hand back the wrong
//! module: the entry is rebuilt instead (KeOps' cache omits the architecture
//! and the compiler versions, the source of many of its crash reports).
//!
//! Entry layout: `FMMCUBIN1\n`, the key's length and the key, the payload's
//! length and FNV-1a checksum, the payload. Entries are written to a
//! temporary file and renamed, so a crash mid-write leaves no half entry
//! under the real name.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;

const MAGIC: &[u8] = b"FMMCUBIN1\n";

/// Everything a compiled module depends on, as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey(String);

impl CacheKey {
    /// Builds a key from named parts (`("arch", "sm_90")`, ...) and the
    /// source. The crate version is always part of it.
    pub fn new(parts: &[(&str, String)], source: &str) -> Self {
        let mut text = format!("fmm-core {}\n", env!("CARGO_PKG_VERSION"));
        for (name, value) in parts {
            text.push_str(&format!("{name} {value}\n"));
        }
        text.push_str("source\n");
        text.push_str(source);
        CacheKey(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file name of the entry: a hash of the key.
    fn file_name(&self) -> String {
        format!("{:016x}.cubin", fnv1a(self.0.as_bytes()))
    }
}

/// What a lookup did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// The entry was there and valid.
    Hit,
    /// There was no entry; the module was built and stored.
    Miss,
    /// An entry was there but unusable (the reason says why); rebuilt.
    Rebuilt(String),
    /// The cache is switched off (`FMM_CACHE_DIR=off`); built, not stored.
    Disabled,
}

/// The cache directory, or none when caching is off.
#[derive(Clone, Debug)]
pub struct ModuleCache {
    dir: Option<PathBuf>,
}

impl ModuleCache {
    /// A cache in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        ModuleCache {
            dir: Some(dir.into()),
        }
    }

    /// No caching.
    pub fn disabled() -> Self {
        ModuleCache { dir: None }
    }

    /// `FMM_CACHE_DIR` (`off` disables), else `$XDG_CACHE_HOME/fmm-rs`,
    /// else `$HOME/.cache/fmm-rs`, else no cache.
    pub fn from_env() -> Self {
        match std::env::var_os("FMM_CACHE_DIR") {
            Some(v) if v == "off" => Self::disabled(),
            Some(v) => Self::at(v),
            None => {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")));
                match base {
                    Some(b) => Self::at(b.join("fmm-rs")),
                    None => Self::disabled(),
                }
            }
        }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The module for `key`: from the cache if a valid entry is there, else
    /// from `build`, which is then stored. A failure to store is not an
    /// error (the module is still returned); a failure to build is.
    pub fn get_or_build(
        &self,
        key: &CacheKey,
        build: impl FnOnce() -> Result<Vec<u8>, Error>,
    ) -> Result<(Vec<u8>, CacheOutcome), Error> {
        let Some(dir) = &self.dir else {
            return Ok((build()?, CacheOutcome::Disabled));
        };
        let path = dir.join(key.file_name());
        let outcome = match fs::read(&path) {
            Ok(bytes) => match decode(&bytes, key) {
                Ok(payload) => return Ok((payload, CacheOutcome::Hit)),
                Err(reason) => CacheOutcome::Rebuilt(reason),
            },
            Err(_) => CacheOutcome::Miss,
        };
        let payload = build()?;
        // Best effort: a read-only or full disk only costs a rebuild later.
        let _ = store(dir, &path, key, &payload);
        Ok((payload, outcome))
    }
}

fn store(dir: &Path, path: &Path, key: &CacheKey, payload: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&encode(key, payload))?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

fn encode(key: &CacheKey, payload: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(format!("{}\n", key.0.len()).as_bytes());
    out.extend_from_slice(key.0.as_bytes());
    out.extend_from_slice(format!("{} {:016x}\n", payload.len(), fnv1a(payload)).as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry, or why it cannot be used.
fn decode(bytes: &[u8], key: &CacheKey) -> Result<Vec<u8>, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a cache entry (bad header)")?;
    let (key_len, rest) = read_line(rest).ok_or("truncated entry")?;
    let key_len: usize = key_len.parse().map_err(|_| "corrupt key length")?;
    if rest.len() < key_len {
        return Err("truncated entry".into());
    }
    let (stored_key, rest) = rest.split_at(key_len);
    if stored_key != key.0.as_bytes() {
        return Err(
            "stale entry (its key differs: another source, GPU, option or compiler version)".into(),
        );
    }
    let (meta, payload) = read_line(rest).ok_or("truncated entry")?;
    let (len, sum) = meta.split_once(' ').ok_or("corrupt payload header")?;
    let len: usize = len.parse().map_err(|_| "corrupt payload length")?;
    if payload.len() != len {
        return Err(format!(
            "truncated entry ({} of {len} bytes)",
            payload.len()
        ));
    }
    if format!("{:016x}", fnv1a(payload)) != sum {
        return Err("corrupt entry (checksum mismatch)".into());
    }
    Ok(payload.to_vec())
}

fn read_line(bytes: &[u8]) -> Option<(String, &[u8])> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&bytes[..end]).ok()?.to_string();
    Some((line, &bytes[end + 1..]))
}

/// 64-bit FNV-1a: a file name and a checksum, not a security measure (the
/// whole key is compared on load).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn key(src: &str, arch: &str) -> CacheKey {
        CacheKey::new(&[("arch", arch.to_string()), ("nvrtc", "13.0".into())], src)
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fmm-cache-test-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    /// A fake compiler that counts its calls.
    fn compiler<'a>(
        calls: &'a Cell<u32>,
        out: &'a [u8],
    ) -> impl FnOnce() -> Result<Vec<u8>, Error> + 'a {
        move || {
            calls.set(calls.get() + 1);
            Ok(out.to_vec())
        }
    }

    #[test]
    fn miss_then_hit() {
        let cache = ModuleCache::at(temp_dir("hit"));
        let calls = Cell::new(0);
        let k = key("kernel A", "sm_90");
        let (m, o) = cache
            .get_or_build(&k, compiler(&calls, b"cubin A"))
            .unwrap();
        assert_eq!((m.as_slice(), o), (&b"cubin A"[..], CacheOutcome::Miss));
        let (m, o) = cache.get_or_build(&k, compiler(&calls, b"other")).unwrap();
        assert_eq!((m.as_slice(), o), (&b"cubin A"[..], CacheOutcome::Hit));
        assert_eq!(calls.get(), 1, "a hit does not compile");
    }

    #[test]
    fn every_part_of_the_key_matters() {
        let cache = ModuleCache::at(temp_dir("key"));
        let calls = Cell::new(0);
        cache
            .get_or_build(&key("kernel A", "sm_90"), compiler(&calls, b"x"))
            .unwrap();
        for k in [key("kernel B", "sm_90"), key("kernel A", "sm_80")] {
            let (_, o) = cache.get_or_build(&k, compiler(&calls, b"y")).unwrap();
            assert_eq!(o, CacheOutcome::Miss);
        }
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn corrupt_and_stale_entries_are_rebuilt() {
        let dir = temp_dir("corrupt");
        let cache = ModuleCache::at(&dir);
        let calls = Cell::new(0);
        let k = key("kernel A", "sm_90");
        cache
            .get_or_build(&k, compiler(&calls, b"good module"))
            .unwrap();
        let path = dir.join(k.file_name());

        // Flip a payload byte: the checksum catches it.
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let (m, o) = cache
            .get_or_build(&k, compiler(&calls, b"good module"))
            .unwrap();
        assert_eq!(m, b"good module");
        assert!(
            matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("checksum")),
            "{o:?}"
        );
        assert_eq!(
            cache.get_or_build(&k, compiler(&calls, b"?")).unwrap().1,
            CacheOutcome::Hit
        );

        // Truncated.
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let (_, o) = cache
            .get_or_build(&k, compiler(&calls, b"good module"))
            .unwrap();
        assert!(
            matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("truncated")),
            "{o:?}"
        );

        // Another key under the same file name (as a hash collision would be).
        let other = key("kernel Z", "sm_90");
        fs::write(&path, encode(&other, b"wrong module")).unwrap();
        let (m, o) = cache
            .get_or_build(&k, compiler(&calls, b"good module"))
            .unwrap();
        assert_eq!(m, b"good module");
        assert!(
            matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("stale")),
            "{o:?}"
        );

        // Garbage.
        fs::write(&path, b"garbage").unwrap();
        let (_, o) = cache
            .get_or_build(&k, compiler(&calls, b"good module"))
            .unwrap();
        assert!(
            matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("header")),
            "{o:?}"
        );
    }

    #[test]
    fn build_errors_pass_through_and_store_nothing() {
        let dir = temp_dir("err");
        let cache = ModuleCache::at(&dir);
        let k = key("broken", "sm_90");
        let e = cache
            .get_or_build(&k, || Err(Error::Cuda("compile failed".into())))
            .unwrap_err();
        assert_eq!(e, Error::Cuda("compile failed".into()));
        assert!(!dir.join(k.file_name()).exists());
    }

    #[test]
    fn disabled_cache_always_builds() {
        let cache = ModuleCache::disabled();
        let calls = Cell::new(0);
        let k = key("a", "sm_90");
        for _ in 0..2 {
            let (_, o) = cache.get_or_build(&k, compiler(&calls, b"m")).unwrap();
            assert_eq!(o, CacheOutcome::Disabled);
        }
        assert_eq!(calls.get(), 2);
    }
}
