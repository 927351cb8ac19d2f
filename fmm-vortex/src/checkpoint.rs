//! Checkpoints a run resumes from bit for bit: the particles, the time
//! and step, and what the time integration carries between steps
//! (Adams-Bashforth's last rates), in one binary file written to a
//! temporary name and renamed when complete, so an interrupted write
//! leaves the last checkpoint as it was and no file that looks complete.
//!
//! Format (little-endian): the magic `FMMVORTX`, the format version
//! (u32), the kernel's name, the step (u64), the time (f64), the scheme
//! (u8), the last rates (u8 present, then the step length and 6 n f64),
//! the particle count n (u64), then x, alpha (3 n f64 each), sigma and
//! the volumes (n f64 each), and last an FNV-1a hash (u64) of everything
//! before it: a file cut short or changed is refused by name.

use std::io::Write;
use std::path::Path;

use crate::error::VortexError;
use crate::integrate::{Scheme, Stepper};
use crate::output::write_whole;
use crate::particles::VortexParticles;
use crate::passive::{Motion, Passive, Pickup};
use crate::rotor::{Rotor, Trailer, Wake};

const MAGIC: &[u8; 8] = b"FMMVORTX";
const VERSION: u32 = 1;
/// The kernel the rates are summed with: a checkpoint of another is
/// refused.
const KERNEL: &str = "VelocityStretching";

/// A run's state at a step.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub step: u64,
    pub time: f64,
    pub particles: VortexParticles,
    pub stepper: Stepper,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn scheme_tag(s: Scheme) -> u8 {
    match s {
        Scheme::Ab2 => 0,
        Scheme::Rk2 => 1,
        Scheme::Rk3 => 2,
        Scheme::Rk4 => 3,
    }
}

fn io_error(path: &Path, e: std::io::Error) -> VortexError {
    VortexError::Checkpoint {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

impl Checkpoint {
    /// Writes the checkpoint to `path` ([`write_whole`]: by `path` with
    /// `.part` added, renamed when written and synced).
    pub fn save(&self, path: &Path) -> Result<(), VortexError> {
        let p = &self.particles;
        let n = p.len();
        let mut b = Vec::with_capacity(64 + 8 * 14 * n);
        head(&mut b, MAGIC);
        b.extend(self.step.to_le_bytes());
        b.extend(self.time.to_le_bytes());
        b.push(scheme_tag(self.stepper.scheme));
        match &self.stepper.last {
            Some((rates, _)) if rates.len() != 6 * n => {
                return Err(VortexError::Checkpoint {
                    path: path.display().to_string(),
                    why: format!(
                        "the stepper carries {} values of state, not the {} of the particles' positions and strengths (a stepper that moves passive particles too: checkpoints hold the vortex particles only)",
                        rates.len(),
                        6 * n
                    ),
                });
            }
            Some((rates, dt)) => {
                b.push(1);
                b.extend(dt.to_le_bytes());
                b.extend((rates.len() as u64).to_le_bytes());
                rates.iter().for_each(|v| b.extend(v.to_le_bytes()));
            }
            None => b.push(0),
        }
        b.extend((n as u64).to_le_bytes());
        for v in
            p.x.iter()
                .chain(&p.alpha)
                .flatten()
                .chain(&p.sigma)
                .chain(&p.volume)
        {
            b.extend(v.to_le_bytes());
        }
        seal(path, b)
    }

    /// Reads the checkpoint at `path`: a file of another format, another
    /// kernel, cut short or changed is refused, saying which.
    pub fn load(path: &Path) -> Result<Self, VortexError> {
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        let shown = path.display().to_string();
        let mut r = open(&bytes, MAGIC, "vortex", &shown)?;
        let body_len = r.b.len();
        let bad = |why: String| VortexError::Checkpoint {
            path: shown.clone(),
            why,
        };
        let step = r.u64()?;
        let time = r.f64()?;
        let scheme = match r.take(1)?[0] {
            0 => Scheme::Ab2,
            1 => Scheme::Rk2,
            2 => Scheme::Rk3,
            3 => Scheme::Rk4,
            t => return Err(bad(format!("an unknown scheme {t}"))),
        };
        let mut stepper = Stepper::new(scheme);
        if r.take(1)?[0] == 1 {
            let dt = r.f64()?;
            let m = r.u64()? as usize;
            stepper.last = Some((r.f64s(m)?, dt));
        }
        let n = r.u64()? as usize;
        let triples = |v: Vec<f64>| v.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
        let x = triples(r.f64s(3 * n)?);
        let alpha = triples(r.f64s(3 * n)?);
        let sigma = r.f64s(n)?;
        let volume = r.f64s(n)?;
        if r.at != body_len {
            return Err(bad(format!("{} bytes past its particles", body_len - r.at)));
        }
        Ok(Checkpoint {
            step,
            time,
            particles: VortexParticles::new(x, alpha, sigma, volume)?,
            stepper,
        })
    }
}

/// A checkpoint's head: its magic, the format version, the kernel.
fn head(b: &mut Vec<u8>, magic: &[u8; 8]) {
    b.extend(magic);
    b.extend(VERSION.to_le_bytes());
    b.extend((KERNEL.len() as u32).to_le_bytes());
    b.extend(KERNEL.as_bytes());
}

/// `b` with its hash written whole to `path` ([`write_whole`]: by `path`
/// with `.part` added, renamed when written and synced).
fn seal(path: &Path, mut b: Vec<u8>) -> Result<(), VortexError> {
    let hash = fnv1a(&b);
    b.extend(hash.to_le_bytes());
    write_whole(path, |f| f.write_all(&b)).map_err(|e| io_error(path, e))
}

/// The fields after the head of a checkpoint's `bytes` (read from
/// `path`): a file of another kind, format or kernel, cut short or
/// changed is refused, saying which.
fn open<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    what: &str,
    path: &'a str,
) -> Result<Reader<'a>, VortexError> {
    let bad = |why: String| VortexError::Checkpoint {
        path: path.to_string(),
        why,
    };
    if bytes.len() < magic.len() + 8 || &bytes[..8] != magic {
        return Err(bad(format!(
            "not a {what} checkpoint (its magic is not {})",
            String::from_utf8_lossy(magic)
        )));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 8);
    if fnv1a(body).to_le_bytes() != tail {
        return Err(bad("its hash does not match: cut short or changed".into()));
    }
    let mut r = Reader {
        b: body,
        at: 8,
        path,
    };
    let version = u32::from_le_bytes(r.take(4)?.try_into().expect("4"));
    if version != VERSION {
        return Err(bad(format!(
            "format version {version}, this build reads {VERSION}"
        )));
    }
    let len = u32::from_le_bytes(r.take(4)?.try_into().expect("4")) as usize;
    let kernel = String::from_utf8_lossy(r.take(len)?).into_owned();
    if kernel != KERNEL {
        return Err(bad(format!("made with the kernel {kernel}, not {KERNEL}")));
    }
    Ok(r)
}

/// Reads a checkpoint's fields in turn; running out is an error.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    path: &'a str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, k: usize) -> Result<&'a [u8], VortexError> {
        let end = self.at.checked_add(k).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(VortexError::Checkpoint {
                path: self.path.to_string(),
                why: "shorter than its fields say".into(),
            });
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, VortexError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    fn f64(&mut self) -> Result<f64, VortexError> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    fn f64s(&mut self, k: usize) -> Result<Vec<f64>, VortexError> {
        let raw = self.take(k.saturating_mul(8))?;
        Ok(raw
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8")))
            .collect())
    }

    fn triples(&mut self, k: usize) -> Result<Vec<[f64; 3]>, VortexError> {
        let v = self.f64s(3 * k)?;
        Ok(v.chunks(3).map(|c| [c[0], c[1], c[2]]).collect())
    }

    fn byte(&mut self) -> Result<u8, VortexError> {
        Ok(self.take(1)?[0])
    }
}

/// Appends `values` to `b`, little-endian.
fn put(b: &mut Vec<u8>, values: impl IntoIterator<Item = f64>) {
    for v in values {
        b.extend(v.to_le_bytes());
    }
}

/// `FMMWAKE2`: the rotor's loading by panels (`FMMWAKE1` had one
/// circulation; its files are refused as another kind).
const WAKE_MAGIC: &[u8; 8] = b"FMMWAKE2";

/// A brown-out run's state at a step: the rotor and its wake, and the
/// dust (`Wake::step_with_dust` carries nothing else between steps), in
/// the same framing as [`Checkpoint`] (magic `FMMWAKE2`, version, kernel,
/// the fields, an FNV-1a hash; written whole or not at all).
#[derive(Clone, Debug, PartialEq)]
pub struct WakeCheckpoint {
    pub step: u64,
    pub wake: Wake,
    pub dust: Passive,
}

impl WakeCheckpoint {
    /// Writes the checkpoint to `path`, whole or not at all.
    pub fn save(&self, path: &Path) -> Result<(), VortexError> {
        let (w, q) = (&self.wake, &self.dust);
        let r = &w.rotor;
        let mut b = Vec::with_capacity(256 + 56 * w.nodes() + 56 * q.len());
        head(&mut b, WAKE_MAGIC);
        b.extend(self.step.to_le_bytes());
        b.extend((r.blades as u64).to_le_bytes());
        b.extend((r.per_step as u64).to_le_bytes());
        put(&mut b, [r.radius, r.omega]);
        put(&mut b, r.hub);
        put(&mut b, [r.root, r.core, w.time, w.laid]);
        b.extend((r.circulation.len() as u64).to_le_bytes());
        put(&mut b, r.circulation.iter().copied());
        b.extend((w.trailers.len() as u64).to_le_bytes());
        for t in &w.trailers {
            b.extend((t.blade as u64).to_le_bytes());
            b.extend((t.nodes.len() as u64).to_le_bytes());
            put(&mut b, [t.radius, t.circulation]);
            put(&mut b, t.nodes.iter().flatten().copied());
            put(&mut b, t.born.iter().copied());
        }
        match q.motion {
            Motion::Tracer => b.push(0),
            Motion::Inertial {
                response_time,
                gravity,
            } => {
                b.push(1);
                put(&mut b, [response_time]);
                put(&mut b, gravity);
            }
        }
        b.push(u8::from(q.ground.is_some()));
        put(&mut b, [q.ground.unwrap_or(0.0)]);
        b.push(u8::from(q.pickup.is_some()));
        let k = q.pickup.unwrap_or(Pickup {
            reference_height: 0.0,
            roughness: 0.0,
            threshold: 0.0,
            launch: 0.0,
        });
        put(
            &mut b,
            [k.reference_height, k.roughness, k.threshold, k.launch],
        );
        b.extend((q.lifted as u64).to_le_bytes());
        b.extend((q.len() as u64).to_le_bytes());
        put(&mut b, q.x.iter().chain(&q.v).flatten().copied());
        seal(path, b)
    }

    /// Reads the checkpoint at `path`: another kind of file, another
    /// format or kernel, a file cut short or changed, or values a rotor
    /// or dust may not have are refused, saying which.
    pub fn load(path: &Path) -> Result<Self, VortexError> {
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        let shown = path.display().to_string();
        let mut r = open(&bytes, WAKE_MAGIC, "rotor wake", &shown)?;
        let step = r.u64()?;
        let (blades, per_step) = (r.u64()? as usize, r.u64()? as usize);
        let (radius, omega) = (r.f64()?, r.f64()?);
        let hub = [r.f64()?, r.f64()?, r.f64()?];
        let [root, core, time, laid] = [0; 4].map(|_| r.f64());
        let panels = r.u64()? as usize;
        let rotor = Rotor {
            blades,
            radius,
            omega,
            hub,
            circulation: r.f64s(panels)?,
            root: root?,
            core: core?,
            per_step,
        };
        rotor.check()?;
        let trailers = (0..r.u64()?)
            .map(|_| {
                let (blade, n) = (r.u64()? as usize, r.u64()? as usize);
                let (radius, circulation) = (r.f64()?, r.f64()?);
                Ok(Trailer {
                    nodes: r.triples(n)?,
                    born: r.f64s(n)?,
                    circulation,
                    blade,
                    radius,
                })
            })
            .collect::<Result<Vec<_>, VortexError>>()?;
        let motion = match r.byte()? {
            0 => Motion::Tracer,
            _ => Motion::Inertial {
                response_time: r.f64()?,
                gravity: [r.f64()?, r.f64()?, r.f64()?],
            },
        };
        let ground = (r.byte()? == 1, r.f64()?);
        let pickup = (r.byte()? == 1, [0; 4].map(|_| r.f64()));
        let lifted = r.u64()? as usize;
        let n = r.u64()? as usize;
        let x = r.triples(n)?;
        let v = if matches!(motion, Motion::Inertial { .. }) {
            r.triples(n)?
        } else {
            Vec::new()
        };
        if r.at != r.b.len() {
            return Err(VortexError::Checkpoint {
                path: shown.clone(),
                why: format!("{} bytes past its dust", r.b.len() - r.at),
            });
        }
        let [h, z, t, l] = pickup.1;
        let dust = Passive {
            x,
            v,
            motion,
            ground: ground.0.then_some(ground.1),
            pickup: pickup.0.then_some(Pickup {
                reference_height: h?,
                roughness: z?,
                threshold: t?,
                launch: l?,
            }),
            lifted,
        };
        dust.check()?;
        Ok(WakeCheckpoint {
            step,
            wake: Wake {
                rotor,
                trailers,
                time: time?,
                laid: laid?,
            },
            dust,
        })
    }
}
