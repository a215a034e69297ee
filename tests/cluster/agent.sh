#!/bin/sh
# The launcher's remote shell for the stand-in nodes of tests/cluster/netns.sh
# (mpirun: OMPI_MCA_plm_rsh_agent): `agent.sh HOST COMMAND...` runs COMMAND
# as ssh would (one line for sh -c) in HOST's network namespace, with that
# node's own store (IMGBUILD_STORE), both from $NODES_MAP, whose lines are
# "ADDRESS NAMESPACE STORE [VAR=VALUE...]" (the node's own environment:
# IMGBUILD_NODE_GPUS=1, NCCL_HOSTID=node-b, ...).
host=$1
shift
line=$(grep "^$host " "${NODES_MAP:?}") || { echo "agent.sh: no node $host in $NODES_MAP" >&2; exit 255; }
ns=$(echo "$line" | cut -d' ' -f2)
store=$(echo "$line" | cut -d' ' -f3)
extra=$(echo "$line" | cut -s -d' ' -f4-)
# shellcheck disable=SC2086 # the node's VAR=VALUE words, one each
exec nsenter --net="/run/netns/$ns" env IMGBUILD_STORE="$store" IB_NODE="$host" $extra sh -c "$*"
