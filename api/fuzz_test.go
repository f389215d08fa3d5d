package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/config"
)

// FuzzDecodeActiveVersion: the PUT .../configs/active body decoder never
// panics, answers 400 naming the field for bad input, and accepts only
// what encoding/json reads as the same version.
func FuzzDecodeActiveVersion(f *testing.F) {
	for _, s := range []string{`{"version": 1}`, `{"version": 0, "x": [1, {"y": null}]}`, `{}`, `{"version": -1}`,
		`{"version": 1e3}`, `{"version": "2"}`, `{"version": 18446744073709551615}`, `{"version": 18446744073709551616}`,
		`null`, `[]`, `{"version": 1} {}`, `{"version": 1`, ``, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeActiveVersion(body)
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Reason, ":") {
				t.Fatalf("bad error for %q: %v", body, err)
			}
			return
		}
		var want struct{ Version *uint64 }
		if err := json.Unmarshal(body, &want); err != nil || want.Version == nil || *want.Version != v {
			t.Fatalf("accepted %q as version %d; encoding/json reads %v (%v)", body, v, want.Version, err)
		}
	})
}

// FuzzCreateConfig: POST .../configs with any body answers 200 with the
// stored version or 400 with upstream's error body; never a 500 or a
// panic. It runs against a real runtime and configuration directory.
func FuzzCreateConfig(f *testing.F) {
	for _, s := range []string{createOutV1, `{}`, `{`, `[]`, `null`,
		`{"path": "count", "streams": [{"stream": "s", "topics": ["t"]}]}`,
		`{"path": "count", "streams": [{"stream": "s", "topics": ["t"], "poll_interval": "1h 5m", "on_error": "dead_letter"}], "plugin_config": {"a": [1, 2.5, "x", {"b": null}]}}`,
		`{"path": "count", "transforms": {"add_fields": {"enabled": true, "fields": [{"key": "k", "value": {"static": 1}}]}}, "streams": [{"stream": "s", "topics": ["t"]}]}`,
		`{"path": "count", "streams": [{"stream": "", "topics": []}]}`,
		`{"path": "count", "streams": [{"stream": "s", "topics": ["t"], "batch_length": 0}]}`,
		`{"key": "other", "version": 7}`,
	} {
		f.Add([]byte(s))
	}
	e := newEnv(f, map[string]string{"out.toml": outTOML}, config.HTTP{})
	h := e.srv.Handler()
	// Pin version 0 as active, so each created version can be deleted
	// again and the directory stays small.
	if r := e.do("PUT", "/sinks/out/configs/active", `{"version": 0}`); r.status != http.StatusNoContent {
		f.Fatalf("pin version 0: %d %s", r.status, r.body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "http://127.0.0.1/sinks/out/configs", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(APIKeyHeader, e.key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("status %d, body not a JSON object: %q", rec.Code, rec.Body.Bytes())
		}
		switch rec.Code {
		case http.StatusOK:
			v, ok := m["version"].(float64)
			if m["key"] != "out" || m["active"] != false || !ok || v < 1 {
				t.Fatalf("created version of the wrong shape: %s", rec.Body.Bytes())
			}
			if err := e.rt.Provider().Delete(context.Background(), config.KindSink, "out", uint64(v)); err != nil {
				t.Fatalf("delete created version %v: %v", v, err)
			}
		case http.StatusBadRequest:
			if m["code"] == nil || m["reason"] == nil || len(m) != 2 {
				t.Fatalf("400 without upstream's error body: %s", rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.Bytes())
		}
	})
}
