#!/usr/bin/env bash
# Installs the Debian packages flashlab builds against, only those that are missing.
# Run as root on Debian 12 (or with sudo available). Safe to run twice.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config
  ccache             # a compiler cache: the students' copy test rebuilds from it
  libeigen3-dev      # Eigen 3.4: the CPU reference's matrices
  doctest-dev        # the unit tests
  libcli11-dev       # the flashlab command line
  libfmt-dev         # formatted output
  nlohmann-json3-dev # JSON traces and reports
  gnuplot-nox        # the simulator's sweep plots (optional: without it the plot step says so)
  libomp-dev         # OpenMP (g++ ships its own libgomp; this keeps clang builds whole too)
  chromium           # the HTML viewer's and the book's browser tests (headless; nothing is downloaded)
  python3            # the book's browser test: its link checker and screenshot reader
  libcmark-gfm-dev libcmark-gfm-extensions-dev  # `flashlab book`: the lessons' Markdown, tables included
  clang-14 libclang-rt-14-dev  # the fuzz targets (libFuzzer with AddressSanitizer and UBSan)
  pybind11-dev python3-dev     # the Python module `flashlab` (python/)
  python3-numpy python3-pytest # its arrays and its tests
  python3-matplotlib           # the Python walkthrough's plot (python/examples/)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: every package is already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
