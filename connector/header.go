package connector

import "github.com/ferryhq/ferry/iggy/header"

// Iggy user headers, as a Message carries them. They are package
// iggy/header's types, shared with the Iggy client and its protocol layer,
// so a header passes from a connector to Iggy and back without being
// converted; package connector does not depend on the protocol.
type (
	// Header is one user header: a key and a typed value.
	Header = header.Header
	// HeaderKey is a header's key: a string (header.StringKey, as
	// StringHeader and SetHeader make) or, rarely, raw bytes
	// (header.BinaryKey).
	HeaderKey = header.Key
	// HeaderValue is a typed header value: Kind says how Data is encoded.
	// Construct one with header.StringValue, header.Uint64Value and the
	// like, and read one with Text, Bool or String.
	HeaderValue = header.Value
)

// StringHeader is a header with a string key and a string value.
func StringHeader(key, value string) Header { return header.New(key, header.StringValue(value)) }

// Header returns the value of the first header with the string key key.
func (m *Message) Header(key string) (HeaderValue, bool) { return header.Get(m.Headers, key) }

// SetHeader sets the header with the string key key to v, replacing the
// first one there is or adding one.
func (m *Message) SetHeader(key string, v HeaderValue) { m.Headers = header.Set(m.Headers, key, v) }
