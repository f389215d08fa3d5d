package broker

// get_snapshot (11): [compression u8][types_count u8][type u8 × count].
// The reply is a raw ZIP archive with one "<type>.txt" entry per type
// requested: 1 filesystem_overview (the data directory tree), 2
// process_list, 3 resource_usage, 4 test, 5 server_logs (a note: logs go
// to Config.Logger), 6 server_config (the password redacted); 100 means
// all of them and must come alone. Compression 1 stores the entries; 2-6
// (deflate, bzip2, zstd, lzma, xz) all use deflate, the one method the
// standard library writes (ZIP entries name their method, so readers
// cope). An unknown compression or type, no types, or 100 with others is
// status 3; a snapshot while another runs, or one over a frame, is 9000.

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/iggy/wire"
)

var snapshotTypes = map[uint8]string{
	1: "filesystem_overview", 2: "process_list", 3: "resource_usage",
	4: "test", 5: "server_logs", 6: "server_config",
}

const snapshotAll = 100

func handleGetSnapshot(b *Broker, r *request) reply {
	var req wire.GetSnapshot
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if req.Compression < 1 || req.Compression > 6 || len(req.Types) == 0 {
		return status(wire.ErrInvalidCommand.Code)
	}
	var types []uint8
	for _, t := range req.Types {
		switch {
		case t == snapshotAll && len(req.Types) == 1:
			types = []uint8{1, 2, 3, 4, 5, 6}
		case snapshotTypes[t] == "":
			return status(wire.ErrInvalidCommand.Code)
		default:
			types = append(types, t)
		}
	}
	if !b.snapBusy.CompareAndSwap(false, true) {
		return status(wire.ErrSnapshotFileCompletionFailed.Code)
	}
	defer b.snapBusy.Store(false)
	method := zip.Store
	if req.Compression > 1 {
		method = zip.Deflate
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	seen := map[uint8]bool{}
	for _, t := range types {
		if seen[t] {
			continue
		}
		seen[t] = true
		w, err := zw.CreateHeader(&zip.FileHeader{Name: snapshotTypes[t] + ".txt", Method: method})
		if err == nil {
			_, err = w.Write([]byte(b.snapshotText(t)))
		}
		if err != nil {
			return b.failed("snapshot", err)
		}
	}
	if err := zw.Close(); err != nil {
		return b.failed("snapshot", err)
	}
	if buf.Len() > wire.MaxFrameSize-wire.HeaderSize {
		return status(wire.ErrSnapshotFileCompletionFailed.Code)
	}
	return raw(buf.Bytes())
}

func (b *Broker) snapshotText(t uint8) string {
	var sb strings.Builder
	switch t {
	case 1:
		b.writeTree(&sb)
	case 2:
		writeProcesses(&sb)
	case 3:
		st := b.stats()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(&sb, "pid %d\ncpu %.2f%%\nresident memory %d bytes\ngo heap %d bytes\ngoroutines %d\n"+
			"total memory %d\navailable memory %d\nread bytes %d\nwritten bytes %d\nfree disk %d of %d\n",
			st.ProcessID, st.CPUUsage, st.MemoryUsage, ms.HeapAlloc, runtime.NumGoroutine(),
			st.TotalMemory, st.AvailableMemory, st.ReadBytes, st.WrittenBytes, st.FreeDiskSpace, st.TotalDiskSpace)
	case 4:
		sb.WriteString("test\n")
	case 5:
		sb.WriteString("This broker keeps no log files; its logs go to the slog.Logger in its Config.\n")
	case 6:
		c := b.cfg
		fmt.Fprintf(&sb, "addr %s\ndata_dir %q\nroot_username %s\nroot_password <redacted>\ntls %t\n"+
			"fsync %s\nfsync_interval %s\nheartbeat_interval %s\nrebalancing_timeout %s\nretention_interval %s\n",
			b.addr, c.DataDir, c.RootUsername, c.TLS != nil, c.Fsync, c.FsyncInterval,
			c.HeartbeatInterval, c.RebalancingTimeout, c.RetentionInterval)
	}
	return sb.String()
}

func (b *Broker) writeTree(sb *strings.Builder) {
	if b.cfg.DataDir == "" {
		sb.WriteString("in-memory broker: no data directory\n")
		return
	}
	fmt.Fprintf(sb, "%s\n", b.cfg.DataDir)
	filepath.WalkDir(b.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == b.cfg.DataDir {
			return nil
		}
		rel, _ := filepath.Rel(b.cfg.DataDir, path)
		if d.IsDir() {
			fmt.Fprintf(sb, "%s/\n", rel)
		} else if info, err := d.Info(); err == nil {
			fmt.Fprintf(sb, "%s %d\n", rel, info.Size())
		}
		return nil
	})
}

func writeProcesses(sb *strings.Builder) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		fmt.Fprintf(sb, "%d (this broker)\n", os.Getpid())
		return
	}
	var lines []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil {
			lines = append(lines, e.Name()+" "+strings.TrimSpace(string(comm)))
		}
	}
	sort.Strings(lines)
	sb.WriteString(strings.Join(lines, "\n") + "\n")
}
