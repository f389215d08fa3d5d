package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// A transform plugin's answers that the contract does not allow are
// garbage (its process is killed and the batch transformed again), each
// with a reason that names the verdict.
func TestCheckApplyRefusesGarbage(t *testing.T) {
	msg := &pluginpb.Message{Payload: []byte(`{}`)}
	keep := &pluginpb.Verdict{Kind: pluginpb.VerdictKind_VERDICT_KIND_KEEP}
	for _, c := range []struct {
		resp *pluginpb.ApplyResponse
		want string
	}{
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep}}, "1 verdicts for a batch of 2"},
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep, {Kind: pluginpb.VerdictKind_VERDICT_KIND_REPLACE}}}, "verdict 1 replaces with 0 messages, not one"},
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep, {Kind: pluginpb.VerdictKind_VERDICT_KIND_DROP, Messages: []*pluginpb.Message{msg}}}}, "verdict 1 (VERDICT_KIND_DROP) carries messages"},
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep, {Kind: 99}}}, "verdict 1 has the unknown kind 99"},
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep, {Kind: pluginpb.VerdictKind_VERDICT_KIND_KEEP, Schema: "raw"}}}, `verdict 1 changes the schema to "raw"`},
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep, {Kind: pluginpb.VerdictKind_VERDICT_KIND_SPLIT,
			Messages: []*pluginpb.Message{{Id: []byte{1, 2, 3}}}}}}, "verdict 1: "},
		{&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep}, Error: &pluginpb.Failure{Reason: "x"}}, "both an error of the whole batch and verdicts"},
	} {
		_, err := checkApply(c.resp, 2, connector.SchemaJSON)
		var g garbage
		if !errors.As(err, &g) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkApply: %v, want garbage with %q", err, c.want)
		}
	}
	made, err := checkApply(&pluginpb.ApplyResponse{Verdicts: []*pluginpb.Verdict{keep,
		{Kind: pluginpb.VerdictKind_VERDICT_KIND_SPLIT, Messages: []*pluginpb.Message{msg, msg}}}}, 2, connector.SchemaJSON)
	if err != nil || len(made[0]) != 0 || len(made[1]) != 2 {
		t.Fatalf("a good answer: %v, %v", made, err)
	}
}
