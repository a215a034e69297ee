# Stand-in nodes for the smoke test across nodes (issue 21), on one
# machine: network namespaces that this script makes and removes itself,
# each a "node" with an address of its own, nothing off the machine.
#
#   lan_up PREFIX NET        a LAN: namespaces PREFIX-h (the head: the
#                            registry, imgverify, mpirun), PREFIX-a and
#                            PREFIX-b (the nodes), each joined by a veth
#                            pair to a bridge in PREFIX-sw; addresses
#                            NET.10 (head), NET.1 and NET.2 (nodes)
#   pair_up PREFIX NET       two namespaces PREFIX-a (NET.1) and PREFIX-b
#                            (NET.2) joined by one veth pair (the GPU
#                            script: mpirun runs on node a)
#   lan_down PREFIX          remove them (the processes in them end first)
#   in_ns NS CMD...          CMD in namespace NS's network (nsenter: the
#                            mounts stay the machine's, which runc needs)
#
# Which namespace and store each node's processes get is in the file
# $NODES_MAP ("ADDRESS NAMESPACE STORE" lines), read by the launcher's
# agent (agent.sh), which stands in for ssh.

in_ns() {
  local ns=$1
  shift
  nsenter --net="/run/netns/$ns" "$@"
}

_ns_add() { # NS
  ip netns add "$1"
  ip -n "$1" link set lo up
}

lan_up() {
  local p=$1 net=$2 n
  _ns_add "$p-sw"
  ip -n "$p-sw" link add br0 type bridge
  ip -n "$p-sw" link set br0 up
  for n in h a b; do
    _ns_add "$p-$n"
    ip link add "$p-$n-e" netns "$p-$n" type veth peer name "p-$n" netns "$p-sw"
    ip -n "$p-sw" link set "p-$n" master br0
    ip -n "$p-sw" link set "p-$n" up
  done
  ip -n "$p-h" addr add "$net.10/24" dev "$p-h-e"
  ip -n "$p-a" addr add "$net.1/24" dev "$p-a-e"
  ip -n "$p-b" addr add "$net.2/24" dev "$p-b-e"
  for n in h a b; do ip -n "$p-$n" link set "$p-$n-e" up; done
}

pair_up() {
  local p=$1 net=$2
  _ns_add "$p-a"
  _ns_add "$p-b"
  ip link add "$p-a-e" netns "$p-a" type veth peer name "$p-b-e" netns "$p-b"
  ip -n "$p-a" addr add "$net.1/24" dev "$p-a-e"
  ip -n "$p-b" addr add "$net.2/24" dev "$p-b-e"
  ip -n "$p-a" link set "$p-a-e" up
  ip -n "$p-b" link set "$p-b-e" up
}

lan_down() {
  local p=$1 ns pid
  for ns in "$p-h" "$p-a" "$p-b" "$p-sw"; do
    [ -e "/run/netns/$ns" ] || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}
