#!/usr/bin/env bash
# Builds nib's container image without pulling from any registry: a Debian
# root filesystem made from the distribution's packages (mmdebstrap, the
# packages in packages.txt, the same layout as the Containerfile: user
# `agent` uid 1000, /workspace), nib and nib-confine added, imported into
# podman with the Containerfile's user, folder, environment and entry point.
#
# Usage: dist/container/rootfs.sh BIN_DIR [IMAGE]   (BIN_DIR holds nib and
#   nib-confine; IMAGE defaults to nib:local). The base file system is kept in
#   target/container/ per package list and suite, so a rebuild adds only the
#   binaries. DEBIAN_SUITE overrides the suite (default: this machine's).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:?usage: dist/container/rootfs.sh BIN_DIR [IMAGE]}"
image="${2:-nib:local}"
for f in nib nib-confine; do
  [ -x "$bin/$f" ] || { echo "rootfs: $bin/$f is missing; build it first" >&2; exit 1; }
done
suite="${DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}"
packages="$(grep -v '^#' dist/container/packages.txt | grep -v '^$' | paste -sd, -)"
key="$(printf '%s %s' "$suite" "$packages" | sha256sum | cut -c1-16)"
out=target/container
base="$out/base-$suite-$key.tar"
mkdir -p "$out"
if [ ! -s "$base" ]; then
  command -v mmdebstrap >/dev/null || { echo "rootfs: mmdebstrap is missing (apt-get install mmdebstrap)" >&2; exit 1; }
  echo "rootfs: making the $suite base from $(echo "$packages" | tr ',' ' ' | wc -w) packages"
  mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" \
    --customize-hook='chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash agent' \
    --customize-hook='mkdir -p "$1/workspace" && chroot "$1" chown agent:agent /workspace' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$suite" "$base.part"
  mv "$base.part" "$base"
fi
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$base" "$stage/rootfs.tar"
mkdir -p "$stage/usr/local/bin"
install -m 755 "$bin/nib" "$bin/nib-confine" "$stage/usr/local/bin/"
tar -C "$stage" --owner=0 --group=0 -rf "$stage/rootfs.tar" ./usr/local/bin/nib ./usr/local/bin/nib-confine
podman import --quiet \
  --change 'USER agent' --change 'WORKDIR /workspace' \
  --change 'ENV NIB_SANDBOX=1' --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV HOME=/home/agent' \
  --change 'ENTRYPOINT ["nib"]' \
  "$stage/rootfs.tar" "$image" >/dev/null
echo "rootfs: imported $image"
