#!/usr/bin/env bash
# Installs the Debian packages distc needs to build and test, skipping those
# already present. Runs `apt-get update` once, only when something is missing.
set -euo pipefail

pkgs=(
  cmake g++ make pkg-config binutils   # build, and nm/readelf/objcopy for the ABI checks
  abigail-tools                        # abidiff against the committed ABI baseline
  libgloo-dev libdlpack-dev            # the built-in CPU backend; DLPack tensors in the API
  libcmocka-dev                        # C tests
  libopenmpi-dev openmpi-bin           # the mpi backend plugin and mpirun for its tests
  python3 python3-pytest python3-numpy # Debian's /usr/bin/python3 test runner
  swig python3-dev                     # the Python bindings (bindings/python)
  bindgen                              # regenerates and checks the Rust bindings (bindings/rust/distc-sys)
  python3-torch                        # the PyTorch peer for wire-compatibility tests and benchmarks
  clang libclang-rt-14-dev             # libFuzzer and its sanitizer runtimes (tools/fuzz.sh)
  clang-format-14                      # the house style (.clang-format; tools/check-format.sh)
  scdoc mandoc                         # the man1/man7 pages (man/*.scd) and their lint (tests/man)
  slurmctld slurmd slurm-client munge  # a real Slurm across fake hosts (netns_srun)
  iproute2 iperf3                      # fake hosts' links, and their rate beside bench/compare --hosts
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -q
$sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
