// Command go-transform is an example Ferry transform plugin built with the
// Go SDK: it upper-cases one string field of each JSON object, drops the
// messages whose "drop" member is true, splits a message whose field holds
// a list into one message per element, and fails (dead-letters) payloads
// that are not JSON objects.
//
//	go build -o examples/plugins/go-transform/go-transform ./examples/plugins/go-transform
//
//	[transforms.plugin]
//	path = "../../examples/plugins/go-transform/ferry-plugin.toml"
//	[transforms.plugin.config]
//	field = "name"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/sdk"
	"github.com/ferryhq/ferry/transform"
)

var spec = connector.NewSpec(
	connector.NewStringField("field").Require().WithExample("name").
		WithDoc("the member upper-cased (a string) or split on (a list)"),
)

type upper struct{ field string }

func (u *upper) ApplyBatch(_ context.Context, msgs []connector.Message, _ connector.Schema) ([]transform.Outcome, error) {
	outs := make([]transform.Outcome, len(msgs))
	for i, m := range msgs {
		var obj map[string]any
		if err := json.Unmarshal(m.Payload, &obj); err != nil || obj == nil {
			outs[i].Err = errors.New("not a JSON object")
			continue
		}
		if obj["drop"] == true {
			continue // dropped
		}
		switch v := obj[u.field].(type) {
		case string:
			obj[u.field] = strings.ToUpper(v)
			outs[i].Out = []connector.Message{with(m, obj)}
		case []any:
			for _, e := range v {
				obj[u.field] = e
				outs[i].Out = append(outs[i].Out, with(m, obj))
			}
			if len(v) == 0 {
				outs[i].Out = nil // split into nothing: dropped
			}
		default:
			outs[i].Keep = true
		}
	}
	return outs, nil
}

func with(m connector.Message, obj map[string]any) connector.Message {
	b, _ := json.Marshal(obj) // obj came from JSON
	m.Payload = b
	return m
}

func main() {
	sdk.ServeTransform(sdk.TransformInfo{
		Name:    "go-transform",
		Summary: "upper-cases a field, drops on drop=true, splits lists",
		Spec:    spec,
		New: func(cfg connector.Config) (sdk.Transformer, error) {
			set, err := spec.Parse(cfg.Plugin)
			if err != nil {
				return nil, err
			}
			return &upper{field: set.String("field")}, nil
		},
	})
}
