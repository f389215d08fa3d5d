package webhook

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
)

// formJSON turns a urlencoded form into a JSON object: a field given once
// is a string, a field given more than once an array of strings, in the
// body's order; keys sorted.
func formJSON(body []byte) ([]byte, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("the body is not a urlencoded form: %v", err)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	obj := make(map[string]any, len(vals))
	for _, k := range keys {
		if v := vals[k]; len(v) == 1 {
			obj[k] = v[0]
		} else {
			obj[k] = v
		}
	}
	return json.Marshal(obj)
}
