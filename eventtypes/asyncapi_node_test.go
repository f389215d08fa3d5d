package eventtypes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAsyncAPIParser feeds the AsyncAPI document of the sample deployment
// (two sources, two sinks, a hook, JSON Schema, Avro and Protobuf types)
// to the @asyncapi/parser package and fails on any diagnostic of severity
// error. It needs node and the package: FERRY_ASYNCAPI_PARSER_DIR names
// the directory holding node_modules (scripts/test.sh installs it there);
// without them the test is skipped, unless FERRY_REQUIRE_ASYNCAPI=1.
func TestAsyncAPIParser(t *testing.T) {
	t.Parallel()
	node, modules := asyncAPIParser(t)
	doc, err := sample(t).AsyncAPI(DocInfo{Title: "Shop", Version: "1.2.0"})
	require.NoError(t, err)

	summary, diags, stderr, err := runParser(t, node, modules, doc)
	require.NoError(t, err, "the parser refused the document:\n%s\n%s\ndocument:\n%s", strings.Join(diags, "\n"), stderr, doc)
	require.True(t, summary.Parsed, "no summary from the parser script: %s", stderr)
	require.Zero(t, summary.Errors, "%s", strings.Join(diags, "\n"))
	require.Equal(t, 4, summary.Messages, "one message per event type")
	require.Equal(t, 3, summary.Channels, "shop/orders, shop/payments and shop/inventory: %s", doc)
	require.Equal(t, 6, summary.Operations)
	require.Len(t, summary.Registered, 2, "the Avro and Protobuf schema parsers are registered, so their schemas are checked too")
	t.Logf("accepted by @asyncapi/parser: %d channels, %d operations, %d messages; %d diagnostics below error", summary.Channels, summary.Operations, summary.Messages, len(diags))
	for _, d := range diags {
		t.Log(d)
	}

	// The check can fail: the same document with an operation on a
	// channel that does not exist is refused.
	broken := bytes.Replace(doc, []byte("$ref: '#/channels/shop.payments'"), []byte("$ref: '#/channels/shop.nowhere'"), 1)
	require.NotEqual(t, doc, broken)
	summary, diags, _, err = runParser(t, node, modules, broken)
	require.Error(t, err)
	require.Positive(t, summary.Errors, "%s", strings.Join(diags, "\n"))
}

type parserSummary struct {
	Summary    bool     `json:"summary"`
	Parsed     bool     `json:"parsed"`
	Errors     int      `json:"errors"`
	Registered []string `json:"registered"`
	Channels   int      `json:"channels"`
	Operations int      `json:"operations"`
	Messages   int      `json:"messages"`
}

// runParser runs testdata/asyncapi_check.js over doc.
func runParser(t *testing.T, node, modules string, doc []byte) (parserSummary, []string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, err := filepath.Abs("testdata/asyncapi_check.js")
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.Stdin = bytes.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var summary parserSummary
	var diags []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"summary":true`) {
			require.NoError(t, json.Unmarshal([]byte(line), &summary))
			continue
		}
		diags = append(diags, line)
	}
	return summary, diags, stderr.String(), err
}

// asyncAPIParser finds node and the parser package, or skips.
func asyncAPIParser(t *testing.T) (node, modules string) {
	t.Helper()
	require := os.Getenv("FERRY_REQUIRE_ASYNCAPI") == "1"
	skip := func(format string, args ...any) {
		t.Helper()
		if require {
			t.Fatalf("FERRY_REQUIRE_ASYNCAPI=1: "+format, args...)
		}
		t.Skipf(format+" (scripts/test.sh installs it; FERRY_REQUIRE_ASYNCAPI=1 makes this a failure)", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed")
	}
	dir := os.Getenv("FERRY_ASYNCAPI_PARSER_DIR")
	if dir == "" {
		skip("FERRY_ASYNCAPI_PARSER_DIR is not set: no @asyncapi/parser package")
	}
	modules = filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@asyncapi", "parser", "package.json")); err != nil {
		skip("@asyncapi/parser is not installed in %s: %v", dir, err)
	}
	return node, modules
}
