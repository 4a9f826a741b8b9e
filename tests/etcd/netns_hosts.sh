# Sourced by the etcd tests: emulated hosts on one machine. A "switch"
# (a bridge in a network namespace of its own) and hosts attached to it,
# each a network namespace with interface gw0 (every rank names the same
# interface: GRADWIRE_OFI_IFACE=gw0). A host's programs run in pid and UTS
# namespaces of their own (host_run), so that no other host sees their pids
# (as on real hosts: Note [heartbeats between hosts]) and each has its own
# host name. Exits 77 (ctest SKIP) without root, namespaces, veth or unshare.
#
#   switch_up PREFIX           namespaces are called PREFIX<name>
#   host_add NAME ADDR         a host (ADDR in 10.81.0.0/16)
#   host_run NAME LOG CMD...   CMD on host NAME, in the background; its pid
#                              in the root namespace: $HOST_PID
#   host_kill PID              the host's programs all die: SIGKILL to the
#                              pid namespace's first process, which takes
#                              every other with it
#   host_cut NAME              its link goes down (nothing more leaves or
#                              arrives: no FIN, no RST)
#   host_del NAME / switch_down
SWITCH_PREFIX=""
SWITCH_NS=""
declare -A HOST_PORT=()
HOST_PORTS=0

switch_up() {
  SWITCH_PREFIX=$1
  SWITCH_NS=${SWITCH_PREFIX}sw
  command -v unshare > /dev/null || { echo "SKIP: unshare not installed"; exit 77; }
  ip netns add "$SWITCH_NS" 2> /dev/null ||
    { echo "SKIP: cannot create a network namespace (root and CAP_NET_ADMIN needed)"; exit 77; }
  ip -n "$SWITCH_NS" link add br0 type bridge
  ip -n "$SWITCH_NS" link set br0 up
  unshare --pid --fork --uts --mount-proc true 2> /dev/null ||
    { echo "SKIP: cannot unshare pid/uts namespaces"; exit 77; }
}

host_add() {
  local name=$1 addr=$2 ns=${SWITCH_PREFIX}$1 port="p$HOST_PORTS"
  HOST_PORTS=$((HOST_PORTS + 1))
  HOST_PORT[$name]=$port
  ip netns add "$ns" || exit 1
  ip link add gw0 netns "$ns" type veth peer name "$port" netns "$SWITCH_NS" 2> /dev/null ||
    { echo "SKIP: cannot create a veth pair (CONFIG_VETH)"; exit 77; }
  ip -n "$SWITCH_NS" link set "$port" master br0
  ip -n "$SWITCH_NS" link set "$port" up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.gw0.disable_ipv6=1
  ip -n "$ns" addr add "$addr/16" dev gw0
  ip -n "$ns" link set gw0 up
  for _ in $(seq 100); do  # the carrier comes up asynchronously
    ip -n "$ns" link show gw0 | grep -q 'state UP' && break
    sleep 0.05
  done
}

host_run() {
  local name=$1 log=$2
  shift 2
  ip netns exec "${SWITCH_PREFIX}$name" unshare --pid --fork --uts --mount-proc \
    sh -c 'hostname "$0"; exec "$@"' "$name" "$@" > "$log" 2>&1 &
  HOST_PID=$!
}

host_kill() {
  local init
  init=$(pgrep -P "$1" | head -1)
  [[ -n $init ]] && kill -9 "$init" 2> /dev/null
  kill -9 "$1" 2> /dev/null
}

host_cut() {
  ip -n "$SWITCH_NS" link set "${HOST_PORT[$1]}" down 2> /dev/null
  ip -n "${SWITCH_PREFIX}$1" link set gw0 down 2> /dev/null
}

host_del() { ip netns del "${SWITCH_PREFIX}$1" 2> /dev/null; }

switch_down() {
  local n
  for n in "${!HOST_PORT[@]}"; do host_del "$n"; done
  [[ -n $SWITCH_NS ]] && ip netns del "$SWITCH_NS" 2> /dev/null
  return 0
}
