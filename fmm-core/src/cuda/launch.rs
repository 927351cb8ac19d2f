//! Launching a generated entry point through its signature: the host's
//! half of the one source of every host-device contract.
//!
//! `fmm_codegen::emit::signature` builds the arguments of each generated
//! entry point (name, C type, role) once from the kernel declaration, and
//! the emitters print the CUDA parameter list from it. Here a method pushes
//! its arguments into [`Args`], one role at a time, and [`Entry::launch`]
//! checks them against that same signature before anything reaches the
//! driver: a missing or extra argument, an array of the other precision, a
//! read-only array where the kernel writes, or a wrong count of slot arrays
//! is an [`Error::Cuda`] naming the entry point and the argument, where a
//! hand-written push sequence would have launched a kernel reading one
//! array as another. The check reads only the recorded types
//! ([`check`]), so it is tested without a GPU.
//!
//! A method author writes:
//!
//! ```ignore
//! let entry = Entry::p2p_list::<K, R>(gpu)?;
//! let mut a = Args::new();
//! a.int(Role::TargetCount, m as i32)
//!     .read(Role::TargetPositions, &pos)
//!     .read(Role::TargetSlots, &slots)
//!     // ... every role of the signature, in order ...
//!     .write(Role::Counts, [&mut counts]);
//! // SAFETY: what the types cannot say: lengths and index ranges.
//! unsafe { entry.launch(a, stream, cfg, cuda_err("launching the P2P lists")) }?;
//! ```

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchArgs,
    LaunchConfig, PushKernelArg,
};
use fmm_codegen::emit::signature::{ArgType, EntryPoint, Precision, Role, Scalar};
use fmm_codegen::emit::Module;

use super::Gpu;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::real::Real;

/// The precision of `R`.
pub(crate) fn precision<R: Real>() -> Precision {
    Precision::from_name(R::NAME).expect("Real is f32 or f64")
}

/// The compiled module `module` of kernel `K`, named
/// `<symbol>_<module>` ([`Module::module_name`]): from this process's
/// modules, else from the disk cache, else compiled now. Each method's
/// module is compiled and cached on its own.
pub(crate) fn module<K: Kernel>(gpu: &Gpu, module: Module) -> Result<Arc<CudaModule>, Error> {
    gpu.module(&module.module_name(K::def()), K::cuda_source(module))
        .map(|(m, _)| m)
}

/// A host type an argument or an array's elements may have, as the
/// signature names it.
pub(crate) trait Element: DeviceRepr + Copy + 'static {
    fn scalar() -> Scalar;
}

impl<R: Real> Element for R {
    fn scalar() -> Scalar {
        precision::<R>().scalar()
    }
}

impl Element for i32 {
    fn scalar() -> Scalar {
        Scalar::Int
    }
}

impl Element for i64 {
    fn scalar() -> Scalar {
        Scalar::LongLong
    }
}

impl Element for u64 {
    fn scalar() -> Scalar {
        Scalar::UnsignedLongLong
    }
}

/// A value passed by value: the builder keeps a reference to it, so it
/// lives in the [`Args`] until the launch.
trait PushValue {
    fn push<'s>(&'s self, b: &mut LaunchArgs<'s>);
}

impl<E: Element> PushValue for E {
    fn push<'s>(&'s self, b: &mut LaunchArgs<'s>) {
        b.arg(self);
    }
}

/// An array the entry point reads.
trait PushRead {
    fn push<'s>(&'s self, b: &mut LaunchArgs<'s>);
}

impl<E> PushRead for CudaSlice<E> {
    fn push<'s>(&'s self, b: &mut LaunchArgs<'s>) {
        b.arg(self);
    }
}

/// An array the entry point writes (pushed mutably, so that cudarc orders
/// later uses after the write).
trait PushWrite {
    fn push<'s>(&'s mut self, b: &mut LaunchArgs<'s>);
}

impl<E> PushWrite for CudaSlice<E> {
    fn push<'s>(&'s mut self, b: &mut LaunchArgs<'s>) {
        b.arg(self);
    }
}

enum Value<'a> {
    Scalar(Box<dyn PushValue>),
    Read(&'a dyn PushRead),
    Write(&'a mut dyn PushWrite),
}

/// The arguments of one launch, pushed role by role in the signature's
/// order, each recorded with its C type.
#[derive(Default)]
pub(crate) struct Args<'a> {
    /// Each pushed argument's role and type, in order.
    types: Vec<(Role, ArgType)>,
    /// The groups as pushed, in order: role and how many (a group may be
    /// empty: a kernel without target fields has no target slots).
    groups: Vec<(Role, usize)>,
    values: Vec<Value<'a>>,
}

impl<'a> Args<'a> {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn record(&mut self, role: Role, ty: ArgType) {
        self.types.push((role, ty));
        self.group(role).1 += 1;
    }

    /// The group `role` continues (or starts).
    fn group(&mut self, role: Role) -> &mut (Role, usize) {
        if self.groups.last().is_none_or(|g| g.0 != role) {
            self.groups.push((role, 0));
        }
        self.groups.last_mut().expect("pushed above")
    }

    /// An `int` by value.
    pub(crate) fn int(&mut self, role: Role, v: i32) -> &mut Self {
        self.value(role, v)
    }

    /// A value (a count, a parameter) by value.
    pub(crate) fn value<E: Element>(&mut self, role: Role, v: E) -> &mut Self {
        self.record(role, ArgType::value(E::scalar()));
        self.values.push(Value::Scalar(Box::new(v)));
        self
    }

    /// Values by value, one argument each (the parameters).
    pub(crate) fn values<E: Element>(&mut self, role: Role, vs: &[E]) -> &mut Self {
        self.group(role);
        for &v in vs {
            self.value(role, v);
        }
        self
    }

    /// Arrays the entry point reads, one argument each.
    pub(crate) fn read<E: Element>(
        &mut self,
        role: Role,
        arrays: impl IntoIterator<Item = &'a CudaSlice<E>>,
    ) -> &mut Self {
        self.group(role);
        for a in arrays {
            self.record(role, ArgType::read(E::scalar()));
            self.values.push(Value::Read(a));
        }
        self
    }

    /// Arrays the entry point writes, one argument each.
    pub(crate) fn write<E: Element>(
        &mut self,
        role: Role,
        arrays: impl IntoIterator<Item = &'a mut CudaSlice<E>>,
    ) -> &mut Self {
        self.group(role);
        for a in arrays {
            self.record(role, ArgType::write(E::scalar()));
            self.values.push(Value::Write(a));
        }
        self
    }
}

/// Checks the arguments `args` against the signature of `entry`: the
/// roles in the signature's order, as many arguments of each role as it
/// has, each of its type in the entry's precision. The error names the
/// entry point and the first argument that differs.
pub(crate) fn check(entry: &EntryPoint, args: &Args<'_>) -> Result<(), Error> {
    let err = |what: String| {
        Err(Error::Cuda(format!(
            "the arguments pushed for `{}` do not follow its signature: {what}",
            entry.name
        )))
    };
    let runs = entry.signature.runs();
    // Where each run starts in the argument list.
    let mut first = Vec::with_capacity(runs.len());
    let mut at = 0;
    for (_, r) in &runs {
        first.push(at);
        at += r.len();
    }
    let (mut run, mut pushed) = (0, 0);
    for &(role, count) in &args.groups {
        match runs.get(run) {
            Some(&(want, list)) if want == role => {
                if count != list.len() {
                    let names: Vec<&str> = list.iter().map(|a| a.name.as_str()).collect();
                    let (from, to) = (first[run] + 1, first[run] + list.len());
                    let place = if from == to {
                        format!("argument {from}")
                    } else {
                        format!("arguments {from} to {to}")
                    };
                    return err(format!(
                        "the {role}: it takes {} ({place}: {}), {count} were pushed",
                        list.len(),
                        names.join(", ")
                    ));
                }
                for (k, a) in list.iter().enumerate() {
                    let want = a.ty.resolve(entry.precision);
                    let got = args.types[pushed + k].1;
                    if got != want {
                        return err(format!(
                            "argument {} `{}` ({role}) is `{}`, but `{}` was pushed",
                            first[run] + k + 1,
                            a.name,
                            want.c_type("T"),
                            got.c_type("T")
                        ));
                    }
                }
                run += 1;
            }
            // A group the signature does not have, pushed empty (the
            // parameters of a kernel without any).
            _ if count == 0 => {}
            Some(&(want, list)) => {
                return err(format!(
                    "argument {} `{}` ({want}) comes next, but the group pushed there is the {role}",
                    first[run] + 1,
                    list[0].name
                ));
            }
            None => {
                return err(format!(
                    "it takes {} arguments, and more were pushed after them: the {role}",
                    entry.signature.args().len()
                ));
            }
        }
        pushed += count;
    }
    if let Some(&(want, list)) = runs.get(run) {
        let (from, all) = (first[run] + 1, entry.signature.args().len());
        return err(if from == all {
            format!("argument {from} `{}` ({want}) was not pushed", list[0].name)
        } else {
            format!(
                "arguments {from} to {all}, from `{}` ({want}) on, were not pushed",
                list[0].name
            )
        });
    }
    Ok(())
}

/// A generated entry point loaded from its module, with the signature its
/// launches are checked against.
pub(crate) struct Entry {
    func: CudaFunction,
    point: EntryPoint,
}

impl Entry {
    /// Loads `point` from kernel `K`'s module.
    pub(crate) fn load<K: Kernel>(gpu: &Gpu, point: EntryPoint) -> Result<Entry, Error> {
        let m = module::<K>(gpu, point.module)?;
        Ok(Entry {
            func: gpu.function(&m, &point.name)?,
            point,
        })
    }

    /// The tile kernel of `K` in `R` for launch shape `shape`.
    pub(crate) fn tile<K: Kernel, R: Real>(gpu: &Gpu, shape: (u32, u32)) -> Result<Entry, Error> {
        Self::load::<K>(gpu, EntryPoint::tile(K::def(), precision::<R>(), shape))
    }

    /// The treecode walk of `K` in `R`.
    pub(crate) fn walk<K: Kernel, R: Real>(gpu: &Gpu) -> Result<Entry, Error> {
        Self::load::<K>(gpu, EntryPoint::walk(K::def(), precision::<R>()))
    }

    /// The FMM's P2P lists of `K` in `R`.
    pub(crate) fn p2p_list<K: Kernel, R: Real>(gpu: &Gpu) -> Result<Entry, Error> {
        Self::load::<K>(gpu, EntryPoint::p2p_list(K::def(), precision::<R>()))
    }

    pub(crate) fn function(&self) -> &CudaFunction {
        &self.func
    }

    pub(crate) fn name(&self) -> &str {
        &self.point.name
    }

    /// Checks `args` against the signature ([`check`]), then launches the
    /// entry point with them on `stream`; a driver error is worded by
    /// `err`.
    ///
    /// # Safety
    /// The types and the order of the arguments are checked; what they
    /// cannot say is the caller's to keep: every array holds as many
    /// elements as the counts passed with it say, and every index the
    /// kernel reads from an array (groups, cells, lists) is in range.
    pub(crate) unsafe fn launch(
        &self,
        mut args: Args<'_>,
        stream: &CudaStream,
        cfg: LaunchConfig,
        err: impl FnOnce(DriverError) -> Error,
    ) -> Result<(), Error> {
        check(&self.point, &args)?;
        let mut b = stream.launch_builder(&self.func);
        for v in args.values.iter_mut() {
            match v {
                Value::Scalar(x) => x.push(&mut b),
                Value::Read(a) => a.push(&mut b),
                Value::Write(a) => a.push(&mut b),
            }
        }
        // SAFETY: the arguments follow the entry point's signature, as
        // checked above; the rest is the caller's (see above).
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Gravity;

    impl Args<'_> {
        /// Records an argument's type as [`Args::read`] and the others do,
        /// without a value: arrays need a GPU, the check does not.
        fn typed(&mut self, role: Role, ty: ArgType, n: usize) -> &mut Self {
            self.group(role);
            for _ in 0..n {
                self.record(role, ty);
            }
            self
        }
    }

    const INT: ArgType = ArgType::value(Scalar::Int);
    const READ_F64: ArgType = ArgType::read(Scalar::Double);
    const WRITE_F64: ArgType = ArgType::write(Scalar::Double);

    /// Gravity's tile entry in f64 and the arguments a correct launch
    /// pushes, but with `outputs` output arrays and the parameters `eps`.
    fn gravity(outputs: usize, eps: &[f64]) -> (EntryPoint, Args<'static>) {
        let entry = EntryPoint::tile(Gravity::def(), Precision::F64, (256, 1));
        let mut a = Args::new();
        a.int(Role::TargetCount, 10)
            .typed(Role::TargetPositions, READ_F64, 3)
            .typed(Role::TargetSlots, READ_F64, 0)
            .int(Role::SourceCount, 20)
            .typed(Role::SourcePositions, READ_F64, 3)
            .typed(Role::SourceSlots, READ_F64, 1)
            .values(Role::Params, eps)
            .typed(Role::Outputs, WRITE_F64, outputs)
            .int(Role::Accumulate, 0);
        (entry, a)
    }

    fn message(r: Result<(), Error>) -> String {
        match r {
            Err(Error::Cuda(m)) => m,
            other => panic!("expected a CUDA error, got {other:?}"),
        }
    }

    #[test]
    fn arguments_that_follow_the_signature_pass() {
        let (entry, a) = gravity(4, &[0.1]);
        check(&entry, &a).unwrap();
        assert_eq!(a.values.len(), 4, "the counts, the parameter and the flag");
    }

    #[test]
    fn an_array_of_the_other_precision_is_named() {
        let entry = EntryPoint::tile(Gravity::def(), Precision::F64, (256, 1));
        let mut a = Args::new();
        a.int(Role::TargetCount, 10)
            .typed(Role::TargetPositions, READ_F64, 2)
            .typed(Role::TargetPositions, ArgType::read(Scalar::Float), 1);
        let m = message(check(&entry, &a));
        assert!(m.contains("`gravity_p2p_f64_256x1`"), "{m}");
        assert!(
            m.contains("argument 4 `z_i_ptr` (target positions) is `const double*`, but `const float*` was pushed"),
            "{m}"
        );
    }

    #[test]
    fn a_parameter_of_the_other_precision_is_named() {
        let entry = EntryPoint::tile(Gravity::def(), Precision::F64, (256, 1));
        let mut a = Args::new();
        a.int(Role::TargetCount, 10)
            .typed(Role::TargetPositions, READ_F64, 3)
            .int(Role::SourceCount, 20)
            .typed(Role::SourcePositions, READ_F64, 3)
            .typed(Role::SourceSlots, READ_F64, 1)
            .values(Role::Params, &[0.1f32]);
        let m = message(check(&entry, &a));
        assert!(
            m.contains(
                "argument 10 `p_eps` (parameters) is `const double`, but `const float` was pushed"
            ),
            "{m}"
        );
    }

    #[test]
    fn a_wrong_count_of_slot_arrays_is_named() {
        let (entry, a) = gravity(2, &[0.1]);
        let m = message(check(&entry, &a));
        assert!(
            m.contains("the outputs: it takes 4 (arguments 11 to 14: o_phi, o_acc_x, o_acc_y, o_acc_z), 2 were pushed"),
            "{m}"
        );
    }

    #[test]
    fn a_missing_group_is_named() {
        // No parameter pushed, and none said: the outputs come where
        // `p_eps` is.
        let entry = EntryPoint::tile(Gravity::def(), Precision::F64, (256, 1));
        let mut a = Args::new();
        a.int(Role::TargetCount, 10)
            .typed(Role::TargetPositions, READ_F64, 3)
            .int(Role::SourceCount, 20)
            .typed(Role::SourcePositions, READ_F64, 3)
            .typed(Role::SourceSlots, READ_F64, 1)
            .typed(Role::Outputs, WRITE_F64, 4);
        let m = message(check(&entry, &a));
        assert!(
            m.contains("argument 10 `p_eps` (parameters) comes next, but the group pushed there is the outputs"),
            "{m}"
        );
        // An empty group of parameters, pushed where they go.
        let (entry, a) = gravity(4, &[]);
        let m = message(check(&entry, &a));
        assert!(
            m.contains("the parameters: it takes 1 (argument 10: p_eps), 0 were pushed"),
            "{m}"
        );
    }

    #[test]
    fn missing_and_extra_arguments_are_named() {
        let entry = EntryPoint::tile(Gravity::def(), Precision::F64, (256, 1));
        let (_, full) = gravity(4, &[0.1]);
        // Everything but the flag.
        let mut short = Args::new();
        for &(role, count) in &full.groups[..full.groups.len() - 1] {
            let ty = full.types.iter().find(|t| t.0 == role).map_or(INT, |t| t.1);
            short.typed(role, ty, count);
        }
        let m = message(check(&entry, &short));
        assert!(
            m.contains("argument 15 `accumulate` (accumulate flag) was not pushed"),
            "{m}"
        );
        let (_, mut extra) = gravity(4, &[0.1]);
        extra.typed(Role::Counts, ArgType::write(Scalar::UnsignedLongLong), 1);
        let m = message(check(&entry, &extra));
        assert!(
            m.contains(
                "it takes 15 arguments, and more were pushed after them: the interaction counts"
            ),
            "{m}"
        );
    }

    #[test]
    fn a_read_only_array_where_the_kernel_writes_is_named() {
        let (entry, _) = gravity(4, &[0.1]);
        let mut a = Args::new();
        a.int(Role::TargetCount, 10)
            .typed(Role::TargetPositions, READ_F64, 3)
            .int(Role::SourceCount, 20)
            .typed(Role::SourcePositions, READ_F64, 3)
            .typed(Role::SourceSlots, READ_F64, 1)
            .values(Role::Params, &[0.1])
            .typed(Role::Outputs, READ_F64, 4)
            .int(Role::Accumulate, 0);
        let m = message(check(&entry, &a));
        assert!(
            m.contains(
                "argument 11 `o_phi` (outputs) is `double*`, but `const double*` was pushed"
            ),
            "{m}"
        );
    }

    #[test]
    fn host_types_name_their_c_types() {
        assert_eq!(<f32 as Element>::scalar(), Scalar::Float);
        assert_eq!(<f64 as Element>::scalar(), Scalar::Double);
        assert_eq!(<i32 as Element>::scalar(), Scalar::Int);
        assert_eq!(<i64 as Element>::scalar(), Scalar::LongLong);
        assert_eq!(<u64 as Element>::scalar(), Scalar::UnsignedLongLong);
    }
}
