# Sourced by the etcd tests: start and stop etcd servers (Debian's
# etcd-server, installed by scripts/install-deps) that belong to one test.
# Nothing is left running: etcd_stop_all (called from the test's EXIT trap)
# kills every server started here and waits for it.
#
#   etcd_start NAME DIR CLIENT_URL PEER_URL CLUSTER [NETNS]
#       a member NAME with its data in DIR/NAME, serving clients on
#       CLIENT_URL and peers on PEER_URL; CLUSTER is etcd's
#       --initial-cluster (NAME=PEER_URL,...). In network namespace NETNS if
#       given. Its pid: ${ETCD_PID[NAME]}.
#   etcd_wait URL [SECONDS]     until the member answers (default 20 s)
#   etcd_kill NAME              SIGKILL one member (and reap it)
#   kill_tree PID               SIGKILL PID and its descendants
#   etcd_free_port              a TCP port nothing listens on (20000-59999)
#   etcdctl_at URL ARGS...      etcdctl (v3 API) against URL (from network
#                               namespace $ETCD_NS when set)
#   etcd_session [KILL] [MORE]  the test's scratch: $tmp (a fresh directory),
#                               pids (background workers: append to it), fail
#                               MESSAGE; at exit each of pids is killed with
#                               KILL (default kill_tree), every etcd stopped,
#                               MORE run (a function name), $tmp removed
# Exits 77 (ctest SKIP) when etcd is not installed.
command -v etcd > /dev/null && command -v etcdctl > /dev/null ||
  { echo "SKIP: etcd or etcdctl not installed (scripts/install-deps)"; exit 77; }
declare -A ETCD_PID=()

etcd_start() {
  local name=$1 dir=$2 client=$3 peer=$4 cluster=$5 ns=${6:-}
  local run=()
  [[ -n $ns ]] && run=(ip netns exec "$ns")
  mkdir -p "$dir"
  "${run[@]}" etcd --name "$name" --data-dir "$dir/$name" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$cluster" --initial-cluster-state new \
    --initial-cluster-token "gwtest-$$" --log-level warn > "$dir/$name.log" 2>&1 &
  ETCD_PID[$name]=$!
}

etcd_wait() {
  local url=$1 limit=${2:-20} t0=$SECONDS
  until etcdctl_at "$url" get gradwire-probe > /dev/null 2>&1; do
    ((SECONDS - t0 < limit)) || { echo "FAIL: etcd at $url did not answer within $limit s"; return 1; }
    sleep 0.1
  done
}

etcd_kill() {
  local pid=${ETCD_PID[$1]:-}
  [[ -n $pid ]] || return 0
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  unset "ETCD_PID[$1]"
}

etcd_stop_all() {
  local name
  for name in "${!ETCD_PID[@]}"; do etcd_kill "$name"; done
}

etcd_free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 40000))
    ss -Htln "sport = :$p" 2> /dev/null | grep -q . || { echo "$p"; return 0; }
  done
  echo "FAIL: no free port" >&2
  return 1
}

# kill_tree PID: SIGKILL a process started in the background and its
# children (the worker under `timeout`: killing timeout alone would leave
# the worker running, holding its lease).
kill_tree() {
  local c
  for c in $(pgrep -P "$1" 2> /dev/null); do kill_tree "$c"; done
  kill -9 "$1" 2> /dev/null
}

etcdctl_at() {
  local url=$1 run=()
  shift
  [[ -n ${ETCD_NS:-} ]] && run=(ip netns exec "$ETCD_NS")
  ETCDCTL_API=3 "${run[@]}" etcdctl --endpoints="$url" --dial-timeout=2s --command-timeout=5s "$@"
}

etcd_session() {
  tmp=$(mktemp -d)
  pids=()
  _etcd_session_kill=${1:-kill_tree} _etcd_session_more=${2:-:}
  trap _etcd_session_end EXIT
}
_etcd_session_end() {
  local p
  for p in "${pids[@]}"; do "$_etcd_session_kill" "$p"; done
  etcd_stop_all
  "$_etcd_session_more"
  rm -rf "$tmp"
}
fail() { echo "FAIL: $*"; exit 1; }
