//! The span table that [`fmm_codegen::ast::Span`] indexes.
//!
//! Every AST node carries an `ast::Span` that indexes [`super::Parsed::spans`].
//! A stable compiler cannot join two spans into one (`Span::join` returns
//! `None` outside nightly), so the table keeps the first and last token of
//! each piece of syntax, and an error covers that token range.

use fmm_codegen::ast;
use proc_macro2::Span;
use quote::ToTokens;

/// The span table that `ast::Span` indexes: token ranges.
#[derive(Default)]
pub(super) struct Spans(pub(super) Vec<(Span, Span)>);

impl Spans {
    /// Records one token.
    pub(super) fn push(&mut self, span: Span) -> ast::Span {
        self.push_range(span, span)
    }

    /// Records the tokens `first ..= last`.
    pub(super) fn push_range(&mut self, first: Span, last: Span) -> ast::Span {
        let k = u32::try_from(self.0.len()).expect("more than u32::MAX spans");
        self.0.push((first, last));
        ast::Span(k)
    }

    /// Records all the tokens of a piece of syntax.
    pub(super) fn range(&mut self, syntax: &impl ToTokens) -> ast::Span {
        let (first, last) = token_range(syntax);
        self.push_range(first, last)
    }

    /// The token range of an AST span.
    pub(super) fn get(&self, span: ast::Span) -> (Span, Span) {
        self.0
            .get(span.0 as usize)
            .copied()
            .unwrap_or_else(|| (Span::call_site(), Span::call_site()))
    }
}

/// An error underlining the tokens `first ..= last`: `syn::Error::new_spanned`
/// covers the range from the first to the last token of what it is given,
/// which works on a stable compiler where spans cannot be joined.
pub(crate) fn error_at((first, last): (Span, Span), message: &str) -> syn::Error {
    let tokens: proc_macro2::TokenStream = [first, last]
        .into_iter()
        .map(|span| {
            let mut t = proc_macro2::TokenTree::Punct(proc_macro2::Punct::new(
                '<',
                proc_macro2::Spacing::Alone,
            ));
            t.set_span(span);
            t
        })
        .collect();
    syn::Error::new_spanned(tokens, message)
}

/// The spans of the first and last token of a piece of syntax.
pub(super) fn token_range(syntax: &impl ToTokens) -> (Span, Span) {
    let mut tokens = syntax.to_token_stream().into_iter();
    let first = tokens.next().map_or_else(Span::call_site, |t| t.span());
    let last = tokens.last().map_or(first, |t| t.span());
    (first, last)
}
