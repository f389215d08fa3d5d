package file

import (
	"encoding/json"
	"fmt"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/wire"
)

// Size is a byte count read from a number or a string such as "64MiB".
type Size int64

// UnmarshalJSON implements json.Unmarshaler.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size %s: want a number of bytes or a string such as \"64MiB\"", b)
	}
	v, err := wire.ParseSize(str)
	if err != nil {
		return err
	}
	if v > 1<<62 {
		return fmt.Errorf("size %q is too large", str)
	}
	*s = Size(v)
	return nil
}

// Formats of the source and the sink.
const (
	FormatNDJSON    = "ndjson"
	FormatLines     = "lines"
	FormatWholeFile = "whole_file" // source only
	FormatRaw       = "raw"        // sink only
)

func where(p connector.PluginConfig, key string) string {
	w := "plugin_config." + key
	if p.Source != "" {
		w = p.Source + ": " + w
	}
	return w
}
