#!/usr/bin/env bash
# perf.sh — agentmesh's black-box performance table, measured in one run.
#
# Builds agentmesh and meshload into a temporary directory, starts
# `agentmesh serve` on free loopback ports (18900–18999), drives it with
# meshload and prints every figure of the table with its target, pass or
# fail. The load generator shares the machine's cores with the server.
# Under each delegation row, a "floor" row (no target) measures the same
# requests through a bare reverse proxy instead of the mesh
# (meshload -mode floor): what the machine allows a server that only
# forwards them.
#
#   scripts/perf.sh              # the table, once
#   scripts/perf.sh -r 3         # three runs, then the median and spread of each figure
#   scripts/perf.sh -r 0 -s 10m  # no table; the 10-minute soak (mixed load on bbolt)
#
# Options:
#   -r N      runs of the table (default 1; 0 for none)
#   -d DUR    measured duration of each load (default 5s)
#   -s DUR    after the table, soak: the mixed load for DUR against serve on
#             bbolt, its store filled to the retention bounds first
#             (meshload -mode fill), sampling every -S (default: no soak)
#   -S DUR    soak sampling interval (default 30s)
#   -c REV    build that commit (git archive: the working tree and index are
#             not touched) instead of the working tree
#   -b DIR    use the agentmesh and meshload binaries in DIR; build nothing
#   -k        keep the temporary directory (stores, logs, JSON reports)
#
# Every process it starts is stopped on exit.
set -euo pipefail

runs=1
dur=5s
soak=""
sample=30s
keep=0
rev=""
bin=""
usage() { sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p;}' "$0"; }
while getopts "r:d:s:S:c:b:kh" opt; do
	case $opt in
	r) runs=$OPTARG ;;
	d) dur=$OPTARG ;;
	s) soak=$OPTARG ;;
	S) sample=$OPTARG ;;
	c) rev=$OPTARG ;;
	b) bin=$OPTARG ;;
	k) keep=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
case $runs in '' | *[!0-9]*) echo "perf.sh: -r wants a number" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentmesh-perf.XXXXXX")
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ "$keep" = 1 ]; then
		echo "perf.sh: kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

am=$tmp/agentmesh
ml=$tmp/meshload
if [ -n "$bin" ]; then
	am=$bin/agentmesh
	ml=$bin/meshload
elif [ -n "$rev" ]; then
	mkdir -p "$tmp/src"
	git -C "$root" archive "$rev" | tar -x -C "$tmp/src"
	echo "perf.sh: building $rev ($(git -C "$root" rev-parse --short "$rev")) in $tmp" >&2
	(cd "$tmp/src" && go build -o "$am" ./cmd/agentmesh && go build -o "$ml" ./cmd/meshload)
else
	echo "perf.sh: building the working tree in $tmp" >&2
	(cd "$root" && go build -o "$am" ./cmd/agentmesh && go build -o "$ml" ./cmd/meshload)
fi
token="perf-$(date +%s)-$$-0123456789abcdef"
export MESH_TOKEN=$token

# free_port prints a loopback port in 18900–18999 nobody listens on and
# this script has not handed out yet.
used=" "
free_port() {
	local p
	for p in $(seq 18900 18999); do
		case $used in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used="$used$p "
			echo "$p"
			return 0
		fi
	done
	echo "perf.sh: no free port in 18900-18999" >&2
	return 1
}

# serve STORE-FLAGS... : starts agentmesh serve on a free port; sets
# $url and $spid.
serve() {
	local port log
	port=$(free_port)
	log=$tmp/serve-$port.log
	"$am" serve --addr "127.0.0.1:$port" --log-level warn --allow-private-endpoints "$@" >"$log" 2>&1 &
	spid=$!
	pids+=("$spid")
	url=http://127.0.0.1:$port
	local i
	for i in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	echo "perf.sh: serve $* did not start:" >&2
	cat "$log" >&2
	exit 1
}

stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# jnum FILE INDENT KEY [NTH]: the NTH (default 1) number of "KEY" at
# INDENT spaces in meshload's indented JSON reports.
jnum() {
	awk -v pad="$2" -v key="\"$3\":" -v nth="${4:-1}" '
		{ lead = match($0, /[^ ]/) - 1 }
		lead == pad && $1 == key { n++; if (n == nth) { v = $2; sub(/,$/, "", v); print v; exit } }
	' "$1"
}

# rss_mib PID [FIELD]: VmRSS (or RssAnon, RssFile…) of PID in MiB.
rss_mib() { awk -v f="${2:-VmRSS}:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

calc() { awk "BEGIN { printf \"%.${2:-2}f\", $1 }"; }

# load NAME ARGS...: meshload -json into $tmp/NAME.json, its stderr to
# the terminal.
load() {
	local name=$1
	shift
	"$ml" -url "$url" -json "$@" >"$tmp/$name.json"
}

# The figures of one run go into fig_<row>[run]; the rows:
rows=(discover register delegate floor1 throughput floor8 mcp rss)
declare -A title target cmp
title[discover]="GET /v1/discover ÷ GET /health throughput, 10k agents, c=8"
title[register]="durable registrations (bbolt), c=8, ÷ the disk's limit 8 ÷ fdatasync p50"
title[delegate]="sync delegation, c=1: added p50 ÷ direct p50"
title[floor1]="  the floor: a bare reverse proxy for the mesh, added ÷ direct p50, c=1"
title[throughput]="delegation mesh ÷ direct throughput, c=8"
title[floor8]="  the floor: a bare reverse proxy for the mesh, ÷ direct throughput, c=8"
title[mcp]="stdio MCP mesh_discover ÷ HTTP discover, 1k agents, 8 in flight"
title[rss]="server RSS (MiB) after 10k agents (bbolt) and the discover load"
target[discover]=0.5 cmp[discover]=ge
target[register]=0.3 cmp[register]=ge
target[delegate]=1.5 cmp[delegate]=le
target[throughput]=0.3 cmp[throughput]=ge
# The floor rows have no target: they are what the machine allows a
# server that only forwards the request (meshload -mode floor).
cmp[floor1]=ref cmp[floor8]=ref
target[mcp]=1.0 cmp[mcp]=ge
target[rss]=60 cmp[rss]=le
declare -A value detail

verdict() { # ROW VALUE
	local ok
	if [ "${cmp[$1]}" = ref ]; then
		echo ref
		return
	fi
	if [ "${cmp[$1]}" = ge ]; then
		ok=$(awk "BEGIN { print ($2 >= ${target[$1]}) }")
	else
		ok=$(awk "BEGIN { print ($2 <= ${target[$1]}) }")
	fi
	if [ "$ok" = 1 ]; then echo pass; else echo FAIL; fi
}

sign() {
	case ${cmp[$1]} in
	ge) echo "≥ ${target[$1]}" ;;
	le) echo "≤ ${target[$1]}" ;;
	*) echo "—" ;;
	esac
}

one_run() {
	local r=$1 d
	# Memory store: HTTP discover at 1k agents, stdio MCP at 1k, then 10k agents.
	serve --store memory
	load seed1k -mode seed -n 1000 -c 8
	load disc1k -mode discover -c 8 -d "$dur" -server-pid "$spid" -settle 60s
	"$ml" -mode mcp-stdio -cmd "$am --store memory" -n 1000 -c 8 -d "$dur" -settle 60s -json >"$tmp/mcp1k.json"
	load seed10k -mode seed -n 10000 -c 8
	load disc10k -mode discover -c 8 -d "$dur" -server-pid "$spid" -settle 60s
	load health -mode get -path /health -c 8 -d "$dur" -server-pid "$spid" -settle 60s
	stop "$spid"

	local disc health http1k mcp
	disc=$(jnum "$tmp/disc10k.json" 2 requestsPerSecond)
	health=$(jnum "$tmp/health.json" 2 requestsPerSecond)
	http1k=$(jnum "$tmp/disc1k.json" 2 requestsPerSecond)
	mcp=$(jnum "$tmp/mcp1k.json" 2 requestsPerSecond)
	value[discover,$r]=$(calc "$disc / $health")
	detail[discover,$r]="$(calc "$disc" 0) ÷ $(calc "$health" 0) req/s"
	value[mcp,$r]=$(calc "$mcp / $http1k")
	detail[mcp,$r]="$(calc "$mcp" 0) ÷ $(calc "$http1k" 0) req/s"

	# bbolt: 10k agents and the discover load, the RSS; then delegation.
	d=$tmp/run$r-rss
	mkdir -p "$d"
	serve --store bolt --db "$d/mesh.db"
	load seed10k-bolt -mode seed -n 10000 -c 8
	load disc10k-bolt -mode discover -c 8 -d "$dur" -server-pid "$spid" -settle 60s
	value[rss,$r]=$(rss_mib "$spid")
	detail[rss,$r]="anonymous $(rss_mib "$spid" RssAnon), file $(rss_mib "$spid" RssFile) (the store's mapped pages); after $(calc "$(jnum "$tmp/disc10k-bolt.json" 2 requestsPerSecond)" 0) discover/s"
	local port
	port=$(free_port)
	load deleg1 -mode delegate -agent-addr "127.0.0.1:$port" -c 1 -d "$dur" -server-pid "$spid" -settle 60s
	load deleg8 -mode delegate -agent-addr "127.0.0.1:$port" -c 8 -d "$dur" -server-pid "$spid" -settle 60s
	stop "$spid"
	value[delegate,$r]=$(jnum "$tmp/deleg1.json" 4 addedP50Ratio)
	detail[delegate,$r]="mesh p50 $(jnum "$tmp/deleg1.json" 4 p50Ms 2) ms, direct $(jnum "$tmp/deleg1.json" 4 directP50Ms) ms, added $(jnum "$tmp/deleg1.json" 4 addedP50Ms) ms"
	value[throughput,$r]=$(jnum "$tmp/deleg8.json" 4 throughputRatio)
	detail[throughput,$r]="$(calc "$(jnum "$tmp/deleg8.json" 2 requestsPerSecond 2)" 0) ÷ $(calc "$(jnum "$tmp/deleg8.json" 2 requestsPerSecond 1)" 0) req/s"

	# The floor under the two delegation rows, in the same run: the same
	# requests through a bare reverse proxy (net/http/httputil, a process
	# of its own) instead of the mesh.
	"$ml" -json -mode floor -c 1 -d "$dur" >"$tmp/floor1.json"
	"$ml" -json -mode floor -c 8 -d "$dur" >"$tmp/floor8.json"
	value[floor1,$r]=$(jnum "$tmp/floor1.json" 4 addedP50Ratio)
	detail[floor1,$r]="proxy p50 $(jnum "$tmp/floor1.json" 4 p50Ms 2) ms, direct $(jnum "$tmp/floor1.json" 4 directP50Ms) ms, added $(jnum "$tmp/floor1.json" 4 addedP50Ms) ms"
	value[floor8,$r]=$(jnum "$tmp/floor8.json" 4 throughputRatio)
	detail[floor8,$r]="$(calc "$(jnum "$tmp/floor8.json" 2 requestsPerSecond 2)" 0) ÷ $(calc "$(jnum "$tmp/floor8.json" 2 requestsPerSecond 1)" 0) req/s"

	# bbolt, a fresh store: the disk's limit, then registrations.
	d=$tmp/run$r-reg
	mkdir -p "$d"
	"$ml" -mode fsync -d 3s -dir "$d" -json >"$tmp/fsync.json"
	serve --store bolt --db "$d/mesh.db"
	load register -mode register -c 8 -d "$dur" -server-pid "$spid" -settle 60s
	stop "$spid"
	local reg p50 limit
	reg=$(jnum "$tmp/register.json" 2 requestsPerSecond)
	p50=$(jnum "$tmp/fsync.json" 4 p50Ms)
	limit=$(jnum "$tmp/fsync.json" 4 perSecond)
	value[register,$r]=$(calc "$reg / $limit" 3)
	detail[register,$r]="$(calc "$reg" 0) ÷ $(calc "$limit" 0) /s (fdatasync p50 $p50 ms)"
}

# col TEXT WIDTH: TEXT padded to WIDTH characters (not bytes: titles hold ÷).
col() {
	local n=$(($2 - ${#1}))
	[ "$n" -gt 0 ] || n=1
	printf '%s%*s' "$1" "$n" ""
}

print_run() {
	local r=$1 row
	printf '\nrun %d of %d (%s each, GOMAXPROCS %s, load generator on the same cores)\n' "$r" "$runs" "$dur" "$(nproc)"
	printf '%s %8s  %s %-5s %s\n' "$(col figure 76)" value "$(col target 7)" "" measured
	for row in "${rows[@]}"; do
		printf '%s %8s  %s %-5s %s\n' "$(col "${title[$row]}" 76)" "${value[$row,$r]}" "$(col "$(sign "$row")" 7)" \
			"$(verdict "$row" "${value[$row,$r]}")" "${detail[$row,$r]}"
	done
}

print_spread() {
	local row r vals med
	printf '\n%d runs: median (min–max) of each figure; pass/fail on the median\n' "$runs"
	printf '%s %8s  %s %s\n' "$(col figure 76)" median "$(col spread 17)" target
	for row in "${rows[@]}"; do
		vals=""
		for r in $(seq "$runs"); do vals="$vals ${value[$row,$r]}"; done
		# shellcheck disable=SC2086 # one value per word
		read -r med lo hi < <(printf '%s\n' $vals | sort -g | awk '{ v[NR] = $1 } END {
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%s %s %s\n", m, v[1], v[NR] }')
		printf '%s %8s  %s %s %s\n' "$(col "${title[$row]}" 76)" "$med" "$(col "$lo–$hi" 17)" "$(col "$(sign "$row")" 7)" "$(verdict "$row" "$med")"
	done
}

for r in $(seq "$runs"); do
	echo "perf.sh: run $r of $runs" >&2
	one_run "$r"
	print_run "$r"
done
if [ "$runs" -gt 1 ]; then
	print_spread
fi

if [ -n "$soak" ]; then
	echo "perf.sh: soak, $soak" >&2
	mkdir -p "$tmp/soak"
	# The store starts at its retention bounds (100,000 delegation records
	# and audit entries), where a server that has run for a while is.
	"$ml" -mode fill -store-file "$tmp/soak/mesh.db"
	serve --store bolt --db "$tmp/soak/mesh.db"
	load soak-seed -mode seed -n 10000 -c 8
	port=$(free_port)
	printf '\nsoak: 10k agents on bbolt, the store filled to its bounds, mixed load at c=8 for %s\n' "$soak"
	"$ml" -url "$url" -mode soak -server-pid "$spid" -store-file "$tmp/soak/mesh.db" -agent-addr "127.0.0.1:$port" -c 8 -d "$soak" -sample "$sample" -settle 60s
	stop "$spid"
fi
