package mongodb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxDepth bounds the nesting of a JSON payload: MongoDB refuses
// documents nested deeper than 100 levels, and a payload of a million
// brackets must not cost a million stack frames.
const maxDepth = 180

// jsonToBSON turns a JSON payload into a BSON value as upstream does
// (serde_json, then bson): objects keep their key order (a repeated key
// keeps its first place and its last value), integers that fit are
// Int64, other numbers Double. Nothing is read as Extended JSON: a key
// "$oid" stays a key, so a payload cannot forge BSON types or operators
// (the server decides whether it takes such keys).
func jsonToBSON(payload []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the payload is not JSON: more after the first value")
	}
	return v, nil
}

func readValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("the payload is not JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, fmt.Errorf("the payload is nested deeper than %d levels", maxDepth)
		}
		if t == '[' {
			arr := bson.A{}
			for dec.More() {
				v, err := readValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token() // ]
			return arr, wrapJSON(err)
		}
		doc := bson.D{}
		var index map[string]int
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, wrapJSON(err)
			}
			key, _ := kt.(string)
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if index == nil {
				index = map[string]int{}
			}
			if i, dup := index[key]; dup {
				doc[i].Value = v
				continue
			}
			index[key] = len(doc)
			doc = append(doc, bson.E{Key: key, Value: v})
		}
		_, err := dec.Token() // }
		return doc, wrapJSON(err)
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return n, nil
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return float64(u), nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("the payload's number %s is out of range", t)
		}
		return f, nil
	default: // string, bool, nil
		return t, nil
	}
}

func wrapJSON(err error) error {
	if err != nil {
		return fmt.Errorf("the payload is not JSON: %w", err)
	}
	return nil
}
