#!/usr/bin/env bash
# Fetch the ONNX Runtime C/C++ headers the native engine compiles against.
#
# The pip package `onnxruntime` ships the runtime library but no headers. Debian trixie's
# `libonnxruntime-dev` carries them; this machine runs bookworm, whose archive lacks the package
# but whose mirror also serves trixie. We download that one .deb with apt options that point at a
# private source list and private package lists, and unpack it with `dpkg -x` into
# third_party/: nothing is installed into the system (a trixie install would pull a newer libc).
#
# Idempotent: a second run finds the headers and exits at once.
# If ORT_ROOT or ONNXRUNTIME_ROOT names an ONNX Runtime release folder (with include/), nothing is
# fetched: CMake uses that folder's headers instead.
#
# Usage: scripts/fetch_ort_headers.sh            (from anywhere; paths are relative to the repo)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${repo_root}/third_party/onnxruntime"
marker="${dest}/include/onnxruntime_cxx_api.h"

for var in ORT_ROOT ONNXRUNTIME_ROOT; do
  root="${!var:-}"
  if [[ -n "${root}" ]]; then
    if [[ -f "${root}/include/onnxruntime_cxx_api.h" || -f "${root}/include/onnxruntime/onnxruntime_cxx_api.h" ]]; then
      echo "fetch_ort_headers: ${var}=${root} has the headers; nothing to fetch"
      exit 0
    fi
    echo "fetch_ort_headers: ${var}=${root} has no include/onnxruntime_cxx_api.h;" \
         "point it at an ONNX Runtime release folder or unset it" >&2
    exit 1
  fi
done

if [[ -f "${marker}" ]]; then
  echo "fetch_ort_headers: headers already in ${dest}/include"
  exit 0
fi

for tool in apt-get dpkg; do
  if ! command -v "${tool}" >/dev/null; then
    echo "fetch_ort_headers: ${tool} not found. On a non-Debian system download an ONNX Runtime" \
         "release (github.com/microsoft/onnxruntime/releases) and set ORT_ROOT to its folder" >&2
    exit 1
  fi
done

# The mirror this machine already trusts: first `URIs:` line of the deb822 source file, else the
# first `deb` line of the classic list, else the main Debian mirror.
uri=""
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
fi
if [[ -z "${uri}" && -f /etc/apt/sources.list ]]; then
  uri="$(awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit}' /etc/apt/sources.list)"
fi
uri="${uri:-http://deb.debian.org/debian}"

work="$(mktemp -d "${TMPDIR:-/tmp}/rlsim-ort-headers.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${work}/lists/partial" "${work}/archives/partial"
echo "deb ${uri} trixie main" > "${work}/trixie.list"

# Private list, parts, state and cache: the system's apt state is read-only to this script.
apt_opts=(
  -o "Dir::Etc::SourceList=${work}/trixie.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=${work}/lists"
  -o "Dir::Cache=${work}/cache"
  -o "Dir::Cache::archives=${work}/archives"
  -o "Debug::NoLocking=1"
  -o "APT::Sandbox::User=root"
)

echo "fetch_ort_headers: reading trixie package lists from ${uri}"
apt-get "${apt_opts[@]}" -qq update
(cd "${work}" && apt-get "${apt_opts[@]}" -qq download libonnxruntime-dev)

deb="$(ls "${work}"/libonnxruntime-dev_*.deb 2>/dev/null | head -n1)"
if [[ -z "${deb}" ]]; then
  echo "fetch_ort_headers: apt-get download produced no libonnxruntime-dev .deb;" \
       "set ORT_ROOT to an ONNX Runtime release folder instead" >&2
  exit 1
fi

dpkg -x "${deb}" "${work}/unpacked"
src="${work}/unpacked/usr/include/onnxruntime"
if [[ ! -f "${src}/onnxruntime_cxx_api.h" ]]; then
  echo "fetch_ort_headers: ${deb##*/} holds no usr/include/onnxruntime/onnxruntime_cxx_api.h" >&2
  exit 1
fi

# Copy to a temporary name then rename, so an interrupted run never leaves a half-filled include/.
mkdir -p "${dest}"
rm -rf "${dest}/include.tmp"
cp -r "${src}" "${dest}/include.tmp"
echo "${deb##*/}" > "${dest}/include.tmp/SOURCE_PACKAGE"
rm -rf "${dest}/include"
mv "${dest}/include.tmp" "${dest}/include"
echo "fetch_ort_headers: headers from ${deb##*/} in ${dest}/include"
