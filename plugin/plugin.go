package plugin

import (
	"fmt"

	goplugin "github.com/hashicorp/go-plugin"
)

// The handshake: go-plugin's, with Ferry's cookie and this contract's
// version. Ferry sets MagicCookieKey=MagicCookieValue in the plugin's
// environment; a plugin started otherwise should say it is a Ferry
// plugin and exit. ProtocolVersion is the second field of the handshake
// line a plugin prints ("1|1|tcp|127.0.0.1:PORT|grpc") and the v1 in the
// proto package ferry.plugin.v1.
const (
	MagicCookieKey   = "FERRY_PLUGIN_MAGIC_COOKIE"
	MagicCookieValue = "ferry-connector-plugin"
	ProtocolVersion  = 1
)

// Handshake is the go-plugin handshake of Ferry's plugins.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}

// PluginName is the name under which the SDK and the host put the
// contract in go-plugin's plugin set (a local name: nothing on the wire
// carries it).
const PluginName = "ferry"

// Kind is what a plugin is: a source, a sink or a transform.
type Kind string

// Plugin kinds, as in a manifest's kind and the Spec call's kinds.
const (
	KindSource    Kind = "source"
	KindSink      Kind = "sink"
	KindTransform Kind = "transform"
)

// Transport is how Ferry talks to a plugin.
type Transport string

// Transports.
const (
	// TransportGRPC is the go-plugin handshake and the gRPC services of
	// proto/ferry/plugin/v1/plugin.proto.
	TransportGRPC Transport = "grpc"
	// TransportLines is newline-delimited JSON on standard input and
	// output, for scripts without an SDK.
	TransportLines Transport = "lines"
)

// ErrTransportNotBuilt is wrapped by the error of starting a plugin whose
// manifest names a transport this build of Ferry does not run (both
// transports above are built; a manifest is checked against them, so
// only a Manifest made in code can name another).
var ErrTransportNotBuilt = fmt.Errorf("transport not available in this build")
