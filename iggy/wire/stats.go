package wire

import "math"

// Stats is the reply of get_stats (10).
type Stats struct {
	ProcessID                                                 uint32
	CPUUsage, TotalCPUUsage                                   float32
	MemoryUsage                                               uint64
	TotalMemory, AvailableMemory                              uint64
	RunTime, StartTime                                        uint64 // µs
	ReadBytes, WrittenBytes                                   uint64
	MessagesSizeBytes                                         uint64
	StreamsCount, TopicsCount                                 uint32
	PartitionsCount                                           uint32
	SegmentsCount                                             uint32
	MessagesCount                                             uint64
	ClientsCount                                              uint32
	ConsumerGroupsCount                                       uint32
	Hostname, OSName, OSVersion, KernelVersion, ServerVersion string
	ServerSemver                                              uint32
	Caches                                                    []CacheStats
	ThreadsCount                                              uint32
	FreeDiskSpace, TotalDiskSpace                             uint64
}

// CacheStats is one per-partition cache entry of Stats.
type CacheStats struct {
	Stream, Topic, Partition uint32
	Hits, Misses             uint64
	HitRatio                 float32
}

func (s *Stats) AppendTo(b []byte) []byte {
	b = appendU32(b, s.ProcessID)
	b = appendU32(b, math.Float32bits(s.CPUUsage))
	b = appendU32(b, math.Float32bits(s.TotalCPUUsage))
	for _, v := range []uint64{s.MemoryUsage, s.TotalMemory, s.AvailableMemory, s.RunTime,
		s.StartTime, s.ReadBytes, s.WrittenBytes, s.MessagesSizeBytes} {
		b = appendU64(b, v)
	}
	for _, v := range []uint32{s.StreamsCount, s.TopicsCount, s.PartitionsCount, s.SegmentsCount} {
		b = appendU32(b, v)
	}
	b = appendU64(b, s.MessagesCount)
	b = appendU32(appendU32(b, s.ClientsCount), s.ConsumerGroupsCount)
	for _, v := range []string{s.Hostname, s.OSName, s.OSVersion, s.KernelVersion, s.ServerVersion} {
		b = appendString32(b, v)
	}
	b = appendU32(appendU32(b, s.ServerSemver), uint32(len(s.Caches)))
	for _, c := range s.Caches {
		b = appendU32(appendU32(appendU32(b, c.Stream), c.Topic), c.Partition)
		b = appendU32(appendU64(appendU64(b, c.Hits), c.Misses), math.Float32bits(c.HitRatio))
	}
	return appendU64(appendU64(appendU32(b, s.ThreadsCount), s.FreeDiskSpace), s.TotalDiskSpace)
}

func (s *Stats) DecodeFrom(d *Decoder) {
	s.ProcessID = d.U32("pid")
	s.CPUUsage = math.Float32frombits(d.U32("cpu usage"))
	s.TotalCPUUsage = math.Float32frombits(d.U32("total cpu usage"))
	for _, p := range []*uint64{&s.MemoryUsage, &s.TotalMemory, &s.AvailableMemory, &s.RunTime,
		&s.StartTime, &s.ReadBytes, &s.WrittenBytes, &s.MessagesSizeBytes} {
		*p = d.U64("stats counter")
	}
	for _, p := range []*uint32{&s.StreamsCount, &s.TopicsCount, &s.PartitionsCount, &s.SegmentsCount} {
		*p = d.U32("stats count")
	}
	s.MessagesCount = d.U64("messages count")
	s.ClientsCount = d.U32("clients count")
	s.ConsumerGroupsCount = d.U32("consumer groups count")
	for _, p := range []*string{&s.Hostname, &s.OSName, &s.OSVersion, &s.KernelVersion, &s.ServerVersion} {
		*p = d.String32("stats string")
	}
	s.ServerSemver = d.U32("server semver")
	n := d.U32("cache count")
	if uint64(n)*32 > uint64(d.Remaining()) {
		d.Failf("stats list %d cache entries, %d bytes left", n, d.Remaining())
		return
	}
	for i := uint32(0); i < n; i++ {
		var c CacheStats
		c.Stream, c.Topic, c.Partition = d.U32("stream"), d.U32("topic"), d.U32("partition")
		c.Hits, c.Misses = d.U64("hits"), d.U64("misses")
		c.HitRatio = math.Float32frombits(d.U32("hit ratio"))
		s.Caches = append(s.Caches, c)
	}
	s.ThreadsCount = d.U32("threads count")
	s.FreeDiskSpace = d.U64("free disk space")
	s.TotalDiskSpace = d.U64("total disk space")
}
