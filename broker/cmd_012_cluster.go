package broker

// get_cluster_metadata (12): cluster "single-node" with one node,
// "iggy-node", the healthy leader, at the broker's real listen address
// (an unspecified listen IP is advertised as 127.0.0.1), with the TCP port
// it listens on (TLS or not). Upstream advertises the port of every
// listener it runs and 0 for a disabled one; the broker serves only TCP,
// so QUIC, HTTP and WebSocket are 0. Before login the dispatcher answers
// status 40 like every NonReplicated code but ping.

import (
	"net"
	"strconv"

	"github.com/ferryhq/ferry/iggy/wire"
)

func handleGetClusterMetadata(b *Broker, r *request) reply {
	host, portStr, err := net.SplitHostPort(b.addr)
	if err != nil {
		return b.failed("cluster metadata", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	port, _ := strconv.ParseUint(portStr, 10, 16)
	return rawOf(&wire.ClusterMetadata{
		Name:  "single-node",
		Nodes: []wire.ClusterNode{{Name: "iggy-node", IP: host, TCP: uint16(port), Role: 0, Status: 0}},
	})
}
