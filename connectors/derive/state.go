package derive

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ferryhq/ferry/internal/fsx"
)

// checkpointVersion is the checkpoint format. A new format gets a new
// number, and decode keeps reading the old ones. Version 2 is a
// checkpoint of input = "changelog": version 1's, and the rows.
const (
	checkpointVersion          = 1
	checkpointVersionChangelog = 2
)

// checkpointFile is the checkpoint's name in state_dir.
const checkpointFile = "checkpoint.json"

// checkpoint is what the derive sink saves after applying a batch, in one
// atomic file write: the groups, the input offsets applied, and the
// outputs of that batch (sent again at the next Open, so a crash between
// the save and the send loses none; their ids make the copies duplicates
// the broker drops).
type checkpoint struct {
	Version int `json:"version"`
	// Next is, per input "stream/topic/partition", the offset of the
	// first message not yet applied.
	Next map[string]uint64 `json:"next"`
	// Watermark is the highest event time seen, in Unix milliseconds.
	Watermark int64 `json:"watermark"`
	// Groups are the open groups and tombstones, sorted by id.
	Groups []*group `json:"groups"`
	// Pending are the last batch's outputs.
	Pending []output `json:"pending,omitempty"`
	// Rejected are, per input partition, the messages of the last batch
	// that were not applied and are reported again when the runtime
	// delivers that batch again.
	Rejected map[string][]rejection `json:"rejected,omitempty"`
	// Input is "changelog" in a version 2 checkpoint, else empty.
	Input string `json:"input,omitempty"`
	// Seq is the sequence number of the last row updated (changelog).
	Seq uint64 `json:"seq,omitempty"`
	// Rows are the input keys' rows (changelog, table.go), in no
	// particular order.
	Rows []*row `json:"rows,omitempty"`
}

// group is one key's (and window's) aggregate state.
type group struct {
	Key string `json:"key"`
	// Start and End bound the window in Unix milliseconds; both zero
	// without a window.
	Start int64 `json:"start,omitempty"`
	End   int64 `json:"end,omitempty"`
	// Version counts the updates emitted for the group, deletion markers
	// included: the output id is made of it.
	Version uint64     `json:"version"`
	Aggs    []aggState `json:"aggs,omitempty"`
	UDAF    []byte     `json:"udaf,omitempty"`
	// Deleted marks a tombstone: the group was deleted and is kept so a
	// later group of the same key and window goes on counting versions.
	Deleted bool `json:"deleted,omitempty"`

	changed bool
	rows    map[string]*row // with input = "changelog": the group's rows by rowID
	// outDeleted is whether the group's last output was a deletion
	// marker: Deleted as the checkpoint holds it, saved after emit.
	outDeleted bool
}

// id is the group's changelog key: the group key, and its window's start.
func (g *group) id() string { return groupID(g.Key, g.Start, g.End) }

func groupID(key string, start, end int64) string {
	if start == 0 && end == 0 {
		return key
	}
	return key + "@" + msTime(start)
}

// output is one message to the output topic.
type output struct {
	ID        [16]byte        `json:"id"`
	Partition uint32          `json:"partition"`
	Key       string          `json:"key"`
	Window    string          `json:"window,omitempty"`
	Deleted   bool            `json:"deleted,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// rejection is a message not applied: late, or not readable.
type rejection struct {
	Offset uint64 `json:"offset"`
	Reason string `json:"reason"`
	Late   bool   `json:"late,omitempty"`
}

// loadCheckpoint reads dir's checkpoint; an empty one when there is none.
func loadCheckpoint(dir string) (*checkpoint, error) {
	path := filepath.Join(dir, checkpointFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &checkpoint{Version: checkpointVersion, Next: map[string]uint64{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("derive: read checkpoint: %w", err)
	}
	cp, err := decodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("derive: checkpoint %s: %w", path, err)
	}
	return cp, nil
}

// decodeCheckpoint parses and checks a checkpoint.
func decodeCheckpoint(data []byte) (*checkpoint, error) {
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("not a checkpoint: %w", err)
	}
	switch {
	case cp.Version != checkpointVersion && cp.Version != checkpointVersionChangelog:
		return nil, fmt.Errorf("format version %d, want %d or %d", cp.Version, checkpointVersion, checkpointVersionChangelog)
	case cp.Version == checkpointVersion && (cp.Input != "" || len(cp.Rows) > 0 || cp.Seq != 0):
		return nil, fmt.Errorf("format version %d has no input, seq or rows", cp.Version)
	case cp.Version == checkpointVersionChangelog && cp.Input != "changelog":
		return nil, fmt.Errorf("format version %d: input %q, want \"changelog\"", cp.Version, cp.Input)
	}
	if cp.Next == nil {
		cp.Next = map[string]uint64{}
	}
	seen := make(map[string]bool, len(cp.Groups))
	for i, g := range cp.Groups {
		if g == nil {
			return nil, fmt.Errorf("groups[%d] is null", i)
		}
		if g.End < g.Start {
			return nil, fmt.Errorf("groups[%d] (%q): window ends before it starts", i, g.Key)
		}
		if seen[g.id()] {
			return nil, fmt.Errorf("groups[%d]: group %q twice", i, g.id())
		}
		seen[g.id()] = true
	}
	rows := make(map[string]bool, len(cp.Rows))
	for i, r := range cp.Rows {
		switch {
		case r == nil:
			return nil, fmt.Errorf("rows[%d] is null", i)
		case r.Topic == "" || len(r.Key) == 0 || len(r.Key) > 255:
			return nil, fmt.Errorf("rows[%d]: want a topic and a key of 1 to 255 bytes", i)
		case r.Group == "" || !seen[r.Group]:
			return nil, fmt.Errorf("rows[%d]: group %q is not in groups", i, r.Group)
		case r.Seq == 0 || r.Seq > cp.Seq:
			return nil, fmt.Errorf("rows[%d]: seq %d, want 1 to %d", i, r.Seq, cp.Seq)
		case rows[r.id()]:
			return nil, fmt.Errorf("rows[%d]: key %q of %s twice", i, r.Key, r.Topic)
		}
		rows[r.id()] = true
	}
	for i, o := range cp.Pending {
		if o.Key == "" || len(o.Payload) == 0 || !json.Valid(o.Payload) {
			return nil, fmt.Errorf("pending[%d]: no key or no JSON payload", i)
		}
	}
	return &cp, nil
}

// save writes the checkpoint atomically (a new file renamed over the old
// one, both synced): a kill at any point leaves the old or the new one.
func (cp *checkpoint) save(dir string, groups map[string]*group, rows map[string]*row) error {
	cp.Groups = cp.Groups[:0]
	for _, g := range groups {
		cp.Groups = append(cp.Groups, g)
	}
	sort.Slice(cp.Groups, func(i, j int) bool { return less(cp.Groups[i], cp.Groups[j]) })
	cp.Rows = cp.Rows[:0]
	for _, r := range rows {
		cp.Rows = append(cp.Rows, r) // in no order: rebuild orders them by Seq
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("derive: encode checkpoint: %w", err)
	}
	if err := fsx.WriteFile(filepath.Join(dir, checkpointFile), data, 0o600); err != nil {
		return fmt.Errorf("derive: save checkpoint: %w", err)
	}
	return nil
}

func less(a, b *group) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return a.Start < b.Start
}
