#!/usr/bin/python3
"""Status stand-in for the lab cluster (see README.md next to this file).

Runs on the machine next to the lab's real kube-apiserver (which has no controller-manager,
no scheduler and no kubelets) and, every second, writes the status that controllers and
kubelets would write IF every pod ran wherever it may be scheduled:

- DaemonSet: desired/current/updated/ready/available = the Ready Nodes its pod template may
  be scheduled on (nodeSelector and required node affinity with In/NotIn/Exists/
  DoesNotExist, taints against tolerations); observedGeneration = generation.
- Deployment: replicas updated/ready/available = spec.replicas when at least one Ready Node
  fits its pod template, else 0; condition Available accordingly.
- Node: the `node.kubernetes.io/not-ready` taint (added by the API server's admission when a
  Node registers) is removed once the Node is Ready, as the node lifecycle controller does.
- TigeraStatus `calico`: created with Available=True once an operator.tigera.io
  Installation `default` exists (what the tigera operator reports when Calico is up).

No pod is ever created or run: this only lets kwin's waits observe a rollout.

    status-stand-in.py KUBECONFIG [--once]
"""

import json
import subprocess
import sys
import time


def kubectl(kc, *args, stdin=None):
    return subprocess.run(["kubectl", "--kubeconfig", kc, "--request-timeout=10s", *args],
                          input=stdin, capture_output=True, text=True)


def log(r):
    if r.returncode != 0:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {' '.join(r.args[3:6])}: {r.stderr.strip()}\n")
        sys.stderr.flush()


def get(kc, what, *extra):
    r = kubectl(kc, "get", what, "-A", "-o", "json", *extra)
    if r.returncode != 0:
        return []
    try:
        return json.loads(r.stdout).get("items", [])
    except ValueError:
        return []


def ready(node):
    for c in node.get("status", {}).get("conditions", []):
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def match_expr(labels, e):
    k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
    if op == "In":
        return labels.get(k) in vals
    if op == "NotIn":
        return labels.get(k) not in vals
    if op == "Exists":
        return k in labels
    if op == "DoesNotExist":
        return k not in labels
    return False


def tolerated(taint, tolerations):
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for t in tolerations or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def fits(node, pod_spec):
    labels = node.get("metadata", {}).get("labels", {})
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    req = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    if terms and not any(all(match_expr(labels, e) for e in t.get("matchExpressions") or [])
                         for t in terms):
        return False
    for taint in node.get("spec", {}).get("taints") or []:
        if not tolerated(taint, pod_spec.get("tolerations")):
            return False
    return True


def patch_status(kc, kind, obj, status):
    cur = obj.get("status") or {}
    if all(cur.get(k) == v for k, v in status.items()):
        return
    md = obj["metadata"]
    log(kubectl(kc, "patch", kind, md["name"], "-n", md["namespace"], "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": status})))


def once(kc):
    nodes = [n for n in get(kc, "nodes") if ready(n)]
    for n in nodes:
        taints = n.get("spec", {}).get("taints") or []
        keep = [t for t in taints if t.get("key") != "node.kubernetes.io/not-ready"]
        if len(keep) != len(taints):
            patch = [{"op": "test", "path": "/metadata/resourceVersion",
                      "value": n["metadata"]["resourceVersion"]},
                     {"op": "replace", "path": "/spec/taints", "value": keep}]
            if kubectl(kc, "patch", "node", n["metadata"]["name"], "--type=json",
                       "-p", json.dumps(patch)).returncode == 0:
                n["spec"]["taints"] = keep
    for ds in get(kc, "daemonsets"):
        spec = ds["spec"]["template"].get("spec", {})
        n = sum(1 for node in nodes if fits(node, spec))
        patch_status(kc, "daemonset", ds, {
            "observedGeneration": ds["metadata"].get("generation", 1),
            "desiredNumberScheduled": n, "currentNumberScheduled": n,
            "updatedNumberScheduled": n, "numberReady": n, "numberAvailable": n,
            "numberMisscheduled": 0})
    for d in get(kc, "deployments"):
        spec = d["spec"]["template"].get("spec", {})
        want = d["spec"].get("replicas", 1)
        ok = any(fits(node, spec) for node in nodes)
        got = want if ok else 0
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conds = [c for c in (d.get("status") or {}).get("conditions", [])
                 if c.get("type") == "Available"]
        avail = "True" if ok else "False"
        cond = conds[0] if conds and conds[0].get("status") == avail else {
            "type": "Available", "status": avail,
            "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
            "message": "status stand-in: pods counted as available, none runs" if ok
            else "status stand-in: no Ready node fits the pod template",
            "lastUpdateTime": now, "lastTransitionTime": now}
        patch_status(kc, "deployment", d, {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": got, "updatedReplicas": got, "readyReplicas": got,
            "availableReplicas": got, "conditions": [cond]})
    if any(i["metadata"]["name"] == "default" for i in get(kc, "installations.operator.tigera.io")):
        r = kubectl(kc, "get", "tigerastatus", "calico", "-o", "json")
        if r.returncode != 0 and "NotFound" in r.stderr:
            log(kubectl(kc, "create", "-f", "-", stdin=json.dumps({
                "apiVersion": "operator.tigera.io/v1", "kind": "TigeraStatus",
                "metadata": {"name": "calico"}, "spec": {}})))
            r = kubectl(kc, "get", "tigerastatus", "calico", "-o", "json")
        if r.returncode == 0:
            ts = json.loads(r.stdout)
            conds = (ts.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Available" and c.get("status") == "True" for c in conds):
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                st = {"status": {"conditions": [
                    {"type": "Available", "status": "True", "reason": "AllObjectsAvailable",
                     "message": "status stand-in: no Calico component runs",
                     "lastTransitionTime": now},
                    {"type": "Progressing", "status": "False", "reason": "AllObjectsAvailable",
                     "message": "status stand-in", "lastTransitionTime": now},
                    {"type": "Degraded", "status": "False", "reason": "AllObjectsAvailable",
                     "message": "status stand-in", "lastTransitionTime": now}]}}
                r = kubectl(kc, "patch", "tigerastatus", "calico", "--subresource=status",
                            "--type=merge", "-p", json.dumps(st))
                log(r)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: status-stand-in.py KUBECONFIG [--once]")
    kc = sys.argv[1]
    if "--once" in sys.argv:
        once(kc)
        return
    while True:
        once(kc)
        time.sleep(1)


if __name__ == "__main__":
    main()
