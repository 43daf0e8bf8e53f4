//! Name scopes opened and closed by hand, for library functions that must call ops directly
//! (not inside a closure) so that `#[track_caller]` reaches the model function's line.

use super::tracer::Tracer;

impl Tracer {
    /// Opens the name scope `name` until the matching [`Tracer::pop_scope`]; ops made in
    /// between get `op_name` `name/op`. [`Tracer::scope`] is the closure form.
    pub fn push_scope(&mut self, name: &str) {
        self.state.borrow_mut().scopes.push(name.to_string());
    }

    /// Closes the innermost scope opened by [`Tracer::push_scope`] (nothing when none is open).
    pub fn pop_scope(&mut self) {
        self.state.borrow_mut().scopes.pop();
    }
}

impl Tracer {
    /// Takes every open name scope away (ops made next are at top level) and returns them for
    /// [`Tracer::restore_scopes`]: variables are named by their variable scope alone.
    pub fn take_scopes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.state.borrow_mut().scopes)
    }

    /// Puts back the scopes [`Tracer::take_scopes`] took.
    pub fn restore_scopes(&mut self, scopes: Vec<String>) {
        self.state.borrow_mut().scopes = scopes;
    }
}
