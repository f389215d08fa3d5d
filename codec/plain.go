package codec

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// jsonCodec: payloads are JSON documents.
type jsonCodec struct{}

func (jsonCodec) Schema() connector.Schema { return connector.SchemaJSON }
func (jsonCodec) Mapped() bool             { return true }

func (jsonCodec) Validate(p []byte) error {
	if err := jsonx.Check(p); err != nil {
		return fmt.Errorf("payload is not valid JSON: %w", err)
	}
	return nil
}

func (c jsonCodec) ToJSON(dst, p []byte) ([]byte, error) {
	if err := c.Validate(p); err != nil {
		return nil, err
	}
	return append(dst, p...), nil
}

func (c jsonCodec) FromJSON(dst, doc []byte) ([]byte, error) { return c.ToJSON(dst, doc) }

// textCodec: payloads are UTF-8 text; as JSON a text payload is read as a
// JSON document (upstream's text to JSON conversion parses it).
type textCodec struct{}

func (textCodec) Schema() connector.Schema { return connector.SchemaText }
func (textCodec) Mapped() bool             { return true }

func (textCodec) Validate(p []byte) error {
	if !utf8.Valid(p) {
		return errors.New("payload is not valid UTF-8 text")
	}
	return nil
}

func (textCodec) ToJSON(dst, p []byte) ([]byte, error) { return jsonCodec{}.ToJSON(dst, p) }

func (textCodec) FromJSON(dst, doc []byte) ([]byte, error) { return jsonCodec{}.ToJSON(dst, doc) }

// rawCodec: payloads are opaque bytes.
type rawCodec struct{}

func (rawCodec) Schema() connector.Schema { return connector.SchemaRaw }
func (rawCodec) Mapped() bool             { return false }
func (rawCodec) Validate([]byte) error    { return nil }

func (rawCodec) ToJSON([]byte, []byte) ([]byte, error)   { return nil, ErrNotMapped }
func (rawCodec) FromJSON([]byte, []byte) ([]byte, error) { return nil, ErrNotMapped }
