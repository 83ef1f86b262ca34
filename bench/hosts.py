"""Fake hosts for bench/compare --hosts: the network namespaces of
tests/netns/hosts.sh (one implementation for the tests and the benchmark),
each host's link optionally shaped with tc's token bucket, optionally
delayed (through netns_wire, the user-space switch of tests/netns/wire.c,
on kernels without netem), and the link's own rate measured by iperf3 in
the same run."""
import json
import os
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTS_SH = os.path.join(HERE, os.pardir, "tests", "netns", "hosts.sh")


class Hosts:
    def __init__(self, n, rate=None, delay_us=None, wire=None):
        self.n = n
        self.id = "dcb%d" % os.getpid()
        self.delay_us = delay_us
        if delay_us:
            # A segment of up to 64 KiB per frame (--offload): the switch then
            # carries far more than frame by frame, and no frame is lost.
            self._sh("NETNS_WIRE='--delay-us %g --offload' NETNS_WIRE_BIN='%s' netns_up %d" % (delay_us, wire, n))
        else:
            self._sh("netns_up %d" % n)
        self.shaped = None
        if rate:
            for i in range(n):
                # The bucket holds a few milliseconds at the rate, as a NIC's queue would.
                if self._sh("netns_shape %d tbf rate %s burst 4mb latency 5ms" % (i, rate), check=False) != 0:
                    self.close()
                    raise SystemExit("bench/compare: this kernel cannot shape a link with tc tbf")
            self.shaped = rate

    def _sh(self, what, check=True):
        script = ". '%s'; NETNS_KEEP=1; NETNS_N=%d; %s" % (HOSTS_SH, self.n, what)
        env = dict(os.environ, NETNS_ID=self.id)
        rc = subprocess.run(["sh", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
        if check and rc.returncode != 0:
            raise SystemExit("bench/compare: cannot make fake hosts: %s" % rc.stdout.strip()[-500:])
        return rc.returncode

    def name(self, i):
        return "%sh%d" % (self.id, i)

    def addr(self, i):
        return "10.88.0.%d" % (i + 1)

    def wrap(self, host, cmd):
        """`cmd` run on host `host`."""
        return ["ip", "netns", "exec", self.name(host)] + cmd

    def iperf(self, seconds=3, streams=1, bidir=False):
        """host 1 -> host 0 over the link, in GB/s (1e9 B/s); None without iperf3.
        bidir: both ways at once, the slower direction's rate."""
        if not shutil.which("iperf3") or self.n < 2:
            return None
        server = subprocess.Popen(self.wrap(0, ["iperf3", "-s", "-1", "-p", "5201"]), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):
                out = subprocess.run(self.wrap(1, ["iperf3", "-c", self.addr(0), "-p", "5201", "-t", str(seconds),
                                                   "-P", str(streams), "-J"] + (["--bidir"] if bidir else [])),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
                try:
                    end = json.loads(out.stdout)["end"]
                    rate = end["sum_received"]["bits_per_second"]
                    if bidir:
                        rate = min(rate, end["sum_received_bidir_reverse"]["bits_per_second"])
                    return rate / 8e9
                except (ValueError, KeyError):
                    time.sleep(0.1)  # the server is not listening yet
            return None
        finally:
            server.kill()
            server.wait()

    def close(self):
        self._sh("netns_down", check=False)
