//! Putting the ClusterSet back when a test ends, however it ends.

use std::fmt::Debug;

/// Runs `undo` when dropped: when the test ends, whether it passed, failed with an error or
/// panicked, so a test that stops part of the ClusterSet always puts it back.
pub struct Undo<F: FnMut()>(F);

impl<F: FnMut()> Undo<F> {
    pub fn new(undo: F) -> Self {
        Self(undo)
    }
}

impl<F: FnMut()> Drop for Undo<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

impl<F: FnMut()> Debug for Undo<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Undo")
    }
}
