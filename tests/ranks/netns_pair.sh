# Sourced by the emulated-network tests (netem.sh, hosts.sh): two network
# namespaces joined by a veth pair.
#   netns_pair NS0 NS1 ADDR0 ADDR1 DEV
# Both ends are called DEV: every rank must name the same interface
# (GRADWIRE_OFI_IFACE). No IPv6 on it (the tests' iptables rules are IPv4's).
# Exits 77 (ctest SKIP) where namespaces or veth pairs cannot be made; the
# caller deletes the namespaces (ip netns del) on exit.
netns_pair() {
  local ns=("$1" "$2") addr=("$3" "$4") dev=$5 i
  ip netns add "${ns[0]}" 2> /dev/null ||
    { echo "SKIP: cannot create a network namespace (root and CAP_NET_ADMIN needed)"; exit 77; }
  ip netns add "${ns[1]}" || exit 1
  ip link add "$dev" netns "${ns[0]}" type veth peer name "$dev" netns "${ns[1]}" 2> /dev/null ||
    { echo "SKIP: cannot create a veth pair (CONFIG_VETH)"; exit 77; }
  for i in 0 1; do
    ip -n "${ns[i]}" link set lo up
    ip netns exec "${ns[i]}" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
    ip -n "${ns[i]}" addr add "${addr[i]}/24" dev "$dev"
    ip -n "${ns[i]}" link set "$dev" up
  done
  # The carrier comes up asynchronously (linkwatch, up to a second), and
  # libfabric offers no domain on an interface that is not running yet.
  for i in 0 1; do
    for _ in $(seq 100); do
      ip -n "${ns[i]}" link show "$dev" | grep -q 'state UP' && break
      sleep 0.05
    done
  done
}
