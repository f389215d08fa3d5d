package broker

// get_stats (10): process and host figures (pid, CPU time share, resident
// memory, total/available memory, uptime, disk I/O and free space where
// the platform tells them, else 0), the model's counts (streams, topics,
// partitions, segments, messages and their bytes, clients, groups) and the
// host's name, OS and kernel, with ServerVersion. The cache list is empty.

import (
	"os"
	"runtime"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

func handleGetStats(b *Broker, r *request) reply {
	st := b.stats()
	return rawOf(&st)
}

func (b *Broker) stats() wire.Stats {
	now := time.Now()
	sys := readSysInfo(b.cfg.DataDir)
	st := wire.Stats{
		ProcessID: uint32(os.Getpid()), MemoryUsage: sys.rss,
		TotalMemory: sys.memTotal, AvailableMemory: sys.memAvailable,
		RunTime: uint64(now.Sub(b.start).Microseconds()), StartTime: uint64(b.start.UnixMicro()),
		ReadBytes: sys.readBytes, WrittenBytes: sys.writtenBytes,
		Hostname: hostname(), OSName: runtime.GOOS, OSVersion: sys.osVersion, KernelVersion: sys.kernel,
		ServerVersion: ServerVersion, ServerSemver: wire.PackVersion(0, 9, 0),
		ThreadsCount: sys.threads, FreeDiskSpace: sys.diskFree, TotalDiskSpace: sys.diskTotal,
		Caches: []wire.CacheStats{},
	}
	if elapsed := now.Sub(b.start).Seconds(); elapsed > 0 && sys.cpuSeconds > 0 {
		st.CPUUsage = float32(100 * sys.cpuSeconds / elapsed)
		st.TotalCPUUsage = st.CPUUsage / float32(runtime.NumCPU())
	}
	if st.MemoryUsage == 0 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st.MemoryUsage = ms.Sys
	}
	b.mu.RLock()
	for _, s := range b.streams {
		st.StreamsCount++
		for _, t := range s.topics {
			st.TopicsCount++
			st.ConsumerGroupsCount += uint32(len(t.groups))
			for _, p := range t.parts {
				st.PartitionsCount++
				ps := p.stats()
				st.SegmentsCount += ps.segments
				st.MessagesCount += ps.messages
				st.MessagesSizeBytes += ps.sizeBytes
			}
		}
	}
	b.mu.RUnlock()
	st.ClientsCount = uint32(len(b.connList()))
	return st
}
