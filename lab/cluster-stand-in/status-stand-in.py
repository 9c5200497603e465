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
- PodDisruptionBudget (the disruption controller, pkg/controller/disruption/disruption.go):
  expectedPods = the pods its selector matches in its namespace, desiredHealthy =
  minAvailable (a number, or a percentage of expectedPods rounded up) or expectedPods -
  maxUnavailable (rounded up), currentHealthy = those pods Ready, not being deleted and not in
  status.disruptedPods (entries the API server's eviction added; dropped once the pod is gone
  or after 2 minutes), disruptionsAllowed = max(0, currentHealthy - desiredHealthy),
  observedGeneration = generation. Written with the PDB's resourceVersion as precondition, so
  an eviction that changed the status in between is never overwritten. (The controller takes
  expectedPods from the scale of the pods' controllers; here there are no controllers.)
- Node lifecycle (the node lifecycle controller): a Node whose Lease in kube-node-lease was
  not renewed for KWIN_LAB_NODE_GRACE seconds (default 40, the controller's
  node-monitor-grace-period) gets Ready=Unknown ("Kubelet stopped posting node status.") and
  the taint node.kubernetes.io/unreachable:NoSchedule; the taint goes once it is Ready again.
  Nodes without a Lease (made by hand) are left alone.

No pod is created or run: this only lets kwin's waits observe a rollout, and evictions see
the budgets a cluster would compute. (The kubelet stand-in reports the pods bound to its node
as running and completes their deletion.)

With --timeline FILE it also appends one JSON line to FILE whenever a Node's schedulability,
Ready status or kubeletVersion is seen to change (sampled every second; not a controller's
job: a record for the lab's tests of the order nodes were cordoned, upgraded and uncordoned
in).

    status-stand-in.py KUBECONFIG [--once] [--timeline FILE]
"""

import base64
import datetime
import http.client
import json
import math
import os
import ssl
import sys
import tempfile
import time
import urllib.parse

import yaml

NODE_GRACE = float(os.environ.get("KWIN_LAB_NODE_GRACE", "40"))
DISRUPTED_TIMEOUT = 120  # the disruption controller's DeletionTimeout
MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"


def log(msg):
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {msg}\n")
    sys.stderr.flush()


class Api:
    """The API server with the tier's admin kubeconfig (plain HTTPS: a kubectl process per
    call would cost a core's worth of CPU on the lab machine)."""

    def __init__(self, kubeconfig):
        with open(kubeconfig) as f:
            kc = yaml.safe_load(f)
        cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
        self.server = cluster["server"].rstrip("/")
        u = urllib.parse.urlsplit(self.server)
        self.host, self.port, self.conn = u.hostname, u.port or 443, None
        d = tempfile.mkdtemp()
        try:
            paths = {}
            for k, data in (("ca", cluster["certificate-authority-data"]),
                            ("crt", user["client-certificate-data"]),
                            ("key", user["client-key-data"])):
                paths[k] = os.path.join(d, k)
                fd = os.open(paths[k], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(base64.b64decode(data))
            self.ctx = ssl.create_default_context(cafile=paths["ca"])
            self.ctx.check_hostname = False
            self.ctx.load_cert_chain(paths["crt"], paths["key"])
        finally:
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            os.rmdir(d)

    def call(self, method, path, body=None, ctype="application/json"):
        """(status, parsed JSON or None, text); status 0 when the server cannot be reached.
        One kept-alive connection (a TLS handshake per call would cost the lab's CPU)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = ctype
        if getattr(self, "token", None):
            headers["Authorization"] = "Bearer " + self.token
        for attempt in (1, 2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port,
                                                            context=self.ctx, timeout=10)
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                status, text = r.status, r.read().decode(errors="replace")
                break
            except (http.client.HTTPException, OSError) as e:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    return 0, None, str(e)
        try:
            return status, (json.loads(text) if text else None), text
        except ValueError:
            return status, None, text

    def items(self, path):
        st, body, _ = self.call("GET", path)
        return (body or {}).get("items") or [] if st == 200 else []

    def change(self, method, path, body, ctype="application/json", quiet_conflict=False):
        st, _, text = self.call(method, path, body, ctype)
        if st not in (200, 201) and not (quiet_conflict and st == 409):
            log(f"{method} {path}: HTTP {st} {text[:300]}")
        return st

    def pdbs(self):
        """PodDisruptionBudgets (policy/v1: GA in 1.21; policy/v1beta1 was removed in 1.25)."""
        return self.items("/apis/policy/v1/poddisruptionbudgets")


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


def patch_status(api, path, obj, status):
    """Merge-patch `status` into OBJ's status subresource at PATH, if it differs."""
    cur = obj.get("status") or {}
    if all(cur.get(k) == v for k, v in status.items()):
        return
    api.change("PATCH", f"{path}/status", {"status": status}, MERGE)


def parse_time(t):
    """RFC 3339 (with or without fractional seconds) -> epoch seconds, or None."""
    if not t:
        return None
    try:
        t = t.rstrip("Z")
        base, _, frac = t.partition(".")
        return (datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
                .replace(tzinfo=datetime.timezone.utc).timestamp() + float("0." + (frac or "0")))
    except ValueError:
        return None


def now_str():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def selects(selector, labels):
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(match_expr(labels, e) for e in selector.get("matchExpressions") or [])


def scaled(value, total, round_up):
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    v = int(str(value).rstrip("%")) * total / 100
    return math.ceil(v) if round_up else math.floor(v)


def pdb_status(pdb, pods, now):
    spec = pdb.get("spec") or {}
    ns = pdb["metadata"]["namespace"]
    selector = spec.get("selector")
    matched = [p for p in pods if p["metadata"]["namespace"] == ns and selector is not None
               and selects(selector, p["metadata"].get("labels") or {})]
    expected = len(matched)
    if spec.get("minAvailable") is not None:
        desired = scaled(spec["minAvailable"], expected, True)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - scaled(spec["maxUnavailable"], expected, True))
    else:
        desired = expected
    live = {p["metadata"]["name"]: p for p in matched}
    disrupted = {}
    for name, t in ((pdb.get("status") or {}).get("disruptedPods") or {}).items():
        p, when = live.get(name), parse_time(t)
        if p and not p["metadata"].get("deletionTimestamp") and when and now - when < DISRUPTED_TIMEOUT:
            disrupted[name] = t
    healthy = sum(1 for p in matched
                  if not p["metadata"].get("deletionTimestamp")
                  and p["metadata"]["name"] not in disrupted
                  and any(c.get("type") == "Ready" and c.get("status") == "True"
                          for c in (p.get("status") or {}).get("conditions") or []))
    return {"observedGeneration": pdb["metadata"].get("generation", 1),
            "expectedPods": expected, "desiredHealthy": desired, "currentHealthy": healthy,
            "disruptionsAllowed": max(0, healthy - desired), "disruptedPods": disrupted}


def sync_pdbs(api):
    pdbs = api.pdbs()
    if not pdbs:
        return
    pods = api.items("/api/v1/pods")
    now = time.time()
    for pdb in pdbs:
        want = pdb_status(pdb, pods, now)
        cur = pdb.get("status") or {}
        if all(cur.get(k) == v or (k == "disruptedPods" and not v and not cur.get(k))
               for k, v in want.items()):
            continue
        md = pdb["metadata"]
        # A merge patch removes the disruptedPods entries that go with null.
        dp = {k: None for k in (cur.get("disruptedPods") or {}) if k not in want["disruptedPods"]}
        dp.update(want["disruptedPods"])
        # The resourceVersion makes it a precondition: an eviction that changed the budget
        # since it was read wins (409), and the next round computes again.
        api.change("PATCH", f"/apis/policy/v1/namespaces/{md['namespace']}/poddisruptionbudgets/"
                   f"{md['name']}/status",
                   {"metadata": {"resourceVersion": md["resourceVersion"]},
                    "status": dict(want, disruptedPods=dp)}, MERGE, quiet_conflict=True)


def node_lifecycle(api, nodes):
    leases = {x["metadata"]["name"]: x for x in
              api.items("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")}
    now = time.time()
    for n in nodes:
        name = n["metadata"]["name"]
        lease = leases.get(name)
        if lease is None:
            continue
        renewed = parse_time((lease.get("spec") or {}).get("renewTime"))
        conds = (n.get("status") or {}).get("conditions") or []
        ready_c = next((c for c in conds if c.get("type") == "Ready"), None)
        taints = (n.get("spec") or {}).get("taints") or []
        unreachable = any(t.get("key") == "node.kubernetes.io/unreachable" for t in taints)
        stale = renewed is None or now - renewed > NODE_GRACE
        rv = n["metadata"]["resourceVersion"]
        if stale and ready_c and ready_c.get("status") != "Unknown":
            t = now_str()
            new = [dict(c, status="Unknown", reason="NodeStatusUnknown",
                        message="Kubelet stopped posting node status.", lastTransitionTime=t)
                   if c.get("type") in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
                   else c for c in conds]
            api.change("PATCH", f"/api/v1/nodes/{name}/status",
                       {"metadata": {"resourceVersion": rv}, "status": {"conditions": new}},
                       MERGE, quiet_conflict=True)
            log(f"node {name}: lease not renewed for {NODE_GRACE:.0f}s, Ready=Unknown")
        elif stale and not unreachable:
            api.change("PATCH", f"/api/v1/nodes/{name}", [
                {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                {"op": "add", "path": "/spec/taints", "value": taints + [
                    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule",
                     "timeAdded": now_str()}]}], JSONPATCH, quiet_conflict=True)
        elif not stale and unreachable and ready(n):
            api.change("PATCH", f"/api/v1/nodes/{name}", [
                {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                {"op": "replace", "path": "/spec/taints", "value": [
                    t for t in taints if t.get("key") != "node.kubernetes.io/unreachable"]}],
                JSONPATCH, quiet_conflict=True)


def tigera(api):
    base = "/apis/operator.tigera.io/v1"
    if not any(i["metadata"]["name"] == "default" for i in api.items(f"{base}/installations")):
        return
    st, ts, _ = api.call("GET", f"{base}/tigerastatuses/calico")
    if st == 404:
        api.change("POST", f"{base}/tigerastatuses", {
            "apiVersion": "operator.tigera.io/v1", "kind": "TigeraStatus",
            "metadata": {"name": "calico"}, "spec": {}})
        st, ts, _ = api.call("GET", f"{base}/tigerastatuses/calico")
    if st != 200:
        return
    conds = (ts.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Available" and c.get("status") == "True" for c in conds):
        return
    now = now_str()
    api.change("PATCH", f"{base}/tigerastatuses/calico/status", {"status": {"conditions": [
        {"type": "Available", "status": "True", "reason": "AllObjectsAvailable",
         "message": "status stand-in: no Calico component runs", "lastTransitionTime": now},
        {"type": "Progressing", "status": "False", "reason": "AllObjectsAvailable",
         "message": "status stand-in", "lastTransitionTime": now},
        {"type": "Degraded", "status": "False", "reason": "AllObjectsAvailable",
         "message": "status stand-in", "lastTransitionTime": now}]}}, MERGE)


SEEN = {}


def timeline(path, nodes):
    """Append the nodes whose (unschedulable, Ready, kubeletVersion) changed since last seen."""
    lines = []
    for n in nodes:
        name = n["metadata"]["name"]
        st = n.get("status") or {}
        ready_c = next((c.get("status") for c in st.get("conditions") or []
                        if c.get("type") == "Ready"), None)
        now = (bool((n.get("spec") or {}).get("unschedulable")), ready_c,
               (st.get("nodeInfo") or {}).get("kubeletVersion"))
        if SEEN.get(name) != now:
            SEEN[name] = now
            lines.append(json.dumps({"time": now_str(), "epoch": round(time.time(), 3),
                                     "node": name, "unschedulable": now[0], "ready": now[1],
                                     "kubelet": now[2]}))
    for name in [k for k in SEEN if k not in {n["metadata"]["name"] for n in nodes}]:
        del SEEN[name]
        lines.append(json.dumps({"time": now_str(), "epoch": round(time.time(), 3),
                                 "node": name, "deleted": True}))
    if lines:
        with open(path, "a") as f:
            f.write("\n".join(lines) + "\n")


def once(api, timeline_path=None):
    all_nodes = api.items("/api/v1/nodes")
    if timeline_path:
        timeline(timeline_path, all_nodes)
    node_lifecycle(api, all_nodes)
    sync_pdbs(api)
    nodes = [n for n in all_nodes if ready(n)]
    for n in nodes:
        taints = n.get("spec", {}).get("taints") or []
        keep = [t for t in taints if t.get("key") != "node.kubernetes.io/not-ready"]
        if len(keep) != len(taints):
            st = api.change("PATCH", f"/api/v1/nodes/{n['metadata']['name']}", [
                {"op": "test", "path": "/metadata/resourceVersion",
                 "value": n["metadata"]["resourceVersion"]},
                {"op": "replace", "path": "/spec/taints", "value": keep}], JSONPATCH,
                quiet_conflict=True)
            if st == 200:
                n["spec"]["taints"] = keep
    for ds in api.items("/apis/apps/v1/daemonsets"):
        spec = ds["spec"]["template"].get("spec", {})
        n = sum(1 for node in nodes if fits(node, spec))
        md = ds["metadata"]
        patch_status(api, f"/apis/apps/v1/namespaces/{md['namespace']}/daemonsets/{md['name']}",
                     ds, {"observedGeneration": md.get("generation", 1),
                          "desiredNumberScheduled": n, "currentNumberScheduled": n,
                          "updatedNumberScheduled": n, "numberReady": n, "numberAvailable": n,
                          "numberMisscheduled": 0})
    for d in api.items("/apis/apps/v1/deployments"):
        spec = d["spec"]["template"].get("spec", {})
        want = d["spec"].get("replicas", 1)
        ok = any(fits(node, spec) for node in nodes)
        got = want if ok else 0
        now = now_str()
        conds = [c for c in (d.get("status") or {}).get("conditions", [])
                 if c.get("type") == "Available"]
        avail = "True" if ok else "False"
        cond = conds[0] if conds and conds[0].get("status") == avail else {
            "type": "Available", "status": avail,
            "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
            "message": "status stand-in: pods counted as available, none runs" if ok
            else "status stand-in: no Ready node fits the pod template",
            "lastUpdateTime": now, "lastTransitionTime": now}
        md = d["metadata"]
        patch_status(api, f"/apis/apps/v1/namespaces/{md['namespace']}/deployments/{md['name']}",
                     d, {"observedGeneration": md.get("generation", 1),
                         "replicas": got, "updatedReplicas": got, "readyReplicas": got,
                         "availableReplicas": got, "conditions": [cond]})
    tigera(api)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: status-stand-in.py KUBECONFIG [--once] [--timeline FILE]")
    api = Api(sys.argv[1])
    tl = sys.argv[sys.argv.index("--timeline") + 1] if "--timeline" in sys.argv[:-1] else None
    if "--once" in sys.argv:
        once(api, tl)
        return
    while True:
        try:
            once(api, tl)
        except Exception as e:  # a malformed object or a hiccup: say so, go on
            log(f"error: {type(e).__name__}: {e}")
        time.sleep(1)


if __name__ == "__main__":
    main()
