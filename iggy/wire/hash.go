package wire

import "github.com/OneOfOne/xxhash"

// PartitionForKey returns the partition a messages-key send goes to:
// XXH32(key, seed 0) % partitions.
func PartitionForKey(key []byte, partitions uint32) uint32 {
	if partitions == 0 {
		return 0
	}
	return xxhash.Checksum32(key) % partitions
}

// NamedConsumerID is the numeric id the server keys a named single
// consumer by: XXH32(name, seed 0).
func NamedConsumerID(name string) uint32 { return xxhash.ChecksumString32(name) }
