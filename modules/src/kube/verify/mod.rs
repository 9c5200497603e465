//! What `kwin verify` deploys and checks, as data and pure functions: the test workloads'
//! manifest, the scripts the control plane runs (`kubectl` with the admin kubeconfig), and
//! the parsers that turn their output (`kubectl get -o json`, curl, nslookup) into check
//! results. Every pod runs upstream's conformance image, agnhost ([`AGNHOST_IMAGE`]). [`run`]
//! runs the scripts in order over the engine's [`Remote`](kwin_engine::pipeline::Remote) (the
//! pipeline's connection to the first control plane: logged, scrubbed, retried,
//! interruptible) and emits one `check` event per row; everything else here is pure.
//!
//! The workloads (one namespace, deleted afterwards):
//!
//! | object | what |
//! |---|---|
//! | Pod `win-web` | agnhost `netexec` (HTTP on port 80); `nodeSelector` `kubernetes.io/os: windows` (and the node's `node.kubernetes.io/windows-build`), toleration `os=windows:NoSchedule` |
//! | Pod `linux-web` | agnhost `netexec` on port 80, `nodeSelector` `kubernetes.io/os: linux` |
//! | Pod `client` | agnhost `pause` (curl, nslookup), `nodeSelector` `kubernetes.io/os: linux` |
//! | Services `win-web`, `linux-web` | `NodePort`, port 80, `externalTrafficPolicy: Local` (Windows Server 2022 on an overlay network needs it) |
//!
//! Pods rather than Deployments: fixed names for the messages, and nothing depends on a
//! controller. Egress is checked with curl, never ping: ICMP out of the overlay does not work on
//! Windows.
//!
//! Files: `workloads.rs` (the manifest), `scripts.rs` (what runs on the control plane),
//! `parse.rs` (their output → [`Verdict`]s), `run.rs` (the order, the waits, cleanup on every
//! path out).

mod parse;
pub mod run;
mod scripts;
mod workloads;

pub use parse::*;
pub use run::{verify, VerifyOptions, VerifyReport, VerifySpec};
pub use scripts::*;
pub use workloads::*;
