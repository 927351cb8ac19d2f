//! A flow in a periodic box by vortex particles, beside the spectral
//! solver (`fmm_vortex::spectral`) started from the same field at the
//! same resolution: the loop the Taylor-Green and the turbulence examples
//! share.
//!
//! The particles sit on the spectral solver's `n^3` grid points (the
//! cell centres of a box shifted by half a spacing), strengths the
//! solver's vorticity times the cell's volume, cores of `--overlap`
//! spacings, their sums by the front door in the periodic box. Every
//! `--every` steps the particles' velocity on the grid (targets that are
//! not sources) gives their kinetic energy `K`, set beside the spectral
//! field's smoothed by the particles' Gaussian cores (what the blobs
//! represent of it) and its own, and `-dK/dt` of each; at the end the
//! energy spectra `E(k)`.
//!
//! By default the particles are remeshed onto the grid every step (M4';
//! van Rees, Leonard and Pullin 2011 remesh every step), the lattice's
//! vorticity made divergence-free there and diffused there exactly
//! (`fmm_vortex::remesh::LatticeFilter`; the cores keep their size).
//! `--remesh-every 0 --viscous spread --no-project` is the plain blob
//! method with core spreading, which lasts only while the particles keep
//! their lattice.

use std::error::Error;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use fmm_core::Domain;
use fmm_vortex::grid::write_vti;
use fmm_vortex::output::write_whole;
use fmm_vortex::remesh::{
    filter_lattice, interpolate_on_lattice, lattice_energy, remesh, Lattice, LatticeFilter,
};
use fmm_vortex::spectral::{passot_pouquet, spectrum_of, SpectralNs};
use fmm_vortex::{spread_cores, Checkpoint, Precision, Scheme, Solver, Stepper};
use indicatif::{ProgressBar, ProgressStyle};

use super::plot::{plot_panels, plot_spectra, Panel, SpectrumLine};
use super::Backend;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Prec {
    F32,
    F64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Strengths whose blobs give the vorticity at the grid points
    /// (`remesh::interpolate_on_lattice`; yokota2009): compared with the
    /// spectral field itself.
    Interpolate,
    /// Strengths the vorticity times the cell's volume: the blobs carry
    /// it smoothed by their cores, compared with the spectral field
    /// smoothed the same way.
    Sample,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Viscous {
    /// The cores widen as `sqrt(sigma^2 + 2 nu t)`.
    Spread,
    /// The lattice's vorticity diffused exactly at each remeshing.
    Lattice,
}

/// The settings of a run, shared by the examples' command lines.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The particles' strengths from the spectral field's vorticity.
    #[arg(long, value_enum, default_value = "interpolate")]
    pub init: Init,
    /// The particles' cores in grid spacings.
    #[arg(long, default_value_t = 1.0)]
    pub overlap: f64,
    /// Remesh the particles onto the grid every this many steps (M4',
    /// `fmm_vortex::remesh`); 0: never.
    #[arg(long, default_value_t = 1)]
    pub remesh_every: usize,
    /// Leave the lattice's vorticity as the remeshing gives it (by
    /// default it is made divergence-free there).
    #[arg(long)]
    pub no_project: bool,
    /// Viscosity by diffusing the lattice's vorticity at each remeshing
    /// (the cores kept) or by core spreading.
    #[arg(long, value_enum, default_value = "lattice")]
    pub viscous: Viscous,
    /// The particles alone, the spectral solver not stepped (its columns
    /// blank): a timing run.
    #[arg(long)]
    pub no_spectral: bool,
    /// Steps between the diagnostics.
    #[arg(long, default_value_t = 5)]
    pub every: usize,
    #[arg(long, default_value_t = 1e-4)]
    pub tol: f64,
    /// The particles' precision in the sums at `--tol`.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Prec,
    /// Sum by the f64 direct sum of the periodic box (the Ewald sum)
    /// instead: small `n` only.
    #[arg(long)]
    pub f64: bool,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// PNG plot; `none` for no plot.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// The time series (CSV).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write the particles' velocity on the grid at the end here.
    #[arg(long)]
    pub vti: Option<PathBuf>,
    /// Write the particles where the run ended (or stopped) here, as a
    /// checkpoint (`fmm_vortex::Checkpoint`).
    #[arg(long)]
    pub save: Option<PathBuf>,
}

/// Decaying isotropic turbulence's initial field (yokota2009 section 5):
/// a solenoidal velocity with random phases and the Passot-Pouquet
/// spectrum `E(k) ~ (k/kp)^4 exp(-2 (k/kp)^2)` in a periodic box of side
/// 2 pi, scaled to `K = 3/2 u'^2`. Both turbulence examples take it.
#[derive(clap::Args, Debug)]
pub struct Isotropic {
    /// Particles (and spectral grid points) a side.
    #[arg(long, default_value_t = 32)]
    pub n: usize,
    /// The spectrum's peak wavenumber (the box is 2 pi a side).
    #[arg(long, default_value_t = 3.0)]
    pub kp: f64,
    /// The initial r.m.s. velocity of one component, u'.
    #[arg(long, default_value_t = 1.0)]
    pub u_rms: f64,
    #[arg(long, default_value_t = 0.01)]
    pub nu: f64,
    /// The random phases' seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl Isotropic {
    /// The field on the spectral solver's grid (the same seed, the same
    /// field on every process).
    pub fn field(&self) -> Result<SpectralNs, Box<dyn Error>> {
        let side = std::f64::consts::TAU;
        let shape = |k: f64| passot_pouquet(k, self.kp);
        let unit = SpectralNs::isotropic(self.n, side, self.nu, shape, self.seed)?;
        // Made once: the energy is the coefficients' squares'.
        let scale = 1.5 * self.u_rms * self.u_rms / unit.energy();
        Ok(unit.scaled(scale.sqrt()))
    }
}

/// What a run is: its name (the files' default stem), its title, the
/// viscosity, the step and the end, and the unit its times are shown in
/// (`(1.0, "t")`, or an eddy turnover time and `"t/T"`).
pub struct Case {
    pub name: &'static str,
    pub title: String,
    pub nu: f64,
    pub dt: f64,
    pub t_end: f64,
    pub unit: (f64, &'static str),
}

/// The spectral solver's diagnostics at one of the particles' diagnostic
/// steps.
struct SpectralView {
    /// `K` smoothed by the particles' cores (the reference), and its own.
    smoothed: f64,
    energy: f64,
    /// `nu <|omega|^2>`.
    dissipation: f64,
    /// `E(k)` smoothed and its own.
    spectra: (Vec<f64>, Vec<f64>),
}

/// The spectral solver stepped beside the particles.
///
/// At 128^3 a spectral step takes seconds on the host, as long as a
/// particle step on a GPU, so the two run side by side: the solver on a
/// thread of its own with its own rayon pool, sending its diagnostics at
/// the particles' diagnostic steps through a channel of one place (it
/// runs at most one interval ahead). The run's wall time is then the
/// slower side's, not the sum. `stop` ends it early (the particles
/// stopped); the handle gives the seconds spent stepping and the steps.
struct SpectralBeside {
    views: Receiver<Result<SpectralView, String>>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(f64, usize)>,
}

impl SpectralBeside {
    fn start(
        mut spectral: SpectralNs,
        steps: usize,
        every: usize,
        dt: f64,
        smooth: f64,
    ) -> Result<Self, Box<dyn Error>> {
        let (tx, views) = sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let pool = rayon::ThreadPoolBuilder::new().build()?;
        let handle = std::thread::spawn(move || {
            pool.install(|| {
                let (mut seconds, mut done) = (0.0, 0);
                for step in 0..=steps {
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    if step % every == 0 || step == steps {
                        let view = SpectralView {
                            smoothed: spectral.smoothed_energy(smooth),
                            energy: spectral.energy(),
                            dissipation: spectral.dissipation(),
                            spectra: (spectral.smoothed_spectrum(smooth), spectral.spectrum()),
                        };
                        if tx.send(Ok(view)).is_err() {
                            break;
                        }
                    }
                    if step < steps {
                        let clock = Instant::now();
                        // The particles' step in as many of the solver's
                        // as keep its Courant number under 0.8 (RK4's
                        // bound for a spectral advection is 2.8 / pi).
                        let parts = (dt / spectral.stable_dt(0.8)).ceil().max(1.0);
                        for _ in 0..parts as usize {
                            if let Err(e) = spectral.step(dt / parts) {
                                let _ = tx.send(Err(e.to_string()));
                                return (seconds, done);
                            }
                        }
                        seconds += clock.elapsed().as_secs_f64();
                        done += 1;
                    }
                }
                (seconds, done)
            })
        });
        Ok(SpectralBeside {
            views,
            stop,
            handle,
        })
    }

    /// The next diagnostics (blocks until the solver has them).
    fn next(&self) -> Result<SpectralView, Box<dyn Error>> {
        match self.views.recv() {
            Ok(view) => Ok(view?),
            Err(_) => Err("the spectral solver's thread ended early".into()),
        }
    }

    /// Stops the solver; its seconds a particle step.
    fn finish(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.views);
        match self.handle.join() {
            Ok((seconds, done)) => seconds / done.max(1) as f64,
            Err(_) => f64::NAN,
        }
    }
}

/// Runs `case` from the spectral solver's field `spectral` (its grid, box
/// and time zero).
pub fn run(args: &RunArgs, case: &Case, spectral: SpectralNs) -> Result<(), Box<dyn Error>> {
    if args.viscous == Viscous::Lattice && args.remesh_every == 0 {
        return Err(
            "--viscous lattice diffuses at the remeshings: give --remesh-every, or --viscous spread"
                .into(),
        );
    }
    let (n, side, nu) = (spectral.n(), spectral.side(), case.nu);
    let h = side / n as f64;
    // The spectral grid's points are this box's cell centres.
    let (mut p, pbox, grid) = spectral.lattice_particles(args.overlap)?;
    // The reference: the spectral field, or smoothed as the blobs are.
    let smooth = match args.init {
        Init::Interpolate => {
            interpolate_on_lattice(&mut p, &pbox, n)?;
            0.0
        }
        Init::Sample => args.overlap * h,
    };
    let solver = if args.f64 {
        Solver::direct_f64(args.backend.core())
    } else {
        let s = Solver::f32_at(args.backend.core(), args.tol);
        match args.precision {
            Prec::F32 => s,
            Prec::F64 => Solver {
                precision: Precision::F64,
                ..s
            },
        }
    }
    .in_domain(Domain::Periodic(pbox));
    let energy = |u: &[Vec<f64>; 3]| -> f64 {
        (0..u[0].len())
            .map(|i| u[0][i] * u[0][i] + u[1][i] * u[1][i] + u[2][i] * u[2][i])
            .sum::<f64>()
            * 0.5
            / u[0].len() as f64
    };
    let steps = (case.t_end / case.dt).round() as usize;
    let (unit, tname) = case.unit;
    println!(
        "{}: {n}^3 particles (strengths by {:?}, cores {} spacings; remeshed every {} steps, {}projected; viscosity by {:?}) against a {n}^3 spectral solver, AB2 and RK4, dt {:.4}, {steps} steps, sums {}",
        case.title,
        args.init,
        args.overlap,
        args.remesh_every,
        if args.no_project { "not " } else { "" },
        args.viscous,
        case.dt,
        if args.f64 {
            "f64 direct (Ewald)".to_string()
        } else {
            format!("at {:e} ({:?})", args.tol, args.precision)
        }
    );
    println!(
        "{tname:>6} {:>10} {:>10} {:>9} {:>10} {:>10} {:>11} {:>11} {:>11}  sums (last step)",
        "K vortex",
        "K ref",
        "dK/K",
        "K spectral",
        "K lattice",
        "-dK/dt vtx",
        "-dK/dt ref",
        "eps spec"
    );
    println!("(K lattice: the energy of the velocity whose curl the particles' lattice carries, unsmoothed by the cores, where they fill it)");
    if smooth > 0.0 {
        println!("(ref: the spectral field smoothed by the particles' Gaussian cores, what they represent of it)");
    } else {
        println!("(ref: the spectral field)");
    }
    let stem = PathBuf::from(case.name);
    let csv_path = args.csv.clone().unwrap_or(stem.with_extension("csv"));
    let mut stepper = Stepper::new(Scheme::Ab2);
    let every = args.every.max(1);
    let beside = if args.no_spectral {
        None
    } else {
        Some(SpectralBeside::start(
            spectral, steps, every, case.dt, smooth,
        )?)
    };
    // The spectral solver's last diagnostics, taken at the particles'.
    let mut view: Option<SpectralView> = None;
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let mut csv = String::from(
        "t,k_vortex,k_reference,k_spectral,k_lattice,eps_vortex,eps_reference,eps_spectral\n",
    );
    let (mut kv, mut ks, mut kt, mut ev, mut es, mut et) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut last, mut worst, mut device) = (None::<(f64, f64, f64)>, 0.0f64, String::new());
    // The last step's sums: their estimated error and settings.
    let mut achieved = String::new();
    let (mut t_vortex, mut t_remesh) = (0.0, 0.0);
    let mut u = solver.velocity_on(&p, &grid)?;
    // E(k) of both at each diagnostic: (t in the case's unit, the
    // particles', the reference's).
    let mut spectra: Vec<(f64, Vec<f64>, Vec<f64>)> = vec![];
    // An evaluation that cannot meet the tolerance stops the run: what
    // was made is written, then the error said.
    let mut stopped = None;
    let mut done = 0;
    // Whether the particles sit on the lattice, one a point (at the start
    // and after each remeshing).
    let mut on_lattice = true;
    for step in 0..=steps {
        let t = step as f64 * case.dt;
        if step % every == 0 || step == steps {
            u = match solver.velocity_on(&p, &grid) {
                Ok(u) => u,
                Err(e) => {
                    stopped = Some((t, e));
                    break;
                }
            };
            if let Some(b) = &beside {
                view = Some(b.next()?);
            }
            let (k_v, k_s, k_t, eps_t) = match &view {
                None => (energy(&u), f64::NAN, f64::NAN, f64::NAN),
                Some(v) => (energy(&u), v.smoothed, v.energy, v.dissipation),
            };
            spectra.push((
                t / unit,
                spectrum_of(&u, n)?,
                view.as_ref()
                    .map_or_else(|| vec![f64::NAN; n], |v| v.spectra.0.clone()),
            ));
            let k_l = if on_lattice {
                lattice_energy(&p, &pbox, n)?
            } else {
                f64::NAN
            };
            let rel = k_v / k_s - 1.0;
            if rel.is_finite() {
                worst = worst.max(rel.abs());
            }
            // -dK/dt of both by the difference since the last.
            let (eps_v, eps_s) = last.map_or((f64::NAN, f64::NAN), |(t0, v0, s0)| {
                ((v0 - k_v) / (t - t0), (s0 - k_s) / (t - t0))
            });
            // The plot's times in the case's unit, its rates per unit.
            let tu = t / unit;
            if let Some((t0, _, _)) = last {
                ev.push((0.5 * (t0 + t) / unit, eps_v));
                es.push((0.5 * (t0 + t) / unit, eps_s));
            }
            last = Some((t, k_v, k_s));
            kv.push((tu, k_v));
            ks.push((tu, k_s));
            kt.push((tu, k_t));
            et.push((tu, eps_t));
            csv.push_str(&format!(
                "{t},{k_v},{k_s},{k_t},{k_l},{eps_v},{eps_s},{eps_t}\n"
            ));
            // The series so far, marked as such: a run cut short keeps
            // it, and no file of a run that did not end looks whole.
            write_whole(&csv_path, |f| {
                f.write_all(csv.as_bytes())?;
                writeln!(f, "# running: to t = {t} of {}", case.t_end)
            })?;
            bar.suspend(|| {
                println!(
                    "{tu:6.2} {k_v:10.6} {k_s:10.6} {rel:9.1e} {k_t:10.6} {k_l:10.6} {eps_v:11.3e} {eps_s:11.3e} {eps_t:11.3e}  {achieved}"
                )
            });
        }
        if step < steps {
            let clock = Instant::now();
            let r = match stepper.step_particles(&mut p, case.dt, |s| solver.rates(s)) {
                Ok(r) => r,
                Err(e) => {
                    stopped = Some((t, e));
                    break;
                }
            };
            if args.viscous == Viscous::Spread {
                spread_cores(&mut p, nu, case.dt)?;
            }
            done += 1;
            on_lattice = false;
            if args.remesh_every > 0 && done % args.remesh_every == 0 {
                let clock = Instant::now();
                p = remesh(&p, &Lattice::Periodic { pbox, n }, 0.0)?;
                let filter = LatticeFilter {
                    project: !args.no_project,
                    diffuse: match args.viscous {
                        Viscous::Spread => 0.0,
                        Viscous::Lattice => nu * case.dt * args.remesh_every as f64,
                    },
                };
                filter_lattice(&mut p, &pbox, n, filter)?;
                on_lattice = p.len() == n * n * n;
                // Adams-Bashforth's last rates belong to the old particles.
                stepper.restart();
                t_remesh += clock.elapsed().as_secs_f64();
            }
            t_vortex += clock.elapsed().as_secs_f64();
            device.clone_from(&r.device);
            if let Some(a) = &r.achieved {
                achieved = format!(
                    "{:.1e} {} p {} theta {}",
                    a.estimated_error, a.method, a.settings.p, a.settings.theta
                );
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let t_spectral = beside.map_or(f64::NAN, SpectralBeside::finish);
    let reached = kv.last().map_or(0.0, |l| l.0);
    println!(
        "K within {worst:.1e} of the reference's to {tname} = {reached:.3}; {:.3} s a particle step ({:.3} s the rates, on {device}; {:.3} s the remeshing with its filter), {:.3} s a spectral step (on a thread beside them)",
        t_vortex / done.max(1) as f64,
        (t_vortex - t_remesh) / done.max(1) as f64,
        t_remesh / done.max(1) as f64,
        t_spectral
    );
    // Both at the last diagnostic step.
    let e_v = spectrum_of(&u, n)?;
    let (e_s, e_t) = view.map_or((vec![f64::NAN; n], vec![f64::NAN; n]), |v| v.spectra);
    println!("E(k) at {tname} = {reached:.3}:");
    println!(
        "{:>4} {:>11} {:>11} {:>8} {:>11}",
        "k", "vortex", "ref", "ratio", "spectral"
    );
    for k in 1..n / 2 {
        // Shells the spectral field leaves empty have no ratio.
        let ratio = if e_s[k] > 1e-20 {
            format!("{:8.4}", e_v[k] / e_s[k])
        } else {
            format!("{:>8}", "-")
        };
        println!(
            "{k:4} {:11.4e} {:11.4e} {ratio} {:11.4e}",
            e_v[k], e_s[k], e_t[k]
        );
    }
    if let Some((t, e)) = &stopped {
        // The series is whole to where the run stopped, and says so.
        csv.push_str(&format!("# stopped at t = {t}: {e}\n"));
    }
    write_whole(&csv_path, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", csv_path.display());
    let spectra_csv = csv_path.with_file_name(format!(
        "{}_spectra.csv",
        csv_path
            .file_stem()
            .map_or("spectra".into(), |s| s.to_string_lossy())
    ));
    write_whole(&spectra_csv, |f| {
        writeln!(f, "t,k,e_vortex,e_reference")?;
        for (tu, e_v, e_r) in &spectra {
            for k in 1..n / 2 {
                writeln!(f, "{},{k},{},{}", tu * unit, e_v[k], e_r[k])?;
            }
        }
        Ok(())
    })?;
    println!("spectra at each diagnostic in {}", spectra_csv.display());
    if let Some(path) = &args.vti {
        write_vti(path, &grid, &[("velocity", &u)])?;
        println!("the particles' velocity on the grid in {}", path.display());
    }
    let plot = args.plot.clone().unwrap_or(stem.with_extension("png"));
    if plot.as_os_str() != "none" {
        let panels = [
            Panel {
                caption: format!("Kinetic energy against {tname}"),
                y: "K".into(),
                lines: if smooth > 0.0 {
                    vec![
                        ("vortex particles".into(), kv),
                        ("spectral, smoothed by the cores".into(), ks),
                        ("spectral".into(), kt),
                    ]
                } else {
                    vec![("vortex particles".into(), kv), ("spectral".into(), kt)]
                },
            },
            Panel {
                caption: format!("Dissipation rate -dK/dt against {tname}"),
                y: "epsilon".into(),
                lines: vec![
                    ("vortex particles".into(), ev),
                    ("spectral (-dK/dt)".into(), es),
                    ("spectral (nu <|omega|^2>)".into(), et),
                ],
            },
        ];
        plot_panels(&plot, &case.title, &panels)?;
        println!("plot in {}", plot.display());
        // E(k) at the start, the middle and the end, log-log.
        let path = plot.with_file_name(format!(
            "{}_spectra.png",
            plot.file_stem()
                .map_or("spectra".into(), |s| s.to_string_lossy())
        ));
        let mut lines = vec![];
        let picked = [0, spectra.len() / 2, spectra.len().saturating_sub(1)];
        for (colour, &i) in picked.iter().enumerate() {
            let Some((tu, e_v, e_r)) = spectra.get(i) else {
                continue;
            };
            let points = |e: &[f64]| -> Vec<(f64, f64)> {
                e.iter()
                    .enumerate()
                    .skip(1)
                    .take(n / 2 - 1)
                    .map(|(k, &v)| (k as f64, v))
                    .collect()
            };
            lines.push(SpectrumLine {
                label: format!("vortex particles, {tname} = {tu:.2}"),
                points: points(e_v),
                colour,
                dashed: false,
            });
            lines.push(SpectrumLine {
                label: format!(
                    "spectral{}, {tname} = {tu:.2}",
                    if smooth > 0.0 { " (smoothed)" } else { "" }
                ),
                points: points(e_r),
                colour,
                dashed: true,
            });
        }
        plot_spectra(
            &path,
            &case.title,
            "Energy spectra E(k): particles (solid), spectral solver (dashed)",
            &lines,
        )?;
        println!("spectra in {}", path.display());
    }
    if let Some(path) = &args.save {
        let at = Checkpoint {
            step: done as u64,
            time: done as f64 * case.dt,
            particles: p.clone(),
            stepper: stepper.clone(),
        };
        at.save(path)?;
        println!("the particles at t = {} in {}", at.time, path.display());
    }
    match stopped {
        Some((t, e)) => {
            println!(
                "the run stopped at t = {t:.3}, before its end at {}",
                case.t_end
            );
            Err(e.into())
        }
        None => Ok(()),
    }
}
