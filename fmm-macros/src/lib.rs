//! The `kernel!` macro: one declaration of a pairwise interaction.
//!
//! The macro parses the declaration ([`parse`]), has `fmm-codegen` check and
//! lower it to the IR, and expands to a unit struct implementing
//! `fmm_core::Kernel` with:
//! - the IR in text form (read back once at run time: the single source of
//!   truth for the runtime's own code generation),
//! - the CUDA C source of each module (`fmm_codegen::emit::Module`: one per
//!   GPU method, compiled and cached on its own), emitted at compile time,
//!   as a match over `&'static str` literals,
//! - the CPU evaluator, emitted as Rust code generic over f32 and f64.
//!
//! Mistakes are compile errors pointing at the offending tokens. Setting the
//! environment variable `FMM_KERNEL_DEBUG` while compiling prints the
//! generated Rust and every CUDA module of every kernel.

mod parse;
#[cfg(test)]
mod tests;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};

use fmm_codegen::emit;
use parse::error_at;

/// Declares a pairwise interaction kernel. See the `fmm-core` crate's
/// README for the syntax; in short:
///
/// ```ignore
/// fmm_core::kernel! {
///     /// Gravity with Plummer softening.
///     pub kernel Gravity {
///         param eps;
///         source m;
///         output phi;
///         output acc: vec3;
///         strength m;
///         far_field laplace { phi = -potential; acc = gradient; }
///         let inv = select(r2 > 0.0, rsqrt(r2 + eps * eps), 0.0);
///         phi -= m * inv;
///         acc -= m * inv * inv * inv * d;
///     }
/// }
/// ```
#[proc_macro]
pub fn kernel(input: TokenStream) -> TokenStream {
    match expand(input.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: TokenStream2) -> syn::Result<TokenStream2> {
    let parsed = parse::parse_kernel(input)?;
    let range_of = |s: fmm_codegen::ast::Span| -> (Span, Span) {
        parsed
            .spans
            .get(s.0 as usize)
            .copied()
            .unwrap_or_else(|| (Span::call_site(), Span::call_site()))
    };
    let def =
        fmm_codegen::lower(&parsed.spec).map_err(|e| error_at(range_of(e.span), &e.message))?;

    let ir_text = fmm_codegen::text::write(&def);
    let opts = emit::cuda::CudaOptions::default();
    let modules: Vec<(emit::Module, String)> = emit::Module::ALL
        .into_iter()
        .map(|m| (m, emit::cuda::emit(&def, m, &opts)))
        .collect();
    let p2p_src = emit::rust::emit_p2p_target(&def, "::fmm_core");
    if std::env::var_os("FMM_KERNEL_DEBUG").is_some() {
        eprintln!("==== kernel {} (Rust) ====\n{p2p_src}", def.name);
        for (m, cuda) in &modules {
            eprintln!(
                "==== kernel {} (CUDA module {}) ====\n{cuda}",
                def.name,
                m.module_name(&def)
            );
        }
    }
    // One arm per module; a module missing from `Module::ALL` leaves the
    // match incomplete, a compile error here rather than a source missing
    // at run time.
    let module_arms = modules.iter().map(|(m, cuda)| {
        let variant = format_ident!("{m:?}");
        quote! { ::fmm_core::fmm_codegen::emit::Module::#variant => #cuda }
    });
    let p2p: TokenStream2 = p2p_src.parse().map_err(|e| {
        syn::Error::new(
            Span::call_site(),
            format!("fmm-codegen emitted Rust that does not parse ({e}); this is a bug in fmm-codegen:\n{p2p_src}"),
        )
    })?;

    let name = format_ident!("{}", def.name, span = range_of(parsed.spec.name_span).0);
    let vis = &parsed.vis;
    let attrs = &parsed.attrs;
    let mut doc: Vec<String> = def.doc.lines().map(|l| format!(" {l}")).collect();
    doc.extend(generated_doc(&def));

    Ok(quote! {
        #(#[doc = #doc])*
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #vis struct #name;

        impl ::fmm_core::Kernel for #name {
            fn def() -> &'static ::fmm_core::fmm_codegen::KernelDef {
                static DEF: ::std::sync::OnceLock<::fmm_core::fmm_codegen::KernelDef> = ::std::sync::OnceLock::new();
                DEF.get_or_init(|| {
                    ::fmm_core::fmm_codegen::text::read(#ir_text)
                        .expect("kernel!: the IR text written at compile time reads back")
                })
            }

            fn cuda_source(module: ::fmm_core::fmm_codegen::emit::Module) -> &'static str {
                match module {
                    #(#module_arms,)*
                }
            }

            #p2p
        }
    })
}

/// The part of the type's documentation the macro writes: layout, far
/// field and flop counts, so that `cargo doc` shows what the kernel takes.
fn generated_doc(def: &fmm_codegen::KernelDef) -> Vec<String> {
    let list = |fields: &[fmm_codegen::Field]| {
        if fields.is_empty() {
            "none".to_string()
        } else {
            fields
                .iter()
                .map(|f| format!("`{}` ({})", f.name, f.shape.name()))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let fc = fmm_codegen::flops::count(def);
    vec![
        String::new(),
        " # Layout (generated by `kernel!`)".into(),
        String::new(),
        format!(" - parameters: {}", list(&def.params)),
        format!(" - source fields: {}", list(&def.sources)),
        format!(" - target fields: {}", list(&def.targets)),
        format!(" - outputs (summed over sources): {}", list(&def.outputs)),
        format!(
            " - strength (adds up over sources): {}",
            def.strength
                .map_or("none".to_string(), |k| format!("`{}`", def.sources[k].name))
        ),
        format!(" - far field: {}", def.far_field.class_name()),
        format!(
            " - per interaction: {} flops, {} weighted by clock cycles (yokota2009 Table 2)",
            fc.plain, fc.weighted
        ),
    ]
}
