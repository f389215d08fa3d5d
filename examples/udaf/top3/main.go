// Command top3 is a WebAssembly user-defined aggregate for Ferry: per
// group, the three highest scores of messages {"id": "...", "score": N}
// with their ids, emitted as [{"id":"b","score":9},...], highest first
// (equal scores by id). Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o top3.wasm .
//
// Its state is binary: a count (1 byte), then per entry the score's
// IEEE 754 bits (8 bytes, little-endian), the id's length (2 bytes) and
// the id.
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/udaf/guest"
)

func main() {}

func init() {
	guest.Register(guest.Aggregate{Init: initState, Add: add, Merge: merge, Emit: emit})
}

// keep is how many entries a group keeps.
const keep = 3

type entry struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// before orders entries: higher score first, then lower id.
func before(a, b entry) int {
	switch {
	case a.Score > b.Score:
		return -1
	case a.Score < b.Score:
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

func initState() ([]byte, error) { return []byte{0}, nil }

func add(state, input []byte) ([]byte, error) {
	top, err := decode(state)
	if err != nil {
		return nil, err
	}
	var in struct {
		ID    *string  `json:"id"`
		Score *float64 `json:"score"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("the input is not a JSON object: %w", err)
	}
	if in.ID == nil || in.Score == nil {
		return nil, errors.New(`the input needs a string "id" and a number "score"`)
	}
	if len(*in.ID) > math.MaxUint16 {
		return nil, fmt.Errorf("an id of %d bytes, at most %d", len(*in.ID), math.MaxUint16)
	}
	return encode(best(append(top, entry{*in.ID, *in.Score}))), nil
}

func merge(a, b []byte) ([]byte, error) {
	x, err := decode(a)
	if err != nil {
		return nil, err
	}
	y, err := decode(b)
	if err != nil {
		return nil, err
	}
	return encode(best(append(x, y...))), nil
}

func emit(state []byte) ([]byte, error) {
	top, err := decode(state)
	if err != nil {
		return nil, err
	}
	if top == nil {
		top = []entry{}
	}
	return json.Marshal(top)
}

// best is the first keep entries of es in order.
func best(es []entry) []entry {
	slices.SortFunc(es, before)
	return es[:min(len(es), keep)]
}

func encode(es []entry) []byte {
	out := []byte{byte(len(es))}
	for _, e := range es {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(e.Score))
		out = binary.LittleEndian.AppendUint16(out, uint16(len(e.ID)))
		out = append(out, e.ID...)
	}
	return out
}

func decode(b []byte) ([]entry, error) {
	if len(b) == 0 || b[0] > keep {
		return nil, errors.New("the state is not a top3 state")
	}
	es := make([]entry, 0, int(b[0])+1)
	p := b[1:]
	for range int(b[0]) {
		if len(p) < 10 {
			return nil, errors.New("the state is cut short")
		}
		score := math.Float64frombits(binary.LittleEndian.Uint64(p))
		if math.IsNaN(score) || math.IsInf(score, 0) {
			return nil, errors.New("the state holds a score that is not a finite number")
		}
		n := int(binary.LittleEndian.Uint16(p[8:]))
		if len(p) < 10+n {
			return nil, errors.New("the state is cut short")
		}
		es = append(es, entry{string(p[10 : 10+n]), score})
		p = p[10+n:]
	}
	if len(p) != 0 {
		return nil, errors.New("the state has bytes past its entries")
	}
	return es, nil
}
