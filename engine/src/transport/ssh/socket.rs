//! A connection's socket, shared by the libssh2 session (which needs it as `AsRawFd`) and
//! kwin's `poll` (`AsFd`): ONE descriptor per connection (not a copy made with `dup`),
//! closed when the last holder drops it. A run on hundreds of hosts holds one per host.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct Socket(Arc<OwnedFd>);

impl Socket {
    pub fn new(fd: impl Into<OwnedFd>) -> Socket {
        Socket(Arc::new(fd.into()))
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
