package connector

import "encoding/json"

// Viewer is implemented by a sink that keeps a keyed state it can answer
// point lookups from, such as the derive sink's groups; the management
// API serves it at GET /views/{name}/{key} while the sink runs. View must
// be safe to call at any time, concurrently with Consume; ok is false
// when the key has no value.
type Viewer interface {
	View(key string) (value json.RawMessage, ok bool)
}
