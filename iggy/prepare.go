package iggy

// PrepareMessages validates msgs as SendMessages does (payload and header
// sizes, header encoding) and fills in place what SendMessages would: a
// UUIDv7 for each zero id and the current time for each zero origin
// timestamp. A sender that may send the same messages again, such as a
// retry after a failed batch, calls it once first, so every attempt
// carries the same ids and a consumer can recognise the duplicates.
func PrepareMessages(msgs []Message) error { return prepareMessages(msgs) }
