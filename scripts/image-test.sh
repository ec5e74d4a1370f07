#!/usr/bin/env bash
# Builds the final stage of deploy/Dockerfile with podman and runs the image
# as a container: read-only root, its own user, the /data volume, $PORT.
#
#   scripts/image-test.sh [STATIC_BINARY]
#
# The Dockerfile's build stage starts from a Go image that must be pulled
# from a registry; where none can be reached (CI), this script makes what
# that stage leaves in /out itself — the binary of scripts/release.sh
# (the same command the stage runs; STATIC_BINARY if given) and an empty
# data directory — and builds the image's final stage, taken verbatim from
# the Dockerfile, from it. It then checks the image's configuration, runs
# `version` and `serve` in it and drives the server over HTTP.
#
# Needs podman and runc (Debian: apt-get install podman runc); it runs as
# root. crun refuses hybrid cgroup hierarchies, hence runc; containers get
# explicit ulimits where the host may not raise its own.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in podman runc curl; do
  command -v "$tool" >/dev/null || { echo "image-test.sh: $tool is not installed" >&2; exit 1; }
done
work=$(mktemp -d)
name="agentmesh-image-test-$$"
image="localhost/agentmesh:image-test-$$"
cleanup() {
  podman rm -f "$name" >/dev/null 2>&1 || true
  podman volume rm -f "$name-data" >/dev/null 2>&1 || true
  podman rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "image-test.sh: $*" >&2; podman logs "$name" 2>/dev/null | tail -20 >&2 || true; exit 1; }
run=(podman --runtime "$(command -v runc)" run --ulimit nofile=1024:1024 --ulimit nproc=4096:4096)

# What the build stage leaves: /out/agentmesh, /out/data, the CA bundle.
mkdir -p "$work/ctx/out/data" "$work/ctx/etc/ssl/certs"
chmod 0700 "$work/ctx/out/data"
if [ "$#" -gt 0 ]; then
  cp "$1" "$work/ctx/out/agentmesh"
else
  DIST="$work/dist" scripts/release.sh linux/amd64 >/dev/null
  cp "$work/dist/agentmesh-linux-amd64" "$work/ctx/out/agentmesh"
fi
cp /etc/ssl/certs/ca-certificates.crt "$work/ctx/etc/ssl/certs/ca-certificates.crt"

# The final stage: from the Dockerfile's last FROM to its end, copying from
# the context instead of the build stage.
awk '/^FROM /{stage=""} {stage=stage $0 "\n"} END{printf "%s", stage}' deploy/Dockerfile \
  | sed 's/--from=build //' > "$work/Containerfile"
grep -q '^FROM scratch' "$work/Containerfile" || fail "the Dockerfile's last stage is not FROM scratch"
if grep -q -- '--from=' "$work/Containerfile"; then fail "the final stage copies from another stage than build"; fi
podman build -q --layers=false --format docker -f "$work/Containerfile" -t "$image" "$work/ctx" >/dev/null

# The image's configuration.
inspect() { podman image inspect --format "$1" "$image"; }
[ "$(inspect '{{.Config.User}}')" = "65532:65532" ] || fail "user is $(inspect '{{.Config.User}}'), want 65532:65532"
inspect '{{json .Config.ExposedPorts}}' | grep -q '"8766/tcp"' || fail "8766 is not exposed"
inspect '{{json .Config.Volumes}}' | grep -q '"/data"' || fail "/data is not a volume"
[ "$(inspect '{{json .Config.Entrypoint}}')" = '["/agentmesh"]' ] || fail "entrypoint $(inspect '{{json .Config.Entrypoint}}')"
[ "$(inspect '{{json .Config.Cmd}}')" = '["serve"]' ] || fail "cmd $(inspect '{{json .Config.Cmd}}')"
[ "$(inspect '{{json .Config.Healthcheck}}')" = "null" ] || fail "the image has a HEALTHCHECK"
inspect '{{json .Config.Env}}' | grep -q '"AGENTMESH_DB=/data/agentmesh.db"' || fail "AGENTMESH_DB is not /data/agentmesh.db"

# `agentmesh version` in the image names the commit of this checkout (give
# a binary built from it).
version=$("${run[@]}" --rm --network none "$image" version --json)
if head=$(git rev-parse HEAD 2>/dev/null); then
  case "$version" in *"\"commit\":\"$head\""*) ;; *) fail "version $version does not name $head" ;; esac
fi
echo "image-test.sh: version in the image: $version"

# serve, as a PaaS runs it: read-only root, $PORT, the data volume.
port=$(( 20000 + RANDOM % 20000 ))
token="image-test-token-$RANDOM$RANDOM"
"${run[@]}" -d --name "$name" --network host --read-only \
  -e PORT="$port" -e MESH_TOKEN="$token" -v "$name-data:/data" "$image" >/dev/null
base="http://127.0.0.1:$port"
for _ in $(seq 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health/ready")" = 200 ] && break
  [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || fail "the container exited"
  sleep 0.1
done
[ "$(curl -s "$base/health")" = '{"status":"ok"}' ] || fail "GET /health"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health/ready")" = 200 ] || fail "GET /health/ready is not 200 after 30s"
pid=$(podman inspect --format '{{.State.Pid}}' "$name")
uid=$(awk '/^Uid:/{print $2}' "/proc/$pid/status")
[ "$uid" = 65532 ] || fail "the server runs as uid $uid"

H="Authorization: Bearer $token"
code=$(curl -s -o "$work/reg" -w '%{http_code}' -H "$H" -H 'Content-Type: application/json' "$base/v1/agents" -d '{
  "name": "weather-agent", "description": "Weather forecasts for any city.",
  "capabilities": ["weather", "forecast"], "endpoint": "https://weather.example.com/task"}')
[ "$code" = 201 ] || fail "register: $code $(cat "$work/reg")"
curl -s -H "$H" "$base/v1/discover?query=forecast" | grep -q '"weather-agent"' || fail "discover does not find the agent"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/agents")" = 401 ] || fail "no token is not 401"

podman stop -t 20 "$name" >/dev/null
[ "$(podman inspect --format '{{.State.ExitCode}}' "$name")" = 0 ] || fail "exit code $(podman inspect --format '{{.State.ExitCode}}' "$name") after SIGTERM"
echo "image-test.sh: the image's final stage builds and serves (user 65532, read-only root, /data, PORT)"
