//! Particles as a VTK XML PolyData file (`.vtp`) that ParaView opens:
//! the points (one vertex each), their strengths `alpha`, cores `sigma`,
//! volumes and, where given, velocities, as raw little-endian arrays
//! appended after the XML header (`header_type="UInt64"`: each array
//! preceded by its length in bytes). Written by hand rather than through
//! a crate: the format is a page of XML and the crates of the field
//! (vtkio) bring a parser and several dependencies a writer does not
//! need. Written to a temporary name and renamed when complete.

use std::io::Write;
use std::path::Path;

use crate::error::VortexError;
use crate::output::write_whole;
use crate::particles::VortexParticles;

/// Writes `p` (and the velocities `u`, one a particle, where given) to
/// `path`.
pub fn write_vtp(
    path: &Path,
    p: &VortexParticles,
    u: Option<&[[f64; 3]]>,
) -> Result<(), VortexError> {
    let n = p.len();
    if let Some(u) = u {
        if u.len() != n {
            return Err(VortexError::LengthMismatch {
                what: "the velocities written with the particles",
                got: u.len(),
                expected: n,
            });
        }
    }
    let flat = |v: &[[f64; 3]]| v.iter().flatten().copied().collect::<Vec<f64>>();
    let conn: Vec<i64> = (0..n as i64).collect();
    let offs: Vec<i64> = (1..=n as i64).collect();
    // (element, name, components, bytes)
    let mut arrays: Vec<(&str, &str, usize, Vec<u8>)> = Vec::new();
    let f64s = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let i64s = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    arrays.push(("Points", "", 3, f64s(&flat(&p.x))));
    arrays.push(("PointData", "alpha", 3, f64s(&flat(&p.alpha))));
    arrays.push(("PointData", "sigma", 1, f64s(&p.sigma)));
    arrays.push(("PointData", "volume", 1, f64s(&p.volume)));
    if let Some(u) = u {
        arrays.push(("PointData", "velocity", 3, f64s(&flat(u))));
    }
    arrays.push(("Verts", "connectivity", 1, i64s(&conn)));
    arrays.push(("Verts", "offsets", 1, i64s(&offs)));

    let mut offset = 0usize;
    let mut tag = |name: &str, comps: usize, ty: &str, bytes: usize| {
        let name = match name {
            "" => String::new(),
            s => format!(" Name=\"{s}\""),
        };
        let t = format!(
            "<DataArray type=\"{ty}\"{name} NumberOfComponents=\"{comps}\" format=\"appended\" offset=\"{offset}\"/>\n"
        );
        offset += 8 + bytes;
        t
    };
    let mut xml = String::new();
    xml.push_str("<?xml version=\"1.0\"?>\n");
    xml.push_str("<VTKFile type=\"PolyData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n<PolyData>\n");
    xml.push_str(&format!(
        "<Piece NumberOfPoints=\"{n}\" NumberOfVerts=\"{n}\" NumberOfLines=\"0\" NumberOfStrips=\"0\" NumberOfPolys=\"0\">\n"
    ));
    let mut section = "";
    for (element, name, comps, bytes) in &arrays {
        if *element != section {
            if !section.is_empty() {
                xml.push_str(&format!("</{section}>\n"));
            }
            match *element {
                "PointData" => xml.push_str("<PointData Vectors=\"alpha\" Scalars=\"sigma\">\n"),
                e => xml.push_str(&format!("<{e}>\n")),
            }
            section = element;
        }
        let ty = if *element == "Verts" {
            "Int64"
        } else {
            "Float64"
        };
        xml.push_str(&tag(name, *comps, ty, bytes.len()));
    }
    xml.push_str(&format!(
        "</{section}>\n</Piece>\n</PolyData>\n<AppendedData encoding=\"raw\">\n_"
    ));

    let io = |e: std::io::Error| VortexError::Output {
        path: path.display().to_string(),
        why: format!("writing the VTK file: {e}"),
    };
    write_whole(path, |f| {
        f.write_all(xml.as_bytes())?;
        for (_, _, _, bytes) in &arrays {
            f.write_all(&(bytes.len() as u64).to_le_bytes())?;
            f.write_all(bytes)?;
        }
        f.write_all(b"\n</AppendedData>\n</VTKFile>\n")
    })
    .map_err(io)
}
