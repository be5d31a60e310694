//! Debug builds count the page latches each thread holds, so that the lock order can be
//! asserted: the commit lock is never taken while holding a page latch (a committer holds the
//! commit lock while it latches pages; the other order deadlocks).

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// A page latch was taken.
pub(crate) fn acquired() {
    #[cfg(debug_assertions)]
    HELD.with(|h| h.set(h.get() + 1));
}

/// A page latch was released.
pub(crate) fn released() {
    #[cfg(debug_assertions)]
    HELD.with(|h| h.set(h.get() - 1));
}

/// Asserts that this thread may take the commit lock now.
pub(crate) fn assert_no_latch(what: &str) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        assert!(
            h.get() == 0,
            "latch order: {what} taken while this thread holds {} page latch(es)",
            h.get()
        );
    });
    let _ = what;
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "latch order")]
    fn the_commit_lock_under_a_page_latch_is_caught() {
        acquired();
        assert_no_latch("the commit lock");
    }

    #[test]
    fn released_latches_allow_the_commit_lock() {
        acquired();
        released();
        assert_no_latch("the commit lock");
    }
}
