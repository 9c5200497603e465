//! Kept for code written against `exec::connect`: a host's transport is made in
//! `transport::connect` from its connection spec.

use crate::plan::ResolvedHost;
use crate::secret::{Scrubber, Secret};
pub use crate::transport::connect::{ConnectOptions, Made, WINRM_STAND_IN_ENV};

/// The transport for `host` ([`crate::transport::connect::transport_for`]).
pub fn transport_for(host: &ResolvedHost, opts: &ConnectOptions, scrubber: &Scrubber) -> Made {
    crate::transport::connect::transport_for(&host.name, &host.conn, opts, scrubber)
}

/// Secrets `host`'s connection uses ([`crate::transport::spec::ConnSpec::secrets`]).
pub fn connection_secrets(host: &ResolvedHost) -> Vec<Secret> {
    host.conn.secrets()
}
