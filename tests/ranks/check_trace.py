#!/usr/bin/env python3
# Runs a job with GRADWIRE_TRACE_DIR set to a fresh directory, then checks
# the timeline (diag/trace.h): every rank's Chrome-trace file is valid JSON
# with collective and bucket spans, and rank 0 wrote the run manifest.
#
#   check_trace.py NRANKS -- launch command...
import json, os, subprocess, sys, tempfile

nranks = int(sys.argv[1])
cmd = sys.argv[3:]
with tempfile.TemporaryDirectory(prefix="gradwire-trace-test.") as d:
    env = dict(os.environ, GRADWIRE_TRACE_DIR=d)
    if subprocess.run(cmd, env=env).returncode != 0:
        sys.exit("check_trace: the launch failed")
    manifest = json.load(open(os.path.join(d, "gradwire-manifest.json")))
    for key in ("gradwire_version", "git_commit", "libfabric_version", "provider", "options"):
        if key not in manifest:
            sys.exit(f"check_trace: the manifest has no {key}: {manifest}")
    print("manifest:", json.dumps(manifest))
    for r in range(nranks):
        events = json.load(open(os.path.join(d, f"gradwire-trace-rank{r}.json")))["traceEvents"]
        spans = [e for e in events if e.get("ph") == "X"]
        cats = {e["cat"] for e in spans}
        for want in ("collective", "queued", "bucket", "step"):
            if want not in cats:
                sys.exit(f"check_trace: rank {r} has no '{want}' span (has {sorted(cats)})")
        if any(e["dur"] < 0 or e["ts"] <= 0 for e in spans):
            sys.exit(f"check_trace: rank {r} has a span with a bad time")
        print(f"rank {r}: {len(spans)} spans, categories {sorted(cats)}")
print("check_trace: ok")
