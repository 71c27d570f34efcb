#!/usr/bin/env bash
# For machines that cannot pull images (no registry access, as on this project's CI machines):
# builds a stand-in for the Containerfile's base image (node:<major>-bookworm-slim) from a
# debootstrap'd Debian bookworm and the Node.js on PATH with its npm, as
# localhost/svc-node-base:<major>, then prints how to smoke-test the Containerfile on it.
# Needs root, debootstrap, podman and a Debian mirror (DEBIAN_MIRROR).
set -euo pipefail

node_bin="$(command -v node)"
major="$(node -p 'process.versions.node.split(".")[0]')"
npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" # …/node_modules/npm
image="localhost/svc-node-base:${major}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

debootstrap --variant=minbase --include=ca-certificates bookworm "$work/rootfs" \
  "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
root="$work/rootfs"
install -m 755 "$node_bin" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules"
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
# The official images' unprivileged user.
chroot "$root" useradd --uid 1000 --create-home --shell /bin/bash node
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

tar -C "$root" -c . | podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]' - "$image" >/dev/null
echo "built $image (node $(node --version), npm $(npm --version))"
echo "smoke-test the Containerfile on it: NODE_IMAGE=$image scripts/container-smoke.sh"
