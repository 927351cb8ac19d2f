//! The VTK file holds what was written: its header's counts and offsets
//! read back, each appended array's length and values.

use fmm_vortex::*;

#[test]
fn a_vtp_file_holds_the_particles_at_its_offsets() {
    let p = Ring::line(1.0, 1.0, 0.2, 7).particles().unwrap();
    let u: Vec<[f64; 3]> = (0..7).map(|i| [i as f64, 0.5, -1.0]).collect();
    let dir = std::env::temp_dir().join(format!("fmm-vortex-vtk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ring.vtp");
    write_vtp(&path, &p, Some(&u)).unwrap();
    assert!(!dir.join("ring.vtp.part").exists());
    let bytes = std::fs::read(&path).unwrap();
    let start = bytes.windows(2).position(|w| w == b"\n_").unwrap() + 2;
    let header = String::from_utf8_lossy(&bytes[..start]).into_owned();
    assert!(
        header.contains("NumberOfPoints=\"7\" NumberOfVerts=\"7\""),
        "{header}"
    );
    // Each array at the offset its tag names: its length, then its values.
    let read = |name: &str| -> Vec<f64> {
        let at = header.find(&format!("Name=\"{name}\"")).unwrap();
        let tail = &header[at..];
        let o = tail.find("offset=\"").unwrap() + 8;
        let offset: usize = tail[o..o + tail[o..].find('"').unwrap()].parse().unwrap();
        let b = &bytes[start + offset..];
        let len = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
        b[8..8 + len]
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let alpha: Vec<f64> = p.alpha.iter().flatten().copied().collect();
    assert_eq!(read("alpha"), alpha);
    assert_eq!(read("sigma"), p.sigma);
    assert_eq!(
        read("velocity"),
        u.iter().flatten().copied().collect::<Vec<_>>()
    );
    assert!(bytes.ends_with(b"</AppendedData>\n</VTKFile>\n"));
    let e = write_vtp(&path, &p, Some(&u[..3])).unwrap_err().to_string();
    assert!(e.contains("velocities"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
