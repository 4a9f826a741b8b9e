#!/usr/bin/env bash
# A real Slurm cluster for one test: Debian's slurmctld and slurmd (and
# munged, Slurm's authentication) started here as root, configured for this
# machine under a temporary directory, then COMMAND runs with SLURM_CONF
# pointing at it (srun, sbatch, sinfo find the cluster), and everything
# started is stopped on exit, whatever happens.
#
#   slurm.sh [--nodes N] -- COMMAND [ARGS...]
#
# --nodes 1 (the default): one node, named after this host, in this network
# namespace. --nodes N > 1: N nodes gwnode1..gwnodeN, each slurmd in a
# network and UTS namespace of its own (its own address on a bridge, its own
# host name), so the tasks of a step really are on N hosts; COMMAND then runs
# in a "login" namespace on the same bridge (srun's tasks must reach srun
# back at its address), and the tasks see the nodes' interface as gw0.
# Each node offers 4 CPUs (SlurmdParameters=config_overrides), so a step of
# 3 tasks needs no --overcommit on a 2-core machine.
#
# Exits 77 (ctest SKIP) without root or without Slurm's programs
# (scripts/install-deps installs them), COMMAND's status otherwise, 1 when
# the cluster does not come up within 60 s (with the daemons' logs).
set -uo pipefail

nodes=1
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    *) echo "slurm.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ ${1:-} == -- ]] && shift
(( $# > 0 )) || { echo "usage: slurm.sh [--nodes N] -- COMMAND [ARGS...]" >&2; exit 2; }

[[ $(id -u) -eq 0 ]] || { echo "SKIP: slurmd and slurmctld need root here"; exit 77; }
for prog in slurmctld slurmd srun sinfo munged; do
  command -v $prog > /dev/null ||
    { echo "SKIP: $prog not found (scripts/install-deps installs slurm-wlm and munge)"; exit 77; }
done

dir=$(mktemp -d /tmp/gw-slurm.XXXXXX)
chmod 755 "$dir"  # munged's socket must be reachable through it
pids=()
namespaces=()
bridge=gwslb$$
cleanup() {
  local p
  # Steps still running (a test cut short) end with their job; slurmstepd
  # outlives slurmd otherwise.
  if [[ -n ${SLURM_CONF:-} ]]; then
    scancel --quiet --full --signal=KILL -u root 2> /dev/null
    for _ in $(seq 50); do
      [[ -z $(squeue -h -o %i 2> /dev/null) ]] && break
      sleep 0.2
    done
  fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null; done
  for n in "${namespaces[@]}"; do
    ip netns pids "$n" 2> /dev/null | xargs -r kill -KILL 2> /dev/null
    ip netns del "$n" 2> /dev/null
  done
  ip link del "$bridge" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two free ports below the range of Note [Slurm store port] (16000-31999)
# and Linux's ephemeral ports: slurmctld's and slurmd's.
free_ports() {
  local used p out=()
  used=$(ss -Htan 2> /dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  while ((${#out[@]} < $1)); do
    p=$((10000 + RANDOM % 6000))
    grep -qx "$p" <<< "$used" || [[ " ${out[*]} " == *" $p "* ]] || out+=("$p")
  done
  echo "${out[@]}"
}
read -r ctld_port slurmd_port < <(free_ports 2)

# munged with a key of its own: Slurm's credentials, never the host's.
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
head -c 1024 /dev/urandom > "$dir/munge/key"
chmod 700 "$dir/munge"
chmod 400 "$dir/munge/key"
munged --foreground --force --key-file="$dir/munge/key" --socket="$dir/munge/socket" \
  --pid-file="$dir/munge/pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" \
  > "$dir/log/munged.out" 2>&1 &
pids+=($!)

host=$(hostname -s)
ctl_addr=""
node_names=$host
run=()  # how COMMAND and the daemons of the nodes are started
if ((nodes > 1)); then
  # 10.79.<pid % 250>.0/24: a subnet per run, so two runs never mix.
  net=10.79.$(($$ % 250))
  ctl_addr=$net.1
  ip link add "$bridge" type bridge || { echo "SKIP: cannot create a bridge"; exit 77; }
  ip addr add "$ctl_addr/24" dev "$bridge"
  ip link set "$bridge" up
  hosts_file="$dir/hosts"
  {
    echo "127.0.0.1 localhost"
    echo "$ctl_addr $host"
    echo "$net.254 gwlogin"
    for i in $(seq "$nodes"); do echo "$net.$((i + 1)) gwnode$i"; done
  } > "$hosts_file"
  # Namespace i (0: the login namespace) with its end of a veth on the bridge.
  make_ns() {
    local ns=$1 addr=$2 veth=gwsv$$_$3
    ip netns add "$ns" || { echo "SKIP: cannot create a network namespace"; exit 77; }
    namespaces+=("$ns")
    ip link add "$veth" type veth peer name gw0 netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.gw0.disable_ipv6=1
    ip -n "$ns" addr add "$addr/24" dev gw0
    ip -n "$ns" link set gw0 up
  }
  # Runs "$@" in namespace $1 as host $2: its own network, host name and
  # /etc/hosts (a mount namespace of its own). Not `ip netns exec`, whose
  # fresh /sys lacks the cgroup mounts that slurmd needs.
  in_ns() {
    local ns=$1 name=$2
    shift 2
    nsenter --net="/run/netns/$ns" unshare --uts --mount sh -c \
      'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"' \
      "$hosts_file" "$name" "$@"
  }
  make_ns gwsl$$_login "$net.254" 0
  for i in $(seq "$nodes"); do make_ns gwsl$$_n$i "$net.$((i + 1))" "$i"; done
  node_names="gwnode[1-$nodes]"
fi

cpus=4
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / nodes / 2 ))
cat > "$dir/slurm.conf" << EOF
ClusterName=gradwire-test
SlurmctldHost=$host${ctl_addr:+($ctl_addr)}
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
PlugStackConfig=/dev/null
InactiveLimit=0
# sbatch --wait polls the job's state 2 s after submitting, then sleeps 4x
# longer each time while that stays under MinJobAge / 2 (10 s for a job of
# one second at the default of 300): at 4, every poll is 2 s apart.
MinJobAge=4
KillWait=5
MessageTimeout=30
EOF
if ((nodes > 1)); then
  echo "NodeName=gwnode[1-$nodes] NodeAddr=$net.[2-$((nodes + 1))] CPUs=$cpus RealMemory=$mem State=UNKNOWN" >> "$dir/slurm.conf"
else
  echo "NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN" >> "$dir/slurm.conf"
fi
echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >> "$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf

for _ in $(seq 50); do [[ -S $dir/munge/socket ]] && break; sleep 0.1; done
slurmctld -D -i > "$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
if ((nodes > 1)); then
  for i in $(seq "$nodes"); do
    mkdir -p "$dir/spool/gwnode$i"
    in_ns gwsl$$_n$i gwnode$i slurmd -D -N gwnode$i > "$dir/log/slurmd.gwnode$i.out" 2>&1 &
    pids+=($!)
  done
  run=(in_ns gwsl$$_login gwlogin)
else
  mkdir -p "$dir/spool/$host"
  slurmd -D > "$dir/log/slurmd.out" 2>&1 &
  pids+=($!)
fi

# Bounded wait for every node to be idle.
up=0
for _ in $(seq 120); do
  idle=$(sinfo -h -N -t idle -o '%N' 2> /dev/null | wc -l)
  ((idle == nodes)) && { up=1; break; }
  for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null || break 2; done  # a daemon died
  sleep 0.5
done
if ((!up)); then
  echo "FAIL: the Slurm cluster ($nodes node(s)) did not come up (60 s at most)"
  sinfo -N 2>&1
  for f in "$dir"/log/*; do echo "=== $f"; tail -n 30 "$f"; done
  exit 1
fi
echo "slurm.sh: $nodes node(s) idle ($(sinfo -h -o '%N'))"

export GW_SLURM_NODES=$nodes
"${run[@]}" "$@"
rc=$?
if ((rc != 0)) && [[ -n ${GW_SLURM_LOGS:-} ]]; then
  for f in "$dir"/log/*; do echo "=== $f"; tail -n 40 "$f"; done
fi
exit $rc
