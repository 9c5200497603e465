#!/usr/bin/env python3
"""Convert the three module case formats (modules/tests/{cases,windows_cases,kube_cases}) to
the one format testkit::cases reads, in place, once.

Every assertion of a case is counted before and after (the kind of outcome, each expected
text, each list item, a step count, a touches list, a param path, each output_contains item);
the script refuses to write anything if a count differs or an old key is not understood, so
no assertion is lost in the conversion.

Linux cases said {"error": ...} both for a refused build and for a failed plan: a case with
no facts is a build error (a plan needs the facts the module asks for, and the old runner
rejected a case whose facts differed from them), one with facts a plan error. The runner
then checks each case under its new reading.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "modules" / "tests"


def count_old(fmt, case):
    e = case["expect"]
    n = len(case.get("output_contains", []))
    if isinstance(e, str):
        assert e == "noop", e
        return n + 1
    if fmt == "linux":
        if "noop" in e:
            assert set(e) == {"noop"}, e
            return n + 1 + (1 if e["noop"] else 0)
        if "error" in e:
            assert set(e) <= {"error", "path"}, e
            return n + 2 + (1 if "path" in e else 0)
        known = {"action", "reason", "steps", "steps_contain", "steps_not_contain",
                 "diff_contains", "diff_not_contains", "touches", "writes"}
        assert set(e) <= known and "action" in e, e
        for k in e:
            if k in ("action", "reason", "steps", "touches"):
                n += 1
            else:
                n += len(e[k])
        return n
    (kind, body), = e.items()
    if kind in ("noop_warning", "error", "param_error"):
        return n + 2
    assert kind == "change", kind
    known = {"action", "reason_contains", "steps_contain", "steps_in_order", "steps_lack",
             "diff_contains"}
    assert set(body) <= known, body
    for k, v in body.items():
        n += 1 if k == "action" else len(v)
    return n


def count_new(case):
    e = case["expect"]
    n = len(case.get("output_contains", []))
    (kind, body), = e.items()
    if kind == "noop":
        return n + 1 + (1 if body else 0)
    if kind in ("noop_warning", "error"):
        return n + 2
    if kind == "param_error":
        return n + 2 + (1 if "path" in body else 0)
    assert kind == "change"
    for k, v in body.items():
        n += 1 if k in ("action", "steps", "touches") else len(v)
    return n


def convert(fmt, case):
    out = {}
    for k in ("comment", "shell", "params", "inputs", "facts"):
        if k in case:
            out[k] = case[k]
    unknown = set(case) - {"comment", "shell", "params", "inputs", "facts", "expect",
                           "output_contains"}
    assert not unknown, unknown
    e = case["expect"]
    if isinstance(e, str):
        out["expect"] = {"noop": ""}
    elif fmt == "linux":
        if "noop" in e:
            out["expect"] = {"noop": e["noop"]}
        elif "error" in e:
            if case.get("facts"):
                assert "path" not in e, case
                out["expect"] = {"error": e["error"]}
            else:
                pe = {"message": e["error"]}
                if "path" in e:
                    pe["path"] = e["path"]
                out["expect"] = {"param_error": pe}
        else:
            ch = {"action": e["action"]}
            rename = {"reason": "reason_contains", "steps_not_contain": "steps_lack",
                      "diff_not_contains": "diff_lacks"}
            for k, v in e.items():
                if k == "action":
                    continue
                if k == "reason":
                    ch["reason_contains"] = [v]
                else:
                    ch[rename.get(k, k)] = v
            out["expect"] = {"change": ch}
    else:
        (kind, body), = e.items()
        if kind == "param_error":
            out["expect"] = {"param_error": {"message": body}}
        else:
            out["expect"] = {kind: body}
    if "output_contains" in case:
        out["output_contains"] = case["output_contains"]
    return out


def main():
    plan = []
    before = after = 0
    for fmt, sub in (("linux", "cases"), ("windows", "windows_cases"), ("kube", "kube_cases")):
        for f in sorted((ROOT / sub).glob("*/*.json")):
            if f.parent.name.startswith("_"):
                continue
            case = json.loads(f.read_text())
            new = convert(fmt, case)
            b, a = count_old(fmt, case), count_new(new)
            if a != b:
                sys.exit(f"{f}: {b} assertions before, {a} after")
            before += b
            after += a
            plan.append((f, new))
    if "--write" in sys.argv:
        for f, new in plan:
            f.write_text(json.dumps(new, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(plan)} cases, {before} assertions before, {after} after"
          + ("" if "--write" in sys.argv else " (dry run; --write to convert)"))


if __name__ == "__main__":
    main()
