//! The flow on a uniform grid (yokota2012 section 4.3): the velocity the
//! particles induce at the grid's points (targets that are not sources,
//! one evaluation), its energy spectrum by FFT
//! ([`crate::spectral::spectrum_of`]) and a VTK ImageData file of it that
//! ParaView opens.

use std::io::Write;
use std::path::Path;

use crate::error::VortexError;
use crate::output::write_whole;
use crate::particles::VortexParticles;
use crate::rates::Solver;

/// `n^3` points `origin + side (i, j, l) / n` (x fastest): a periodic
/// box's grid when `origin` and `side` are the box's, the spectral
/// solver's points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub origin: [f64; 3],
    pub side: f64,
    pub n: usize,
}

impl Grid {
    /// The spacing.
    pub fn spacing(&self) -> f64 {
        self.side / self.n as f64
    }

    /// The points, x fastest.
    pub fn points(&self) -> Vec<[f64; 3]> {
        let (n, h, o) = (self.n, self.spacing(), self.origin);
        (0..n * n * n)
            .map(|i| {
                [
                    o[0] + (i % n) as f64 * h,
                    o[1] + ((i / n) % n) as f64 * h,
                    o[2] + (i / (n * n)) as f64 * h,
                ]
            })
            .collect()
    }

    fn check(&self) -> Result<(), VortexError> {
        if self.n == 0 || !(self.side.is_finite() && self.side > 0.0) {
            return Err(VortexError::BadSetting {
                what: "the grid's side",
                value: self.side,
                why: "must be finite and positive, with at least one point a side",
            });
        }
        Ok(())
    }
}

impl Solver {
    /// The velocity the particles `p` induce at the points of `grid`, one
    /// array per component (x fastest).
    pub fn velocity_on(
        &self,
        p: &VortexParticles,
        grid: &Grid,
    ) -> Result<[Vec<f64>; 3], VortexError> {
        grid.check()?;
        let u = self.velocity_at(p, &grid.points())?.u;
        Ok([0, 1, 2].map(|c| u.iter().map(|v| v[c]).collect()))
    }
}

/// Writes the vector fields `fields` (a name and three components on the
/// grid's points each) to `path` as VTK XML ImageData (`.vti`), raw
/// little-endian arrays appended, written whole or not at all.
pub fn write_vti(
    path: &Path,
    grid: &Grid,
    fields: &[(&str, &[Vec<f64>; 3])],
) -> Result<(), VortexError> {
    grid.check()?;
    let n = grid.n;
    let points = n * n * n;
    let mut xml = String::new();
    let h = grid.spacing();
    let [ox, oy, oz] = grid.origin;
    xml.push_str("<?xml version=\"1.0\"?>\n");
    xml.push_str("<VTKFile type=\"ImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n");
    let extent = format!("0 {m} 0 {m} 0 {m}", m = n - 1);
    xml.push_str(&format!(
        "<ImageData WholeExtent=\"{extent}\" Origin=\"{ox} {oy} {oz}\" Spacing=\"{h} {h} {h}\">\n<Piece Extent=\"{extent}\">\n"
    ));
    let first = fields.first().map_or("", |f| f.0);
    xml.push_str(&format!("<PointData Vectors=\"{first}\">\n"));
    let mut blocks = Vec::with_capacity(fields.len());
    let mut offset = 0usize;
    for (name, v) in fields {
        if let Some(c) = v.iter().find(|c| c.len() != points) {
            return Err(VortexError::LengthMismatch {
                what: "a field written on the grid",
                got: c.len(),
                expected: points,
            });
        }
        let bytes: Vec<u8> = (0..points)
            .flat_map(|i| [v[0][i], v[1][i], v[2][i]])
            .flat_map(|x| x.to_le_bytes())
            .collect();
        xml.push_str(&format!(
            "<DataArray type=\"Float64\" Name=\"{name}\" NumberOfComponents=\"3\" format=\"appended\" offset=\"{offset}\"/>\n"
        ));
        offset += 8 + bytes.len();
        blocks.push(bytes);
    }
    xml.push_str("</PointData>\n</Piece>\n</ImageData>\n<AppendedData encoding=\"raw\">\n_");
    let io = |e: std::io::Error| VortexError::Output {
        path: path.display().to_string(),
        why: format!("writing the VTK file: {e}"),
    };
    write_whole(path, |f| {
        f.write_all(xml.as_bytes())?;
        for b in &blocks {
            f.write_all(&(b.len() as u64).to_le_bytes())?;
            f.write_all(b)?;
        }
        f.write_all(b"\n</AppendedData>\n</VTKFile>\n")
    })
    .map_err(io)
}
