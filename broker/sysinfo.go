package broker

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// sysInfo is what the host tells about itself; zero where it does not.
type sysInfo struct {
	rss, memTotal, memAvailable uint64
	readBytes, writtenBytes     uint64
	threads                     uint32
	cpuSeconds                  float64
	diskFree, diskTotal         uint64
	osVersion, kernel           string
}

// readSysInfo reads /proc (Linux) and the file system of dir; on other
// systems the /proc figures stay zero.
func readSysInfo(dir string) sysInfo {
	var s sysInfo
	status := procFields("/proc/self/status", ":")
	s.rss = kib(status["VmRSS"])
	if n, err := strconv.ParseUint(status["Threads"], 10, 32); err == nil {
		s.threads = uint32(n)
	}
	mem := procFields("/proc/meminfo", ":")
	s.memTotal, s.memAvailable = kib(mem["MemTotal"]), kib(mem["MemAvailable"])
	io := procFields("/proc/self/io", ":")
	s.readBytes, _ = strconv.ParseUint(io["read_bytes"], 10, 64)
	s.writtenBytes, _ = strconv.ParseUint(io["write_bytes"], 10, 64)
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		s.kernel = strings.TrimSpace(string(b))
	}
	osr := procFields("/etc/os-release", "=")
	s.osVersion = strings.Trim(osr["PRETTY_NAME"], `"`)
	if dir == "" {
		dir = os.TempDir()
	}
	s.diskFree, s.diskTotal = diskSpace(dir)
	s.cpuSeconds = cpuSeconds()
	return s
}

// procFields reads "key<sep> value" lines.
func procFields(path, sep string) map[string]string {
	out := map[string]string{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), sep); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// kib parses "123 kB" into bytes.
func kib(v string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}
