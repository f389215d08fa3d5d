package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
	"github.com/ferryhq/ferry/transform"
)

// Importing plugin/host makes [transforms.plugin] build transform plugins.
func init() { transform.SetPluginBuilder(BuildTransform) }

// Transform is a transform plugin as a transform.BatchTransform: one Apply
// call per batch, under the same supervision as a sink plugin's calls (a
// deadline per call, a process that fails is killed and started again
// after the restart backoff). A batch the plugin could not answer fails
// with an error marked connector.Unavailable, which the runtime retries
// (the batch is read or polled again) rather than dead-letters; a
// message the plugin fails (VERDICT_KIND_FAIL) or a batch it answers
// with an error goes to the dead-letter path with its reason.
type Transform struct {
	sup  *supervisor
	name string
}

// BuildTransform is transform.PluginBuilder: the plugin at path (a
// manifest, its directory or an executable) must serve the transform kind
// over gRPC; config is checked against its spec. where names the
// [transforms.plugin] table for errors and logs.
func BuildTransform(path string, config map[string]any, where string) (transform.BatchTransform, error) {
	m, ok, err := Find(path, "")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no plugin at %s", path)
	}
	if m.Transport == plugin.TransportLines {
		return nil, fmt.Errorf("%s: a transform plugin speaks gRPC; the line protocol has sources and sinks only", where)
	}
	d, err := Describe(m)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(d.Kinds, plugin.KindTransform) {
		return nil, fmt.Errorf("%s is a %s plugin, not a transform", path, joinKinds(d.Kinds))
	}
	spec := d.Spec
	if spec == nil {
		spec = connector.NewSpec()
	}
	if _, err := spec.Parse(connector.PluginConfig{Values: config, Source: where, Table: "config"}); err != nil {
		return nil, err
	}
	js, err := ConfigJSON(spec, config)
	if err != nil {
		return nil, err
	}
	t := &Transform{name: "plugin"}
	t.sup = newSupervisor(m, slog.Default().With("transform", "plugin", "plugin", m.Name, "table", where), true)
	t.sup.open = func(ctx context.Context, p proc) error {
		resp, err := p.rpc().transform.Open(ctx, &pluginpb.OpenRequest{Key: where, Name: d.Name, ConfigJson: js})
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	}
	return t, nil
}

// Name is the table's name.
func (t *Transform) Name() string { return t.name }

// ApplyBatch sends msgs to the plugin and maps its verdicts.
func (t *Transform) ApplyBatch(ctx context.Context, msgs []connector.Message, schema connector.Schema) ([]transform.Outcome, error) {
	p, err := t.sup.get(ctx)
	if err != nil {
		if !connector.IsUnavailable(err) && ctx.Err() == nil {
			err = connector.Unavailable(err)
		}
		return nil, err
	}
	req := &pluginpb.ApplyRequest{Schema: string(schema), Messages: plugin.MessagesToProto(msgs)}
	var resp *pluginpb.ApplyResponse
	var made [][]connector.Message // per verdict, its messages
	err = t.sup.call(ctx, p, "Apply", t.sup.m.Limits.CallTimeout, func(ctx context.Context) error {
		var err error
		if resp, err = p.rpc().transform.Apply(ctx, req); err == nil {
			made, err = checkApply(resp, len(msgs), schema)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	t.sup.succeeded()
	if resp.Error != nil {
		return nil, plugin.FailureError(resp.Error)
	}
	outs := make([]transform.Outcome, len(msgs))
	for i, v := range resp.Verdicts {
		switch v.Kind {
		case pluginpb.VerdictKind_VERDICT_KIND_KEEP:
			outs[i].Keep = true
		case pluginpb.VerdictKind_VERDICT_KIND_DROP:
		case pluginpb.VerdictKind_VERDICT_KIND_REPLACE, pluginpb.VerdictKind_VERDICT_KIND_SPLIT:
			// A split into nothing leaves Out empty: dropped.
			for k, m := range made[i] {
				outs[i].Out = append(outs[i].Out, withOrigin(&msgs[i], m, k == 0))
			}
		case pluginpb.VerdictKind_VERDICT_KIND_FAIL:
			outs[i].Err = fmt.Errorf("the plugin failed the message: %s", v.Reason)
		}
	}
	return outs, nil
}

// withOrigin is a message the plugin made of orig: orig's stream fields
// (a sink's offset, partition), and orig's id when the plugin gave none
// and keepID.
func withOrigin(orig *connector.Message, m connector.Message, keepID bool) connector.Message {
	r := *orig
	r.Payload, r.Headers, r.OriginTimestamp = m.Payload, m.Headers, m.OriginTimestamp
	if m.ID != ([16]byte{}) {
		r.ID = m.ID
	} else if !keepID {
		r.ID = [16]byte{}
	}
	return r
}

// checkApply refuses answers the contract does not allow: a count of
// verdicts other than the batch's, a replace without exactly one message,
// messages that do not convert, or another schema. It returns each
// verdict's messages, converted.
func checkApply(resp *pluginpb.ApplyResponse, n int, schema connector.Schema) ([][]connector.Message, error) {
	if resp.Error != nil {
		if len(resp.Verdicts) > 0 {
			return nil, garbage{errors.New("both an error of the whole batch and verdicts")}
		}
		return nil, nil
	}
	if len(resp.Verdicts) != n {
		return nil, garbagef("%d verdicts for a batch of %d", len(resp.Verdicts), n)
	}
	made := make([][]connector.Message, n)
	for i, v := range resp.Verdicts {
		if v.Schema != "" && v.Schema != string(schema) {
			return nil, garbagef("verdict %d changes the schema to %q (from %q), which a transform plugin may not", i, v.Schema, schema)
		}
		switch v.Kind {
		case pluginpb.VerdictKind_VERDICT_KIND_KEEP, pluginpb.VerdictKind_VERDICT_KIND_DROP, pluginpb.VerdictKind_VERDICT_KIND_FAIL:
			if len(v.Messages) > 0 {
				return nil, garbagef("verdict %d (%s) carries messages", i, v.Kind)
			}
		case pluginpb.VerdictKind_VERDICT_KIND_REPLACE:
			if len(v.Messages) != 1 {
				return nil, garbagef("verdict %d replaces with %d messages, not one", i, len(v.Messages))
			}
		case pluginpb.VerdictKind_VERDICT_KIND_SPLIT:
		default:
			return nil, garbagef("verdict %d has the unknown kind %d", i, v.Kind)
		}
		ms, err := plugin.MessagesFromProto(v.Messages)
		if err != nil {
			return nil, garbagef("verdict %d: %v", i, err)
		}
		made[i] = ms
	}
	return made, nil
}

// Apply runs the plugin on one message (transform.Transform); a split is
// an error here: the runtime applies chains a batch at a time.
func (t *Transform) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	outs, err := t.ApplyBatch(context.Background(), []connector.Message{*m}, schema)
	if err != nil {
		return schema, false, err
	}
	switch o := outs[0]; {
	case o.Err != nil:
		return schema, false, o.Err
	case o.Keep:
		return schema, true, nil
	case len(o.Out) == 0:
		return schema, false, nil
	case len(o.Out) == 1:
		*m = o.Out[0]
		return schema, true, nil
	}
	return schema, false, errors.New("the plugin split a message, which needs a batch")
}

// Close closes the transform and ends its process.
func (t *Transform) Close() error {
	return t.sup.close(context.Background(), func(ctx context.Context, p proc) error {
		resp, err := p.rpc().transform.Close(ctx, &pluginpb.CloseRequest{})
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	})
}

var _ transform.BatchTransform = (*Transform)(nil)
