"""What bench/compare and bench/ab say about the machine they ran on."""

import json
import os
import platform
import subprocess


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def line_trip_ns(build):
    """One cache line's trip between two cores (build/distc-line-trip), in ns: None where
    it is not built or there is one core. Every small message between ranks on one host
    costs at least that, and on a VM it moves when the host moves the cores."""
    exe = os.path.join(build, "distc-line-trip")
    if not os.access(exe, os.X_OK):
        return None
    try:
        p = subprocess.run([exe, "--json", "--trips", "20000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           universal_newlines=True, timeout=60)
        return json.loads(p.stdout)["line_trip_ns"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return None


def line_trip_note(start, end):
    """The header line for the trips measured before and after a run."""
    if start is None or end is None:
        return "# cache-line trip between two cores: not measured (distc-line-trip not built, or one core)"
    note = "# cache-line trip between two cores (distc-line-trip): %.0f ns one way before the run, %.0f ns after" % (
        start, end)
    if max(start, end) > 1.5 * min(start, end):
        note += ": the host moved this machine's cores meanwhile, and small-message times with them"
    return note
