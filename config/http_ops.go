package config

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// get fetches a template's URL and extracts its payload.
func (p *HTTPProvider) get(ctx context.Context, u string) (any, error) {
	r, err := p.do(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if err := p.check(http.MethodGet, r); err != nil {
		return nil, err
	}
	return p.extract(http.MethodGet, r)
}

// decode reads one connector entry from a payload.
func (p *HTTPProvider) decode(source string, v any, kind Kind, key string) (*Connector, *overrides, error) {
	t, ok := v.(*table)
	if !ok {
		return nil, nil, Errors{{File: source, Msg: "expected a connector object, got " + typeName(v)}}
	}
	return loadConnector(newBinder(source, nil), t, kind, key, p.env)
}

// Load fetches the active configurations (get_active_configs): an object
// {"sinks": {key: config}, "sources": {key: config}}.
func (p *HTTPProvider) Load(ctx context.Context) (*ConnectorSet, error) {
	u := p.url("get_active_configs", "", nil, nil)
	v, err := p.get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("load connector configurations: %w", err)
	}
	root, ok := v.(*table)
	if !ok {
		return nil, fmt.Errorf("load connector configurations: GET %s: expected an object with sinks and sources, got %s", redactedURLString(u), typeName(v))
	}
	set := &ConnectorSet{}
	known := map[string]bool{}
	for _, kind := range []Kind{KindSource, KindSink} {
		group, ok := root.get(kind.plural())
		if !ok {
			continue
		}
		gt, ok := group.(*table)
		if !ok {
			return nil, fmt.Errorf("load connector configurations: GET %s: %q: expected an object of %s by key, got %s", redactedURLString(u), kind.plural(), kind.plural(), typeName(group))
		}
		for _, key := range gt.keys {
			source := redactedURLString(u) + " " + kind.plural() + "." + quoteKey(key)
			c, ov, err := p.decode(source, gt.vals[key], kind, key)
			if ov != nil {
				for k := range ov.known {
					known[k] = true
				}
			}
			if err != nil {
				set.Errors = append(set.Errors, &LoadError{File: source, Type: kind, Key: key, Err: err})
				continue
			}
			set.Connectors = append(set.Connectors, c)
		}
	}
	set.Warnings = envWarnings(p.env.Names(), known, set.Connectors)
	set.sort()
	return set, nil
}

// Versions lists the versions (get_<kind>_configs), marking the active one
// from get_active_versions, or the highest when the API names none.
func (p *HTTPProvider) Versions(ctx context.Context, kind Kind, key string) ([]VersionInfo, error) {
	if err := checkKindKey(kind, key); err != nil {
		return nil, err
	}
	u := p.url("get_"+string(kind)+"_configs", key, nil, nil)
	v, err := p.get(ctx, u)
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("GET %s: expected an array of configurations, got %s", redactedURLString(u), typeName(v))
	}
	var out []VersionInfo
	for i, e := range arr {
		c, _, err := p.decode(fmt.Sprintf("%s [%d]", redactedURLString(u), i), e, kind, key)
		if err != nil {
			return nil, err
		}
		out = append(out, VersionInfo{Version: c.Version})
	}
	if len(out) == 0 {
		return nil, notFound(kind, key, nil)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	activeV, created, ok, err := p.activeVersion(ctx, kind, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		activeV = out[len(out)-1].Version
	}
	for i := range out {
		if out[i].Version == activeV {
			out[i].Active, out[i].CreatedAt = true, created
		}
	}
	return out, nil
}

// activeVersion reads get_active_versions:
// {"sinks": {key: {"version": n, "created_at": "..."}}, "sources": {...}}.
func (p *HTTPProvider) activeVersion(ctx context.Context, kind Kind, key string) (uint64, time.Time, bool, error) {
	v, err := p.get(ctx, p.url("get_active_versions", "", nil, nil))
	if err != nil {
		if IsNotFound(err) {
			return 0, time.Time{}, false, nil
		}
		return 0, time.Time{}, false, err
	}
	entry, ok := navigate(v, kind.plural()+"."+key)
	if !ok {
		return 0, time.Time{}, false, nil
	}
	t, ok := entry.(*table)
	if !ok {
		return 0, time.Time{}, false, nil
	}
	n, ok := t.vals["version"].(int64)
	if !ok || n < 0 {
		return 0, time.Time{}, false, nil
	}
	var created time.Time
	if s, ok := t.vals["created_at"].(string); ok {
		created, _ = time.Parse(time.RFC3339Nano, s)
	}
	return uint64(n), created, true, nil
}

// Get fetches one version (get_<kind>_config).
func (p *HTTPProvider) Get(ctx context.Context, kind Kind, key string, version uint64) (*Connector, error) {
	if err := checkKindKey(kind, key); err != nil {
		return nil, err
	}
	u := p.url("get_"+string(kind)+"_config", key, &version, nil)
	v, err := p.get(ctx, u)
	if err != nil {
		return nil, err
	}
	c, _, err := p.decode(redactedURLString(u), v, kind, key)
	return c, err
}

// Active fetches the active version (get_active_<kind>_config).
func (p *HTTPProvider) Active(ctx context.Context, kind Kind, key string) (*Connector, error) {
	if err := checkKindKey(kind, key); err != nil {
		return nil, err
	}
	u := p.url("get_active_"+string(kind)+"_config", key, nil, nil)
	v, err := p.get(ctx, u)
	if err != nil {
		return nil, err
	}
	c, _, err := p.decode(redactedURLString(u), v, kind, key)
	return c, err
}

// SetActive sends {"version": n} to set_active_<kind> with PUT.
func (p *HTTPProvider) SetActive(ctx context.Context, kind Kind, key string, version uint64) error {
	if err := checkKindKey(kind, key); err != nil {
		return err
	}
	body := []byte(`{"version":` + strconv.FormatUint(version, 10) + `}`)
	r, err := p.do(ctx, http.MethodPut, p.url("set_active_"+string(kind), key, nil, nil), body)
	if err != nil {
		return err
	}
	return p.check(http.MethodPut, r)
}

// Create validates c and POSTs it to create_<kind> in upstream's
// CreateSinkConfig / CreateSourceConfig shape; the API assigns the version
// and answers with the stored configuration.
func (p *HTTPProvider) Create(ctx context.Context, c *Connector) (*Connector, error) {
	if c == nil {
		return nil, fmt.Errorf("create connector: nil: %w", ErrInvalid)
	}
	if err := checkKindKey(c.Type, c.Key); err != nil {
		return nil, err
	}
	n := *c
	n.fillZeroDefaults()
	data, err := n.MarshalTOML()
	if err != nil {
		return nil, err
	}
	label := fmt.Sprintf("new %s %q", n.Type, n.Key)
	if _, err := ParseConnector(label, data, WithEnv(MapEnv(nil))); err != nil {
		return nil, err
	}
	body, err := n.createBody()
	if err != nil {
		return nil, err
	}
	u := p.url("create_"+string(n.Type), n.Key, nil, nil)
	r, err := p.do(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, err
	}
	if err := p.check(http.MethodPost, r); err != nil {
		return nil, err
	}
	v, err := p.extract(http.MethodPost, r)
	if err != nil {
		return nil, err
	}
	saved, _, err := p.decode(r.url, v, n.Type, n.Key)
	return saved, err
}

// Delete removes a version with DELETE delete_<kind>_config?version=n.
// The active version is refused (ErrActiveVersion) before asking the API.
func (p *HTTPProvider) Delete(ctx context.Context, kind Kind, key string, version uint64) error {
	versions, err := p.Versions(ctx, kind, key)
	if err != nil {
		return err
	}
	found := false
	for _, v := range versions {
		if v.Version == version {
			found = true
			if v.Active {
				return fmt.Errorf("delete %s %q version %d: it is the active version; activate another version first: %w", kind, key, version, ErrActiveVersion)
			}
		}
	}
	if !found {
		return notFound(kind, key, &version)
	}
	q := url.Values{"version": {strconv.FormatUint(version, 10)}}
	r, err := p.do(ctx, http.MethodDelete, p.url("delete_"+string(kind)+"_config", key, nil, q), nil)
	if err != nil {
		return err
	}
	return p.check(http.MethodDelete, r)
}
