#!/usr/bin/env bash
# Builds the release binaries of agentmesh: static (CGO_ENABLED=0),
# reproducible paths (-trimpath), stripped (-s -w), one per target, into
# $DIST (default dist/), with a SHA256SUMS file over all of them.
#
#   scripts/release.sh                      # every target
#   scripts/release.sh linux/amd64          # one or more GOOS/GOARCH
#   TARGETS="linux/amd64 linux/arm64" scripts/release.sh
#   VERSION=v0.1.0 scripts/release.sh       # stamp a version at link time
#
# Without VERSION the binaries report the version the Go toolchain stamps
# from the checkout (the tag of a clean tagged commit, else a
# pseudo-version), and always the commit (`agentmesh version`). Files are
# named agentmesh-GOOS-GOARCH (.exe on windows). Linux binaries are then
# checked to be static (no ELF interpreter, no shared libraries) and the
# sums are verified. The container image (deploy/Dockerfile) builds its
# binary with this script, so the image and the release carry the same one.
set -euo pipefail
cd "$(dirname "$0")/.."

all="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
if [ "$#" -gt 0 ]; then
  targets="$*"
else
  targets="${TARGETS:-$all}"
fi
dist="${DIST:-dist}"
version="${VERSION:-}"

ldflags="-s -w"
if [ -n "$version" ]; then
  ldflags="$ldflags -X github.com/agentmesh/agentmesh/internal/buildinfo.version=$version"
fi

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

mkdir -p "$dist"
built=()
for target in $targets; do
  goos="${target%/*}" goarch="${target#*/}"
  case " $all " in
    *" $goos/$goarch "*) ;;
    *) echo "release.sh: unknown target $target (known: $all)" >&2; exit 2 ;;
  esac
  name="agentmesh-$goos-$goarch"
  [ "$goos" = windows ] && name="$name.exe"
  echo "release.sh: building $dist/$name"
  # -buildvcs=auto: stamp the commit when building in a checkout, even
  # where GOFLAGS turns stamping off (CI does, for the test suite).
  CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" \
    go build -trimpath -buildvcs=auto -ldflags="$ldflags" -o "$dist/$name" ./cmd/agentmesh
  built+=("$name")
done

(
  cd "$dist"
  sha256 "${built[@]}" > SHA256SUMS
  sha256 -c SHA256SUMS >/dev/null
)
echo "release.sh: $dist/SHA256SUMS lists ${#built[@]} binaries and matches them"

linux=()
for name in "${built[@]}"; do
  case "$name" in agentmesh-linux-*) linux+=("$dist/$name") ;; esac
done
if [ "${#linux[@]}" -gt 0 ]; then
  go run ./scripts/checkstatic "${linux[@]}"
fi
