package broker

// ping (1): an empty ok. It is the only NonReplicated command answered
// before login; any request refreshes the connection's heartbeat.

func handlePing(b *Broker, r *request) reply { return reply{} }
