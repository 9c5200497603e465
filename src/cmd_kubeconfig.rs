//! `kwin kubeconfig plan.toml [-o FILE] [--address HOST[:PORT]]`: the cluster's admin
//! kubeconfig, read on the first control plane over a session's connection (host keys as for
//! apply, the run logged — its stdout never: it holds the admin key;
//! `kwin_modules::kube::kubeconfig`), written with mode 0600 through a new, randomly named
//! file and a rename (`fs::write_private`). Default file: `<cluster name>.kubeconfig` next to
//! the plan. Only the path, context and server are reported. The server is
//! `https://<control_plane_endpoint>`, or with `--address` the address this machine reaches
//! the API server on (a CI runner outside the nodes' network: a public IP, a load balancer),
//! the port the endpoint's unless given (as k0sctl's `kubeconfig --address`); an address the
//! API server's certificate does not name (`Effective::api_server_cert_covers`) is a warning
//! naming `cluster.api_server_sans`, before anything connects.

use crate::args::{request, Recipes, RunArgs};
use crate::drive::{self, Render};
use crate::output::{KubeconfigWritten, Output};
use kwin_engine::diag::{Diagnostic, Diagnostics};
use kwin_engine::event::Mode;
use kwin_engine::pipeline::{ChecksumMode, Outcome, Session};
use kwin_modules::kube::kubeconfig::{fetch, FetchError};
use kwin_modules::kube::ADMIN_CONF;
use std::path::PathBuf;

pub fn kubeconfig(
    run: &RunArgs,
    file: Option<PathBuf>,
    address: Option<&str>,
    out: &Output,
) -> anyhow::Result<Outcome> {
    if !run.limit.is_empty() {
        anyhow::bail!(
            "--limit does not apply to `kwin kubeconfig`: it reads the first control plane only"
        );
    }
    let req =
        request(&run.plan, Recipes::Build, ChecksumMode::Known, false).with_vars(run.vars.map());
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let Some(cluster) = &p.eff.cluster else {
        let plan = run.plan.display();
        anyhow::bail!("{plan} has no [cluster]: there is no kubeconfig to fetch");
    };
    let Some(cp) = p.eff.first_control_plane(&p.plan) else {
        anyhow::bail!("the plan has no host with role = \"control-plane\"");
    };
    let server = match address {
        None => format!("https://{}", cluster.control_plane_endpoint),
        Some(a) => {
            let (host, port) = kwin_engine::plan::syntax::endpoint(a)
                .map_err(|why| anyhow::anyhow!("--address {a} is not HOST[:PORT]: {why}"))?;
            if !p.eff.api_server_cert_covers(&host) {
                out.warnings(&Diagnostics(vec![Diagnostic::warning(
                    "kubeconfig-address",
                    format!(
                        "--address {a}: the API server's certificate does not name `{host}`, so kubectl will refuse the connection"
                    ),
                )
                .with_hint(format!(
                    "add \"{host}\" to cluster.api_server_sans before the cluster is first applied (kubeadm writes the certificate once), or use an address it names: {}",
                    p.eff.api_server_cert_names().join(", ")
                ))]));
            }
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            format!("https://{host}:{}", port.unwrap_or(cluster.api_server_port))
        }
    };
    let yaml = drive::stage(out, Render::Quiet, |ctl| async {
        let mut s = Session::open(&p, &run.flags(), Mode::Apply, ctl)?;
        let yaml = fetch(&s.remote(cp), &cluster.name, &server).await;
        Ok((yaml, s.notes()))
    })?;
    let yaml = match yaml {
        Ok(y) => y,
        Err(FetchError::Interrupted) => return Ok(Outcome::Interrupted),
        Err(FetchError::Failed(e)) => anyhow::bail!("{e}"),
    };
    let path = file.unwrap_or_else(|| p.plan.base_dir.join(format!("{}.kubeconfig", cluster.name)));
    kwin_engine::fs::write_private(&path, yaml.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    out.kubeconfig_written(&KubeconfigWritten {
        path: &path,
        context: &cluster.name,
        server: &server,
        host: &cp.name,
        from: ADMIN_CONF,
    });
    Ok(Outcome::Success)
}
