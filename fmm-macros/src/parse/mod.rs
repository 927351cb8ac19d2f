//! Parsing of the `kernel!` DSL into [`fmm_codegen::ast`].
//!
//! The input is a single declaration:
//!
//! ```text
//! /// doc
//! #[derive(..)]
//! pub kernel Name {
//!     param eps;  source m;  target a: vec3;  output phi;  output acc: vec3;
//!     strength m;
//!     far_field laplace { phi = -potential; acc = gradient; }   // or `far_field none;`
//!     let inv = rsqrt(r2 + eps * eps);
//!     phi -= m * inv;
//! }
//! ```
//!
//! This module only checks *syntax*: which names exist, which functions are
//! built in, whether shapes agree and what a far-field entry means is the
//! business of `fmm_codegen::lower`, which reports through the spans
//! recorded here ([`spans`]).
//!
//! The files follow the grammar, top down: [`decl`] (the kernel and its
//! declarations), [`far_field`] (`far_field none;` / `laplace { .. }`),
//! [`stmt`] (the body's statements) and [`expr`] (expressions, converted
//! from syn's to the AST's).
//!

mod decl;
mod expr;
mod far_field;
mod spans;
mod stmt;
#[cfg(test)]
mod tests;

use fmm_codegen::ast::KernelSpec;
use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser};

use decl::parse_top;
pub(crate) use spans::error_at;
use spans::Spans;

/// The DSL's own keywords. They are ordinary identifiers to Rust, so a
/// keyword only starts a declaration when it is not the target of an
/// assignment (see `decl::starts_decl`).
mod kw {
    syn::custom_keyword!(kernel);
    syn::custom_keyword!(param);
    syn::custom_keyword!(source);
    syn::custom_keyword!(target);
    syn::custom_keyword!(output);
    syn::custom_keyword!(strength);
    syn::custom_keyword!(far_field);
    syn::custom_keyword!(require);
    syn::custom_keyword!(cutoff);
    syn::custom_keyword!(laplace);
    syn::custom_keyword!(none);
    syn::custom_keyword!(scalar);
    syn::custom_keyword!(vec3);
}

/// A parsed `kernel!` invocation.
pub struct Parsed {
    pub vis: syn::Visibility,
    /// Non-doc outer attributes on the kernel (e.g. `#[derive(..)]`), to be
    /// passed through to the generated type. Doc comments go to `spec.doc`.
    pub attrs: Vec<syn::Attribute>,
    pub spec: KernelSpec,
    /// `ast::Span(k)` refers to `spans[k]`: the first and last token of
    /// the syntax, so errors underline all of it (a stable compiler cannot
    /// join two spans into one, but an error can cover a token range).
    pub spans: Vec<(Span, Span)>,
}

/// Parses the whole macro input.
pub fn parse_kernel(input: TokenStream) -> syn::Result<Parsed> {
    let mut spans = Spans::default();
    let (vis, attrs, spec) = (|input: ParseStream| parse_top(input, &mut spans)).parse2(input)?;
    Ok(Parsed {
        vis,
        attrs,
        spec,
        spans: spans.0,
    })
}
