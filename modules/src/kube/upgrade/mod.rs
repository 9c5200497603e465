//! Kubernetes upgrades: what the cluster runs, and whether the plan's `kubernetes_version` may
//! follow it.
//!
//! - [`cluster`]: the running versions, read in one `kubectl` round trip on the first control
//!   plane (the kube-apiserver mirror pods, kubeadm-config, the Nodes), and their pure parser.
//! - [`skew`]: the Kubernetes version skew policy as a pure function of those facts and the
//!   plan's version: a refusal per broken rule (located at the plan's key or a host), or the
//!   order an upgrade runs in.
//!
//! Nothing here connects or prints: the pipeline runs [`cluster::script`] on the first control
//! plane and hands the answer to [`cluster::parse`] and [`skew::check`].

pub mod cluster;
pub mod gate;
pub mod skew;
