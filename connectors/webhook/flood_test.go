package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A flood of 1 MiB bodies at a 64 KiB limit is refused (413) without
// memory growth: by Content-Length before reading anything, and for
// chunked bodies after at most the limit. The heap after the flood,
// after a GC, is compared with the heap before: a generous bound, since
// 800 bodies read whole would be 800 MiB.
func TestFloodOverTheLimit(t *testing.T) {
	s := open(t, standardValues("max_body_size", "64KiB"), standardEnv)
	big := bytes.Repeat([]byte("x"), 1<<20)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var refused, chunked, accepted atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				var body io.Reader = bytes.NewReader(big)
				if i%2 == 1 {
					body = io.MultiReader(strings.NewReader(""), bytes.NewReader(big)) // no length: chunked
				}
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, addrURL(s, "/sw"), body)
				require.NoError(t, err)
				res, err := client.Do(req)
				if err != nil {
					require.Equal(t, 1, i%2, "worker %d request %d with a Content-Length: %v", w, i, err)
					chunked.Add(1) // the server closed the connection while we were still sending
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusRequestEntityTooLarge:
					refused.Add(1)
				default:
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	after := heap()
	growth := int64(after) - int64(before)
	t.Logf("%d refused with 413, %d cut off while sending, heap %d → %d bytes (%+d)", refused.Load(), chunked.Load(), before, after, growth)
	require.Zero(t, accepted.Load(), "a body over the limit was not refused")
	require.GreaterOrEqual(t, refused.Load(), int64(400), "every request with a Content-Length answers 413")
	require.Less(t, growth, int64(32<<20), "the heap grew by more than 32 MiB")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.queue)
}
