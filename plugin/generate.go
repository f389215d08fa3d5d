package plugin

// The Go code of the published contract, proto/ferry/plugin/v1/plugin.proto,
// is generated into pluginpb and checked in. To regenerate it, with protoc
// (Debian: apt-get install protobuf-compiler) and the two Go generators on
// PATH:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	go generate ./plugin
//
//go:generate protoc -I proto --go_out=pluginpb --go_opt=module=github.com/ferryhq/ferry/plugin/pluginpb --go-grpc_out=pluginpb --go-grpc_opt=module=github.com/ferryhq/ferry/plugin/pluginpb ferry/plugin/v1/plugin.proto
