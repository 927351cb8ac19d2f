//! The arguments of a generated entry point, as one value: what the CUDA
//! emitters print as the parameter list, and what the host's launcher
//! (`fmm_core::cuda::launch`) walks when a method pushes the arguments.
//!
//! The parameter list and the host's pushes used to be two spellings of
//! one contract, kept in step by hand: an argument added to one and not
//! to the other shifted every later argument, and the kernel read one
//! array as another. Now a [`Signature`] is built once per entry kind from
//! the [`KernelDef`] ([`Signature::tile`], [`Signature::walk`],
//! [`Signature::p2p_list`]); the emitters print it, and the launcher
//! checks the role and the C type of every pushed argument against it
//! before the launch (CubeCL's `generate/launch.rs` builds its host
//! launcher from the same parsed signature as the kernel, for the same
//! reason). An [`EntryPoint`] adds the entry's name, module and precision.

use std::fmt;

use super::cuda::{entry_name, slots};
use super::p2p_list::p2p_list_entry_name;
use super::walk::walk_entry_name;
use super::Module;
use crate::kernel::KernelDef;

/// The two precisions every generated entry point comes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    F32,
    F64,
}

impl Precision {
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::F64];

    /// The suffix of the entry names, as `fmm_core::Real::NAME` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The C type.
    pub const fn c_type(self) -> &'static str {
        match self {
            Precision::F32 => "float",
            Precision::F64 => "double",
        }
    }

    /// The precision a suffix names (`"f32"`, `"f64"`).
    pub fn from_name(name: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The scalar type of this precision.
    pub const fn scalar(self) -> Scalar {
        match self {
            Precision::F32 => Scalar::Float,
            Precision::F64 => Scalar::Double,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of a value passed by value, or of the elements of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    Int,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    /// `T`: the entry point's precision ([`Precision`]).
    Real,
}

impl Scalar {
    /// The C spelling, with `real` for `T`.
    pub fn c_type(self, real: &str) -> &str {
        match self {
            Scalar::Int => "int",
            Scalar::LongLong => "long long",
            Scalar::UnsignedLongLong => "unsigned long long",
            Scalar::Float => "float",
            Scalar::Double => "double",
            Scalar::Real => real,
        }
    }

    /// `T` made the type of `precision`; the others as they are.
    pub fn resolve(self, precision: Precision) -> Scalar {
        match self {
            Scalar::Real => precision.scalar(),
            s => s,
        }
    }
}

/// How an argument is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pass {
    /// By value (`const int n`).
    Value,
    /// An array the entry point only reads (`const T* __restrict__ x`).
    Read,
    /// An array the entry point writes (`T* __restrict__ o`).
    Write,
}

/// The C type of an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgType {
    pub scalar: Scalar,
    pub pass: Pass,
}

impl ArgType {
    pub const fn value(scalar: Scalar) -> ArgType {
        ArgType {
            scalar,
            pass: Pass::Value,
        }
    }

    pub const fn read(scalar: Scalar) -> ArgType {
        ArgType {
            scalar,
            pass: Pass::Read,
        }
    }

    pub const fn write(scalar: Scalar) -> ArgType {
        ArgType {
            scalar,
            pass: Pass::Write,
        }
    }

    /// The type in `precision`.
    pub fn resolve(self, precision: Precision) -> ArgType {
        ArgType {
            scalar: self.scalar.resolve(precision),
            ..self
        }
    }

    /// The C type, with `real` for `T`: `const int`, `const T*`, `T*`.
    pub fn c_type(self, real: &str) -> String {
        let s = self.scalar.c_type(real);
        match self.pass {
            Pass::Value => format!("const {s}"),
            Pass::Read => format!("const {s}*"),
            Pass::Write => format!("{s}*"),
        }
    }

    /// The declaration of a parameter `name` of this type.
    pub fn declare(self, name: &str, real: &str) -> String {
        match self.pass {
            Pass::Value => format!("{} {name}", self.c_type(real)),
            Pass::Read | Pass::Write => format!("{} __restrict__ {name}", self.c_type(real)),
        }
    }
}

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.c_type("T"))
    }
}

/// What an argument is for. The arguments of one role are consecutive in
/// a signature (one run), so the host pushes each role as one group, and
/// a wrong count in a group (a slot array missing) is named as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The number of targets.
    TargetCount,
    /// Target `x, y, z`.
    TargetPositions,
    /// The target field slots, one array each.
    TargetSlots,
    /// The number of target groups.
    GroupCount,
    /// Each group's targets `begin..end` (and, for the P2P lists, its leaf).
    Groups,
    /// Each group's bounding box: `lo x, y, z`, `hi x, y, z`.
    GroupBoxes,
    /// The number of source cells.
    CellCount,
    /// The source tree's cells: children and particle ranges.
    Cells,
    /// What the opening criterion reads of a cell: the squared acceptance
    /// distance, the point it is measured from `x, y, z` (the centre of
    /// strength, or the box centre for node far fields), the box centre
    /// `x, y, z` and half-width.
    CellCriterion,
    /// Pseudo-sources per cell: 1 (a monopole at the centre of strength),
    /// or a node far field's nodes.
    PseudoSourcesPerCell,
    /// The cells' pseudo-sources: `x, y, z` (cell `c`'s `per_cell` of
    /// them from `c * per_cell` on).
    PseudoSourcePositions,
    /// The cells' pseudo-sources: the source slots.
    PseudoSourceSlots,
    /// The P2P lists: per target cell, where its list begins and ends
    /// (64-bit), and the listed source cells.
    Lists,
    /// The lattice shifts of a periodic box's images that list entries
    /// name, `x, y, z` an image (one zero shift in free space).
    ImageShifts,
    /// The number of sources.
    SourceCount,
    /// Source `x, y, z`.
    SourcePositions,
    /// The source field slots, one array each.
    SourceSlots,
    /// The kernel's parameter slots, by value.
    Params,
    /// The output slots, one array each.
    Outputs,
    /// 0: overwrite the outputs, 1: add to them.
    Accumulate,
    /// The walk's stacks and the cells each holds.
    Stacks,
    /// The walk's next group and overflow flag (ints set to 0 before the
    /// launch).
    WalkState,
    /// The 64-bit counters the entry adds its interactions to.
    Counts,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::TargetCount => "target count",
            Role::TargetPositions => "target positions",
            Role::TargetSlots => "target slots",
            Role::GroupCount => "group count",
            Role::Groups => "groups",
            Role::GroupBoxes => "group boxes",
            Role::CellCount => "cell count",
            Role::Cells => "cells",
            Role::CellCriterion => "cells' opening criterion",
            Role::PseudoSourcesPerCell => "pseudo-sources per cell",
            Role::PseudoSourcePositions => "pseudo-source positions",
            Role::PseudoSourceSlots => "pseudo-source slots",
            Role::Lists => "P2P lists",
            Role::ImageShifts => "image shifts",
            Role::SourceCount => "source count",
            Role::SourcePositions => "source positions",
            Role::SourceSlots => "source slots",
            Role::Params => "parameters",
            Role::Outputs => "outputs",
            Role::Accumulate => "accumulate flag",
            Role::Stacks => "walk stacks",
            Role::WalkState => "walk state",
            Role::Counts => "interaction counts",
        })
    }
}

/// One argument of an entry point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    pub name: String,
    pub ty: ArgType,
    pub role: Role,
}

/// The arguments of an entry point, in order, with `T` for its precision.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Signature {
    args: Vec<Arg>,
}

impl Signature {
    /// The tiled all-pairs sum (`fmm_codegen::emit::cuda`): `n_targets`,
    /// target `x, y, z` and slots; `n_sources`, source `x, y, z` and
    /// slots; the parameters; the outputs; `accumulate` (0: overwrite the
    /// outputs, 1: add to them, for sources split in chunks). Every slot
    /// is an array of its own (structure of arrays), passed even when the
    /// kernel does not read it.
    pub fn tile(def: &KernelDef) -> Signature {
        let mut s = Signature::default();
        s.targets(def);
        s.int(Role::SourceCount, "n_sources");
        for a in ["x", "y", "z"] {
            s.read(Role::SourcePositions, Scalar::Real, &format!("{a}_j_ptr"));
        }
        for n in slots(&def.sources, "s") {
            s.read(Role::SourceSlots, Scalar::Real, &format!("{n}_ptr"));
        }
        s.params_outputs_accumulate(def);
        s
    }

    /// The treecode walk (`fmm_codegen::emit::walk`): `n_targets`, target
    /// `x, y, z` and slots (tree order); `n_groups`, `group_begin`,
    /// `group_end`, the groups' boxes `lo_x, lo_y, lo_z, hi_x, hi_y, hi_z`;
    /// `n_cells`, `cell_nchild`, `cell_child` (8 per cell), `cell_begin`,
    /// `cell_end`, `cell_accept2` (squared acceptance distance), the point
    /// it is measured from `px, py, pz`, the cells' box `cx, cy, cz` and
    /// `half`, `per_cell` pseudo-sources a cell, their `x, y, z` and
    /// source slots (cell-major); `n_sources`, source `x, y, z` and slots (tree order);
    /// the parameters; the outputs (tree order); `accumulate`; `stacks`,
    /// `stack_cap` (cells per block); `next_group` and `overflow` (ints set
    /// to 0 before the launch); `counts` (the particle-particle and
    /// particle-cell interactions are added to its two entries).
    pub fn walk(def: &KernelDef) -> Signature {
        let mut s = Signature::default();
        s.targets(def);
        s.int(Role::GroupCount, "n_groups");
        for g in ["group_begin", "group_end"] {
            s.read(Role::Groups, Scalar::Int, g);
        }
        for side in ["lo", "hi"] {
            for a in ["x", "y", "z"] {
                s.read(Role::GroupBoxes, Scalar::Real, &format!("group_{side}_{a}"));
            }
        }
        s.int(Role::CellCount, "n_cells");
        for c in ["cell_nchild", "cell_child", "cell_begin", "cell_end"] {
            s.read(Role::Cells, Scalar::Int, c);
        }
        for c in [
            "cell_accept2",
            "cell_px",
            "cell_py",
            "cell_pz",
            "cell_cx",
            "cell_cy",
            "cell_cz",
            "cell_half",
        ] {
            s.read(Role::CellCriterion, Scalar::Real, c);
        }
        s.int(Role::PseudoSourcesPerCell, "per_cell");
        for a in ["x", "y", "z"] {
            s.read(
                Role::PseudoSourcePositions,
                Scalar::Real,
                &format!("cell_{a}"),
            );
        }
        for n in slots(&def.sources, "s") {
            s.read(Role::PseudoSourceSlots, Scalar::Real, &format!("cell_{n}"));
        }
        s.sources_by_prefix(def);
        s.params_outputs_accumulate(def);
        s.push(Role::Stacks, ArgType::write(Scalar::Int), "stacks");
        s.int(Role::Stacks, "stack_cap");
        for w in ["next_group", "overflow"] {
            s.push(Role::WalkState, ArgType::write(Scalar::Int), w);
        }
        s.counts();
        s
    }

    /// The FMM's P2P lists (`fmm_codegen::emit::p2p_list`): `n_targets`,
    /// target `x, y, z` and slots (tree order); `n_groups`,
    /// `group_begin`, `group_end` (targets `begin..end`), `group_cell` (the
    /// target leaf of the group); `list_begin`, `list_end` (64-bit, one per
    /// target cell: the P2P list of cell `c` is
    /// `list[list_begin[c]..list_end[c]]`), `list` (source cells);
    /// `cell_begin`, `cell_end` (the source cells' particle ranges);
    /// `n_sources`, source `x, y, z` and slots (tree order); the
    /// parameters; the outputs (tree order); `accumulate`; `counts` (one
    /// 64-bit integer the interactions are added to).
    pub fn p2p_list(def: &KernelDef) -> Signature {
        let mut s = Signature::default();
        s.targets(def);
        s.int(Role::GroupCount, "n_groups");
        for g in ["group_begin", "group_end", "group_cell"] {
            s.read(Role::Groups, Scalar::Int, g);
        }
        // 64-bit list offsets: the lists pass 2^31 entries at scale.
        for l in ["list_begin", "list_end"] {
            s.read(Role::Lists, Scalar::LongLong, l);
        }
        s.read(Role::Lists, Scalar::Int, "list");
        s.read(Role::ImageShifts, Scalar::Real, "image_shift");
        for c in ["cell_begin", "cell_end"] {
            s.read(Role::Cells, Scalar::Int, c);
        }
        s.sources_by_prefix(def);
        s.params_outputs_accumulate(def);
        s.counts();
        s
    }

    /// The arguments, in order.
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// The arguments grouped in runs of one role, in order.
    pub fn runs(&self) -> Vec<(Role, &[Arg])> {
        let mut runs: Vec<(Role, &[Arg])> = Vec::new();
        let mut start = 0;
        for i in 1..=self.args.len() {
            if i == self.args.len() || self.args[i].role != self.args[start].role {
                runs.push((self.args[start].role, &self.args[start..i]));
                start = i;
            }
        }
        runs
    }

    /// The parameter list, one declaration a line, with `real` for `T`.
    pub fn declare(&self, real: &str) -> String {
        self.args
            .iter()
            .map(|a| a.ty.declare(&a.name, real))
            .collect::<Vec<_>>()
            .join(",\n    ")
    }

    /// The arguments' names, as a call passes them on.
    pub fn pass(&self) -> String {
        self.args
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn push(&mut self, role: Role, ty: ArgType, name: &str) {
        debug_assert!(
            self.args.last().is_none_or(|a| a.role == role)
                || self.args.iter().all(|a| a.role != role),
            "role {role} in two runs"
        );
        self.args.push(Arg {
            name: name.to_string(),
            ty,
            role,
        });
    }

    fn int(&mut self, role: Role, name: &str) {
        self.push(role, ArgType::value(Scalar::Int), name);
    }

    fn read(&mut self, role: Role, scalar: Scalar, name: &str) {
        self.push(role, ArgType::read(scalar), name);
    }

    /// `n_targets`, target `x_i_ptr, y_i_ptr, z_i_ptr` and slots
    /// `t_*_ptr`.
    fn targets(&mut self, def: &KernelDef) {
        self.int(Role::TargetCount, "n_targets");
        for a in ["x", "y", "z"] {
            self.read(Role::TargetPositions, Scalar::Real, &format!("{a}_i_ptr"));
        }
        for n in slots(&def.targets, "t") {
            self.read(Role::TargetSlots, Scalar::Real, &format!("{n}_ptr"));
        }
    }

    /// `n_sources`, source `src_x, src_y, src_z` and slots `src_s_*`.
    fn sources_by_prefix(&mut self, def: &KernelDef) {
        self.int(Role::SourceCount, "n_sources");
        for a in ["x", "y", "z"] {
            self.read(Role::SourcePositions, Scalar::Real, &format!("src_{a}"));
        }
        for n in slots(&def.sources, "s") {
            self.read(Role::SourceSlots, Scalar::Real, &format!("src_{n}"));
        }
    }

    fn params_outputs_accumulate(&mut self, def: &KernelDef) {
        for n in slots(&def.params, "p") {
            self.push(Role::Params, ArgType::value(Scalar::Real), &n);
        }
        for n in slots(&def.outputs, "o") {
            self.push(Role::Outputs, ArgType::write(Scalar::Real), &n);
        }
        self.int(Role::Accumulate, "accumulate");
    }

    fn counts(&mut self) {
        self.push(
            Role::Counts,
            ArgType::write(Scalar::UnsignedLongLong),
            "counts",
        );
    }
}

/// One generated entry point: its name, the module that holds it, its
/// precision and its arguments. What the host loads and launches, and
/// what a test finds in the compiled module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryPoint {
    pub name: String,
    pub module: Module,
    pub precision: Precision,
    pub signature: Signature,
}

impl EntryPoint {
    /// The tile kernel of launch shape `shape` (`P` targets per block,
    /// `Q` threads per target).
    pub fn tile(def: &KernelDef, precision: Precision, shape: (u32, u32)) -> EntryPoint {
        EntryPoint {
            name: entry_name(def, precision.name(), shape),
            module: Module::Direct,
            precision,
            signature: Signature::tile(def),
        }
    }

    /// The treecode walk.
    pub fn walk(def: &KernelDef, precision: Precision) -> EntryPoint {
        EntryPoint {
            name: walk_entry_name(def, precision.name()),
            module: Module::Walk,
            precision,
            signature: Signature::walk(def),
        }
    }

    /// The FMM's P2P lists.
    pub fn p2p_list(def: &KernelDef, precision: Precision) -> EntryPoint {
        EntryPoint {
            name: p2p_list_entry_name(def, precision.name()),
            module: Module::P2pList,
            precision,
            signature: Signature::p2p_list(def),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Shape;
    use crate::kernel::Field;

    fn field(name: &str, shape: Shape, offset: usize) -> Field {
        Field {
            name: name.into(),
            shape,
            offset,
        }
    }

    fn def() -> KernelDef {
        KernelDef {
            name: "Test".into(),
            doc: String::new(),
            params: vec![field("eps", Shape::Scalar, 0)],
            sources: vec![field("m", Shape::Scalar, 0)],
            targets: vec![field("alpha", Shape::Vec3, 0)],
            outputs: vec![field("phi", Shape::Scalar, 0)],
            graph: Default::default(),
            contributions: Vec::new(),
            strength: None,
            far_field: crate::kernel::FarField::None,
            requirements: Vec::new(),
            cutoff: None,
        }
    }

    #[test]
    fn each_role_is_one_run() {
        let d = def();
        for s in [
            Signature::tile(&d),
            Signature::walk(&d),
            Signature::p2p_list(&d),
        ] {
            let roles: Vec<Role> = s.runs().iter().map(|r| r.0).collect();
            for (i, r) in roles.iter().enumerate() {
                assert!(!roles[i + 1..].contains(r), "{r} twice in {roles:?}");
            }
            assert_eq!(
                s.runs().iter().map(|r| r.1.len()).sum::<usize>(),
                s.args().len()
            );
        }
    }

    #[test]
    fn declarations_spell_the_c_types() {
        let s = Signature::p2p_list(&def());
        let text = s.declare("double");
        assert!(text.starts_with("const int n_targets,\n    const double* __restrict__ x_i_ptr,"));
        assert!(text.contains("const double* __restrict__ t_alpha_z_ptr"));
        assert!(text.contains("const long long* __restrict__ list_end"));
        assert!(text.contains("const double p_eps,\n    double* __restrict__ o_phi"));
        assert!(text.ends_with("unsigned long long* __restrict__ counts"));
        assert_eq!(
            ArgType::read(Scalar::Real)
                .resolve(Precision::F32)
                .to_string(),
            "const float*"
        );
        assert_eq!(ArgType::write(Scalar::Real).to_string(), "T*");
        assert_eq!(Precision::from_name("f64"), Some(Precision::F64));
    }
}
