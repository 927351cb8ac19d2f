//! The domain floor: where the particles live, and what that asks of every
//! method. Free space, a periodic box (periodic along all three axes, two
//! (a slab) or one (a wire)), or the half-space above a plane wall
//! ([`Wall`], by mirror images); the box's checks, the wrapping of
//! positions into it, its lattice of images and the statement of the
//! boundary at infinity are here once, below every method.
//!
//! Conventions (the README's "Periodic boxes" says them to users):
//! - The box is a cube `[origin, origin + side)^3`. Along a periodic axis a
//!   position outside it is wrapped into it (the sum is the same for every
//!   lattice image of a particle, so the outputs do not change); along an
//!   open axis a position must lie inside it (the expansions of the images
//!   need the cell to hold its particles), else an error names it.
//! - The sum is over every image of every source: `sum_n sum_j k(x_i - x_j -
//!   n side)`, `n` over the periodic axes' integers, the source's own image
//!   `n = 0` on a target dropping out as in free space.
//! - Three periodic axes: a Laplace-family sum of a cell with a dipole is
//!   only conditionally convergent and the boundary at infinity says which
//!   value it takes ([`Boundary`]). One or two periodic axes: the sum of
//!   neutral cells converges over growing squares or lines and needs no
//!   boundary choice.
//! - A cell's summed strength must vanish (neutral charges, zero-mean
//!   vorticity) for the lattice sum to exist; otherwise an error, unless a
//!   uniform neutralising background is asked for
//!   ([`PeriodicBox::with_background`]).

use rayon::prelude::*;

use crate::error::Error;

mod moments;
mod wall;
pub use moments::{Moments, NEUTRAL};
pub use wall::Wall;

/// The region the particles live in.
///
/// Every method takes the domain from the problem; a method that cannot run
/// a domain says so, naming what can.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Domain {
    /// Open space: every source interacts with every target once.
    #[default]
    FreeSpace,
    /// A periodic box: every source and all its lattice images.
    Periodic(PeriodicBox),
    /// The half-space above a plane wall: every source and its mirror
    /// image, each source field's image even or odd as the wall says.
    Wall(Wall),
}

impl Domain {
    /// The box, where the domain is periodic.
    pub fn periodic(&self) -> Option<&PeriodicBox> {
        match self {
            Domain::Periodic(b) => Some(b),
            _ => None,
        }
    }

    /// The wall, where the domain is a half-space.
    pub fn wall(&self) -> Option<&Wall> {
        match self {
            Domain::Wall(w) => Some(w),
            _ => None,
        }
    }

    /// Checks the domain's own values (a finite box of positive side).
    pub fn check(&self) -> Result<(), Error> {
        match self {
            Domain::FreeSpace => Ok(()),
            Domain::Periodic(b) => b.check(),
            Domain::Wall(w) => w.check(),
        }
    }

    /// A short name for errors and logs.
    pub fn name(&self) -> String {
        match self {
            Domain::FreeSpace => "free space".into(),
            Domain::Periodic(b) => b.name(),
            Domain::Wall(w) => format!("half-space above the {}", w.name()),
        }
    }
}

/// The boundary at infinity of a box periodic along all three axes: which
/// value the conditionally convergent lattice sum of a cell with a dipole
/// moment `D` takes (de Leeuw, Perram and Smith 1980).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Boundary {
    /// Conducting surroundings (Ewald's sum without its surface term): what
    /// Ewald, particle-mesh and spectral solvers give. The default.
    #[default]
    TinFoil,
    /// Vacuum surroundings: the lattice summed over growing cubes (or
    /// spheres) about the box, which is what the FMM's images add up to.
    /// Per unit strength it differs from tin foil by the surface term: the
    /// potential by `(4 pi / 3V) D . (x - c) - (2 pi / 3V) sum_j q_j |x_j -
    /// c|^2` (`c` the box's centre), the field by `-(4 pi / 3V) D`, the
    /// energy by `(2 pi / 3V) |D|^2`.
    Vacuum,
}

/// A periodic cube.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicBox {
    /// The corner of the box with the smallest coordinates.
    pub origin: [f64; 3],
    /// The side of the cube.
    pub side: f64,
    /// Which axes are periodic (all three; two: a slab; one: a wire).
    pub axes: [bool; 3],
    /// The boundary at infinity (three periodic axes only).
    pub boundary: Boundary,
    /// Levels of images the FMM and the treecode add by the tree extended
    /// outwards: the sum covers a cube of `5^levels` boxes a side (1: the box
    /// and its 124 nearest images, [`NEAR`]). `None`: chosen from the
    /// accuracy asked for.
    pub image_levels: Option<u32>,
    /// A uniform background of opposite strength that makes a cell with a
    /// net strength neutral (Ewald's convention: the `k = 0` term dropped).
    pub background: bool,
}

/// The images met box by box (by the tree methods' traversal) reach this
/// many boxes out along each periodic axis: the box and its `5^3 - 1`
/// nearest images. Farther images come by expansions of blocks of `5^3`
/// boxes, the nearest of them two boxes clear of the box, where an
/// expansion of order 20 is good to about 1e-9 (with one box clear, as a
/// `3^3` block leaves, the floor of order 20 was 2e-6 against the Ewald
/// sum).
pub const NEAR: u32 = 2;

/// The side of the blocks the image levels grow by: `2 NEAR + 1` boxes.
pub const BLOCK: u32 = 2 * NEAR + 1;

/// The most image levels: `5^9` boxes a side, where the images' sum has
/// long converged (its remainder falls about 25-fold a level) and the
/// expansions' powers of the level's size stay in f64's range.
pub const MAX_IMAGE_LEVELS: u32 = 9;

impl PeriodicBox {
    /// The cube `[origin, origin + side)^3`, periodic along every axis, tin
    /// foil at infinity, image levels chosen by the accuracy, no background.
    pub fn cube(origin: [f64; 3], side: f64) -> Self {
        PeriodicBox {
            origin,
            side,
            axes: [true; 3],
            boundary: Boundary::TinFoil,
            image_levels: None,
            background: false,
        }
    }

    /// The same box periodic along `axes` only.
    pub fn with_axes(self, axes: [bool; 3]) -> Self {
        PeriodicBox { axes, ..self }
    }

    /// The same box with the boundary at infinity `boundary`.
    pub fn with_boundary(self, boundary: Boundary) -> Self {
        PeriodicBox { boundary, ..self }
    }

    /// The same box with `levels` levels of images.
    pub fn with_image_levels(self, levels: u32) -> Self {
        PeriodicBox {
            image_levels: Some(levels),
            ..self
        }
    }

    /// The same box with a uniform neutralising background.
    pub fn with_background(self) -> Self {
        PeriodicBox {
            background: true,
            ..self
        }
    }

    /// The number of periodic axes.
    pub fn periodic_axes(&self) -> usize {
        self.axes.iter().filter(|&&a| a).count()
    }

    /// The box's centre.
    pub fn center(&self) -> [f64; 3] {
        self.origin.map(|o| o + 0.5 * self.side)
    }

    /// The box's volume.
    pub fn volume(&self) -> f64 {
        self.side.powi(3)
    }

    pub fn name(&self) -> String {
        let kind = match self.periodic_axes() {
            3 => "periodic box",
            2 => "slab",
            _ => "wire",
        };
        format!("{kind} of side {}", self.side)
    }

    /// Checks the box: a finite origin, a finite positive side, at least one
    /// periodic axis, a boundary choice and a background only where they
    /// mean something, at most [`MAX_IMAGE_LEVELS`] image levels.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::BadDomain(why));
        if let Some(a) = (0..3).find(|&a| !self.origin[a].is_finite()) {
            return bad(format!(
                "the periodic box's origin is not finite along axis {a} ({})",
                self.origin[a]
            ));
        }
        if !(self.side.is_finite() && self.side > 0.0) {
            return bad(format!(
                "the periodic box's side must be finite and positive, not {}",
                self.side
            ));
        }
        if self.periodic_axes() == 0 {
            return bad("a periodic box needs at least one periodic axis; \
                        with none, use Domain::FreeSpace"
                .into());
        }
        if self.boundary == Boundary::Vacuum && self.periodic_axes() < 3 {
            return bad(format!(
                "the vacuum boundary is a choice for three periodic axes only; the {} sum \
                 converges without one",
                self.name()
            ));
        }
        if self.background && self.periodic_axes() < 3 {
            return bad(format!(
                "a neutralising background is a choice for three periodic axes only; a {}'s \
                 cell must be neutral",
                self.name()
            ));
        }
        if let Some(l) = self.image_levels {
            if l == 0 || l > MAX_IMAGE_LEVELS {
                return bad(format!(
                    "image levels must be from 1 to {MAX_IMAGE_LEVELS}, not {l}"
                ));
            }
        }
        Ok(())
    }

    /// Positions `pos` (one vector per axis) wrapped into the box along the
    /// periodic axes; an error naming the first point outside it along an
    /// open axis.
    pub fn wrap(&self, pos: &mut [Vec<f64>; 3]) -> Result<(), Error> {
        let (o, l) = (self.origin, self.side);
        for (a, axis) in pos.iter_mut().enumerate() {
            if self.axes[a] {
                axis.par_iter_mut().for_each(|x| *x = wrap1(*x, o[a], l));
            } else if let Some(i) = axis
                .par_iter()
                .position_first(|&x| !(x >= o[a] && x <= o[a] + l))
            {
                return Err(self.outside(i, a, axis[i]));
            }
        }
        Ok(())
    }

    /// Whether a kernel's cutoff `rc` (its `cutoff` declaration's `text`,
    /// for the message) suits the minimum image: at most half the side,
    /// so a pair meets within `rc` at one image at most.
    pub fn check_cutoff(&self, rc: f64, text: &str) -> Result<(), Error> {
        if rc.is_finite() && rc >= 0.0 && rc <= 0.5 * self.side {
            return Ok(());
        }
        Err(Error::BadDomain(format!(
            "the kernel's cutoff `{text}` = {rc} is {}: the minimum image needs a cutoff of at \
             most half the side of the {} ({}); use a larger box or a shorter cutoff",
            if rc.is_finite() && rc >= 0.0 {
                "more than half the side"
            } else {
                "not a distance"
            },
            self.name(),
            0.5 * self.side
        )))
    }

    /// The error of point `i` lying at `x` off the box along its open
    /// axis `a` (said the same by the CPU's wrapping and the GPU's).
    pub fn outside(&self, i: usize, a: usize, x: f64) -> Error {
        let (o, l) = (self.origin[a], self.side);
        Error::BadDomain(format!(
            "point {i} lies outside the {} along its open axis {a} ({x} not in [{o}, {}])",
            self.name(),
            o + l
        ))
    }

    /// The lattice vectors of the box and its nearest images along the
    /// periodic axes, in units of the side: `-NEAR..=NEAR` on each periodic
    /// axis, `0` on the others; the box itself first.
    pub fn near_images(&self) -> Vec<[f64; 3]> {
        let n = NEAR as i32;
        let range = |a: usize| if self.axes[a] { -n..=n } else { 0..=0 };
        let mut v = vec![[0.0; 3]];
        for i in range(0) {
            for j in range(1) {
                for k in range(2) {
                    if (i, j, k) != (0, 0, 0) {
                        v.push([i as f64, j as f64, k as f64]);
                    }
                }
            }
        }
        v
    }

    /// The lattice shifts of `domain`'s nearest images ([`Self::near_images`]
    /// times the side), or free space's one zero shift: what a traversal
    /// or a walk meets the source tree at.
    pub fn near_shifts(domain: Option<&PeriodicBox>) -> Vec<[f64; 3]> {
        match domain {
            Some(b) => b
                .near_images()
                .iter()
                .map(|v| v.map(|x| x * b.side))
                .collect(),
            None => vec![[0.0; 3]],
        }
    }

    /// Positions `pos` of the box (wrapped into it) moved into the unit box
    /// about the origin: `(x - centre) / side`.
    pub fn to_unit(&self, pos: &mut [Vec<f64>; 3]) {
        let c = self.center();
        for (a, axis) in pos.iter_mut().enumerate() {
            axis.par_iter_mut()
                .for_each(|x| *x = (*x - c[a]) / self.side);
        }
    }

    /// The image levels for a relative error `tol`: the levels' remainder
    /// falls about 25-fold a level, from about 1e-2 at one level (random
    /// neutral charges against the Ewald sum: 7.5e-3, 3.0e-4, 1.2e-5,
    /// 4.8e-7, 1.9e-8 at 1 to 5 levels; `docs/BENCHMARKS.md`, "Periodic
    /// boxes"), with one level to spare: a level costs two translations.
    pub fn levels_for(&self, tol: f64) -> u32 {
        if let Some(l) = self.image_levels {
            return l;
        }
        let tol = tol.clamp(1e-16, 1e-2);
        let l = 2.0 + ((1e-2 / tol).ln() / 25f64.ln()).ceil();
        (l as u32).clamp(3, MAX_IMAGE_LEVELS)
    }
}

/// `x` wrapped into `[o, o + l)`.
#[inline]
pub fn wrap1(x: f64, o: f64, l: f64) -> f64 {
    let mut y = x - ((x - o) / l).floor() * l;
    // Rounding can leave `o + l` itself.
    if y >= o + l {
        y -= l;
    }
    if y < o {
        y = o;
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_lands_in_the_box_and_moves_by_whole_sides() {
        let b = PeriodicBox::cube([-1.0, 2.0, 0.5], 3.0);
        for x in [-7.3, -1.0, 1.999, 2.0, 5.0, 1e6 + 0.3, -1e-17] {
            let y = wrap1(x, -1.0, 3.0);
            assert!((-1.0..2.0).contains(&y), "{x} -> {y}");
            let k = (x - y) / 3.0;
            assert!((k - k.round()).abs() < 1e-6, "{x} -> {y}");
        }
        let mut pos = [vec![5.5], vec![2.5], vec![-2.5]];
        b.wrap(&mut pos).unwrap();
        assert_eq!(pos, [vec![-0.5], vec![2.5], vec![0.5]]);
    }

    #[test]
    fn bad_boxes_and_points_off_an_open_axis_are_named() {
        let b = PeriodicBox::cube([0.0; 3], 1.0);
        assert!(b.check().is_ok());
        for bad in [
            PeriodicBox::cube([0.0; 3], 0.0),
            PeriodicBox::cube([0.0; 3], f64::NAN),
            PeriodicBox::cube([f64::INFINITY, 0.0, 0.0], 1.0),
            b.with_axes([false; 3]),
            b.with_axes([true, true, false])
                .with_boundary(Boundary::Vacuum),
            b.with_image_levels(0),
            b.with_image_levels(MAX_IMAGE_LEVELS + 1),
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(
                e.contains("periodic") || e.contains("levels") || e.contains("vacuum"),
                "{e}"
            );
        }
        let slab = b.with_axes([true, true, false]);
        let mut pos = [vec![0.5], vec![0.5], vec![1.5]];
        let e = slab.wrap(&mut pos).unwrap_err().to_string();
        assert!(e.contains("open axis 2"), "{e}");
        assert_eq!(slab.near_images().len(), 25);
        assert_eq!(b.near_images().len(), 125);
        assert_eq!(b.near_images()[0], [0.0; 3]);
    }
}
