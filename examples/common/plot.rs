//! The Plummer example's PNG: three panels against time (relative energy
//! drift, virial ratio, Lagrangian radii).
//!
//! plotters draws into an RGB buffer and `png` encodes it. No system fonts
//! are needed: the text is drawn by ab_glyph with an ASCII subset of DejaVu
//! Sans (13 kB, Bitstream Vera license, `fonts/LICENSE-DejaVu.txt`) embedded
//! in the binary.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::PathElement;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle, RGBColor};
use std::error::Error;
use std::path::Path;

/// ASCII (and a few symbols) of DejaVu Sans 2.37 (Debian's fonts-dejavu-core),
/// made with
/// `pyftsubset DejaVuSans.ttf --unicodes=U+0020-007E,U+00B0-00B3,U+00D7,U+2013,U+2014,U+2212,U+2248
///  --no-hinting --desubroutinize --legacy-kern --drop-tables+=MATH,GSUB,FFTM`.
const FONT: &[u8] = include_bytes!("fonts/DejaVuSans-subset.ttf");

/// Size of the PNG in pixels.
pub const WIDTH: u32 = 900;
pub const HEIGHT: u32 = 1200;

/// One report of the run.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub t: f64,
    /// (E - E0) / |E0|; drawn as its absolute value.
    pub drift: f64,
    /// 2T / |W|.
    pub virial: f64,
    /// Radii holding 10, 50 and 90% of the mass.
    pub lagrangian: [f64; 3],
}

const BLUE_: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN_: RGBColor = RGBColor(44, 160, 44);
const GREY: RGBColor = RGBColor(110, 110, 110);
const GRID: RGBColor = RGBColor(205, 205, 205);
const LIGHT_GRID: RGBColor = RGBColor(240, 240, 240);

/// Makes the embedded font plotters' "sans-serif" (again: cheap, and
/// idempotent).
fn register() -> Result<(), Box<dyn Error>> {
    register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the embedded font does not parse".into())
}

/// `lo..hi` widened by `pad` of its length on each side, and made non-empty.
fn padded(lo: f64, hi: f64, pad: f64) -> std::ops::Range<f64> {
    let span = hi - lo;
    if span > 0.0 {
        lo - pad * span..hi + pad * span
    } else {
        let d = if lo != 0.0 { 0.05 * lo.abs() } else { 0.05 };
        lo - d..hi + d
    }
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// Draws the three panels of `samples` (in time order) into the PNG `path`;
/// `title` goes on top.
pub fn plot_plummer(path: &Path, title: &str, samples: &[Sample]) -> Result<(), Box<dyn Error>> {
    if samples.is_empty() {
        return Err("nothing to plot".into());
    }
    register()?;
    let mut rgb = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    draw(&mut rgb, title, samples)?;
    write_png(path, &rgb, WIDTH, HEIGHT)
}

fn draw(rgb: &mut [u8], title: &str, samples: &[Sample]) -> Result<(), Box<dyn Error>> {
    let root = BitMapBackend::with_buffer(rgb, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let panels = root.split_evenly((3, 1));

    let (t0, t1) = min_max(samples.iter().map(|s| s.t)).ok_or("no finite time")?;
    let t_range = padded(t0, t1, 0.0);
    let caption = ("sans-serif", 20);
    let labels = ("sans-serif", 15);

    // Energy drift, log scale; zeros (t = 0) cannot be drawn and are left out.
    let drift: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (s.t, s.drift.abs()))
        .filter(|&(_, d)| d > 0.0 && d.is_finite())
        .collect();
    let (lo, hi) = min_max(drift.iter().map(|p| p.1)).unwrap_or((1e-16, 1e-15));
    let decades =
        10f64.powf(lo.log10().floor())..10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let mut chart = ChartBuilder::on(&panels[0])
        .caption("Relative energy drift |E - E0| / |E0|", caption)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(75)
        .build_cartesian_2d(t_range.clone(), decades.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("t (Henon units)")
        .y_desc("|dE / E0|")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .label_style(labels)
        .axis_desc_style(labels)
        .bold_line_style(GRID)
        .light_line_style(LIGHT_GRID)
        .draw()?;
    chart
        .draw_series(LineSeries::new(drift, BLUE_.stroke_width(2)))?
        .label("|dE / E0|")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE_.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;

    // Virial ratio, with the equilibrium value 1.
    let (lo, hi) = min_max(samples.iter().map(|s| s.virial).chain([1.0])).unwrap_or((0.9, 1.1));
    let mut chart = ChartBuilder::on(&panels[1])
        .caption("Virial ratio 2T / |W|", caption)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(75)
        .build_cartesian_2d(t_range.clone(), padded(lo, hi, 0.15))?;
    chart
        .configure_mesh()
        .x_desc("t (Henon units)")
        .y_desc("2T / |W|")
        .y_label_formatter(&|v| format!("{v:.3}"))
        .label_style(labels)
        .axis_desc_style(labels)
        .bold_line_style(GRID)
        .light_line_style(LIGHT_GRID)
        .draw()?;
    chart
        .draw_series(DashedLineSeries::new(
            [(t_range.start, 1.0), (t_range.end, 1.0)],
            8,
            6,
            GREY.stroke_width(2),
        ))?
        .label("equilibrium (1)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], GREY.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            samples.iter().map(|s| (s.t, s.virial)),
            ORANGE.stroke_width(2),
        ))?
        .label("2T / |W|")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], ORANGE.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;

    // Lagrangian radii.
    let (_, hi) = min_max(samples.iter().flat_map(|s| s.lagrangian)).unwrap_or((0.0, 1.0));
    let mut chart = ChartBuilder::on(&panels[2])
        .caption("Lagrangian radii", caption)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(75)
        .build_cartesian_2d(t_range, 0.0..(1.15 * hi).max(1e-3))?;
    chart
        .configure_mesh()
        .x_desc("t (Henon units)")
        .y_desc("radius")
        .y_label_formatter(&|v| format!("{v:.2}"))
        .label_style(labels)
        .axis_desc_style(labels)
        .bold_line_style(GRID)
        .light_line_style(LIGHT_GRID)
        .draw()?;
    for (k, (name, color)) in [("10% of the mass", BLUE_), ("50%", ORANGE), ("90%", GREEN_)]
        .into_iter()
        .enumerate()
    {
        chart
            .draw_series(LineSeries::new(
                samples.iter().map(|s| (s.t, s.lagrangian[k])),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::MiddleRight)?;

    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Width and height from the IHDR chunk, after checking the signature.
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&bytes[12..16], b"IHDR");
        let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
        (be(16), be(20))
    }

    fn plot_to_bytes(name: &str, samples: &[Sample]) -> Vec<u8> {
        let path = std::env::temp_dir().join(format!("{name}-{}.png", std::process::id()));
        plot_plummer(&path, "test", samples).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    #[test]
    fn writes_a_png_of_the_expected_size() {
        let samples: Vec<Sample> = (0..20)
            .map(|i| {
                let t = 0.25 * i as f64;
                Sample {
                    t,
                    drift: 1e-6 * t * (1.0 + t.sin()),
                    virial: 1.0 + 0.01 * t.cos(),
                    lagrangian: [0.4, 0.77, 1.9].map(|r| r * (1.0 + 0.01 * t.sin())),
                }
            })
            .collect();
        let bytes = plot_to_bytes("plummer-plot-test", &samples);
        assert_eq!(png_size(&bytes), (WIDTH, HEIGHT));

        // It decodes, and more than the background is drawn.
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!((info.width, info.height), (WIDTH, HEIGHT));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let inked = rgb.chunks(3).filter(|p| p != &[255, 255, 255]).count();
        assert!(inked > 10_000, "only {inked} pixels drawn");
    }

    #[test]
    fn one_sample_with_no_drift_still_plots() {
        let s = Sample {
            t: 0.0,
            drift: 0.0,
            virial: 1.0,
            lagrangian: [0.4, 0.77, 1.9],
        };
        let bytes = plot_to_bytes("plummer-plot-one", &[s]);
        assert_eq!(png_size(&bytes), (WIDTH, HEIGHT));
        let none: &[Sample] = &[];
        assert!(plot_plummer(Path::new("unused.png"), "", none).is_err());
    }
}

/// One report of the vortex ring.
#[derive(Clone, Copy, Debug)]
pub struct RingSample {
    pub t: f64,
    /// The centre of its impulse along the axis.
    pub z: f64,
    /// That centre's speed.
    pub speed: f64,
}

/// Draws the ring's position and speed against time (`samples`, in time
/// order) beside the formula's speed `formula` (and the line it moves on
/// from the first position), into the PNG `path`.
pub fn plot_ring(
    path: &Path,
    title: &str,
    samples: &[RingSample],
    formula: f64,
) -> Result<(), Box<dyn Error>> {
    let (first, last) = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err("nothing to plot".into()),
    };
    let panels = [
        Panel {
            caption: "Position of the impulse's centre along the axis".into(),
            y: "Z".into(),
            lines: vec![
                (
                    "particles".into(),
                    samples.iter().map(|s| (s.t, s.z)).collect(),
                ),
                (
                    "Saffman's speed from Z(0)".into(),
                    samples
                        .iter()
                        .map(|s| (s.t, first.z + formula * (s.t - first.t)))
                        .collect(),
                ),
            ],
        },
        Panel {
            caption: "Speed of the impulse's centre".into(),
            y: "dZ/dt".into(),
            lines: vec![
                (
                    "particles".into(),
                    samples.iter().map(|s| (s.t, s.speed)).collect(),
                ),
                (
                    "Saffman (1970)".into(),
                    vec![(first.t, formula), (last.t, formula)],
                ),
            ],
        },
    ];
    plot_panels(path, title, &panels)
}

/// `rgb` as a PNG at `path`, written whole or not at all
/// ([`fmm_vortex::output::write_whole`]).
fn write_png(path: &Path, rgb: &[u8], w: u32, h: u32) -> Result<(), Box<dyn Error>> {
    fmm_vortex::output::write_whole(path, |file| {
        let mut encoder = png::Encoder::new(file, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder
            .write_header()
            .and_then(|mut writer| writer.write_image_data(rgb).and_then(|_| writer.finish()))
            .map_err(std::io::Error::other)
    })?;
    Ok(())
}

/// One panel of [`plot_panels`]: its caption, its y axis' name, and its
/// lines (a label and the points of each).
pub struct Panel {
    pub caption: String,
    pub y: String,
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// Panels stacked in one PNG at `path`, each of lines against time (the
/// vortex examples' plots), `title` on top.
pub fn plot_panels(path: &Path, title: &str, panels: &[Panel]) -> Result<(), Box<dyn Error>> {
    stacked(path, title, panels, 400, |panel, area| {
        let colours = [BLUE_, ORANGE, GREEN_, GREY];
        let points = || panel.lines.iter().flat_map(|l| l.1.iter().copied());
        let (t0, t1) = min_max(points().map(|p| p.0)).ok_or("no finite time")?;
        let (lo, hi) = min_max(points().map(|p| p.1)).ok_or("no finite value")?;
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(75)
            .build_cartesian_2d(padded(t0, t1, 0.0), padded(lo, hi, 0.05))?;
        axes(&mut chart, "t", &panel.y)?;
        for ((label, line), &c) in panel.lines.iter().zip(colours.iter().cycle()) {
            chart
                .draw_series(LineSeries::new(line.iter().copied(), c.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        Ok(())
    })
}

/// One panel of [`plot_points`]: its caption, its axes' names and ranges,
/// and its sets of points (a label and the points of each, drawn as
/// single pixels, later sets over earlier).
pub struct PointPanel {
    pub caption: String,
    pub x: (String, std::ops::Range<f64>),
    pub y: (String, std::ops::Range<f64>),
    pub sets: Vec<(String, Vec<(f64, f64)>)>,
}

/// Panels of points stacked in one PNG at `path` (snapshots of particles:
/// the brown-out's dust and wake), `title` on top.
pub fn plot_points(path: &Path, title: &str, panels: &[PointPanel]) -> Result<(), Box<dyn Error>> {
    stacked(path, title, panels, 450, |panel, area| {
        let colours = [ORANGE, BLUE_, GREEN_, GREY];
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(panel.x.1.clone(), panel.y.1.clone())?;
        axes(&mut chart, &panel.x.0, &panel.y.0)?;
        for ((label, set), &c) in panel.sets.iter().zip(colours.iter().cycle()) {
            chart
                .draw_series(set.iter().map(|&p| Pixel::new(p, c)))?
                .label(label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 8, y + 4)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// One PNG at `path` of `panels` stacked, `height` pixels each, `title`
/// on top, each drawn by `draw` into its area.
fn stacked<T>(
    path: &Path,
    title: &str,
    panels: &[T],
    height: u32,
    draw: impl Fn(&T, &DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), Box<dyn Error>>,
) -> Result<(), Box<dyn Error>> {
    register()?;
    let (w, h) = (WIDTH, height * panels.len() as u32);
    let mut rgb = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let areas = root.split_evenly((panels.len(), 1));
        for (panel, area) in panels.iter().zip(&areas) {
            draw(panel, area)?;
        }
        root.present()?;
    }
    write_png(path, &rgb, w, h)
}

type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's axes, named `x` and `y`, with the plots' grid.
fn axes(chart: &mut Chart<'_, '_>, x: &str, y: &str) -> Result<(), Box<dyn Error>> {
    let labels = ("sans-serif", 15);
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .label_style(labels)
        .axis_desc_style(labels)
        .bold_line_style(GRID)
        .light_line_style(LIGHT_GRID)
        .draw()?;
    Ok(())
}

/// A panel's legend at `at` (on linear or log axes).
fn legend<'b, CT: CoordTranslate>(
    chart: &mut ChartContext<'b, BitMapBackend<'b>, CT>,
    at: SeriesLabelPosition,
) -> Result<(), Box<dyn Error>> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// One line of [`plot_spectra`]: its label, its points `(k, E(k))`
/// (those not positive are left out), its colour (an index into the
/// four) and whether it is dashed (a reference's).
pub struct SpectrumLine {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub colour: usize,
    pub dashed: bool,
}

/// Energy spectra on log-log axes in one PNG at `path` (the turbulence
/// cases' `E(k)` at several times, as the papers plot them), `title` on
/// top and `caption` over the panel.
pub fn plot_spectra(
    path: &Path,
    title: &str,
    caption: &str,
    lines: &[SpectrumLine],
) -> Result<(), Box<dyn Error>> {
    let positive = |p: &(f64, f64)| p.0 > 0.0 && p.1 > 0.0 && p.1.is_finite();
    let all = || {
        lines
            .iter()
            .flat_map(|l| l.points.iter().copied().filter(positive))
    };
    let (k0, k1) = min_max(all().map(|p| p.0)).ok_or("no spectrum to plot")?;
    let (e0, e1) = min_max(all().map(|p| p.1)).ok_or("no spectrum to plot")?;
    // Ten decades below the peak at most: the tails of a resolved
    // spectrum fall to round-off.
    let e0 = e0.max(e1 * 1e-10);
    let kept = |l: &SpectrumLine| -> Vec<(f64, f64)> {
        l.points
            .iter()
            .copied()
            .filter(|p| positive(p) && p.1 >= e0)
            .collect()
    };
    stacked(path, title, &[()], 700, |_, area| {
        let colours = [BLUE_, ORANGE, GREEN_, GREY];
        let labels = ("sans-serif", 15);
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(75)
            .build_cartesian_2d((k0..k1).log_scale(), (e0 / 2.0..e1 * 2.0).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("k")
            .y_desc("E(k)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .label_style(labels)
            .axis_desc_style(labels)
            .bold_line_style(GRID)
            .light_line_style(LIGHT_GRID)
            .draw()?;
        for l in lines {
            let c = colours[l.colour % colours.len()];
            let style = c.stroke_width(2);
            let drawn = if l.dashed {
                chart.draw_series(DashedLineSeries::new(kept(l), 8, 5, style))?
            } else {
                chart.draw_series(LineSeries::new(kept(l), style))?
            };
            drawn
                .label(l.label.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
        Ok(())
    })
}
