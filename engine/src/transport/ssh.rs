//! `ssh` transport (ssh2). Blocking libssh2 calls live on one dedicated thread per
//! connection; the async side talks to it over channels.
