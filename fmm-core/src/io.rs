//! Particle sets in and out: NumPy `.npy` files and CSV.
//!
//! A particle table has one row per particle and named columns: `x`, `y`,
//! `z`, then the kernel's fields by slot name (`m`; `alpha_x`, `alpha_y`,
//! `alpha_z`; `sigma` ...). CSV carries the names in its header row, in any
//! order; a `.npy` file is a 2-D float64 or float32 array whose columns are
//! `x, y, z` and then the slots in declaration order. Outputs are written
//! the same way (`phi`, `acc_x` ...). Every malformed file is an error that
//! says what is wrong and where.

use std::path::Path;

use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use crate::Outputs;

/// Named columns of numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub names: Vec<String>,
    /// One vector per column.
    pub columns: Vec<Vec<f64>>,
}

fn io_err(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {what}", path.display()))
}

impl Table {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.len())
    }

    fn column(&self, name: &str, path: &Path) -> Result<&[f64], Error> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|k| self.columns[k].as_slice())
            .ok_or_else(|| {
                io_err(
                    path,
                    format!(
                        "no column `{name}` (the columns are: {})",
                        self.names.join(", ")
                    ),
                )
            })
    }

    /// Reads `.npy` (by extension) or CSV. A `.npy` file's columns get the
    /// names `default_names` (or `c0, c1 ...` beyond them).
    pub fn read(path: &Path, default_names: &[String]) -> Result<Table, Error> {
        let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
        if path.extension().is_some_and(|e| e == "npy") {
            let (rows, cols, data) = parse_npy(&bytes).map_err(|e| io_err(path, e))?;
            let names = (0..cols)
                .map(|k| {
                    default_names
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| format!("c{k}"))
                })
                .collect();
            let columns = (0..cols)
                .map(|k| (0..rows).map(|r| data[r * cols + k]).collect())
                .collect();
            Ok(Table { names, columns })
        } else {
            let text = String::from_utf8(bytes).map_err(|_| io_err(path, "not UTF-8 text"))?;
            parse_csv(&text).map_err(|e| io_err(path, e))
        }
    }

    /// Writes `.npy` (float64, by extension) or CSV with a header row.
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        let bytes = if path.extension().is_some_and(|e| e == "npy") {
            write_npy(self)
        } else {
            let mut s = self.names.join(",");
            s.push('\n');
            for r in 0..self.rows() {
                let row: Vec<String> = self.columns.iter().map(|c| format!("{:?}", c[r])).collect();
                s.push_str(&row.join(","));
                s.push('\n');
            }
            s.into_bytes()
        };
        std::fs::write(path, bytes).map_err(|e| io_err(path, e))
    }
}

/// The column names of kernel `K`'s sources (or targets): `x, y, z`, then
/// the slots.
pub fn column_names<K: Kernel>(sources: bool) -> Vec<String> {
    let def = K::def();
    let fields = if sources { &def.sources } else { &def.targets };
    let mut names: Vec<String> = ["x", "y", "z"].map(String::from).to_vec();
    names.extend(fields.iter().flat_map(|f| f.slot_names()));
    names
}

/// Reads sources (`sources = true`) or targets of kernel `K` from a file.
pub fn read_particles<K: Kernel, R: Real>(
    path: &Path,
    sources: bool,
) -> Result<Particles<R>, Error> {
    let table = Table::read(path, &column_names::<K>(sources))?;
    let [x, y, z] = ["x", "y", "z"].map(|c| table.column(c, path));
    let (x, y, z) = (x?, y?, z?);
    let pos: Vec<[R; 3]> = (0..table.rows())
        .map(|i| [R::c(x[i]), R::c(y[i]), R::c(z[i])])
        .collect();
    let mut p = if sources {
        Particles::sources::<K>(&pos)?
    } else {
        Particles::targets::<K>(&pos)?
    };
    let def = K::def();
    for f in if sources { &def.sources } else { &def.targets } {
        let names = f.slot_names();
        if names.len() == 1 {
            let v: Vec<R> = table
                .column(&names[0], path)?
                .iter()
                .map(|&v| R::c(v))
                .collect();
            p.set(&f.name, &v)?;
        } else {
            let cols = names
                .iter()
                .map(|n| table.column(n, path))
                .collect::<Result<Vec<_>, _>>()?;
            let v: Vec<[R; 3]> = (0..table.rows())
                .map(|i| [0, 1, 2].map(|c| R::c(cols[c][i])))
                .collect();
            p.set_vec3(&f.name, &v)?;
        }
    }
    Ok(p)
}

/// Writes outputs, one column per slot (`phi`, `acc_x` ...), in the
/// targets' order.
pub fn write_outputs<R: Real>(
    path: &Path,
    out: &Outputs<R>,
    names: &[String],
) -> Result<(), Error> {
    let table = Table {
        names: names.to_vec(),
        columns: out
            .slots()
            .iter()
            .map(|s| s.iter().map(|v| v.to_f64()).collect())
            .collect(),
    };
    table.write(path)
}

fn parse_csv(text: &str) -> Result<Table, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let (_, header) = lines
        .next()
        .ok_or("empty file: expected a header row of column names")?;
    let names: Vec<String> = header.split(',').map(|s| s.trim().to_string()).collect();
    if names.iter().any(|n| n.parse::<f64>().is_ok()) {
        return Err("the first row must name the columns (x,y,z,...), but it holds numbers".into());
    }
    let mut columns = vec![Vec::new(); names.len()];
    for (lineno, line) in lines {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.len() != names.len() {
            return Err(format!(
                "line {}: {} values, but the header names {} columns",
                lineno + 1,
                cells.len(),
                names.len()
            ));
        }
        for (k, cell) in cells.iter().enumerate() {
            let v: f64 = cell.trim().parse().map_err(|_| {
                format!(
                    "line {}, column `{}`: `{}` is not a number",
                    lineno + 1,
                    names[k],
                    cell.trim()
                )
            })?;
            columns[k].push(v);
        }
    }
    Ok(Table { names, columns })
}

/// Parses a C-ordered 2-D (or 1-D) float64/float32 `.npy` array: (rows,
/// columns, row-major data).
fn parse_npy(b: &[u8]) -> Result<(usize, usize, Vec<f64>), String> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic bytes)".into());
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    let header = b.get(start..start + hlen).ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(header).map_err(|_| ".npy header is not text")?;
    let field = |key: &str| -> Option<&str> {
        let i = header.find(&format!("'{key}'"))?;
        let rest = &header[i + key.len() + 2..];
        Some(rest[rest.find(':')? + 1..].trim_start())
    };
    let descr = field("descr").ok_or(".npy header has no descr")?;
    let size = if descr.starts_with("'<f8'") {
        8
    } else if descr.starts_with("'<f4'") {
        4
    } else {
        return Err(format!(
            "dtype {} is not supported: use little-endian float64 or float32",
            descr.split(',').next().unwrap_or("")
        ));
    };
    if field("fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err(
            "Fortran-ordered arrays are not supported: save with np.ascontiguousarray".into(),
        );
    }
    let shape = field("shape").ok_or(".npy header has no shape")?;
    let inner =
        &shape[shape.find('(').ok_or("bad shape")? + 1..shape.find(')').ok_or("bad shape")?];
    let dims: Vec<usize> = inner
        .split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape ({inner})"))
        })
        .collect::<Result<_, _>>()?;
    let (rows, cols) = match dims.as_slice() {
        [r] => (*r, 1),
        [r, c] => (*r, *c),
        _ => {
            return Err(format!(
                "expected a 2-D array (particles x columns), got shape ({inner})"
            ))
        }
    };
    let data = &b[start + hlen..];
    if data.len() != rows * cols * size {
        return Err(format!(
            "expected {} bytes of data for shape ({inner}), found {}",
            rows * cols * size,
            data.len()
        ));
    }
    let values = if size == 8 {
        data.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    } else {
        data.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64)
            .collect()
    };
    Ok((rows, cols, values))
}

fn write_npy(t: &Table) -> Vec<u8> {
    let (rows, cols) = (t.rows(), t.columns.len());
    let mut header =
        format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + length (2) + header + newline: a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for r in 0..rows {
        for c in &t.columns {
            out.extend_from_slice(&c[r].to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            names: vec!["x".into(), "y".into(), "z".into(), "m".into()],
            columns: vec![
                vec![0.5, 1.0],
                vec![-2.0, 3.25],
                vec![1e-300, 7.0],
                vec![0.1, 0.2],
            ],
        }
    }

    #[test]
    fn npy_and_csv_round_trip() {
        let dir = std::env::temp_dir().join(format!("fmm-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = table();
        for name in ["p.npy", "p.csv"] {
            let path = dir.join(name);
            t.write(&path).unwrap();
            assert_eq!(Table::read(&path, &t.names).unwrap(), t, "{name}");
        }
    }

    #[test]
    fn malformed_files_say_what_is_wrong() {
        assert!(parse_npy(b"hello world").unwrap_err().contains("magic"));
        let mut npy = write_npy(&table());
        npy.truncate(npy.len() - 3);
        assert!(parse_npy(&npy).unwrap_err().contains("bytes of data"));
        let e = parse_csv("x,y,z\n1,2,oops\n").unwrap_err();
        assert_eq!(e, "line 2, column `z`: `oops` is not a number");
        let e = parse_csv("x,y,z\n1,2\n").unwrap_err();
        assert!(
            e.contains("2 values, but the header names 3 columns"),
            "{e}"
        );
        assert!(parse_csv("1,2,3\n")
            .unwrap_err()
            .contains("name the columns"));
        let mut ints = write_npy(&table());
        let at = ints.windows(3).position(|w| w == b"<f8").unwrap();
        ints[at + 1] = b'i';
        assert!(parse_npy(&ints).unwrap_err().contains("not supported"));
    }
}
