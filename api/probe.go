package api

import (
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// probe samples the process's and the host's CPU and memory from /proc.
// CPU use is a rate: each sample is measured against the previous one.
// Where /proc cannot be read (not Linux), the figures are zero.
type probe struct {
	mu       sync.Mutex
	last     time.Time
	lastProc float64 // process CPU seconds
	lastBusy float64 // host CPU seconds, busy
	lastAll  float64 // host CPU seconds, all
}

type sysSample struct {
	cpu, totalCPU                        float32
	memory, totalMemory, availableMemory uint64
}

func newProbe() *probe {
	p := &probe{}
	p.sample() // the baseline for the first /stats call
	return p
}

func (p *probe) sample() sysSample {
	var out sysSample
	now := time.Now()
	fs, fsErr := procfs.NewDefaultFS()
	var procCPU, busy, all float64
	var haveProc, haveHost bool
	if self, err := procfs.Self(); err == nil {
		if st, err := self.Stat(); err == nil {
			procCPU, haveProc = st.CPUTime(), true
			out.memory = uint64(max(st.ResidentMemory(), 0))
		}
	}
	if fsErr == nil {
		if st, err := fs.Stat(); err == nil {
			c := st.CPUTotal
			busy = c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
			all, haveHost = busy+c.Idle+c.Iowait, true
		}
		if mi, err := fs.Meminfo(); err == nil {
			if mi.MemTotalBytes != nil {
				out.totalMemory = *mi.MemTotalBytes
			}
			if mi.MemAvailableBytes != nil {
				out.availableMemory = *mi.MemAvailableBytes
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() {
		if wall := now.Sub(p.last).Seconds(); haveProc && wall > 0 && procCPU >= p.lastProc {
			out.cpu = float32((procCPU - p.lastProc) / wall * 100)
		}
		if d := all - p.lastAll; haveHost && d > 0 && busy >= p.lastBusy {
			out.totalCPU = float32((busy - p.lastBusy) / d * 100)
		}
	}
	p.last, p.lastProc, p.lastBusy, p.lastAll = now, procCPU, busy, all
	return out
}
