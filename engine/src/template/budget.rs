//! The memory one template render may hold.
//!
//! Fuel ([`super::FUEL`]) bounds the instructions of a render, not its bytes: a few hundred
//! bytes of template can double a string forty times (`s ~ s` in a macro calling itself, a
//! recursive loop, a chain of `{% set %}`), and minijinja checks only the size of one `*`
//! repetition. So kwin counts the bytes a render holds, at the allocator:
//!
//! - The `kwin` binary's global allocator (src/alloc.rs) reports every allocation, release
//!   and resize to [`count`]. On a thread inside a [`Scope`] that counts the bytes allocated
//!   and not yet freed since the scope began.
//! - Over [`SOFT`] bytes the render goes on, and [`Scope::finish`] turns it into an error
//!   naming the template: the common case (one large value) ends as a plan diagnostic.
//! - At [`HARD`] bytes the allocation is not made: the stop hook the binary installed
//!   ([`on_stop`]) says which template was being rendered and ends the process. Renders
//!   happen while tasks are expanded, before any host is touched, so nothing is half done.
//!   Without a hook the allocation fails as any failed allocation does (the process aborts).
//!
//! Threads outside a scope pay one thread-local read per allocation.

use std::cell::{Cell, RefCell};
use std::sync::{Arc, OnceLock};

/// Bytes a render may hold at once; more is an error when the render ends. kwin's own
/// recipes hold well under 1 MiB; manifests a plan renders in full are a few MiB at most.
pub const SOFT: usize = 64 << 20;

/// Bytes at which a render is stopped before it allocates more.
pub const HARD: usize = 256 << 20;

/// Bytes the renders of one [`Expansion`] may leave behind in all (their values: what the
/// tasks of every host carry), so that many renders each under [`SOFT`] stay bounded too.
pub const TOTAL: usize = 256 << 20;

thread_local! {
    /// Inside a scope: bytes allocated and not freed since it began (negative when the
    /// render frees what was allocated before it).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The most `LIVE` was in this scope.
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Inside an expansion: bytes its renders left behind so far.
    static LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    /// The beginning of the template being rendered, for the stop message.
    static SITE: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// What the stop hook is told.
pub struct Stop<'a> {
    /// The beginning of the template that was being rendered ([`excerpt`]).
    pub template: &'a str,
    /// The bytes the render held with the allocation it asked for.
    pub bytes: usize,
}

/// Ends the process; see [`on_stop`].
pub type Hook = fn(&Stop<'_>) -> !;

static HOOK: OnceLock<Hook> = OnceLock::new();

/// Install the function that ends the process when a render reaches [`HARD`] (once; later
/// calls are ignored). It runs on the rendering thread with counting off, so it may
/// allocate; it does not return.
pub fn on_stop(hook: Hook) {
    let _ = HOOK.set(hook);
}

/// The first line of `template`, at most 120 bytes: what a stop message shows of it.
pub fn excerpt(template: &str) -> Arc<str> {
    let line = template.trim_start().lines().next().unwrap_or("");
    let mut end = line.len().min(120);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Arc::from(&line[..end])
}

/// A render in progress on this thread (see the module doc). Scopes nest: an inner scope
/// counts on its own and the outer one resumes when it ends.
pub struct Scope {
    saved: (isize, isize, bool, Option<Arc<str>>),
}

impl Scope {
    /// Begin counting for a render of the template `site` begins ([`excerpt`]).
    pub fn enter(site: Option<Arc<str>>) -> Scope {
        let old_site = SITE.with(|c| c.replace(site));
        let saved = (
            LIVE.with(Cell::get),
            PEAK.with(Cell::get),
            ACTIVE.with(Cell::get),
            old_site,
        );
        LIVE.with(|c| c.set(0));
        PEAK.with(|c| c.set(0));
        ACTIVE.with(|c| c.set(true));
        Scope { saved }
    }

    /// End the render: an error when it held more than [`SOFT`] at some point, or when the
    /// expansion it belongs to has now left more than [`TOTAL`] behind.
    pub fn finish(self) -> Result<(), Over> {
        let peak = PEAK.with(Cell::get);
        let kept = usize::try_from(LIVE.with(Cell::get)).unwrap_or(0);
        drop(self);
        if peak > SOFT as isize {
            return Err(Over::Render(usize::try_from(peak).unwrap_or(usize::MAX)));
        }
        let left = LEFT.with(|c| {
            let left = c.get().map(|n| n.saturating_add(kept));
            c.set(left);
            left
        });
        match left {
            Some(n) if n > TOTAL => Err(Over::Expansion(n)),
            _ => Ok(()),
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let (live, peak, active, site) = self.saved.clone();
        ACTIVE.with(|c| c.set(active));
        LIVE.with(|c| c.set(live));
        PEAK.with(|c| c.set(peak));
        SITE.with(|c| *c.borrow_mut() = site);
    }
}

/// How a render went over its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// It held this many bytes at once, more than [`SOFT`].
    Render(usize),
    /// The renders of its expansion have left this many bytes behind, more than [`TOTAL`].
    Expansion(usize),
}

/// The renders of one plan's tasks on this thread (`expand`): while it lasts, what each
/// render leaves behind is added up against [`TOTAL`].
pub struct Expansion {
    saved: Option<usize>,
}

impl Expansion {
    pub fn begin() -> Expansion {
        Expansion {
            saved: LEFT.with(|c| c.replace(Some(0))),
        }
    }
}

impl Drop for Expansion {
    fn drop(&mut self) {
        LEFT.with(|c| c.set(self.saved));
    }
}

/// Whether this thread's render has held more than [`SOFT`] bytes so far (kwin's filters
/// and formatter stop early on it).
pub fn over() -> bool {
    ACTIVE.try_with(Cell::get).unwrap_or(false) && PEAK.with(Cell::get) > SOFT as isize
}

/// Count an allocation (`delta > 0`) or a release on this thread: the global allocator
/// calls this for every allocation, release and resize. `false`: the allocation must not be
/// made (over [`HARD`] with no stop hook; with one, the hook has ended the process).
#[inline]
pub fn count(delta: isize) -> bool {
    let Ok(true) = ACTIVE.try_with(Cell::get) else {
        return true;
    };
    let live = LIVE.with(Cell::get).saturating_add(delta);
    if delta > 0 && live > HARD as isize {
        stop(usize::try_from(live).unwrap_or(usize::MAX));
        return false;
    }
    LIVE.with(|c| c.set(live));
    PEAK.with(|c| c.set(c.get().max(live)));
    true
}

/// Over [`HARD`]: counting off on this thread, then the hook, if there is one.
#[cold]
fn stop(bytes: usize) {
    ACTIVE.with(|c| c.set(false));
    let Some(hook) = HOOK.get() else { return };
    let site = SITE.try_with(|c| c.borrow().clone()).ok().flatten();
    hook(&Stop {
        template: site.as_deref().unwrap_or(""),
        bytes,
    });
}

fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

/// [`count`]'s argument for an allocation of `size` bytes.
pub fn grown(size: usize) -> isize {
    signed(size)
}

/// [`count`]'s argument for a resize from `old` to `new` bytes.
pub fn resized(old: usize, new: usize) -> isize {
    signed(new) - signed(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The unit tests' binary does not count its allocations (the `kwin` binary does;
    // tests/validate.rs renders templates that would take gigabytes through it), so these
    // check the bookkeeping by counting by hand.

    #[test]
    fn a_scope_counts_what_its_render_holds_and_restores_the_outer_count() {
        let outer = Scope::enter(Some(excerpt("outer")));
        assert!(count(10));
        let inner = Scope::enter(Some(excerpt("inner")));
        assert!(count(signed(SOFT) + 1));
        assert!(over(), "the inner render is over the soft bound");
        assert_eq!(inner.finish(), Err(Over::Render(SOFT + 1)));
        assert!(!over(), "the outer render holds only its own bytes");
        assert_eq!(LIVE.with(Cell::get), 10);
        assert_eq!(outer.finish(), Ok(()));
        assert!(!ACTIVE.with(Cell::get));
    }

    #[test]
    fn freeing_gives_back_and_only_the_peak_counts() {
        let s = Scope::enter(Some(excerpt("t")));
        assert!(count(signed(SOFT)));
        assert!(count(-signed(SOFT)));
        assert!(count(1));
        assert_eq!(s.finish(), Ok(()), "the peak was exactly the soft bound");
    }

    #[test]
    fn what_the_renders_of_an_expansion_leave_behind_adds_up() {
        let e = Expansion::begin();
        for _ in 0..(TOTAL / SOFT) {
            let s = Scope::enter(None);
            assert!(count(signed(SOFT)));
            assert_eq!(s.finish(), Ok(()));
        }
        let s = Scope::enter(None);
        assert!(count(1));
        assert_eq!(s.finish(), Err(Over::Expansion(TOTAL + 1)));
        drop(e);
        let s = Scope::enter(None);
        assert!(count(1));
        assert_eq!(s.finish(), Ok(()), "outside an expansion nothing adds up");
    }

    #[test]
    fn an_allocation_past_the_hard_bound_is_refused_without_a_hook() {
        let s = Scope::enter(Some(excerpt("t")));
        assert!(count(signed(HARD)));
        assert!(!count(1), "one byte more than the hard bound");
        assert!(!ACTIVE.with(Cell::get), "counting is off once stopped");
        drop(s);
    }
}
