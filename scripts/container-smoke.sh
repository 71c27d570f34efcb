#!/usr/bin/env bash
# Builds the tower's image from Containerfile with podman and checks that a container of it
# works: it answers /healthz and /readyz, serves the console, takes a request with the admin token
# it wrote into its volume, exits 0 on `podman stop`, and starts again from the same volume with
# the same token and data. Removes everything it made.
#
#   scripts/container-smoke.sh
#
# Environment: NODE_IMAGE, the base image (default: the Containerfile's); BUILD_CA_FILE, a CA
# bundle npm needs in the build (a registry behind a TLS-inspecting proxy); PODMAN_FLAGS, global
# podman flags (e.g. "--runtime runc" where crun cannot run); RUN_FLAGS, more `podman run` flags
# (e.g. "--ulimit nofile=4096:4096 --ulimit nproc=4096:4096" where the container may not raise
# them); PORT, the host port (default 18008).
set -euo pipefail
cd "$(dirname "$0")/.."

podman=(podman ${PODMAN_FLAGS:-})
tag="localhost/svc-tower-smoke:$$"
name="svc-tower-smoke-$$"
volume="svc-tower-smoke-$$"
port="${PORT:-18008}"
url="http://127.0.0.1:${port}"

cleanup() {
  "${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true
  "${podman[@]}" volume rm -f "$volume" >/dev/null 2>&1 || true
  "${podman[@]}" rmi -f "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT

fail() {
  echo "container-smoke: FAIL: $*" >&2
  "${podman[@]}" logs "$name" >&2 2>&1 || true
  exit 1
}

# Polls until $1 answers 200 (up to 120 s: a first start migrates the store).
wait_ok() {
  for _ in $(seq 1 240); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; then return 0; fi
    [ "$("${podman[@]}" inspect -f '{{.State.Running}}' "$name")" = true ] || fail "the container exited"
    sleep 0.5
  done
  fail "$1 did not answer 200 within 120 s"
}

build_args=()
[ -n "${NODE_IMAGE:-}" ] && build_args+=(--build-arg "NODE_IMAGE=$NODE_IMAGE")
if [ -n "${BUILD_CA_FILE:-}" ]; then
  build_args+=(-v "$BUILD_CA_FILE:/tmp/build-ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/tmp/build-ca.crt)
fi
echo "container-smoke: building $tag"
"${podman[@]}" build --layers=false --network host ${build_args[@]+"${build_args[@]}"} -t "$tag" -f Containerfile .

run() {
  "${podman[@]}" run -d --name "$name" -p "127.0.0.1:${port}:8008" -v "$volume:/var/lib/svc" \
    ${RUN_FLAGS:-} "$tag" >/dev/null
}

echo "container-smoke: starting $name on $url"
run
wait_ok "$url/healthz"
wait_ok "$url/readyz"
curl -sf "$url/" | grep -q '<html' || fail "no console at /"
token="$("${podman[@]}" exec "$name" cat /var/lib/svc/tower/admin.token)"
[[ "$token" == svc_* ]] || fail "no admin token in the volume"
curl -sf -H "authorization: Bearer $token" -H 'content-type: application/json' \
  -d '{"name":"smoke"}' "$url/domains" | grep -q '"name":"smoke"' || fail "POST /domains"
"${podman[@]}" exec "$name" svc --version >/dev/null || fail "svc is not on PATH in the image"

echo "container-smoke: podman stop (SIGTERM)"
"${podman[@]}" stop -t 30 "$name" >/dev/null
code="$("${podman[@]}" inspect -f '{{.State.ExitCode}}' "$name")"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"

echo "container-smoke: starting again from the same volume"
"${podman[@]}" start "$name" >/dev/null
wait_ok "$url/readyz"
again="$("${podman[@]}" exec "$name" cat /var/lib/svc/tower/admin.token)"
[ "$again" = "$token" ] || fail "the admin token changed across a restart"
curl -sf -H "authorization: Bearer $token" "$url/domains" | grep -q '"name":"smoke"' ||
  fail "the domain did not survive the restart"
"${podman[@]}" stop -t 30 "$name" >/dev/null

echo "container-smoke: ok ($("${podman[@]}" image inspect -f '{{.Size}}' "$tag") bytes)"
